#!/usr/bin/env bash
# Builds ampc with sanitizers in a build folder of its own and runs the test suite there.
#
#   bash scripts/sanitize.sh address [ctest arguments...]   # ASan + UBSan, build-asan/
#   bash scripts/sanitize.sh thread  [ctest arguments...]   # TSan, build-tsan/
#
# Without ctest arguments the whole suite runs (-j of the core count); with them, only what
# they select (e.g. `-R TrainTest` or `-L unit`). JOBS=N sets the build and test parallelism;
# TARGETS="t1 t2" builds only those targets (e.g. TARGETS=codegen_threads_test with
# -R CodegenThreads, the tests of ampc's own threads).
# Any report fails the test that caused it: errors are not recoverable
# (-fno-sanitize-recover=all) and every report exits non-zero.
# The CUDA backend is left out (AMPC_ENABLE_CUDA=OFF): nvcc's host code is not instrumented
# and nothing CUDA runs on these machines. The fuzzers live elsewhere (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
case "$mode" in
  address)
    dir=build-asan
    flags="-fsanitize=address,undefined -fno-sanitize-recover=all"
    ;;
  thread)
    dir=build-tsan
    flags="-fsanitize=thread"
    ;;
  *)
    echo "usage: scripts/sanitize.sh address|thread [ctest arguments...]" >&2
    exit 2
    ;;
esac
flags="$flags -fno-omit-frame-pointer -g"

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# -O1 keeps the instrumented suite within a few times the Release one and the stacks readable.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAMPC_ENABLE_CUDA=OFF \
  "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 $flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
# TARGETS="a b" builds only those targets (with the ctest arguments that select their tests).
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j "${JOBS:-$(nproc)}" "${targets[@]}"

supp=$PWD/scripts/sanitizer
# Reports end the process with status 1 (never a silent log line); stacks are symbolized.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
if [[ $mode == thread ]]; then
  # libgomp and OpenBLAS are not built with TSan: the synchronization of their thread teams
  # (futexes and spin loops inside the libraries) is invisible to it, and every parallel
  # loop would be reported as a race. With one OpenMP and one OpenBLAS thread those teams
  # do not exist; what TSan checks is ampc's own threads (the code generator's compile
  # threads, kernels/codegen/parallel_compile.h, and the code that calls kernels from several). See scripts/sanitizer/README.md.
  export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
fi
args=("$@")
if ((${#args[@]} > 0)); then
  exec ctest --test-dir "$dir" --output-on-failure --no-tests=error "${args[@]}"
fi
jobs=(-j "${JOBS:-$(nproc)}")
if [[ $mode == thread ]]; then
  exec ctest --test-dir "$dir" --output-on-failure --no-tests=error "${jobs[@]}"
fi
# The whole suite. The data-parallel tests (label mpi) run without leak detection: Open MPI
# leaks by design at MPI_Finalize and MPI_Abort, mostly from plugins it has unloaded by then
# (`<unknown module>` frames, which no suppression can name); memory errors and UB there are
# still reported.
status=0
ctest --test-dir "$dir" --output-on-failure --no-tests=error "${jobs[@]}" -LE mpi || status=$?
ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
  ctest --test-dir "$dir" --output-on-failure "${jobs[@]}" --timeout 600 -L mpi || status=$?
exit $status
