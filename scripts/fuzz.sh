#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang-19, -fsanitize=fuzzer,address,undefined,
# in build-fuzz/) and runs each for SECONDS, one after the other on one core.
#
#   bash scripts/fuzz.sh SECONDS [TARGET...]     # default: every target
#
# Corpora grow in build-fuzz/corpus/<target>/, seeded from tests/fuzz/seeds/<target>/ (and,
# for the ONNX readers, models/*.onnx and every model.onnx of ONNX's test data). A crash
# leaves its input in build-fuzz/artifacts/<target>/; it becomes a committed regression
# input in tests/fuzz/regressions/<target>/ once fixed (tests/fuzz/README.md). Prints the
# executions per target and exits 1 when any target found something.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 1)); then
  echo "usage: scripts/fuzz.sh SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
all=(onnx_import external_data plan_load checkpoint_load npy_read npz_read policy_json input_shape)
targets=("$@")
if ((${#targets[@]} == 0)); then targets=("${all[@]}"); fi
scripts/install-deps.sh

dir=build-fuzz
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAMPC_FUZZ=ON \
  -DAMPC_ENABLE_CUDA=OFF -DCMAKE_CXX_COMPILER=clang++-19 \
  "${launcher[@]}" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" >/dev/null
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

testdata=/usr/share/libonnx-testdata/data
seed_dirs() {  # extra seed folders of a target, made once under build-fuzz/seeds/
  local t=$1 extra=$dir/seeds/$1
  case "$t" in
    onnx_import | checkpoint_load)
      if [[ ! -d $extra ]]; then
        mkdir -p "$extra"
        cp models/*.onnx "$extra/"
        find "$testdata" -name model.onnx | while read -r m; do
          cp "$m" "$extra/$(echo "${m#"$testdata"/}" | tr / _)"
        done
      fi
      echo "$extra"
      ;;
    npz_read) echo models/data ;;
  esac
}

summary=()
failed=0
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for t in "${targets[@]}"; do
  corpus=$dir/corpus/$t artifacts=$dir/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  dict=()
  if [[ -f tests/fuzz/dict/$t.dict ]]; then dict=(-dict="tests/fuzz/dict/$t.dict"); fi
  log=$dir/logs/$t.log
  mkdir -p "$dir/logs"
  mapfile -t extra < <(seed_dirs "$t")
  rc=0
  # -max_len bounds inputs (the models are seeds, not sizes to explore); -malloc_limit_mb
  # makes an allocation sized by the input past 1 GiB a finding.
  "$dir/tests/fuzz/fuzz_$t" "$corpus" "tests/fuzz/seeds/$t" "${extra[@]}" "${dict[@]}" \
    -max_total_time="$seconds" -max_len=65536 -timeout=20 -rss_limit_mb=2560 \
    -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    >"$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  found=$(find "$artifacts" -type f | wc -l)
  summary+=("$(printf '%-16s %12s executions  %s artifacts  exit %s' "$t" "$execs" "$found" "$rc")")
  if ((rc != 0 || found > 0)); then failed=1; fi
done
printf '%s\n' "${summary[@]}"
exit "$failed"
