#!/usr/bin/env python3
"""The PyTorch (cuDNN) peer of scripts/bench/opencl_gpu.lua.

    python3 scripts/device/torch_conv.py SHAPES.json [--repeats 30] [--min-ms 1]

SHAPES.json is a JSON list of conv2d shapes, each an object
{"key", "n", "ci", "h", "w", "co", "kh", "kw", "sh", "sw", "pt", "pl", "pb", "pr", "dh", "dw"}
(NCHW data, OIHW weights, no bias, padding top/left/bottom/right). Every conv
runs in fp32 on the first CUDA device with TF32 off and cuDNN's benchmark mode
on (the first call of a shape picks the algorithm and is not timed). A repeat
is `number` back-to-back calls between two CUDA events, `number` chosen so
that one repeat lasts at least --min-ms; the latency is the median over the
repeats divided by `number` ("ms": eager calls, so a small conv whose kernels are shorter
than PyTorch's per-call CPU overhead is timed at that overhead). "graph_ms" is the same with
the `number` calls captured once in a CUDA graph and replayed (no CPU launch overhead; closer
to tunelua's OpenCL profiling-event times of the kernels alone); null when capture fails.

Prints one JSON object on stdout:
{"ok": true, "torch", "cuda", "cudnn", "device", "driver", "results": [{"key", "ms", "graph_ms",
"number", "repeats"}]}; without PyTorch or a CUDA device {"ok": false, "reason": ...} (exit 0, so the
benchmark prints n/a with the reason).
"""
import json
import statistics
import subprocess
import sys


def fail(reason):
    print(json.dumps({"ok": False, "reason": reason}))
    sys.exit(0)


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except Exception:  # nvidia-smi missing or hanging: the version is optional
        return None


def main():
    args = sys.argv[1:]
    if not args:
        fail("usage: torch_conv.py SHAPES.json [--repeats N] [--min-ms MS]")
    path, repeats, min_ms = args[0], 30, 1.0
    i = 1
    while i < len(args):
        if args[i] == "--repeats":
            repeats = int(args[i + 1])
            i += 2
        elif args[i] == "--min-ms":
            min_ms = float(args[i + 1])
            i += 2
        else:
            fail("unknown option %s (expected --repeats N, --min-ms MS)" % args[i])
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        fail("PyTorch is not installed (%s)" % e)
    if not torch.cuda.is_available():
        fail("PyTorch %s sees no CUDA device" % torch.__version__)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with open(path) as f:
        shapes = json.load(f)
    dev = torch.device("cuda:0")
    results = []
    for s in shapes:
        g = torch.Generator(device=dev).manual_seed(1)
        x = torch.rand((s["n"], s["ci"], s["h"], s["w"]), device=dev, dtype=torch.float32,
                       generator=g) * 2 - 1
        wt = torch.rand((s["co"], s["ci"], s["kh"], s["kw"]), device=dev, dtype=torch.float32,
                        generator=g) * 2 - 1
        sym = s["pt"] == s["pb"] and s["pl"] == s["pr"]

        def conv():
            if sym:
                return F.conv2d(x, wt, None, (s["sh"], s["sw"]), (s["pt"], s["pl"]),
                                (s["dh"], s["dw"]))
            xp = F.pad(x, (s["pl"], s["pr"], s["pt"], s["pb"]))
            return F.conv2d(xp, wt, None, (s["sh"], s["sw"]), 0, (s["dh"], s["dw"]))

        with torch.no_grad():
            for _ in range(3):            # algorithm search (benchmark mode) and warm-up
                conv()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            number = 1
            while True:                   # calls per repeat: at least min_ms per repeat
                start.record()
                for _ in range(number):
                    conv()
                end.record()
                end.synchronize()
                if start.elapsed_time(end) >= min_ms or number >= 1 << 16:
                    break
                number *= 2
            times = []
            for _ in range(repeats):
                start.record()
                for _ in range(number):
                    conv()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / number)
            graph_ms = None
            try:                          # the same calls replayed from a CUDA graph
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        conv()
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(number):
                        conv()
                graph.replay()
                torch.cuda.synchronize()
                gtimes = []
                for _ in range(repeats):
                    start.record()
                    graph.replay()
                    end.record()
                    end.synchronize()
                    gtimes.append(start.elapsed_time(end) / number)
                graph_ms = statistics.median(gtimes)
                del graph
            except Exception as e:  # capture unsupported: eager time only
                sys.stderr.write("torch_conv: CUDA graph capture failed for %s: %s\n" % (s["key"], e))
        results.append({"key": s["key"], "ms": statistics.median(times), "graph_ms": graph_ms,
                        "number": number, "repeats": repeats})
    print(json.dumps({"ok": True, "torch": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version(),
                      "device": torch.cuda.get_device_name(0), "driver": driver_version(),
                      "tf32": False, "cudnn_benchmark": True, "results": results}))


if __name__ == "__main__":
    main()
