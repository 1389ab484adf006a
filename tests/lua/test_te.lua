-- tunelua.te: building compute DAGs from Lua -- matmul, conv2d with padding,
-- softmax, a custom reducer, multi-output computes -- and checking shapes,
-- dtypes, prints, FLOP counts, workload keys and the error messages.
local tl = require "tunelua"
local te = tl.te

-- The message of the error fn raises, and the position it names.
local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error")
  err = tostring(err)
  local pos, msg = err:match("^([^:]*:%d+): (.*)$")
  return msg or err, pos
end

local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do
    if not same(a[i], b[i]) then return false end
  end
  return true
end

local function eq(got, want)
  if got ~= want then
    error(string.format("\n  got:      %s\n  expected: %s", tostring(got), tostring(want)), 2)
  end
end

-- ---- matmul ---------------------------------------------------------------------

do
  local n, m, l = 64, 32, 16
  local A = te.placeholder({ n, l }, "float32", "A")
  local B = te.placeholder({ l, m }, nil, "B")
  local k = te.reduce_axis({ 0, l }, "k")
  local C = te.compute({ n, m }, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C",
                       { tag = "matmul" })
  assert(same(C.shape, { n, m }) and C.dtype == "float32" and C.ndim == 2 and C.name == "C")
  assert(B.dtype == "float32" and A.op.kind == "placeholder")
  local op = C.op
  eq(op.kind, "compute")
  eq(op.tag, "matmul")
  eq(op.reducer, "sum")
  eq(#op.axis, 2)
  eq(op.axis[1].name, "i")
  eq(op.axis[2].dom.extent, m)
  eq(op.axis[1].kind, "spatial")
  eq(#op.reduce_axis, 1)
  assert(op.reduce_axis[1] == k, "the reduce axis object is the one given")
  eq(k.op, op.id)
  eq(k.index, 0)
  eq(k.iter_kind, 1)
  assert(op.input_tensors[1] == A and op.input_tensors[2] == B)
  assert(op:output(0) == C)
  eq(op:find_axis(k), "reduce")
  local kind, idx = op:find_axis(op.axis[2])
  assert(kind == "spatial" and idx == 2)
  assert(op:find_axis(A) == nil)
  eq(tostring(A(op.axis[1], k) * 2), "(A[i, k]*2f)")
  eq(tostring(C), "Tensor(C, shape=[64, 32], float32)")

  local relu = te.compute(C.shape, function(i, j) return te.max(C(i, j), 0) end, "T_relu")
  local d = te.extract({ relu })
  eq(d:text(), "A = PLACEHOLDER [64, 16]\nB = PLACEHOLDER [16, 32]\n" ..
               "C(i, j) += (A[i, k]*B[k, j])\nT_relu(i, j) = max(C[i, j], 0f)\n")
  eq(d:flop(), 2 * n * m * l + n * m)
  eq(d:flop_ansor(), 2 * n * m * l + n * m)
  assert(d.tensor_map[A.id] == 0 and d.tensor_map[relu.id] == 3)
  assert(same(d.outputs, { 3 }))
  local key = d:workload_key()
  assert(key:match('^%["%x+", %[64, 16%], %[16, 32%], %[64, 32%]%]$'), key)
  eq(#key:match('"(%x+)"'), 32)

  -- the same computation built again (other names): the same key
  local A2 = te.placeholder({ n, l }, "float32", "X")
  local B2 = te.placeholder({ l, m }, "float32", "Y")
  local k2 = te.reduce_axis({ 0, l }, "r")
  local C2 = te.compute({ n, m }, function(x, y) return te.sum(A2(x, k2) * B2(k2, y), k2) end, "Z")
  local R2 = te.compute(C2.shape, function(x, y) return te.max(C2(x, y), 0) end, "relu")
  eq(te.extract(R2):workload_key(), key)
  -- a different shape: a different key
  local A3 = te.placeholder({ n, l + 1 }, "float32", "A")
  local B3 = te.placeholder({ l + 1, m }, "float32", "B")
  local k3 = te.reduce_axis({ 0, l + 1 }, "k")
  local C3 = te.compute({ n, m }, function(i, j) return te.sum(A3(i, k3) * B3(k3, j), k3) end, "C")
  local R3 = te.compute(C3.shape, function(i, j) return te.max(C3(i, j), 0) end, "T_relu")
  assert(te.extract(R3):workload_key() ~= key)
  eq(A3.name, "A")              -- the shared dag keeps names as given ...
  local both = te.extract({ R3, relu })
  eq(both:text():match("^(.-)\n"), "A = PLACEHOLDER [64, 17]")
  assert(both:text():find("\nA_1 = PLACEHOLDER [64, 16]\n", 1, true), both:text())
  assert(both:text():find("\nC_1(i, j) += (A_1[i, k]*B_1[k, j])\n", 1, true), both:text())
end

-- ---- conv2d NCHW with padding ------------------------------------------------------

do
  local N, CI, H, W, CO, KS, pad = 1, 8, 14, 14, 16, 3, 1
  local data = te.placeholder({ N, CI, H, W }, "float32", "data")
  local kernel = te.placeholder({ CO, CI, KS, KS }, "float32", "kernel")
  local padded = te.compute({ N, CI, H + 2 * pad, W + 2 * pad }, function(n, c, y, x)
    local inside = te.all(te.ge(y, pad), te.lt(y, H + pad), te.ge(x, pad), te.lt(x, W + pad))
    return te.if_then_else(inside, data(n, c, y - pad, x - pad), 0.0)
  end, "pad_temp")
  eq(tostring(padded.op.axis[3] - 1), "(y - 1)")
  local rc = te.reduce_axis({ 0, CI }, "rc")
  local ry = te.reduce_axis({ 0, KS }, "ry")
  local rx = te.reduce_axis({ 0, KS }, "rx")
  local OH, OW = H + 2 * pad - KS + 1, W + 2 * pad - KS + 1
  local conv = te.compute({ N, CO, OH, OW }, function(nn, ff, yy, xx)
    return te.sum(padded(nn, rc, yy + ry, xx + rx) * kernel(ff, rc, ry, rx), { rc, ry, rx })
  end, "conv2d_nchw", { tag = "conv2d_nchw" })
  assert(same(conv.shape, { 1, 16, 14, 14 }))
  local d = te.extract(conv)
  eq(d:text(), table.concat({
    "data = PLACEHOLDER [1, 8, 14, 14]",
    "pad_temp(n, c, y, x) = tir.if_then_else(((((y >= 1) && (y < 15)) && (x >= 1)) && (x < 15)), data[n, c, (y - 1), (x - 1)], 0f)",
    "kernel = PLACEHOLDER [16, 8, 3, 3]",
    "conv2d_nchw(nn, ff, yy, xx) += (pad_temp[nn, rc, (yy + ry), (xx + rx)]*kernel[ff, rc, ry, rx])",
    "" }, "\n"))
  local conv_flop = 2 * N * CO * OH * OW * CI * KS * KS
  eq(d:flop_ansor(), conv_flop)
  eq(d:flop(), conv_flop + N * CI * (H + 2) * (W + 2) * 7)
  assert(d:workload_key():match(', %[1, 8, 14, 14%], %[16, 8, 3, 3%], %[1, 16, 14, 14%]%]$'))

  -- without padding, exactly 2*N*K*OH*OW*C*KH*KW
  local conv0 = te.compute({ N, CO, H - 2, W - 2 }, function(n, f, y, x)
    return te.sum(data(n, rc, y + ry, x + rx) * kernel(f, rc, ry, rx), { rc, ry, rx })
  end, "conv0")
  eq(te.extract(conv0):flop(), 2 * N * CO * (H - 2) * (W - 2) * CI * KS * KS)
  -- rc, ry, rx are reused: each compute has its own copy of them
  assert(conv0.op.reduce_axis[1] ~= rc)
  eq(conv0.op.reduce_axis[1].name, "rc")
  eq(conv0.op:find_axis(ry), "reduce")
  eq(conv.op:find_axis(ry), "reduce")
end

-- ---- softmax: max and sum reductions over one reduce axis ---------------------------------

do
  local n, m = 4, 100
  local x = te.placeholder({ n, m }, "float32", "x")
  local k = te.reduce_axis({ 0, m }, "k")
  local maxelem = te.compute({ n }, function(i) return te.max(x(i, k), k) end, "T_softmax_maxelem")
  local e = te.compute({ n, m }, function(i, j) return te.exp(x(i, j) - maxelem(i)) end, "T_softmax_exp")
  local s = te.compute({ n }, function(i) return te.sum(e(i, k), { k }) end, "T_softmax_expsum")
  local norm = te.compute({ n, m }, function(i, j) return e(i, j) / s(i) end, "T_softmax_norm")
  local d = te.extract(norm)
  eq(d:text(), table.concat({
    "x = PLACEHOLDER [4, 100]",
    "T_softmax_maxelem(i) max= x[i, k]",
    "T_softmax_exp(i, j) = tir.exp((x[i, j] - T_softmax_maxelem[i]))",
    "T_softmax_expsum(i) += T_softmax_exp[i, k]",
    "T_softmax_norm(i, j) = (T_softmax_exp[i, j]/T_softmax_expsum[i])",
    "" }, "\n"))
  eq(maxelem.op.reducer, "max")
  -- FlopEstimator: every op once: max 1/elem, exp's sub 1, sum 1, div 1
  eq(d:flop_ansor(), n * m + n * m + n * m + n * m)
  -- AutoTVM: T_softmax_exp is reached along two paths (norm directly, and via expsum)
  eq(d:flop(), n * m + 2 * (n * m + n * m) + n * m)
  assert(same(d.outputs, { 4 }))
end

-- ---- custom reducer, where-conditions, offsets ----------------------------------------------

do
  local A = te.placeholder({ 8, 10 }, "float32", "A")
  local sumsq = te.comm_reducer(function(a, b) return a + b * b end, function(dtype) return 0 end, "sumsq")
  local k = te.reduce_axis({ 2, 10 }, "k")      -- an offset domain
  eq(k.dom.min, 2)
  eq(k.dom.extent, 8)
  eq(tostring(k), "(k + 2)")
  local S = te.compute({ 8 }, function(i) return sumsq(A(i, k), k, { where = te.lt(k, 6) }) end, "S")
  eq(S.op.reducer, "sumsq")
  local d = te.extract(S)
  eq(d:text(), "A = PLACEHOLDER [8, 10]\nS(i) sumsq= A[i, (k + 2)] where ((k + 2) < 6)\n")
  eq(d:flop(), 8 * 8 * 2)
  -- the same reducer on another dtype registers another combiner
  local I = te.placeholder({ 8, 10 }, "int32", "I")
  local k2 = te.reduce_axis({ 0, 10 }, "k2")
  local SI = te.compute({ 8 }, function(i) return sumsq(I(i, k2), k2) end, "SI")
  eq(SI.dtype, "int32")
  local argmin_like = te.comm_reducer(function(a, b) return te.min(a, b) end,
                                      function(dtype) return te.max_value(dtype) end, "mymin")
  local M = te.compute({ 8 }, function(i) return argmin_like(I(i, k2), { k2 }) end, "M")
  eq(te.extract(M):text(), "I = PLACEHOLDER [8, 10]\nM(i) mymin= I[i, k2]\n")
  -- te.prod, te.min over a list, explicit integer ops
  local P = te.compute({ 8 }, function(i) return te.prod(A(i, k2), { k2 }) end, "P")
  eq(P.op.reducer, "prod")
  local Q = te.compute({ 8, 10 }, function(i, j)
    return te.floordiv(I(i, j), 3) + te.floormod(I(i, j), 3) + te.truncdiv(I(i, j), 2) + I(i, j) / 2 + I(i, j) % 4
  end, "Q")
  eq(tostring(Q.op.axis[1]), "i")
  eq(te.extract(Q):text():match("\n(Q.-)\n$"),
     "Q(i, j) = ((((floordiv(I[i, j], 3) + floormod(I[i, j], 3)) + truncdiv(I[i, j], 2)) + floordiv(I[i, j], 2)) + floormod(I[i, j], 4))")
end

-- ---- multi-output, casts, intrinsics, selects ------------------------------------------------

do
  local A = te.placeholder({ 16 }, "float32", "A")
  local lo, hi = te.compute({ 16 }, function(i) return { te.floor(A(i)), te.ceil(A(i)) } end, "split")
  assert(lo.op == hi.op and lo.value_index == 0 and hi.value_index == 1)
  eq(lo.op.num_outputs, 2)
  eq(hi.name, "split")
  local both = te.compute({ 16 }, function(i) return hi(i) - lo(i) end, "width")
  local d = te.extract(both)
  eq(d:text(), "A = PLACEHOLDER [16]\nsplit.v0(i) = tir.floor(A[i])\nsplit.v1(i) = tir.ceil(A[i])\n" ..
               "width(i) = (split_v1[i] - split_v0[i])\n")
  eq(#both.op.input_tensors, 2)

  local H = te.compute({ 16 }, function(i)
    local x = A(i):astype("float64")
    return te.select(te.gt(x, 0.5), te.sqrt(x) ^ 2.0, -te.tanh(x)):astype("float16")
  end, "H")
  eq(H.dtype, "float16")
  eq(te.extract(H):text():match("\n(H.-)\n$"),
     "H(i) = float16(select((float64(A[i]) > 0.5), tir.pow(tir.sqrt(float64(A[i])), 2), (0 - tir.tanh(float64(A[i])))))")
  local idx = te.compute({ 4, 4 }, function(i, j) return (i * 4 + j):astype("float32") end, "iota")
  eq(idx.dtype, "float32")
  eq(te.extract(idx):flop(), 16 * 2)
  eq(te.extract(idx):flop_ansor(), 0)
  local c = te.const(3)
  eq(c.dtype, "int32")
  eq(te.const(0.5).dtype, "float32")
  eq(te.const(2, "float64").dtype, "float64")
  eq(te.const(true).dtype, "bool")
  eq(tostring(te.abs(te.const(-3) + idx.op.axis[1])), "select(((i + -3) < 0), (0 - (i + -3)), (i + -3))")
  -- a scalar output and A[{i}] indexing
  local kk = te.reduce_axis({ 0, 16 }, "kk")
  local total = te.compute({}, function() return te.sum(A[{ kk }], kk) end, "total")
  eq(total.ndim, 0)
  eq(te.extract(total):text(), "A = PLACEHOLDER [16]\ntotal() += A[kk]\n")
  local sc = te.compute({ 16 }, function(i) return A(i) * total() end, "scaled")
  eq(#sc.op.input_tensors, 2)
  -- operator attributes: a "FLOP" entry overrides the auto-scheduler's estimate
  local at = te.compute({ 16 }, function(i) return A(i) + 1 end, "at", { attrs = '{"FLOP": 1234}' })
  eq(te.extract(at):flop_ansor(), 1234)
  eq(te.extract(at):flop(), 16)
  eq(error_of(te.compute, { 16 }, function(i) return A(i) end, "bad", { attrs = "[1]" }),
     "op 'bad': attributes must be a JSON object (not an object)")
  eq(#te.extract(at).outputs, 1)
  assert(not te.dag_text():find("\nbad(", 1, true), "a failed compute adds nothing")
end

-- ---- errors -----------------------------------------------------------------------------------

do
  local A = te.placeholder({ 4, 4 }, "float32", "A")
  local I = te.placeholder({ 4 }, "int32", "I")
  eq(error_of(te.compute, { 4 }, function(i) return A(i) end, "B"), "tensor 'A' has 2 dimensions, got 1 index")
  eq(error_of(te.placeholder, { 4, 0 }, "float32", "Z"), "placeholder 'Z': dimension 1 has extent 0 (must be >= 1)")
  eq(error_of(te.placeholder, { 4, 2.5 }, "float32", "Z"), "placeholder 'Z': shape[2] must be an integer, got 2.5")
  eq(error_of(te.placeholder, { 4 }, "floot32", "Z"),
     "unknown dtype 'floot32' (expected one of float32, float16, int8, uint8, int32, int64, float64, int16, bool)")
  eq(error_of(te.compute, { 4 }, function(i) return A(i, 0) + I(i) end, "B"),
     "add: operands have different dtypes float32 and int32 (cast one side)")
  eq(error_of(te.compute, { 4 }, function(i) return I(i) * 0.5 end, "B"),
     "mul: constant 0.5 does not fit the int32 operand (cast one side)")
  eq(error_of(te.compute, { 4 }, function(i, j) return I(i) end, "B"),
     "compute 'B': the function takes 2 arguments, the shape has 1 dimension")
  local k = te.reduce_axis({ 0, 4 }, "k")
  eq(error_of(te.compute, { 4 }, function(i) return A(i, k) end, "B"),
     "compute 'B': reduce axis 'k' used outside a reduction")
  eq(error_of(te.compute, { 4 }, function(i) return te.sum(A(i, k), k) + 1 end, "B"),
     "a reduction (sum, max, ...) may only be the whole body of a compute")
  eq(error_of(te.compute, { 4 }, function(i) return A end, "B"),
     "compute 'B': tensor 'A' used as an expression; index it: A(i, ...)")
  eq(error_of(te.compute, { 4 }, function(i) return te.sum(A(i, i), i) end, "B"),
     "sum: axis 1 is not a reduce axis (make one with te.reduce_axis)")
  local other
  te.compute({ 4 }, function(i) other = i; return I(i) end, "O")
  eq(error_of(te.compute, { 4 }, function(i) return I(other) end, "B"),
     "compute 'B': variable 'i' is not an axis of this compute")
  eq(error_of(te.exp, I(0)), "exp: int32 argument, expected a float (cast it first)")
  eq(error_of(function() return I(0) / 2.5 end), "div: constant 2.5 does not fit the int32 operand (cast one side)")
  eq(error_of(function() return A(0, 0) % 2 end), "floormod: float32 operands, expected integers")
  eq(error_of(te.select, A(0, 0), 1, 2), "select: condition is float32, expected bool")
  eq(error_of(te.reduce_axis, { 3, 3 }, "e"), "reduce axis 'e': extent 0 (must be >= 1)")
  eq(error_of(te.compute, { 4 }, function(i) return { A(i, 0), I(i) } end, "B"),
     "compute 'B': outputs have different dtypes float32 and int32")
  local msg, pos = error_of(function() local x = A(1); return x end)
  eq(msg, "tensor 'A' has 2 dimensions, got 1 index")
  assert(pos and pos:match("test_te.lua:%d+$"), "the error names the caller's line: " .. tostring(pos))
  eq(error_of(te.extract, {}), "extract: expected a tensor or a list of tensors")
  eq(error_of(function() return te.const(1) < te.const(2) end),
     "compare expressions with te.lt/te.le/te.gt/te.ge (Lua's < and <= must return a boolean)")
end

print("test_te: ok")
