#!/usr/bin/python3
"""The PyTorch and ONNX Runtime CPU peers of scripts/bench/network_cpu.lua.

Builds the benchmark networks as tunelua's networks/ define them
(resnet-18/34/50: pre-activation ResNet v2; mobilenet: MobileNet v1 with
batch norm and relu after the depthwise convolutions; vgg-16: VGG without
batch norm, torchvision's vgg16; inception_v3: torchvision's inception_v3
without the auxiliary head, whose last block pools by average where ours
pools by max, a negligible difference in work), in eval mode, and times
batch-1 fp32 inference on the CPU with the given thread count.

    python3 scripts/bench/torch_peer.py --network resnet-18 --threads 2 --repeat 30
    python3 scripts/bench/torch_peer.py --network resnet-18 --runtime onnxruntime
    python3 scripts/bench/torch_peer.py --network resnet-50 --memory     # resident MiB

--runtime onnxruntime exports the same model to ONNX (opset 17, into a
temporary directory) and times it with ONNX Runtime's CPU provider, all graph
optimizations on, intra-op threads = --threads, one inter-op thread.

--ort-profile FILE (with --runtime onnxruntime): after the timing, a second session of
the same model with ONNX Runtime's profiler on (SessionOptions.enable_profiling) runs 3
warm-up and --repeat profiled inferences; its trace (end_profiling(): the "Node" events
named <node>_kernel_time, "dur" in microseconds) is summarized into FILE as JSON:
{"network", "threads", "runs", "version", "total_us", "nodes": [{"name", "op",
"shape", "mean_us"}, ...]} in execution order (op: the node's op type after ORT's graph
optimizations, e.g. FusedConv; shape: its first output's; mean_us: the mean over the
profiled runs, the warm-up runs left out). scripts/bench/network_cpu.lua --ort-profile
DIR sets it and prints the per-layer comparison with tunelua's per-step profile.

--serve: the model is set up once (exported to ONNX once), then timed on request: each
line "run N" on stdin answers one JSON line {"median_ms", "times_ms"} (N runs after one
warm-up run), "quit" ends. Its first line, once set up, is {"ready": true, "version"} (and
"isa" for torch). scripts/bench/network_cpu.lua keeps one such peer per runtime while it
measures a network, asking it for runs between its own.

--device cuda times the same model on the first CUDA device instead (scripts/bench/
ansor_network.lua --target opencl): fp32 with TF32 off for cuDNN and matmul, cuDNN's
benchmark mode on; a run is `number` back-to-back forward calls between two CUDA events
(`number` chosen so that a run lasts at least --min-ms), the time of a call the median over
--repeat runs divided by `number`: "median_ms" for eager calls, "graph_ms" for the calls
captured once in a CUDA graph and replayed (null when the capture fails).

Prints one JSON object: {"network", "runtime", "threads", "median_ms", "mean_ms", "std_ms",
"runs", "torch", "version"} (with --memory instead of times: "base_mib", "ready_mib",
"peak_mib", "weights_mib": see main_memory) (and, with --device cuda, "device", "graph_ms", "number",
"cudnn"); without a CUDA device {"ok": false, "reason"} (exit 3).
"""
import argparse
import json
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
except ImportError:
    sys.stderr.write("torch_peer: PyTorch is not installed "
                     "(apt-get install python3-torch)\n")
    sys.exit(3)


def bn(c, eps):
    return nn.BatchNorm2d(c, eps=eps)


class BasicUnit(nn.Module):
    def __init__(self, cin, cout, stride, dim_match, bottleneck):
        super().__init__()
        eps = 2e-5
        self.bottleneck = bottleneck
        self.bn1 = bn(cin, eps)
        if bottleneck:
            mid = cout // 4
            self.conv1 = nn.Conv2d(cin, mid, 1, stride, 0, bias=False)
            self.bn2 = bn(mid, eps)
            self.conv2 = nn.Conv2d(mid, mid, 3, 1, 1, bias=False)
            self.bn3 = bn(mid, eps)
            self.conv3 = nn.Conv2d(mid, cout, 1, 1, 0, bias=False)
        else:
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn2 = bn(cout, eps)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.sc = None if dim_match else nn.Conv2d(cin, cout, 1, stride, 0, bias=False)

    def forward(self, x):
        act1 = torch.relu(self.bn1(x))
        y = self.conv1(act1)
        y = self.conv2(torch.relu(self.bn2(y)))
        if self.bottleneck:
            y = self.conv3(torch.relu(self.bn3(y)))
        shortcut = x if self.sc is None else self.sc(act1)
        return y + shortcut


