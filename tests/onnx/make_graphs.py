"""Small ONNX graphs made with python3-onnx's helper, for attributes and forms that PyTorch's
exporter does not write, with their expected outputs computed by PyTorch/NumPy.

    /usr/bin/python3 tests/onnx/make_graphs.py OUTDIR

Writes OUTDIR/NAME.onnx, NAME.in, NAME.out (raw little-endian float32; the graph's one input
is "x", its one output "y") and one line per graph on stdout: NAME <input dims> <output dims>.
Weights are initializers (so they import as params); shapes, axes and scales are Constant
nodes or constant subgraphs (folded at import). Also writes the error cases of
tests/lua/test_onnx_import.lua: ext.onnx (external data in ext.bin; the test removes it),
dyn.onnx (a dynamic batch dimension), unsupported.onnx (an op the importer lacks),
badattr.onnx (MaxPool storage_order=1).
"""
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
rng = np.random.default_rng(0)
warnings.filterwarnings("ignore")


def rand(*s):
    return rng.uniform(-1, 1, size=s).astype(np.float32)


def save(name, nodes, x, y, inits=(), opset=13, extra_inputs=()):
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))] + list(extra_inputs),
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))],
        [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_graphs")
    onnx.checker.check_model(m)
    onnx.save(m, "%s/%s.onnx" % (OUT, name))
    x.astype("<f4").tofile("%s/%s.in" % (OUT, name))
    np.asarray(y, dtype=np.float32).astype("<f4").tofile("%s/%s.out" % (OUT, name))
    print(name, "x".join(map(str, x.shape)), "x".join(map(str, y.shape)), flush=True)


def const(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name))


T = torch.from_numpy

# Conv: auto_pad SAME_LOWER with stride 2, dilation 2, groups 2, bias
x, w, b = rand(1, 4, 9, 11), rand(6, 2, 3, 3), rand(6)
# SAME_LOWER: total pad per axis = (ceil(in/s)-1)*s + (k-1)*d + 1 - in, the extra one before
def same(inn, k, s, d, lower):
    out = -(-inn // s)
    tot = max(0, (out - 1) * s + (k - 1) * d + 1 - inn)
    small = tot // 2
    return (tot - small, small) if lower else (small, tot - small)
ph, pw = same(9, 3, 2, 2, True), same(11, 3, 2, 2, True)
y = F.conv2d(F.pad(T(x), (pw[0], pw[1], ph[0], ph[1])), T(w), T(b), stride=2, dilation=2, groups=2).numpy()
save("conv_same_lower", [helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad="SAME_LOWER",
     strides=[2, 2], dilations=[2, 2], group=2)], x, y, [("w", w), ("b", b)])

# Conv: asymmetric explicit pads, no kernel_shape attribute
x, w = rand(1, 3, 8, 8), rand(5, 3, 3, 2)
y = F.conv2d(F.pad(T(x), (0, 2, 1, 3)), T(w)).numpy()
save("conv_asym_pads", [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 0, 3, 2])], x, y, [("w", w)])

# ConvTranspose: output_shape (the importer computes the pads), groups 2, bias
x, w, b = rand(1, 4, 5, 5), rand(4, 3, 3, 3), rand(6)
full = F.conv_transpose2d(T(x), T(w), T(b), stride=2, groups=2).numpy()   # 11x11
# output_shape 10x10: total padding 1 per axis, NOTSET puts it at the end... (start=total-total//2)
y = full[:, :, 1:11, 1:11]
save("convtranspose_output_shape", [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2],
     group=2, output_shape=[10, 10])], x, y, [("w", w), ("b", b)])

# MaxPool: dilations, ceil_mode, asymmetric pads
x = rand(1, 2, 10, 9)
xp = F.pad(T(x), (1, 0, 0, 1), value=-np.inf)
y = F.max_pool2d(xp, 3, stride=2, dilation=2, ceil_mode=True).numpy()
save("maxpool_dilated_ceil", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
     dilations=[2, 2], pads=[0, 1, 1, 0], ceil_mode=1)], x, y, opset=12)

# AveragePool: count_include_pad = 0 with pads (PyTorch exports 1)
x = rand(1, 3, 7, 7)
y = F.avg_pool2d(T(x), 3, stride=2, padding=1, count_include_pad=False).numpy()
save("avgpool_exclude_pad", [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
     pads=[1, 1, 1, 1], count_include_pad=0)], x, y)

