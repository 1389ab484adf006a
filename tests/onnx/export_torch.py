"""Export torchvision models to ONNX with random weights and record PyTorch's output.

    /usr/bin/python3 tests/onnx/export_torch.py OUTDIR NAME:SIZE[@OPSET] ... [--opset N]
        [--bench N] [--threads T]

For each NAME (a torchvision.models constructor) at a SIZExSIZE input (batch 1, 3 channels),
exported with ai.onnx opset OPSET (default --opset, 14), as TAG = NAME or NAME@OPSET:
OUTDIR/TAG.onnx (fixed shapes, input "input", output "logits"), OUTDIR/TAG.in and
OUTDIR/TAG.out (the input and PyTorch's output as raw little-endian float32), and one line
on stdout: TAG <input dims> <output dims> [<median ms of N runs>]. Weights are torchvision's
random initialization (seeded), with batch-norm statistics and affine parameters drawn at
random too, so that folding them is checked; nothing is downloaded. Used by
tests/lua/test_onnx_models_*.lua and scripts/bench/onnx_models.lua.
"""
import sys
import time
import warnings

import torch
import torchvision

warnings.filterwarnings("ignore")


def build(name):
    kwargs = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    model = getattr(torchvision.models, name)(**kwargs)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                m.running_mean.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
    return model.eval()


def main(argv):
    opset, bench, threads, specs = 14, 0, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--opset":
            opset = int(argv[i + 1]); i += 1
        elif a == "--bench":
            bench = int(argv[i + 1]); i += 1
        elif a == "--threads":
            threads = int(argv[i + 1]); i += 1
        else:
            specs.append(a)
        i += 1
    if threads:
        torch.set_num_threads(threads)
    out = specs.pop(0)
    for spec in specs:
        tag = spec.split(":")[0] + ("@" + spec.split("@")[1] if "@" in spec else "")
        name, rest = spec.split(":")
        size, _, op = rest.partition("@")
        size, op = int(size), int(op) if op else opset
        torch.manual_seed(0)
        model = build(name)
        x = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            y = model(x)
            torch.onnx.export(model, x, "%s/%s.onnx" % (out, tag), opset_version=op,
                              input_names=["input"], output_names=["logits"],
                              do_constant_folding=True)
        x.numpy().astype("<f4").tofile("%s/%s.in" % (out, tag))
        y.numpy().astype("<f4").tofile("%s/%s.out" % (out, tag))
        line = "%s %s %s" % (tag, "x".join(map(str, x.shape)), "x".join(map(str, y.shape)))
        if bench:
            with torch.no_grad():
                model(x)
                ts = []
                for _ in range(bench):
                    t = time.perf_counter()
                    model(x)
                    ts.append(time.perf_counter() - t)
            ts.sort()
            line += " %.4f" % (ts[len(ts) // 2] * 1e3)
        print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
