#!/usr/bin/env bash
# Packs the GPU suite into one archive for a GPU machine that cannot build ampc.
#
# The lent GPU machine (one H200) has nvcc, CMake, ninja and python3 with torch, but none of
# our build dependencies (LLVM 19, ONNX, protobuf, OpenBLAS, googletest, ...) and no network,
# so nothing can be installed there. This script runs on a Debian 12 machine that has them all
# and the CUDA toolkit in /usr/local/cuda (scripts/install-deps.sh): it builds `build-gpu`
# (Release, sm_90) with only the targets tests/gpu/run.sh needs (ampc, cuda_plan_bench and
# the gpu-labelled gtests), and writes gpu-bundle/ampc-gpu.tar.xz (ignored by git; carried
# to the GPU machine next to the working tree), holding
#   ampc-gpu/libexec/  the executables, stripped
#   ampc-gpu/bin/      one small wrapper each: puts lib/ first on LD_LIBRARY_PATH, then execs
#   ampc-gpu/lib/      every shared library they load that a bare glibc system lacks (ldd)
#   ampc-gpu/lib/cxx/  libstdc++ and libgcc_s, used only where the machine's are too old
#   ampc-gpu/MANIFEST  what was built, from which commit, and what the GPU machine must supply
# Not bundled: glibc itself (libc, libm, ld-linux, ...), the driver's libcuda, and cuBLASLt
# and cuDNN (over 1 GB together here: cuBLASLt alone is 540 MB, and cuDNN 9 loads its engine
# sub-libraries at run time). The GPU image has both as pip packages (nvidia-cublas,
# nvidia-cudnn-cu13, which its torch uses); run.sh finds their folders. cudart is static.
#
# Usage: bash tests/gpu/bundle.sh [--arch 90] [--out gpu-bundle] [--check | --check-only]
#   --check       also unpack the archive and start every executable from it with the
#                 system's copies of the bundled libraries hidden (needs root and unshare: a
#                 private mount namespace where each is bind-mounted over by an empty file)
#   --check-only  that check alone, of the archive already in --out
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
arch=90
out=gpu-bundle
check=0
pack=1
while (($#)); do
  case "$1" in
    --arch) arch="$2"; shift ;;
    --out) out="$2"; shift ;;
    --check) check=1 ;;
    --check-only) check=1; pack=0 ;;
    *) echo "usage: $0 [--arch 80|90] [--out DIR] [--check | --check-only]" >&2; exit 2 ;;
  esac
  shift
done
stamp() { echo "[bundle.sh $((SECONDS - start)) s] $*"; }
die() { echo "bundle.sh: error: $*" >&2; exit 1; }

archive=$out/ampc-gpu.tar.xz
glibc_re='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libutil\.so|libresolv\.so|libanl\.so)'
# Build and pack (all but --check-only).
if ((pack)); then
nvcc=/usr/local/cuda/bin/nvcc
[[ -x $nvcc ]] || die "no CUDA toolkit at /usr/local/cuda (nvcc): the bundle must hold the CUDA backend"
for tool in cmake ninja ldd strip xz tar readelf; do
  command -v "$tool" >/dev/null || die "$tool is missing (bash scripts/install-deps.sh installs the build tools)"
done
bash scripts/install-deps.sh

