#!/usr/bin/env bash
# The GPU suite, one command on a machine with an NVIDIA GPU: every GPU gtest (the
# gpu-labelled tests of tests/CMakeLists.txt: the hand-written kernels against their CPU
# twins, whole mlp/cnn/gpt plans on the device against the CPU backend, the skip-step, the
# error flags), then the benchmark (scripts/bench_gpu.py: a 12-layer gpt and the cnn, ampc vs
# PyTorch eager fp32 and AMP), whose table comes last. Fits one 10-minute device command:
# each executable's cases share a bound of 300 s (--budget), the benchmark is last and
# --no-bench leaves it out; the estimate is in tests/gpu/README.md.
#
# At start: the bundle's MANIFEST, nvidia-smi, the loaded driver / runtime / cuBLASLt / cuDNN
# versions (cuda_plan_test's CudaDevice.Versions). Each test case runs in its own process
# (a device fault is sticky: it would fail every later case of the process), with
# AMPC_CUDA_SYNC_DEBUG=1 (the executor's eager first run then names a failing step), and a
# line per executable says how its cases went as soon as it is done, so that a run cut short
# still tells what passed. Fails when a case fails, when the budget ends before every case
# ran, and when nvidia-smi sees a GPU but a case skipped for want of one.
#
# Where the executables come from, first match wins:
#   1. the bundle gpu-bundle/ampc-gpu.tar.xz (tests/gpu/bundle.sh, made on a Debian 12 machine
#      with our build dependencies, carried here as an ignored path): unpacked to a temporary
#      folder and used as it is, nothing is built. This is the way on the lent GPU machine,
#      which has nvcc, CMake and torch but none of our libraries and no network.
#   2. a machine with our build dependencies (Debian 12: scripts/install-deps.sh): builds
#      ampc for sm_$arch in build-gpu (Release, only the targets needed), as before.
#   3. otherwise: stops, saying to make the bundle first.
# Usage: bash tests/gpu/run.sh [--no-bench] [--arch 90] [--bundle FILE] [--build] [--budget S]
#                               [--deadline S]
#   --build     ignore a bundle and build here
#   --budget    seconds for all cases of one executable (300)
#   --deadline  seconds after start by which the whole script ends, the benchmark cut at it
#               (570, under the device tool's 600 per command)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
start=$SECONDS
bench=1
arch=90
bundle=gpu-bundle/ampc-gpu.tar.xz
force_build=0
budget=300
deadline=570  # seconds after start by which everything has ended (a device command has 600)
while (($#)); do
  case "$1" in
    --no-bench) bench=0 ;;
    --arch) arch="$2"; shift ;;
    --bundle) bundle="$2"; shift ;;
    --build) force_build=1 ;;
    --budget) budget="$2"; shift ;;
    --deadline) deadline="$2"; shift ;;
    *) echo "usage: $0 [--no-bench] [--arch 80|90] [--bundle FILE] [--build] [--budget S]" >&2; exit 2 ;;
  esac
  shift
done
stamp() { echo "[run.sh $((SECONDS - start)) s] $*"; }
die() { echo "run.sh: error: $*" >&2; exit 1; }

# The Debian packages the build needs (scripts/install-deps.sh's list, less the Python and
# graphviz ones the GPU suite does not use).
build_packages=(cmake ninja-build libprotobuf-dev protobuf-compiler libonnx-dev libopenblas-dev
                googletest libgtest-dev nlohmann-json3-dev libcli11-dev libzip-dev llvm-19-dev)
can_build() {
  [[ -x /usr/local/cuda/bin/nvcc ]] && command -v dpkg-query >/dev/null || return 1
  local p missing=0
  for p in "${build_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing=1
  done
  ((missing == 0)) && return 0
  # Missing packages are fine on Debian 12 as root: install-deps.sh installs them (apt).
  grep -qs '^ID=debian' /etc/os-release && grep -qs '^VERSION_ID="12"' /etc/os-release &&
    [[ $(id -u) -eq 0 ]]
}