class ResNetV2(nn.Module):
    CONFIG = {18: ([2, 2, 2, 2], False), 34: ([3, 4, 6, 3], False),
              50: ([3, 4, 6, 3], True), 101: ([3, 4, 23, 3], True),
              152: ([3, 8, 36, 3], True)}

    def __init__(self, depth):
        super().__init__()
        units, bottleneck = self.CONFIG[depth]
        filters = [64, 256, 512, 1024, 2048] if bottleneck else [64, 64, 128, 256, 512]
        eps = 2e-5
        self.bn_data = bn(3, eps)
        self.conv0 = nn.Conv2d(3, filters[0], 7, 2, 3, bias=False)
        self.bn0 = bn(filters[0], eps)
        self.pool = nn.MaxPool2d(3, 2, 1)
        layers = []
        cin = filters[0]
        for i, n in enumerate(units):
            for j in range(n):
                stride = 2 if (j == 0 and i > 0) else 1
                layers.append(BasicUnit(cin, filters[i + 1], stride, j > 0, bottleneck))
                cin = filters[i + 1]
        self.units = nn.Sequential(*layers)
        self.bn1 = bn(cin, eps)
        self.fc1 = nn.Linear(cin, 1000)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn0(self.conv0(self.bn_data(x)))))
        x = torch.relu(self.bn1(self.units(x)))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return torch.softmax(self.fc1(x), dim=-1)


class MobileNetV1(nn.Module):
    def __init__(self):
        super().__init__()
        eps = 1e-5

        def block(cin, cout, stride):
            return [nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), bn(cin, eps),
                    nn.ReLU(), nn.Conv2d(cin, cout, 1, 1, 0, bias=False), bn(cout, eps),
                    nn.ReLU()]

        spec = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1),
                (256, 512, 2)] + [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), bn(32, eps), nn.ReLU()]
        for cin, cout, s in spec:
            layers += block(cin, cout, s)
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1024, 1000)

    def forward(self, x):
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1)
        return torch.softmax(self.fc(x), dim=-1)


def build(name):
    if name.startswith("resnet-"):
        return ResNetV2(int(name.split("-")[1]))
    if name == "mobilenet":
        return MobileNetV1()
    if name in ("vgg-16", "inception_v3"):
        try:
            import torchvision
        except ImportError:
            raise SystemExit("torch_peer: %s needs torchvision (apt-get install "
                             "python3-torchvision)" % name)
        if name == "vgg-16":
            return torchvision.models.vgg16(weights=None)
        return torchvision.models.inception_v3(weights=None, aux_logits=False,
                                               init_weights=False)
    raise SystemExit("torch_peer: unknown network %r" % name)


