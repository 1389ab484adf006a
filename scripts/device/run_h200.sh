#!/bin/sh
# scripts/device/run_h200.sh SCRIPT.lua [ARGS...]   (on the accelerator machine)
#
# Runs the packed tunelua (scripts/device/pack.sh, carried as build-device/)
# from the repository root with NVIDIA's OpenCL driver registered for the
# carried ocl-icd loader. PACK overrides the packed folder.
set -eu
pack=${PACK:-build-device}
root=$(pwd)
mkdir -p /etc/OpenCL/vendors
[ -e /etc/OpenCL/vendors/nvidia.icd ] || echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
if [ ! -e /usr/lib/libnvidia-opencl.so.1 ]; then
  found=$(ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 /usr/local/nvidia/lib64/libnvidia-opencl.so.1 2>/dev/null | head -1 || true)
  [ -n "$found" ] && echo "$found" > /etc/OpenCL/vendors/nvidia.icd
fi
# the host finds lua/ through <bin>/../share/tunelua
mkdir -p "$pack/share"
ln -sfn "$root" "$pack/share/tunelua"
export LD_LIBRARY_PATH="$root/$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TUNELUA_CACHE_DIR=/tmp/tunelua-kernels
exec "$root/$pack/bin/tunelua" "$@"
