-- The ONNX node tests (libonnx-testdata) of every operator tunelua.topi
-- covers: each test's graph is rebuilt from topi operators, built with the
-- default CPU schedule (topi.default_schedule), run on the test's inputs and compared with its
-- outputs (rtol 1e-4, atol 1e-5). Prints a table per operator (passed /
-- failed / skipped, with the reason of each skip: an unsupported attribute
-- or dtype) and the line "N passed, N failed, N skipped"; exits non-zero on
-- any failure. Without the test data it says so and passes.
local tl = require "tunelua"
local te, nd, topi, testing, onnx = tl.te, tl.nd, tl.topi, tl.testing, tl.onnx
local schedule = require "tunelua.schedule"
local create_schedule = te.create_schedule or schedule.create
-- TUNELUA_TOPI_EMPTY=1: build with the empty schedule instead of the default one
local use_empty = os.getenv("TUNELUA_TOPI_EMPTY") == "1"

local ok_list, names = pcall(onnx.node_tests)
if not ok_list or #names == 0 then
  print("test_onnx_ops: no ONNX node tests found (libonnx-testdata); nothing to run")
  print("0 passed, 0 failed, 0 skipped")
  return
end

local Skip = {}
local function skip(why) error(setmetatable({ why = why }, Skip), 0) end

local onnx_dtypes = { [1] = "float32", [2] = "uint8", [3] = "int8", [5] = "int16", [6] = "int32",
                      [7] = "int64", [9] = "bool", [10] = "float16", [11] = "float64" }
local ok_dtype = { float32 = true, int8 = true, uint8 = true, int32 = true, int64 = true, int16 = true,
                   float64 = true, float16 = true }

local uid = 0
local function fresh(prefix) uid = uid + 1; return prefix .. uid end

-- the test's inputs: graph input name -> array
local function input_map(t)
  local m = {}
  for i, n in ipairs(t.input_names) do m[n] = t.inputs[i] end
  return m
end

local function ints_of(a)
  local r = {}
  for i, v in ipairs(a:flat()) do r[i] = v end
  return r
end

local function attr(t, k, d) local v = t.attrs[k]; if v == nil then return d end return v end