# The gpu-labelled tests, as tests/CMakeLists.txt declares them (the same list run.sh builds).
mapfile -t gpu_tests < <(sed -n 's/^ *ampc_add_test(\([A-Za-z0-9_]*\) gpu\/.*/\1/p' tests/CMakeLists.txt)
((${#gpu_tests[@]})) || die "no gpu-labelled tests found in tests/CMakeLists.txt"
executables=(ampc cuda_plan_bench "${gpu_tests[@]}")

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DAMPC_CUDA_ARCHITECTURES="$arch" >/dev/null
stamp "building ${executables[*]} with -j$(nproc)"
ninja -C build-gpu -j "$(nproc)" "${executables[@]}" >build-gpu/build.log 2>&1 ||
  { tail -40 build-gpu/build.log; die "the build failed (build-gpu/build.log)"; }
stamp "built"

# Where each executable landed in build-gpu (tools/ampc/ampc, tests/...).
declare -A path_of
for exe in "${executables[@]}"; do
  p=$(find build-gpu -type f -name "$exe" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
  [[ -n $p ]] || die "$exe was not built"
  path_of[$exe]=$p
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/ampc-gpu
mkdir -p "$root/bin" "$root/libexec" "$root/lib/cxx"

for exe in "${executables[@]}"; do
  cp "${path_of[$exe]}" "$root/libexec/$exe"
  strip --strip-unneeded "$root/libexec/$exe"
  # A wrapper rather than an RPATH: no patchelf is needed, and LD_LIBRARY_PATH reaches only
  # ampc's processes (python and torch in run.sh keep the machine's own libraries).
  # AMPC_GPU_LD_PATH: the folders of cuBLASLt and cuDNN (and lib/cxx where needed), set by run.sh.
  cat >"$root/bin/$exe" <<EOF
#!/bin/sh
# Runs ../libexec/$exe with the bundle's libraries (tests/gpu/bundle.sh).
d=\$(dirname "\$(readlink -f "\$0")")/..
LD_LIBRARY_PATH="\$d/lib\${AMPC_GPU_LD_PATH:+:\$AMPC_GPU_LD_PATH}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$d/libexec/$exe" "\$@"
EOF
  chmod +x "$root/bin/$exe"
done

# Every library the executables load, transitively (ldd resolves the whole tree), sorted into
# what glibc brings (left out), what the GPU machine's CUDA supplies (left out, named in the
# MANIFEST), libstdc++/libgcc_s (lib/cxx) and the rest (lib/).
cuda_re='^(libcuda\.so|libcublas|libcublasLt|libcudnn|libnvrtc|libnvJitLink|libcudart\.so)'
declare -A bundled cuda_needed
for exe in "${executables[@]}"; do
  while read -r name arrow target _; do
    [[ $arrow == "=>" ]] || continue  # the vdso and ld-linux lines have no "=>"
    [[ $target == not ]] && die "${path_of[$exe]}: $name not found (ldd)"
    [[ $name =~ $glibc_re ]] && continue
    if [[ $name =~ $cuda_re ]]; then cuda_needed[$name]=1; continue; fi
    bundled[$name]=$target
  done < <(ldd "${path_of[$exe]}")
done
for name in "${!bundled[@]}"; do
  case "$name" in
    libstdc++.so.6 | libgcc_s.so.1) dest=$root/lib/cxx/$name ;;
    *) dest=$root/lib/$name ;;
  esac
  cp -L "${bundled[$name]}" "$dest"
  chmod u+w "$dest"
  strip --strip-unneeded "$dest"
done
# The C++ runtime's needs: the newest GLIBCXX / CXXABI version any executable asks for;
# run.sh uses lib/cxx only where the machine's libstdc++ lacks it.
glibcxx=$(for exe in "${executables[@]}"; do readelf -V --wide "$root/libexec/$exe"; done |
  grep -o 'GLIBCXX_3\.4\.[0-9]*' | sort -t. -k3 -n -u | tail -1)

cudnn_version=$(sed -n 's/^#define CUDNN_\(MAJOR\|MINOR\|PATCHLEVEL\) *\([0-9]*\).*/\2/p' \
  /usr/local/cuda/include/cudnn_version.h 2>/dev/null | paste -sd. -)
{
  echo "# ampc GPU bundle (tests/gpu/bundle.sh); read by tests/gpu/run.sh"
  echo "commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | wc -l | tr -d ' ') files changed"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cuda_arch=$arch"
  echo "nvcc=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "cudnn_built_with=${cudnn_version:-unknown}"
  echo "glibc_built_with=$(ldd --version | head -1 | grep -o '[0-9.]*$')"
  echo "glibcxx_needed=$glibcxx"
  # cuda_plan_test reads the models from this absolute path (AMPC_SOURCE_DIR, compiled in).
  echo "source_dir=$PWD"
  echo "gpu_tests=${gpu_tests[*]}"
  echo "cuda_libs=$(printf '%s\n' "${!cuda_needed[@]}" | sort | paste -sd' ' -)"
  echo "bundled_libs=$(printf '%s\n' "${!bundled[@]}" | sort | paste -sd' ' -)"
} >"$root/MANIFEST"

mkdir -p "$out"
stamp "compressing $(du -sm "$root" | cut -f1) MiB (xz -9)"
# -T0: all cores; the archive is the same single stream, only faster to write.
tar -C "$work" --owner=0 --group=0 --sort=name -cf - ampc-gpu | xz -9 -T0 >"$archive.tmp"
mv "$archive.tmp" "$archive"
bytes=$(stat -c %s "$archive")
limit=$((64 * 1024 * 1024))
stamp "wrote $archive: $((bytes / 1048576)) MiB ($bytes bytes); bundled $(printf '%s ' "${!bundled[@]}")"
echo "GPU machine must supply: ${!cuda_needed[*]} (and the driver's libcuda.so.1)"
# The device tool carries 64 MiB in all, the working tree included.
tree=$(git ls-files -z -co --exclude-standard | du -c -b --files0-from=- 2>/dev/null | tail -1 | cut -f1)
((bytes < limit)) || die "$archive is over 64 MiB: the device tool cannot carry it"
echo "with the working tree (~$((tree / 1048576)) MiB) that is $(((bytes + tree) / 1048576)) of the 64 MiB the device tool carries"

fi

if ((check)); then
  stamp "checking the archive with the system's copies of the bundled libraries hidden"
  if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null; then
    die "--check needs root and unshare (a private mount namespace)"
  fi
  [[ -f $archive ]] || die "no $archive to check (run without --check-only first)"
  t=$(mktemp -d)
  trap 'rm -rf "${work:-}" "$t"' EXIT
  tar -xJf "$archive" -C "$t"
  r=$t/ampc-gpu
  read -r -a bundled_libs <<<"$(sed -n 's/^bundled_libs=//p' "$r/MANIFEST")"
  read -r -a cuda_libs <<<"$(sed -n 's/^cuda_libs=//p' "$r/MANIFEST")"
  # cuBLASLt and cuDNN as the GPU machine supplies them: here, the toolkit's folders.
  cuda_dirs=$(for n in "${cuda_libs[@]}"; do
    f=$(ldconfig -p | awk -v n="$n" '$1 == n {print $NF; exit}')
    [[ -n $f ]] && dirname "$(readlink -f "$f")"
  done | sort -u | paste -sd: -)
  # 1. Resolution: with the bundle first, every library but glibc's, cuBLASLt's and cuDNN's
  #    must come from the bundle (ldd lists the whole tree).
  for exe in "$r"/libexec/*; do
    bad=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$r/lib:$r/lib/cxx:$cuda_dirs" ldd "$exe" |
      awk -v r="$r" -v c="$cuda_dirs" '$2 == "=>" && index($3, r "/") != 1 {
        n = split(c, d, ":"); ok = 0
        for (i = 1; i <= n; i++) if (index($3, d[i] "/") == 1) ok = 1
        if (!ok) print}' | sed 's/^[[:space:]]*//' | grep -v -E "$glibc_re" || true)
    [[ -z $bad ]] || die "$(basename "$exe") resolves outside the bundle:"$'\n'"$bad"
  done
  echo "bundle check: every executable resolves its libraries from the bundle (and $cuda_dirs)"
  # 2. Running: in a private mount namespace, every system file that holds a bundled library
  #    (libstdc++ and libgcc_s too, and the whole llvm-19 tree) is bind-mounted over by an
  #    empty file; only glibc, cuBLASLt and cuDNN stay. Then ampc compiles the mlp for the
  #    GPU (LLVM's NVPTX back end), each gtest runs (skips without a device) and
  #    cuda_plan_bench must say "no CUDA device". Between the mounts, only programs that need
  #    glibc alone run (sh, env, readlink, dirname: the wrappers), apart from mount itself.
  : >"$t/empty"
  hide=()
  for name in "${bundled_libs[@]}"; do
    for f in /lib/x86_64-linux-gnu/"$name"* /usr/lib/x86_64-linux-gnu/"$name"* \
        $(ldconfig -p | awk -v n="$name" '$1 == n {print $NF}'); do
      [[ -e $f ]] && hide+=("$(readlink -f "$f")")
    done
  done
  mapfile -t hide < <(printf '%s\n' "${hide[@]}" | sort -u)
  set +e
  # shellcheck disable=SC2016  # the script is for the inner sh, which expands it
  unshare -m /bin/sh -c '
    t=$1 r=$2 ld=$3; shift 3
    mount -t tmpfs none /usr/lib/llvm-19 || exit 3
    for f in "$@"; do mount --bind "$t/empty" "$f" || exit 3; done
    run() { env -i PATH=/usr/bin:/bin AMPC_GPU_LD_PATH="$ld" "$@"; }
    run "$r/bin/ampc" compile models/mlp.onnx --train --precision fp16 --optimizer adam \
      --target cuda:sm_90 -o "$t/mlp.plan" >"$t/ampc.log" 2>&1 || exit 4
    for exe in "$r"/libexec/*; do
      n=${exe##*/}
      case $n in ampc | cuda_plan_bench) continue ;; esac
      run "$r/bin/$n" >"$t/$n.log" 2>&1 || echo "$n" >>"$t/failed"
    done
    run "$r/bin/cuda_plan_bench" "$t/mlp.plan" models/data/digits.npz >"$t/bench.log" 2>&1
    echo $? >"$t/bench.rc"
  ' sh "$t" "$r" "$r/lib/cxx:$cuda_dirs" "${hide[@]}"
  rc=$?
  set -e
  ((rc != 3)) || die "--check could not hide the system's libraries (mount failed)"
  ((rc != 4)) || die "ampc from the bundle failed with the system's libraries hidden: $(cat "$t/ampc.log")"
  echo "bundle check: $((${#hide[@]})) system files hidden; ampc compiled models/mlp.onnx for cuda:sm_90"
  for log in "$t"/*_test.log; do
    n=$(basename "$log" .log)
    echo "bundle check: $n: $(grep -E '^\[  (PASSED  |SKIPPED |FAILED  )\] [0-9]+ test' "$log" | paste -sd' ' -)"
  done
  [[ ! -e $t/failed ]] || die "these tests failed from the bundle: $(cat "$t/failed")"
  echo "bundle check: cuda_plan_bench exited $(cat "$t/bench.rc"): $(tail -1 "$t/bench.log")"
fi
