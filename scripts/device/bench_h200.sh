#!/bin/sh
# scripts/device/bench_h200.sh [ARGS...]   (on the accelerator machine)
#
# The GPU benchmark in one command: prints the machine (nvidia-smi, the OpenCL
# ICD), then runs scripts/bench/opencl_gpu.lua ARGS through run_h200.sh
# (PACK = the packed folder, default build-device) and writes, when $OUT is
# set, $OUT/opencl_gpu.txt (all output), $OUT/opencl_gpu.md (the table) and
# $OUT/resnet18_mali.log (every tuning record). Here:
#
#   scripts/device/pack.sh /tmp/b-x build-gb
#   run(command="PACK=build-gb sh scripts/device/bench_h200.sh --n-trial 64 --budget 300",
#       carry=["build-gb"])
set -u
dir=$(dirname "$0")
out=${OUT:-/tmp/opencl_gpu}
mkdir -p "$out"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 || true
  nproc
} 2>&1 | tee "$out/machine.txt"
sh "$dir/run_h200.sh" scripts/bench/opencl_gpu.lua --markdown "$out/opencl_gpu.md" \
  --log "$out/resnet18_mali.log" "$@" 2>&1 | tee "$out/opencl_gpu.txt"