# Gemm: transA, alpha, beta, a 2-D C
a, bm, c = rand(5, 3), rand(5, 4), rand(3, 4)
y = 0.5 * a.T @ bm + 2.0 * c
save("gemm_transA_alpha_beta", [helper.make_node("Gemm", ["x", "b", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)],
     a, y, [("b", bm), ("c", c)])

# MatMul with batch broadcasting (2x1xMxK times 3xKxN)
a, bm = rand(2, 1, 4, 5), rand(3, 5, 6)
y = np.matmul(a, bm)
save("matmul_broadcast", [helper.make_node("MatMul", ["x", "b"], ["y"])], a, y, [("b", bm)])

# Softmax before opset 13: axis 1 of a 4-D tensor is over the flattened C*H*W
x = rand(2, 3, 4, 5)
y = F.softmax(T(x).reshape(2, -1), dim=1).reshape(2, 3, 4, 5).numpy()
save("softmax_opset11_axis1", [helper.make_node("Softmax", ["x"], ["y"], axis=1)], x, y, opset=11)

# A constant subgraph: Shape -> Gather -> Unsqueeze -> Concat -> Reshape (0 and -1 too)
x = rand(2, 3, 4, 5)
nodes = [helper.make_node("Shape", ["x"], ["s"]), const("i0", np.array(0, np.int64)),
         helper.make_node("Gather", ["s", "i0"], ["n"], axis=0), const("ax", np.array([0], np.int64)),
         helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]), const("rest", np.array([0, -1], np.int64)),
         helper.make_node("Concat", ["n1", "rest"], ["shape"], axis=0),
         helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Relu", ["r"], ["y"])]
save("fold_shape_reshape", nodes, x, np.maximum(x.reshape(2, 3, 20), 0))

# Slice with negative steps on a weight (folded), then added; Slice of data with axes
x, w = rand(2, 6, 5), rand(4, 6)
wsl = w[::-2, 1:3][:2]            # starts -1, ends -5 (exclusive), step -2 on axis 0 -> rows 3, 1
nodes = [const("ds", np.array([1, 1], np.int64)), const("de", np.array([5, 3], np.int64)),
         const("da", np.array([1, 2], np.int64)), helper.make_node("Slice", ["x", "ds", "de", "da"], ["xs"]),
         const("ws", np.array([-1, 1], np.int64)), const("we", np.array([-5, 3], np.int64)),
         const("wa", np.array([0, 1], np.int64)), const("wt", np.array([-2, 1], np.int64)),
         helper.make_node("Slice", ["w", "ws", "we", "wa", "wt"], ["wsl"]),
         helper.make_node("Concat", ["wsl", "wsl"], ["w4"], axis=0),
         helper.make_node("Add", ["xs", "w4"], ["y"])]
save("slice_steps", nodes, x, x[:, 1:5, 1:3] + np.concatenate([wsl, wsl], 0)[None], [("w", w)])

# Split with uneven sizes (input form), Squeeze/Unsqueeze, ReduceSum keepdims=0 with axes input
x = rand(2, 7, 3)
p = np.split(x, [2, 3], axis=1)
nodes = [const("sp", np.array([2, 1, 4], np.int64)),
         helper.make_node("Split", ["x", "sp"], ["a", "b", "c"], axis=1),
         const("rax", np.array([0, 2], np.int64)),
         helper.make_node("ReduceSum", ["a", "rax"], ["s"], keepdims=0),
         helper.make_node("ReduceMax", ["c"], ["m"], axes=[1, 2], keepdims=1),
         const("sq", np.array([1, 2], np.int64)), helper.make_node("Squeeze", ["m", "sq"], ["m1"]),
         helper.make_node("ReduceMean", ["b"], ["bm"], axes=[0, 1, 2], keepdims=0),
         helper.make_node("Mul", ["m1", "bm"], ["mb"]),
         helper.make_node("Unsqueeze", ["s", "sq0"], ["s1"]),
         helper.make_node("Add", ["s1", "mb"], ["y2"]), helper.make_node("Identity", ["y2"], ["y"])]
nodes.insert(9, const("sq0", np.array([0], np.int64)))
m1 = p[2].max(axis=(1, 2))          # (2,)
bm = p[1].mean()
y = p[0].sum(axis=(0, 2))[None, :] + m1 * bm   # (1,2) + (2,) -> (1,2)
save("split_reduce_squeeze", nodes, x, y)