if [[ -f $bundle && $force_build -eq 0 ]]; then
  mode=bundle
elif can_build; then
  mode=build
else
  die "no bundle at $bundle, and this machine cannot build ampc (it needs Debian 12's
  llvm-19-dev, libonnx-dev, libprotobuf-dev, googletest, OpenBLAS, CLI11, nlohmann-json and
  libzip, and /usr/local/cuda/bin/nvcc). On a Debian 12 machine with them, run
  'bash tests/gpu/bundle.sh' first: it writes gpu-bundle/ampc-gpu.tar.xz. Bring the folder
  gpu-bundle along (with the device tool: carry [\"gpu-bundle\"]) and run this again."
fi

# Whether the driver sees a GPU: then no test may skip for want of one.
gpu_seen=0
if command -v nvidia-smi >/dev/null; then
  nvidia-smi || true
  nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]' && gpu_seen=1
else
  echo "nvidia-smi: not installed here"
fi
py=python3  # the one with torch: the GPU image's python3; Debian's /usr/bin/python3 here
$py -c "import torch" 2>/dev/null || py=/usr/bin/python3

if [[ $mode == bundle ]]; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/ampc-gpu.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  stamp "unpacking $bundle ($(($(stat -c %s "$bundle") / 1048576)) MiB)"
  tar -xJf "$bundle" -C "$tmp"
  root=$tmp/ampc-gpu
  [[ -f $root/MANIFEST ]] || die "$bundle holds no ampc-gpu/MANIFEST: not a tests/gpu/bundle.sh archive"
  manifest() { sed -n "s/^$1=//p" "$root/MANIFEST"; }
  sed -n '/^[a-z_]*=/p' "$root/MANIFEST" | grep -v '^bundled_libs=' | sed 's/^/  bundle: /'
  [[ $(manifest cuda_arch) == "$arch" ]] ||
    echo "note: the bundle holds sm_$(manifest cuda_arch) code; --arch $arch does not rebuild it"

  # cuBLASLt and cuDNN are not in the bundle (over 1 GB): the machine's own, from wherever
  # they are (the loader's cache, CUDA's folders, or torch's pip packages nvidia-cublas and
  # nvidia-cudnn-cu13 under site-packages). cuDNN 9 loads its engine libraries at run time
  # from the folder of libcudnn.so.9, so the folders go on LD_LIBRARY_PATH (for ampc's
  # processes only, through the wrappers' AMPC_GPU_LD_PATH).
  read -r -a cuda_libs <<<"$(manifest cuda_libs)"
  mapfile -t cuda_dirs < <($py - "${cuda_libs[@]}" <<'EOF'
import glob, os, site, sys
roots = [p for p in sys.path if os.path.isdir(p)]
try:
    roots += site.getsitepackages()
except AttributeError:
    pass
fixed = ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"]
found = []
for name in sys.argv[1:]:
    hits = [d for d in fixed if os.path.exists(os.path.join(d, name))]
    for r in roots:
        for pat in ("nvidia/*/lib", "nvidia/*/*/lib", "nvidia/lib"):
            hits += [os.path.dirname(f) for f in glob.glob(os.path.join(r, pat, name))]
    if hits:  # else the loader's cache may still have it: the ldd check below says
        found.append(os.path.realpath(hits[0]))
for d in dict.fromkeys(found):
    print(d)
EOF
  )
  AMPC_GPU_LD_PATH=$(IFS=:; echo "${cuda_dirs[*]}")
  export AMPC_GPU_LD_PATH
  # The bundle's libstdc++ (lib/cxx) only where the machine's is older than the build's.
  missing_libs() {
    local exe
    for exe in "$root"/libexec/*; do
      LD_LIBRARY_PATH="$root/lib${AMPC_GPU_LD_PATH:+:$AMPC_GPU_LD_PATH}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        ldd "$exe" 2>&1 | grep -E 'not found|error|too short' | sed "s|^|  $(basename "$exe"): |" || true
    done
  }
  # (A test on the captured text: grep -q in a pipe could end ldd early, and pipefail would
  # then read the pipe as failed.)
  cxx_re='GLIBCXX|CXXABI|GCC_[0-9]|libstdc\+\+|libgcc_s'
  if [[ $(missing_libs) =~ $cxx_re ]]; then
    AMPC_GPU_LD_PATH="$root/lib/cxx${AMPC_GPU_LD_PATH:+:$AMPC_GPU_LD_PATH}"
    echo "note: using the bundle's libstdc++ (this machine's lacks $(manifest glibcxx_needed))"
  fi
  miss=$(missing_libs)
  # The executables need CUDA 13's cuBLASLt (libcublasLt.so.13) and cuDNN 9 for CUDA 13
  # (libcudnn.so.9); a machine with only a CUDA 12 stack has libcublasLt.so.12: say so.
  if [[ $miss == *libcublasLt.so.13* ]] &&
    { ldconfig -p 2>/dev/null | grep -q 'libcublasLt\.so\.12' ||
      compgen -G "/usr/local/cuda*/lib64/libcublasLt.so.12" >/dev/null; }; then
    die "this machine has a CUDA 12 stack only (libcublasLt.so.12, no libcublasLt.so.13); the
  bundle was built with CUDA 13 (MANIFEST: nvcc $(manifest nvcc)) and needs libcublasLt.so.13
  and libcudnn.so.9 built for CUDA 13 (pip: nvidia-cublas and nvidia-cudnn-cu13), and a driver
  for CUDA 13. Nothing ran."
  fi
  [[ -z $miss ]] || die "libraries the bundle's executables need are not found here
  (cuBLASLt and cuDNN come from this machine: pip packages nvidia-cublas, nvidia-cudnn-cu13,
  or /usr/local/cuda/lib64):
$miss"
  stamp "libraries: bundle + ${AMPC_GPU_LD_PATH:-(none)}"
  # cuDNN and cuBLASLt versions where they are pip packages (the bundle's MANIFEST says
  # which cuDNN the build saw; cuDNN 9 keeps its API within the major version).
  $py - <<'EOF' || true
from importlib import metadata
for d in ("nvidia-cudnn-cu13", "nvidia-cublas", "nvidia-cublas-cu13"):
    try:
        print(f"  pip: {d} {metadata.version(d)}")
    except metadata.PackageNotFoundError:
        pass
EOF
  bin=$root/bin
  read -r -a gpu_tests <<<"$(manifest gpu_tests)"
  work=$tmp/work
  # cuda_plan_test reads models/*.onnx and models/data/*.npz from AMPC_SOURCE_DIR (exported
  # below): this checkout, not the folder the bundle was built in.
else
  bash scripts/install-deps.sh
  jobs=$(nproc)
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DAMPC_CUDA_ARCHITECTURES="$arch" >/dev/null
  # The gpu-labelled tests (tests/CMakeLists.txt), ampc and the benchmark's driver.
  mapfile -t gpu_tests < <(sed -n 's/^ *ampc_add_test(\([A-Za-z0-9_]*\) gpu\/.*/\1/p' tests/CMakeLists.txt)
  stamp "building ampc cuda_plan_bench ${gpu_tests[*]} with -j$jobs"
  ninja -C build-gpu -j "$jobs" ampc cuda_plan_bench "${gpu_tests[@]}" >build-gpu/build.log 2>&1 ||
    { tail -40 build-gpu/build.log; die "the build failed (build-gpu/build.log)"; }
  stamp "built"
  bin=$repo/build-gpu/bin-gpu
  mkdir -p "$bin"
  ln -sf ../tools/ampc/ampc "$bin/ampc"
  for t in cuda_plan_bench "${gpu_tests[@]}"; do ln -sf "../tests/$t" "$bin/$t"; done
  work=$repo/build-gpu
fi
export AMPC_SOURCE_DIR=$repo  # for tests that read it at run time

# Each test case in its own process (gtest's --gtest_filter), the cases of one executable
# sharing $budget seconds; a summary line per executable as soon as it is done.
export AMPC_CUDA_SYNC_DEBUG=1
status=0
mkdir -p "$work"
log=$work/gtest-gpu.log
: >"$log"
total_pass=0 total_fail=0 total_skip=0 total_unrun=0
cases_of() {  # Suite.Case names, one a line (parameterised: Suite/Case/Param)
  "$bin/$1" --gtest_list_tests | awk '/^[^ ]/ {suite = $1; next} /^  / {print suite $1}'
}
# cuda_plan_test's CudaDevice.Versions first: the versions belong at the start of the log.
ordered=()
for t in "${gpu_tests[@]}"; do [[ $t == cuda_plan_test ]] && ordered+=("$t"); done
for t in "${gpu_tests[@]}"; do [[ $t == cuda_plan_test ]] || ordered+=("$t"); done
for t in "${ordered[@]}"; do
  mapfile -t cases < <(cd "$work" && cases_of "$t")
  if [[ $t == cuda_plan_test ]]; then
    mapfile -t cases < <(printf '%s\n' "${cases[@]}" | grep -x 'CudaDevice\.Versions'
                         printf '%s\n' "${cases[@]}" | grep -vx 'CudaDevice\.Versions')
  fi
  mapfile -t cases < <(printf '%s\n' "${cases[@]}" | sed '/^$/d')
  if ((${#cases[@]} == 0)); then
    echo "run.sh: SUMMARY $t: no test cases listed (the executable does not start?)"
    "$bin/$t" --gtest_list_tests 2>&1 | tail -5 || true
    status=1
    continue
  fi
  stamp "$t: ${#cases[@]} cases, $budget s"
  t0=$SECONDS pass=0 fail=0 skip=0 unrun=0 failed_cases=()
  for c in "${cases[@]}"; do
    left=$((budget - (SECONDS - t0)))
    overall=$((deadline - 90 - (SECONDS - start)))  # keep 90 s for the benchmark
    ((overall < left)) && left=$overall
    if ((left < 5)); then unrun=$((unrun + 1)); continue; fi
    out=$work/case.out
    rc=0
    (cd "$work" && timeout "$left" "$bin/$t" --gtest_color=no --gtest_filter="$c") >"$out" 2>&1 || rc=$?
    cat "$out" >>"$log"
    if ((rc != 0)); then
      fail=$((fail + 1)); failed_cases+=("$c")
      ((rc == 124)) && echo "run.sh: $t $c: cut at the executable's budget" | tee -a "$log"
      tail -30 "$out"
    elif grep -q '^\[  SKIPPED \]' "$out"; then
      skip=$((skip + 1))
    else
      pass=$((pass + 1))
    fi
    grep -h '^\[cuda\]' "$out" || true  # what the plan tests report (versions, sizes)
  done
  echo "run.sh: SUMMARY $t: $pass passed, $fail failed, $skip skipped, $unrun not run (budget) in $((SECONDS - t0)) s${failed_cases:+; failed: ${failed_cases[*]}}"
  ((fail + unrun == 0)) || status=1
  total_pass=$((total_pass + pass)) total_fail=$((total_fail + fail))
  total_skip=$((total_skip + skip)) total_unrun=$((total_unrun + unrun))
done
stamp "gtests done: $total_pass passed, $total_fail failed, $total_skip skipped, $total_unrun not run (status $status)"
if ((total_skip)) && ((gpu_seen)); then
  echo "run.sh: error: nvidia-smi sees a GPU but $total_skip cases skipped (CUDA not usable by the tests: see the log)"
  status=1
elif ((total_skip)) && grep -q "skipped: no CUDA device" "$log"; then
  echo "note: $total_skip GPU test cases skipped: this machine has no CUDA device"
fi

# Synchronised BatchNorm's ops (ampc.AllReduceSum, ampc.BatchStatistics) on one GPU, where
# they are copies: the cnn compiled with --data-parallel --sync-batchnorm trains 10 steps on the
# GPU with the CPU's losses (within 1e-4 relative).
stamp "sync-batchnorm plan on one GPU against the CPU"
rc=0
(cd "$work" && "$bin/ampc" compile --train --data-parallel --sync-batchnorm \
  "$repo/models/cnn.onnx" -o syncbn.plan && for d in cpu cuda; do
  "$bin/ampc" train syncbn.plan --data "$repo/models/data/digits_images.npz" --steps 10 \
    --device "$d" --log "syncbn_$d.jsonl" || exit 1
done) >"$work/syncbn.out" 2>&1 || rc=$?
cat "$work/syncbn.out" >>"$log"
if ((rc != 0)) || ! python3 - "$work/syncbn_cpu.jsonl" "$work/syncbn_cuda.jsonl" <<'PY'
import json, sys
cpu, gpu = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
sys.exit(0 if len(cpu) == len(gpu) == 10 and
         all(abs(a - b) <= 1e-4 * abs(a) for a, b in zip(cpu, gpu)) else 1)
PY
then
  echo "run.sh: error: the sync-batchnorm plan on one GPU failed or differs from the CPU"
  status=1
fi

# Data parallel on two GPUs (docs/data-parallel.md): mpirun -np 2 with NCCL, 20 steps of the mlp,
# when this machine has two GPUs and Open MPI's mpirun (the single-GPU NCCL test is
# nccl_smoke_test above).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)
if ((gpus >= 2)) && command -v mpirun >/dev/null; then
  stamp "data parallel: mpirun -np 2 ampc train --device cuda (NCCL)"
  rc=0
  (cd "$work" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    mpirun -np 2 "$bin/ampc" train "$repo/models/mlp.onnx" --data "$repo/models/data/digits.npz" \
    --steps 20 --device cuda --check-replicas) >"$work/dp.out" 2>&1 || rc=$?
  cat "$work/dp.out" >>"$log"
  tail -5 "$work/dp.out"
  if ((rc != 0)) || ! grep -q "identical on 2 ranks" "$work/dp.out"; then
    echo "run.sh: error: the 2-GPU data-parallel run failed (status $rc)"
    status=1
  fi
  # --sync-batchnorm on two GPUs: the cnn's BatchNorm statistics through NCCL.
  rc=0
  (cd "$work" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    mpirun -np 2 "$bin/ampc" train "$repo/models/cnn.onnx" \
    --data "$repo/models/data/digits_images.npz" --steps 20 --device cuda --sync-batchnorm \
    --check-replicas) >"$work/dp_syncbn.out" 2>&1 || rc=$?
  cat "$work/dp_syncbn.out" >>"$log"
  tail -3 "$work/dp_syncbn.out"
  if ((rc != 0)) || ! grep -q "identical on 2 ranks" "$work/dp_syncbn.out"; then
    echo "run.sh: error: the 2-GPU --sync-batchnorm run failed (status $rc)"
    status=1
  fi
else
  echo "note: the 2-GPU data-parallel run needs two GPUs and mpirun (found $gpus GPU(s)$(command -v mpirun >/dev/null || echo ', no mpirun'))"
fi

if ((bench)); then
  # Nothing is printed after the benchmark: its table is the last thing in the log.
  stamp "benchmark (scripts/bench_gpu.py with $($py -c 'import torch; print("torch", torch.__version__)'))"
  left=$((deadline - (SECONDS - start)))
  if ((left < 30)); then
    echo "run.sh: the benchmark did not run: $left s left before the deadline"
    status=1
  else
    rc=0
    PYTHONUNBUFFERED=1 timeout "$left" $py scripts/bench_gpu.py --ampc "$bin/ampc" \
      --bench "$bin/cuda_plan_bench" --work "$work/bench" || rc=$?
    ((rc == 124)) && echo "run.sh: the benchmark was cut at the deadline ($deadline s)"
    ((rc == 0)) || status=1
  fi
fi
exit "$status"