def time_runs(fn, repeat, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def onnxruntime_runner(model, x, threads, profiled=False):
    """(run, version, profiled session or None): the timed session's run function, and with
    profiled=True a second session of the same model with ONNX Runtime's profiler on."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise SystemExit("torch_peer: onnxruntime is not installed")
    import os
    import tempfile
    d = tempfile.mkdtemp(prefix="torch_peer.")
    path = os.path.join(d, "model.onnx")

    def options(profile):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if profile:
            so.enable_profiling = True
            # the trace goes to a directory of its own (removed after reading it)
            so.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="torch_peer.prof."), "ort")
        return so

    psess = None
    try:
        try:
            torch.onnx.export(model, (x,), path, opset_version=17, input_names=["data"],
                              dynamo=False)
        except TypeError:   # a torch without the dynamo switch
            torch.onnx.export(model, (x,), path, opset_version=17, input_names=["data"])
        sess = ort.InferenceSession(path, options(False), providers=["CPUExecutionProvider"])
        if profiled:
            psess = ort.InferenceSession(path, options(True), providers=["CPUExecutionProvider"])
    finally:
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        os.rmdir(d)
    feed = {sess.get_inputs()[0].name: x.numpy()}
    return (lambda: sess.run(None, feed)), ort.__version__, psess


def ort_node_summary(trace, warmup):
    """Per node of an ONNX Runtime profile trace (the list of Chrome trace events that
    end_profiling() wrote, or an object holding it as "traceEvents"): [{"name", "op",
    "shape", "mean_us"}] in execution order, each node's first `warmup` runs left out."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    nodes, order = {}, []
    for e in events:
        if not isinstance(e, dict) or e.get("cat") != "Node":
            continue
        name = e.get("name", "")
        if not name.endswith("_kernel_time"):
            continue
        name = name[:-len("_kernel_time")]
        args = e.get("args") or {}
        n = nodes.get(name)
        if n is None:
            shape = []
            outs = args.get("output_type_shape") or []
            if outs and isinstance(outs[0], dict) and outs[0]:
                shape = list(outs[0].values())[0]
            n = nodes[name] = {"name": name, "op": args.get("op_name", "?"), "shape": shape,
                               "durs": []}
            order.append(name)
        n["durs"].append(float(e.get("dur", 0)))
    out = []
    for name in order:
        n = nodes[name]
        durs = n["durs"][warmup:] if len(n["durs"]) > warmup else n["durs"]
        out.append({"name": name, "op": n["op"], "shape": n["shape"],
                    "mean_us": sum(durs) / len(durs) if durs else 0.0})
    return out


def write_ort_profile(psess, fn_feed, dest, a, version):
    """Run the profiled session (3 warm-up runs, then --repeat), summarize its trace into
    dest (written whole to a temporary name, synced, then renamed)."""
    import os
    warmup = 3
    for _ in range(warmup + a.repeat):
        fn_feed(psess)
    raw = psess.end_profiling()
    try:
        with open(raw) as f:
            trace = json.load(f)
    finally:
        os.remove(raw)
        try:
            os.rmdir(os.path.dirname(raw))
        except OSError:
            pass
    nodes = ort_node_summary(trace, warmup)
    if not nodes:
        raise SystemExit("torch_peer: the ONNX Runtime profile %s has no node events" % raw)
    doc = {"network": a.network, "threads": a.threads, "runs": a.repeat, "version": version,
           "total_us": sum(n["mean_us"] for n in nodes), "nodes": nodes}
    tmp = dest + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dest)


def cuda_times(model, x, repeat, min_ms):
    """Eager and CUDA-graph medians (ms per forward call) of model(x) on the GPU."""
    def timed(fn, number):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    fn = lambda: model(x)
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    number = 1
    while timed(fn, number) < min_ms and number < 4096:
        number *= 2
    eager = [timed(fn, number) / number for _ in range(repeat)]
    graph_ms = None
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        graph.replay()
        torch.cuda.synchronize()
        gtimes = [timed(graph.replay, number) / number for _ in range(repeat)]
        graph_ms = statistics.median(gtimes)
    except Exception as e:  # capture unsupported: the eager time stands alone
        sys.stderr.write("torch_peer: CUDA graph capture failed: %s\n" % e)
    return eager, graph_ms, number


def main_cuda(a):
    if not torch.cuda.is_available():
        print(json.dumps({"ok": False, "reason": "no CUDA device"}))
        sys.exit(3)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model = build(a.network).eval().cuda()
    size = a.image_size or (299 if a.network == "inception_v3" else 224)
    x = torch.rand(1, 3, size, size, device="cuda")
    with torch.no_grad():
        times, graph_ms, number = cuda_times(model, x, a.repeat, a.min_ms)
    print(json.dumps({
        "network": a.network, "runtime": "torch", "device": torch.cuda.get_device_name(0),
        "runs": a.repeat, "number": number, "median_ms": statistics.median(times),
        "mean_ms": statistics.mean(times), "std_ms": statistics.pstdev(times), "graph_ms": graph_ms,
        "torch": torch.__version__, "version": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "tf32": False,
    }))