-- Padding for auto_pad SAME_* / VALID / NOTSET over the D spatial dims
-- (inn, k, s, d: lists of D): every "before" then every "after".
local function window_pads(t, inn, k, s, d)
  local D = #inn
  local ap = attr(t, "auto_pad", "NOTSET")
  local p = {}
  if ap == "NOTSET" then
    local q = attr(t, "pads")
    for i = 1, 2 * D do p[i] = q and q[i] or 0 end
    return p
  elseif ap == "VALID" then
    for i = 1, 2 * D do p[i] = 0 end
    return p
  end
  for i = 1, D do
    local out = math.ceil(inn[i] / s[i])
    local total = math.max((out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - inn[i], 0)
    local small, big = math.floor(total / 2), total - math.floor(total / 2)
    if ap == "SAME_UPPER" then p[i], p[i + D] = small, big else p[i], p[i + D] = big, small end
  end
  return p
end

local function ones(n) local r = {} for i = 1, n do r[i] = 1 end return r end
local function spatial(X) local r = {} for i = 3, #X.shape do r[#r + 1] = X.shape[i] end return r end
local nd_name = { [1] = "1d", [3] = "3d" }


-- A {1}-shaped constant input (alpha, beta) as an extra placeholder.
local function scalar(ctxt, v, dtype)
  local P = te.placeholder({ 1 }, dtype, fresh("const"))
  ctxt.extra[#ctxt.extra + 1] = { P, nd.array({ v }, dtype) }
  return P
end

local convert = {}

function convert.Conv(t, ins)
  local X, Wt, B = ins[1], ins[2], ins[3]
  local D = #X.shape - 2
  if D < 1 or D > 3 then skip(D .. "-D convolution") end
  local k = {}
  for i = 3, #Wt.shape do k[#k + 1] = Wt.shape[i] end
  local s, d = attr(t, "strides", ones(D)), attr(t, "dilations", ones(D))
  local p = window_pads(t, spatial(X), k, s, d)
  local a = { strides = s, dilation = d, padding = p, groups = attr(t, "group", 1) }
  local Y
  if D == 2 then
    Y = topi.nn.conv2d(X, Wt, { strides = s, dilation = d, padding = { p[1], p[2], p[3], p[4] }, groups = a.groups })
  else
    Y = topi.op("conv" .. nd_name[D], { X, Wt }, a)[1]
  end
  if B then Y = topi.nn.bias_add(Y, B, 1) end
  return { Y }
end

function convert.ConvTranspose(t, ins)
  local X, Wt, B = ins[1], ins[2], ins[3]
  local D = #X.shape - 2
  if D < 1 or D > 3 then skip(D .. "-D transposed convolution") end
  local g = attr(t, "group", 1)
  local k = {}
  for i = 3, #Wt.shape do k[#k + 1] = Wt.shape[i] end
  local s, d = attr(t, "strides", ones(D)), attr(t, "dilations", ones(D))
  local op0 = attr(t, "output_padding")
  local op, p = {}, {}
  for i = 1, D do op[i] = op0 and op0[i] or 0 end
  local pads = attr(t, "pads")
  for i = 1, 2 * D do p[i] = pads and pads[i] or 0 end
  local os, ap = attr(t, "output_shape"), attr(t, "auto_pad", "NOTSET")
  if os or ap == "SAME_UPPER" or ap == "SAME_LOWER" then
    local outs = {}
    for i = 1, D do outs[i] = os and os[#os - D + i] or X.shape[i + 2] * s[i] end
    for i = 1, D do
      local total = s[i] * (X.shape[i + 2] - 1) + op[i] + (k[i] - 1) * d[i] + 1 - outs[i]
      if total < 0 then op[i], total = op[i] - total, 0 end   -- the rest is output padding
      local half = math.floor(total / 2)
      if ap == "SAME_UPPER" then p[i], p[i + D] = half, total - half else p[i], p[i + D] = total - half, half end
    end
  elseif ap == "VALID" then
    for i = 1, 2 * D do p[i] = 0 end
  end
  local a = { strides = s, dilation = d, padding = p, groups = g, output_padding = op }
  local Y = topi.op(D == 2 and "conv2d_transpose" or "conv" .. nd_name[D] .. "_transpose", { X, Wt }, a)[1]
  if B then Y = topi.nn.bias_add(Y, B, 1) end
  return { Y }
end

local function pool(t, ins, pt)
  local X = ins[1]
  local D = #X.shape - 2
  if D < 1 or D > 3 then skip(D .. "-D pooling") end
  if #t.nodes[1].outputs > 1 then skip("the Indices output") end
  if attr(t, "storage_order", 0) ~= 0 then skip("storage_order") end
  local k = attr(t, "kernel_shape")
  local s, d = attr(t, "strides", ones(D)), attr(t, "dilations", ones(D))
  local p = window_pads(t, spatial(X), k, s, d)
  local a = { kernel = k, strides = s, dilation = d, padding = p, pool_type = pt,
              ceil_mode = attr(t, "ceil_mode", 0) ~= 0,
              count_include_pad = attr(t, "count_include_pad", 0) ~= 0 }
  if D == 2 then return { topi.nn.pool2d(X, a) } end
  return { topi.op("pool" .. nd_name[D], { X }, a)[1] }
end
function convert.MaxPool(t, ins) return pool(t, ins, "max") end
function convert.AveragePool(t, ins) return pool(t, ins, "avg") end
local function global(t, ins, pt)
  local D = #ins[1].shape - 2
  if D < 1 or D > 3 then skip(D .. "-D pooling") end
  return { topi.nn.global_pool(ins[1], pt) }
end
function convert.GlobalAveragePool(t, ins) return global(t, ins, "avg") end
function convert.GlobalMaxPool(t, ins) return global(t, ins, "max") end

function convert.Gemm(t, ins, c)
  local A, B, Cb = ins[1], ins[2], ins[3]
  if attr(t, "transA", 0) ~= 0 then A = topi.transpose(A) end
  local Wt = attr(t, "transB", 0) ~= 0 and B or topi.transpose(B)
  local Y = topi.nn.dense(A, Wt)
  local alpha, beta = attr(t, "alpha", 1), attr(t, "beta", 1)
  if alpha ~= 1 then Y = topi.multiply(Y, scalar(c, alpha, Y.dtype)) end
  if Cb then
    if beta ~= 1 then Cb = topi.multiply(Cb, scalar(c, beta, Y.dtype)) end
    Y = topi.add(Y, Cb)
  end
  return { Y }
end
function convert.MatMul(t, ins) return { topi.matmul(ins[1], ins[2]) } end
function convert.Relu(t, ins) return { topi.nn.relu(ins[1]) } end
function convert.LeakyRelu(t, ins) return { topi.nn.leaky_relu(ins[1], attr(t, "alpha", 0.01)) } end
function convert.Sigmoid(t, ins) return { topi.sigmoid(ins[1]) } end
function convert.Tanh(t, ins) return { topi.tanh(ins[1]) } end

local function softmax(t, ins, lg)
  local X = ins[1]
  local n = #X.shape
  local f = lg and topi.nn.log_softmax or topi.nn.softmax
  if t.opset >= 13 then return { f(X, { axis = attr(t, "axis", -1) }) } end
  local axis = attr(t, "axis", 1)
  if axis < 0 then axis = axis + n end
  if axis == n - 1 then return { f(X, { axis = -1 }) } end
  local F = topi.nn.flatten(X, axis)
  return { topi.reshape(f(F, { axis = 1 }), X.shape) }
end
function convert.Softmax(t, ins) return softmax(t, ins, false) end
function convert.LogSoftmax(t, ins) return softmax(t, ins, true) end

function convert.BatchNormalization(t, ins)
  if #t.nodes[1].outputs > 1 or attr(t, "training_mode", 0) ~= 0 then skip("training mode") end
  return { topi.nn.batch_norm(ins[1], ins[2], ins[3], ins[4], ins[5],
                              { axis = 1, epsilon = attr(t, "epsilon", 1e-5) }) }
end

local function binop(name)
  return function(t, ins)
    if attr(t, "broadcast") == 1 and attr(t, "axis") then skip("legacy broadcast with axis") end
    local Y = ins[1]
    for i = 2, #ins do Y = topi[name](Y, ins[i]) end
    if #ins == 1 then Y = topi.identity(Y) end
    return { Y }
  end
end
convert.Add, convert.Sub, convert.Mul, convert.Div = binop("add"), binop("subtract"), binop("multiply"), binop("divide")
convert.Max, convert.Min = binop("maximum"), binop("minimum")

function convert.Concat(t, ins) return { topi.concatenate(ins, attr(t, "axis", 0)) } end

function convert.Split(t, ins, c)
  local X = ins[1]
  local axis = attr(t, "axis", 0)
  local sizes = attr(t, "split")
  if c.const[2] then sizes = ints_of(c.const[2]) end
  local nout = #t.nodes[1].outputs
  local a = { axis = axis }
  if sizes then
    a.sizes = sizes
  else
    local n = X.shape[axis < 0 and axis + #X.shape + 1 or axis + 1]
    if n % nout ~= 0 then
      local per, acc = math.ceil(n / nout), {}
      for i = 1, nout do acc[i] = math.min(per, n - per * (i - 1)) end
      a.sizes = acc
    else
      a.sections = nout
    end
  end
  return topi.op("split", { X }, a)
end

function convert.Flatten(t, ins) return { topi.nn.flatten(ins[1], attr(t, "axis", 1)) } end
function convert.Reshape(t, ins, c)
  local shape = attr(t, "shape") or ints_of(c.const[2])
  if attr(t, "allowzero", 0) ~= 0 then
    for _, v in ipairs(shape) do if v == 0 then skip("allowzero with a 0 in the shape") end end
  end
  return { topi.reshape(ins[1], shape) }
end
function convert.Transpose(t, ins) return { topi.transpose(ins[1], attr(t, "perm")) } end
function convert.Squeeze(t, ins, c)
  local axes = attr(t, "axes") or (c.const[2] and ints_of(c.const[2]))
  return { topi.squeeze(ins[1], axes) }
end
function convert.Unsqueeze(t, ins, c)
  local axes = attr(t, "axes") or ints_of(c.const[2])
  return { topi.op("expand_dims", { ins[1] }, { axes = axes })[1] }
end
function convert.Pad(t, ins, c)
  local mode = attr(t, "mode", "constant")
  if mode ~= "constant" then skip("mode " .. mode) end
  local pads = attr(t, "pads") or attr(t, "paddings") or ints_of(c.const[2])
  local value = attr(t, "value", 0)
  if c.const[3] then value = c.const[3]:flat()[1] end
  local n = #ins[1].shape
  local axes = c.const[4] and ints_of(c.const[4])
  local before, after = {}, {}
  for i = 1, n do before[i], after[i] = 0, 0 end
  if axes then
    for i, a in ipairs(axes) do
      if a < 0 then a = a + n end
      before[a + 1], after[a + 1] = pads[i], pads[i + #axes]
    end
  else
    for i = 1, n do before[i], after[i] = pads[i], pads[i + n] end
  end
  for i = 1, n do if before[i] < 0 or after[i] < 0 then skip("negative pads (cropping)") end end
  return { topi.nn.pad(ins[1], before, after, value) }
end
function convert.Clip(t, ins, c)
  local lo, hi = attr(t, "min"), attr(t, "max")
  if c.const[2] then lo = c.const[2]:flat()[1] end
  if c.const[3] then hi = c.const[3]:flat()[1] end
  return { topi.clip(ins[1], lo, hi) }
end
function convert.Cast(t, ins)
  local to = onnx_dtypes[attr(t, "to")]
  if not to or not ok_dtype[to] then skip("cast to " .. tostring(to or attr(t, "to"))) end
  return { topi.cast(ins[1], to) }
end

-- Inputs that are operator parameters (read as constants, not placeholders).
local const_inputs = {
  Reshape = { [2] = true }, Split = { [2] = true }, Squeeze = { [2] = true },
  Unsqueeze = { [2] = true }, Pad = { [2] = true, [3] = true, [4] = true },
  Clip = { [2] = true, [3] = true },
}

local function run_test(t)
  if #t.nodes ~= 1 then skip("a graph of " .. #t.nodes .. " nodes") end
  local node = t.nodes[1]
  local im = input_map(t)
  local ctxt = { const = {}, extra = {} }
  local ins, args, arrays = {}, {}, {}
  local consts = const_inputs[t.op_type] or {}
  for k, name in ipairs(node.inputs) do
    local a = name ~= "" and im[name] or nil
    if name ~= "" and a == nil then skip("input '" .. name .. "' is not in the test data") end
    if a ~= nil and not onnx.is_array(a) then skip("input dtype " .. tostring(a.elem_type)) end
    if a ~= nil and a:numel() == 0 then skip("an empty tensor (tunelua extents are >= 1)") end
    if a ~= nil then
      if consts[k] then
        ctxt.const[k] = a
      else
        local dt = a:dtype()
        if not ok_dtype[dt] then skip("dtype " .. dt) end
        local P = te.placeholder(a:shape(), dt, fresh("in"))
        ins[#ins + 1] = P
        args[#args + 1] = P
        arrays[#arrays + 1] = a
      end
    elseif not consts[k] then
      ins[#ins + 1] = nil
    end
  end
  for _, o in ipairs(t.outputs) do
    if not onnx.is_array(o) then skip("output dtype " .. tostring(o.elem_type)) end
    if not ok_dtype[o:dtype()] then skip("dtype " .. o:dtype()) end
  end
  local outs = convert[t.op_type](t, ins, ctxt)
  for _, e in ipairs(ctxt.extra) do args[#args + 1] = e[1]; arrays[#arrays + 1] = e[2] end
  -- a uniquely named copy of each output (schedules find arguments by op name)
  local finals = {}
  for i, Y in ipairs(outs) do
    finals[i] = te.compute(Y.shape, function(...) return Y(...) end, fresh("out"))
    args[#args + 1] = finals[i]
  end
  local s = use_empty and create_schedule(#finals == 1 and finals[1].op or finals)
            or topi.default_schedule(finals, "llvm")
  local f = tl.build(s, args, "c", { cflags = "-O1" })
  local res = {}
  for i, Y in ipairs(finals) do
    res[i] = nd.empty(Y.shape, Y.dtype)
    arrays[#arrays + 1] = res[i]
  end
  f(unpack(arrays))
  if #res ~= #t.outputs then error("got " .. #res .. " outputs, the test has " .. #t.outputs) end
  for i, want in ipairs(t.outputs) do
    testing.assert_allclose(res[i], want, { rtol = 1e-4, atol = 1e-5 })
  end
end

local supported = {}
for op in pairs(convert) do supported[op] = true end

local stats, order = {}, {}
local npass, nfail, nskip = 0, 0, 0
local filter = arg and arg[1]
for _, name in ipairs(names) do
  if not filter or name:find(filter, 1, true) then
    local okl, t = pcall(onnx.load_node_test, name)
    if okl and supported[t.op_type] and (t.domain == "" or t.domain == "ai.onnx") then
      local st = stats[t.op_type]
      if not st then
        st = { passed = 0, failed = 0, skipped = 0, lines = {} }
        stats[t.op_type] = st
        order[#order + 1] = t.op_type
      end
      local ok, err = pcall(run_test, t)
      if ok then
        st.passed = st.passed + 1; npass = npass + 1
      elseif getmetatable(err) == Skip then
        st.skipped = st.skipped + 1; nskip = nskip + 1
        st.lines[#st.lines + 1] = "    skipped " .. name .. ": " .. err.why
      else
        st.failed = st.failed + 1; nfail = nfail + 1
        st.lines[#st.lines + 1] = "    FAILED  " .. name .. ": " .. tostring(err):gsub("\n", "\n      ")
      end
    end
  end
end

table.sort(order)
print(string.format("%-20s %7s %7s %8s", "operator", "passed", "failed", "skipped"))
for _, op in ipairs(order) do
  local st = stats[op]
  print(string.format("%-20s %7d %7d %8d", op, st.passed, st.failed, st.skipped))
  for _, l in ipairs(st.lines) do print(l) end
end
print(string.format("%d passed, %d failed, %d skipped", npass, nfail, nskip))
if nfail > 0 then os.exit(1) end