# Pad (opset 11: pads and constant_value as inputs), Clip with only a min
x = rand(1, 2, 3, 4)
y = np.maximum(np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1)), constant_values=0.25), -0.5)
nodes = [const("pads", np.array([0, 0, 1, 2, 0, 0, 0, 1], np.int64)), const("cv", np.array(0.25, np.float32)),
         helper.make_node("Pad", ["x", "pads", "cv"], ["p"]), const("lo", np.array(-0.5, np.float32)),
         helper.make_node("Clip", ["p", "lo"], ["y"])]
save("pad_clip_min", nodes, x, y, opset=11)

# Resize: nearest with asymmetric coordinates and round_prefer_ceil; linear align_corners by sizes
x = rand(1, 2, 3, 4)
def nearest_idx(out, inn, scale):
    return [min(inn - 1, int(np.floor(i / scale + 0.5))) for i in range(out)]
hi, wi = nearest_idx(6, 3, 2.0), nearest_idx(10, 4, 2.5)
y1 = x[:, :, hi][:, :, :, wi]
y = F.interpolate(T(y1), size=(4, 7), mode="bilinear", align_corners=True).numpy()
nodes = [const("sc", np.array([1, 1, 2.0, 2.5], np.float32)),
         helper.make_node("Resize", ["x", "", "sc"], ["r"], mode="nearest",
                          coordinate_transformation_mode="asymmetric", nearest_mode="round_prefer_ceil"),
         const("sz", np.array([1, 2, 4, 7], np.int64)),
         helper.make_node("Resize", ["r", "", "", "sz"], ["y"], mode="linear",
                          coordinate_transformation_mode="align_corners")]
save("resize_nearest_linear", nodes, x, y)

# Upsample (opset 9: scales as an input), bilinear; HardSigmoid with its own alpha/beta
x = rand(1, 1, 2, 3)
def lin_idx(out, inn, scale):
    m = np.zeros((out, inn), np.float32)
    for i in range(out):
        s = min(i / scale, inn - 1)
        j = int(np.floor(s)); w = s - j
        m[i, j] += 1 - w
        if w > 0: m[i, min(j + 1, inn - 1)] += w
    return m
y = np.einsum("oh,nchw,pw->ncop", lin_idx(4, 2, 2.0), x, lin_idx(6, 3, 2.0))
y = np.clip(0.3 * y + 0.4, 0, 1)
nodes = [const("us", np.array([1, 1, 2, 2], np.float32)),
         helper.make_node("Upsample", ["x", "us"], ["u"], mode="linear"),
         helper.make_node("HardSigmoid", ["u"], ["y"], alpha=0.3, beta=0.4)]
save("upsample_hardsigmoid", nodes, x, y, opset=9)

# PyTorch's own export of Linear -> LayerNorm -> GELU -> Linear: at opset 14 LayerNorm and
# GELU are decomposed (ReduceMean, Pow, Sqrt, Erf, ...), at opset 17 LayerNorm is one
# LayerNormalization node; batched 3-D MatMul against 2-D weights
class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.ln, self.fc2 = torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(F.gelu(self.ln(self.fc(x))))


torch.manual_seed(0)
mlp = Mlp().eval()
x = torch.rand(2, 5, 16)
with torch.no_grad():
    y = mlp(x).numpy()
for op in (14, 17):
    torch.onnx.export(mlp, x, "%s/mlp_layernorm_gelu_opset%d.onnx" % (OUT, op), opset_version=op,
                      input_names=["x"], output_names=["y"])
    x.numpy().astype("<f4").tofile("%s/mlp_layernorm_gelu_opset%d.in" % (OUT, op))
    y.astype("<f4").tofile("%s/mlp_layernorm_gelu_opset%d.out" % (OUT, op))
    print("mlp_layernorm_gelu_opset%d" % op, "2x5x16", "2x5x8", flush=True)

# ---- error cases ----
x = rand(1, 3, 4, 4)
w = rand(2, 3, 1, 1)
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "ext",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
                      [numpy_helper.from_array(w, "w")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.save_model(m, "%s/ext.onnx" % OUT, save_as_external_data=True, all_tensors_to_one_file=True,
                location="ext.bin", size_threshold=0)
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "dyn",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 8, 8])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "%s/dyn.onnx" % OUT)
g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Einsum", ["r"], ["y"],
                       equation="ij->ji", name="the_einsum")], "unsupported",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "%s/unsupported.onnx" % OUT)
g = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], storage_order=1,
                                        name="pool0")], "badattr",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "%s/badattr.onnx" % OUT)
