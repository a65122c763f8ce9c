#!/usr/bin/env bash
# Prepares what tests/gpu/run.sh needs on a GPU machine that cannot install
# the build packages (no network): builds the four programs the GPU check
# runs, with NCCL, in $BUILD_DIR (default build-nccl/), then copies them
# (without debug info) and every shared library they load into
# $BUILD_DIR/gpu-bundle/:
#   bin/      test_gpu_check, test_nccl, test_nccl_gpu, horovodrun, elastic_train
#   lib/      gRPC, protobuf, Abseil, Gloo, ... as found here
#   lib-cxx/  this machine's libstdc++ and libgcc_s, used only if the GPU
#             machine's own are too old
# Left out: the C library family, the CUDA driver and NCCL, which the GPU
# machine provides (run.sh finds its libnccl.so.2). The CUDA runtime is linked
# statically. bundle.txt records the fingerprint of the GPU sources, which
# run.sh compares with the tree it runs in.
#
#   tests/gpu/make_bundle.sh                 build and bundle
#   tests/gpu/make_bundle.sh --fingerprint   print the sources' fingerprint
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# A hash of the sources compiled into the bundle's GPU parts (worker
# runtime, example, GPU tests), so a bundle older than the tree is noticed.
fingerprint() {
  (cd "$repo_root" &&
    {
      find src/worker_runtime examples tests/gpu -type f \
        \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cmake' \)
      find tests/unit -name 'test_nccl_*' -o -name nccl.cmake
    } | LC_ALL=C sort | xargs sha1sum | sha1sum | cut -d' ' -f1)
}

if [[ "${1:-}" == --fingerprint ]]; then
  fingerprint
  exit 0
fi

build_dir="${BUILD_DIR:-$repo_root/build-nccl}"
jobs="${JOBS:-$(nproc)}"
targets=(test_gpu_check test_nccl test_nccl_gpu horovodrun elastic_train)

cmake -S "$repo_root" -B "$build_dir" -DHVDD_WITH_NCCL=ON
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"

bundle="$build_dir/gpu-bundle"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/lib-cxx"
binaries=(
  "$build_dir/tests/gpu/test_gpu_check"
  "$build_dir/tests/unit/test_nccl"
  "$build_dir/tests/unit/test_nccl_gpu"
  "$build_dir/bin/horovodrun"
  "$build_dir/examples/elastic_train"
)
for binary in "${binaries[@]}"; do
  cp "$binary" "$bundle/bin/"
  strip --strip-debug "$bundle/bin/$(basename "$binary")"
done

# Every library the binaries resolve here, except those the GPU machine has.
ldd "${binaries[@]}" | awk '/=> \// {print $3}' | sort -u | while read -r library; do
  name="$(basename "$library")"
  case "$name" in
    ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|\
    libutil.so*|libanl.so*|libnsl.so*|libcuda.so*|libnccl.so*)
      ;;
    libstdc++.so*|libgcc_s.so*)
      cp -L "$library" "$bundle/lib-cxx/$name"
      ;;
    *)
      cp -L "$library" "$bundle/lib/$name"
      ;;
  esac
done

newest_glibc="$(objdump -T "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null |
  grep -o 'GLIBC_[0-9.]*' | sort -t. -k1,1 -k2,2n -u | tail -n 1)"
{
  echo "sources $(fingerprint)"
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), needs ${newest_glibc:-GLIBC_?}"
  nccl_header="$(grep -m1 -o 'NCCL_VERSION_CODE [0-9]*' \
    "$(find /usr/local/cuda/include /usr/include -name nccl.h 2>/dev/null | head -n 1)" || true)"
  echo "built against ${nccl_header:-an unknown NCCL}"
} > "$bundle/bundle.txt"

size_kib="$(du -sk "$bundle" | cut -f1)"
cat "$bundle/bundle.txt"
echo "bundle: $bundle ($((size_kib / 1024)) MiB)"
if ((size_kib > 56 * 1024)); then
  echo "the bundle is over 56 MiB: too big to carry to the GPU machine" >&2
  exit 1
fi
