#!/bin/sh
# scripts/device/pack.sh BUILD_DIR [OUT_DIR]
#
# Packs a built tunelua for the accelerator machine (no package registry
# there): OUT_DIR (default build-device/, ignored by git through /build-*/)
# gets bin/tunelua, lib/libtunelua.so, lib/tunelua-measure-opencl and every shared library they need
# except the C library itself (glibc, libm, libpthread, libdl, the dynamic
# loader), the ocl-icd loader (libOpenCL.so.1) among them. The Lua sources
# are not copied: the repository travels with the run, and run_h200.sh
# points the host at it. Carry OUT_DIR with the device tool's `run`:
#
#   scripts/device/pack.sh /tmp/b-ocl
#   run(command="sh scripts/device/run_h200.sh scripts/bench/opencl_gpu.lua", carry=["build-device"])
#
# The GPU benchmark (tuned resnet-18 convs vs PyTorch, results under $OUT):
#   run(command="PACK=build-device sh scripts/device/bench_h200.sh --n-trial 96 --budget 380",
#       carry=["build-device"])
set -eu
build=${1:?usage: pack.sh BUILD_DIR [OUT_DIR]}
out=${2:-build-device}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/tunelua" "$out/bin/"
cp "$build/libtunelua.so" "$out/lib/"
# the OpenCL measurement child exec'd once the tuner has initialized OpenCL itself: the
# library looks for it in its own directory
cp "$build/tunelua-measure-opencl" "$out/lib/"
for f in "$build/tunelua" "$build/libtunelua.so"; do
  ldd "$f" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libtunelua.so) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
du -sh "$out"
ls "$out/lib"
