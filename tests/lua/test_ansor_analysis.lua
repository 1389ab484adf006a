-- The auto-scheduler's static analysis from Lua (tunelua.auto_scheduler.analyze over
-- core/ansor): stage tables for DAGs built with tunelua.topi, an extracted task, the
-- printed form the REPL shows, and the argument errors.
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"
local networks = require "networks"

local function eq(a, b, what)
  if a ~= b then error(string.format("%s: expected %s, got %s", what, tostring(b), tostring(a)), 2) end
end

-- matmul + bias + relu: the matmul is tiled and fuses the bias stage
local A = te.placeholder({ 64, 32 }, "float32", "A")
local B = te.placeholder({ 32, 48 }, "float32", "B")
local bias = te.placeholder({ 48 }, "float32", "bias")
local C = topi.matmul(A, B)
local D = topi.nn.bias_add(C, bias, 1)
local R = topi.nn.relu(D)
local a = auto_scheduler.analyze(R)
local mm, ba, relu = a:stage(C.op.name), a:stage(D.op.name), a:stage(R.op.name)
eq(#a.stages, 6, "stages")
eq(a:stage(0).name, "A", "stage 0")
eq(a:stage("A").kind, "placeholder", "A kind")
eq(mm.needs_multi_level_tiling, true, "matmul tiling")
eq(mm.has_reuse, true, "matmul reuse")
eq(mm.injective, false, "matmul injective")
eq(mm.is_output, false, "matmul output")
eq(mm.has_reduce, true, "matmul reduce")
eq(mm.fused_consumer, ba.name, "matmul fuses the bias stage")
eq(table.concat(mm.producers, " "), "A B", "matmul producers")
eq(ba.strictly_inlinable, true, "bias_add inlinable")
eq(ba.needs_multi_level_tiling, false, "bias_add tiling")
eq(relu.is_output, true, "relu output")
eq(relu.fused_consumer, nil, "relu fuses nothing")
eq(a:elementwise_match(mm.name, relu.name), true, "matmul ~ relu")
eq(a:elementwise_match(relu.id, mm.id), false, "relu ~ matmul")
local text = tostring(a)
assert(text:find(mm.name .. "%s+compute%s+tile reuse reduce  %-> " .. ba.name .. "  %(fuses " .. ba.name .. "%)"),
       "printed analysis:\n" .. text)
assert(not pcall(a.stage, a, "nope"), "unknown stage")

-- conv2d with padding: the pad stage is injective but guarded, so not strictly inlinable
local x = te.placeholder({ 1, 8, 10, 10 }, "float32", "data")
local w = te.placeholder({ 16, 8, 3, 3 }, "float32", "kernel")
local y = topi.nn.conv2d(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
local ca = auto_scheduler.analyze(te.extract(y))
eq(ca:stage("pad_temp").injective, true, "pad injective")
eq(ca:stage("pad_temp").strictly_inlinable, false, "pad inlinable")
eq(ca:stage(y.op.name).needs_multi_level_tiling, true, "conv tiling")

-- a task extracted from a network: every conv2d task has a stage that needs tiling
local mod, params = networks.get_network("resnet-18", { layout = "NHWC", batch_size = 1 })
local tasks = auto_scheduler.extract_tasks(mod, params, "llvm", { winograd = "never" })
assert(#tasks > 0, "resnet-18 tasks")
-- conv2d tasks tile the conv and fuse the bias add (a [1, 1, 1, C] broadcast); pooling
-- and softmax tasks reduce without reuse and tile nothing
local nconv = 0
for _, t in ipairs(tasks) do
  local ta = auto_scheduler.analyze(t)
  local name = table.concat(t.desc, ",")
  local tiled = {}
  for _, s in ipairs(ta.stages) do if s.needs_multi_level_tiling then tiled[#tiled + 1] = s end end
  if name:find("conv2d", 1, true) then
    nconv = nconv + 1
    eq(#tiled, 1, name .. ": tiled stages")
    eq(tiled[1].name, "conv2d_nhwc", name .. ": the tiled stage")
    if #tiled[1].consumers > 0 then
      eq(tiled[1].fused_consumer, tiled[1].consumers[1], name .. ": fused consumer")
    end
  elseif name:find("pool", 1, true) or name:find("softmax", 1, true) then
    eq(#tiled, 0, name .. ": tiled stages")
  end
  assert(ta.stages[#ta.stages].is_output, name .. ": last stage is an output")
end
assert(nconv >= 12, "conv2d tasks: " .. nconv)

-- the Winograd tasks of the default extraction: the batched GEMM is the one tiled stage (its
-- consumer, the output transform's first pass, is no element-wise match: not fused); the
-- transform passes are injective with a branch (their select), so never strictly inlinable
local nwg = 0
for _, t in ipairs(auto_scheduler.extract_tasks(mod, params, "llvm")) do
  local ta = auto_scheduler.analyze(t)
  local name = table.concat(t.desc, ",")
  if tostring(t.compute_dag):find("conv2d_winograd_nhwc", 1, true) then
    nwg = nwg + 1
    local tiled = {}
    for _, s in ipairs(ta.stages) do if s.needs_multi_level_tiling then tiled[#tiled + 1] = s end end
    eq(#tiled, 1, name .. ": tiled stages")
    eq(tiled[1].name, "bgemm", name .. ": the tiled stage")
    eq(tiled[1].fused_consumer, nil, name .. ": the GEMM fuses no consumer")
    for _, st in ipairs({ "data_pack_rows", "data_pack", "inverse_rows", "conv2d_winograd_nhwc" }) do
      eq(ta:stage(st).strictly_inlinable, false, name .. ": " .. st .. " inlinable")
    end
    assert(ta.stages[#ta.stages].is_output, name .. ": last stage is an output")
  end
end
eq(nwg, 9, "resnet-18 Winograd tasks")

local ok, err = pcall(auto_scheduler.analyze, 42)
assert(not ok and err:find("analyze: expected a search task, a compute DAG or tensors, got number", 1, true), err)
print("ok")
