#!/bin/sh
# scripts/device/ansor_cpu_parallel.sh   (on the accelerator machine; rerun to continue)
#
# scripts/bench/ansor_cpu.lua at 64, 256 and 512 trials for resnet-18's conv layers 2, 6, 11, 4
# and the 1024^3 matmul, as five processes at once: each times its kernels (and, at the end,
# its PyTorch/OpenBLAS peer) on a pair of CPUs of its own (TUNELUA_MEASURE_CPUS), while the
# five searches and their compiles share CPUs 0,1,12-15. Logs persist in build-device/ansor-logs
# (copied in) and come back as $OUT/logs.tgz: unpack it into build-device/ansor-logs before the
# next call, which resumes every tuner from its log (each call stops starting runs after 470 s).
set -u
export TUNELUA_PYTHON=${TUNELUA_PYTHON:-python3} TUNELUA_NUM_THREADS=2
out=${OUT:-/tmp/ansor-out}
logs=/tmp/ansor-logs
mkdir -p "$logs" "$out"
[ -d build-device/ansor-logs ] && cp -r build-device/ansor-logs/. "$logs/"
one() { # ansor_cpu options, measurement CPUs, name
  TUNELUA_MEASURE_CPUS=$2 taskset -c 0,1,12-15 timeout 540 sh scripts/device/run_h200.sh \
    scripts/bench/ansor_cpu.lua --trials=64,256,512 $1 --logdir="$logs/$3" --time-limit=470 \
    --build-jobs=4 --min-repeat-ms=20 > "$out/$3.txt" 2>&1 &
}
one "--layers=2 --no-matmul" 2,3 l2
one "--layers=6 --no-matmul" 4,5 l6
one "--layers=11 --no-matmul" 6,7 l11
one "--layers=4 --no-matmul" 8,9 l4
one "--matmul-only" 10,11 mm
wait
tar czf "$out/logs.tgz" -C "$logs" .
tail -n 9 "$out"/*.txt