def proc_status_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def reset_peak_rss():
    """Reset VmHWM to the current RSS (Linux: 5 to /proc/self/clear_refs); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def main_memory(a):
    """Resident memory of the model on the CPU: base (torch imported), ready (model built,
    weights in memory, before any inference) and peak (the high-water mark over --repeat
    inferences, counted from ready with the mark reset there), in MiB above base."""
    import gc
    torch.set_num_threads(a.threads)
    gc.collect()
    base = proc_status_kb("VmRSS")
    model = build(a.network).eval()
    size = a.image_size or (299 if a.network == "inception_v3" else 224)
    x = torch.rand(1, 3, size, size)
    gc.collect()
    ready = proc_status_kb("VmRSS")
    reset = reset_peak_rss()
    with torch.no_grad():
        for _ in range(a.repeat):
            model(x)
    peak = proc_status_kb("VmHWM")
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    weights += sum(b.numel() * b.element_size() for b in model.buffers())
    print(json.dumps({
        "network": a.network, "runtime": "torch", "threads": a.threads, "runs": a.repeat,
        "base_mib": base / 1024, "ready_mib": (ready - base) / 1024,
        "peak_mib": (peak - base) / 1024 if reset else None, "weights_mib": weights / 2**20,
        "torch": torch.__version__, "version": torch.__version__,
    }))


def torch_isa():
    """PyTorch's vector ISA as it runs here: ATen's kernels (ATEN_CPU_CAPABILITY caps them)
    and oneDNN's cap when ONEDNN_MAX_CPU_ISA sets one."""
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    isa = "ATen " + (get() if get else os.environ.get("ATEN_CPU_CAPABILITY", "the host's best"))
    if os.environ.get("ONEDNN_MAX_CPU_ISA"):
        isa += ", oneDNN up to " + os.environ["ONEDNN_MAX_CPU_ISA"]
    return isa


def serve(a, fn, version):
    """--serve: the model is set up once and run 3 times; then each line "run N" on stdin times N runs (after
    one warm-up run) and answers one JSON line {"median_ms", "times_ms"}; "quit" or the end of
    stdin ends it. The first line out, once set up: {"ready": true, "version"[, "isa"]}."""
    for _ in range(3):      # first runs set up lazily (ONNX Runtime's allocations)
        fn()
    ready = {"ready": True, "version": version}
    if a.runtime == "torch":
        ready["isa"] = torch_isa()
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        if words[0] == "run" and len(words) == 2 and words[1].isdigit() and int(words[1]) > 0:
            times = time_runs(fn, int(words[1]), warmup=1)
            print(json.dumps({"median_ms": statistics.median(times), "times_ms": times}), flush=True)
        else:
            print(json.dumps({"error": "expected 'run N' (N > 0) or 'quit', got %r" % line.strip()}),
                  flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--network", default="resnet-18")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--image-size", type=int, default=0)
    ap.add_argument("--runtime", choices=["torch", "onnxruntime"], default="torch")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--min-ms", type=float, default=1.0)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--ort-profile", default=None, metavar="FILE")
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    if a.ort_profile and a.runtime != "onnxruntime":
        ap.error("--ort-profile FILE needs --runtime onnxruntime")
    if a.serve and (a.ort_profile or a.memory or a.device != "cpu"):
        ap.error("--serve times the CPU runtime only (no --ort-profile, --memory or --device cuda)")
    if a.device == "cuda":
        return main_cuda(a)
    if a.memory:
        return main_memory(a)
    torch.set_num_threads(a.threads)
    model = build(a.network).eval()
    size = a.image_size or (299 if a.network == "inception_v3" else 224)
    x = torch.rand(1, 3, size, size)
    with torch.no_grad():
        psess = None
        if a.runtime == "onnxruntime":
            fn, version, psess = onnxruntime_runner(model, x, a.threads, bool(a.ort_profile))
        else:
            fn, version = (lambda: model(x)), torch.__version__
        if a.serve:
            return serve(a, fn, version)
        times = time_runs(fn, a.repeat)
        if psess is not None:
            feed = {psess.get_inputs()[0].name: x.numpy()}
            write_ort_profile(psess, lambda s: s.run(None, feed), a.ort_profile, a, version)
    res = {
        "network": a.network, "runtime": a.runtime, "threads": a.threads, "runs": a.repeat,
        "median_ms": statistics.median(times), "mean_ms": statistics.mean(times),
        "std_ms": statistics.pstdev(times), "torch": torch.__version__, "version": version,
    }
    if a.ort_profile:
        res["ort_profile"] = a.ort_profile
    if a.runtime == "torch":
        res["isa"] = torch_isa()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
