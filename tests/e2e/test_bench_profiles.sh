#!/bin/bash
# The profiling options of scripts/bench/network_cpu.lua and torch_peer.py:
#   * torch_peer.py's summary of an ONNX Runtime profile trace (ort_node_summary): the
#     "<node>_kernel_time" events of category Node per node, in execution order, with the op
#     type and first output shape of the event, the warm-up runs left out of the mean; fence
#     and session events ignored; the trace as a list or as {"traceEvents": [...]};
#   * torch_peer.py --serve: ready once set up, one JSON answer per "run N", a bad request
#     named, nothing after "quit";
#   * network_cpu.lua's checks of --scaling and --ort-profile (bad values named, before any
#     network is built).
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3

if "$PY" -c "import torch" 2>/dev/null; then
  out=$(cd "$tmp" && "$PY" -B - "$SRC/scripts/bench" 2>&1 <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import torch_peer as tp
ev = []
for r in range(5):
    ev.append({"cat": "Session", "name": "model_run", "dur": 5000})
    ev.append({"cat": "Node", "name": "/c1/Conv_fence_before", "dur": 1, "args": {"op_name": "Conv"}})
    ev.append({"cat": "Node", "name": "/c1/Conv_kernel_time", "dur": 100 + 10 * r,
               "args": {"op_name": "FusedConv", "output_type_shape": [{"float": [1, 64, 56, 56]}]}})
    ev.append({"cat": "Node", "name": "/fc/Gemm_kernel_time", "dur": 40,
               "args": {"op_name": "Gemm", "output_type_shape": [{"float": [1, 1000]}]}})
for trace in (ev, {"traceEvents": ev}):
    s = tp.ort_node_summary(trace, 3)
    assert [n["name"] for n in s] == ["/c1/Conv", "/fc/Gemm"], s
    assert s[0]["op"] == "FusedConv" and s[0]["shape"] == [1, 64, 56, 56], s
    assert abs(s[0]["mean_us"] - 135.0) < 1e-9, s      # runs 3 and 4: 130, 140
    assert s[1]["op"] == "Gemm" and s[1]["shape"] == [1, 1000] and s[1]["mean_us"] == 40.0, s
# fewer runs than the warm-up: all of them
assert tp.ort_node_summary(ev[:4], 3)[0]["mean_us"] == 100.0
assert tp.ort_node_summary([], 3) == []
print("summary ok")
EOF
)
  rc=$?
  check "ort_node_summary" 0 "summary ok" "$rc" "$out"
  out=$("$PY" -B "$SRC/scripts/bench/torch_peer.py" --ort-profile "$tmp/x.json" 2>&1); rc=$?
  check "--ort-profile needs onnxruntime" 2 "--ort-profile FILE needs --runtime onnxruntime" "$rc" "$out"
  # --serve: ready once set up, then one answer per request, a bad request named, quit
  out=$(printf 'run 2\nrun zero\nquit\nrun 1\n' |
        "$PY" -B "$SRC/scripts/bench/torch_peer.py" --serve --network mobilenet --threads 1 2>"$tmp/serve.err"); rc=$?
  check "--serve ready" 0 '{"ready": true, "version": ' "$rc" "$(echo "$out" | sed -n 1p)"
  check "--serve answers run 2" 0 '"median_ms": ' "$rc" "$(echo "$out" | sed -n 2p)"
  n=$(echo "$out" | sed -n 2p | "$PY" -c 'import json, sys; print(len(json.load(sys.stdin)["times_ms"]))')
  check "--serve times 2 runs" 0 "2" "$rc" "$n"
  check "--serve names a bad request" 0 "expected 'run N' (N > 0) or 'quit', got 'run zero'" "$rc" \
        "$(echo "$out" | sed -n 3p)"
  check "--serve stops at quit" 0 "3" "$rc" "$(echo "$out" | wc -l | tr -d ' ')"
else
  echo "test_bench_profiles: $PY has no torch: torch_peer.py checks skipped"
fi

NC="$SRC/scripts/bench/network_cpu.lua"
out=$(cd "$tmp" && "$TL" "$NC" --scaling 0,1 2>&1); rc=$?
check "--scaling without --profile" 1 "--scaling needs --profile N" "$rc" "$out"
out=$(cd "$tmp" && "$TL" "$NC" --profile 2 --scaling 1 2>&1); rc=$?
check "--scaling of one CPU" 1 "--scaling expects a comma-separated list of at least two CPU numbers" "$rc" "$out"
out=$(cd "$tmp" && "$TL" "$NC" --profile 2 --scaling a,b 2>&1); rc=$?
check "--scaling not numbers" 1 "got a,b" "$rc" "$out"
out=$(cd "$tmp" && "$TL" "$NC" --ort-profile "$tmp/ort" 2>&1); rc=$?
check "--ort-profile without --profile" 1 "--ort-profile needs --profile N" "$rc" "$out"
check_done test_bench_profiles
