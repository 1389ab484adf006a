-- tunelua.relay.graph_pack and topi's conv2d_packed: the packed convolution against the
-- NCHW int8 convolution (exact, odd shapes, batch and channel blocks other than 1/16);
-- resnet18_v1 quantized and packed between nn.max_pool2d and nn.global_avg_pool2d, run on
-- the CPU, equal bit for bit to the unpacked quantized network; its structure (19 packed
-- convs, the stem and the head unpacked) and its 10 conv2d_packed.vta tasks (the VTA
-- tutorial's list, AutoTVM tasks on tunelua.vta's target, packed with get_env()); errors
-- naming the layer.
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"
local networks = require "networks"
local quantize = require "tunelua.relay.quantize"
local graph_pack = require "tunelua.relay.graph_pack"
local extract = require "tunelua.graph.extract"
local executor = require "tunelua.graph.executor"
local vta = require "tunelua.vta"
local raises = require("tests.lua.lib.util").raises

local function run(mod, inputs)
  local m = executor.GraphModule(executor.build(mod, { target = "llvm", quiet = true }))
  m:set_input(inputs)
  m:run()
  return m:get_output(0)
end

local function same(a, b, what)
  local x, y = a:flat(), b:flat()
  assert(#x == #y, what .. ": sizes")
  for i = 1, #x do
    if x[i] ~= y[i] then error(string.format("%s: element %d: %s vs %s", what, i, x[i], y[i]), 2) end
  end
end

-- ---- conv2d_packed against conv2d ---------------------------------------------------------
for _, case in ipairs {
  { n = 2, c = 16, o = 24, h = 7, w = 9, k = 3, s = 2, p = { 1, 0, 1, 0 }, bn = 2, bc = 8 },
  { n = 1, c = 32, o = 16, h = 6, w = 6, k = 1, s = 1, p = { 0, 0, 0, 0 }, bn = 1, bc = 16 },
} do
  local x = nd.random_uniform({ case.n, case.c, case.h, case.w }, { seed = 5, low = -128, high = 128 }):astype("int8")
  local w = nd.random_uniform({ case.o, case.c, case.k, case.k }, { seed = 6, low = -128, high = 128 }):astype("int8")
  local data = relay.var("data", { shape = x:shape(), dtype = "int8" })
  local attrs = { channels = case.o, kernel_size = case.k, strides = case.s, padding = case.p,
                  out_dtype = "int32" }
  local ref = relay.nn.conv2d(data, relay.const(w), attrs)
  local pa = {}
  for k, v in pairs(attrs) do pa[k] = v end
  pa.data_layout = graph_pack.data_layout(case.bn, case.bc)
  pa.kernel_layout = graph_pack.kernel_layout(case.bc, case.bc)
  local packed = relay.nn.conv2d(graph_pack.pack(data, case.bn, case.bc, "test"),
                                 relay.const(graph_pack.pack_weight(w, case.bc, case.bc)), pa)
  assert(#packed.type.shape == 6 and packed.type.shape[5] == case.bn and packed.type.shape[6] == case.bc)
  local a = run(relay.Module(ref), { data = x })
  local b = run(relay.Module(graph_pack.unpack(packed)), { data = x })
  same(a, b, string.format("conv2d_packed %s", pa.data_layout))
end

-- conv2d_packed's checks, as relay type errors
do
  local k = relay.var("k", { shape = { 1, 1, 3, 3, 16, 16 }, dtype = "int8" })
  local pa = { data_layout = "NCHW1n16c", kernel_layout = "OIHW16o16i", out_dtype = "int32" }
  raises(function() relay.nn.conv2d(relay.var("d", { shape = { 1, 16, 8, 8 }, dtype = "int8" }), k, pa) end,
         "conv2d_packed: data and kernel must be 6-D, got (1, 16, 8, 8) and (1, 1, 3, 3, 16, 16)")
  raises(function() relay.nn.conv2d(relay.var("d", { shape = { 1, 2, 8, 8, 1, 8 }, dtype = "int8" }), k, pa) end,
         "do not match the layouts NCHW1n16c and OIHW16o16i")
  raises(function() relay.nn.conv2d(relay.var("d", { shape = { 1, 2, 8, 8, 1, 16 }, dtype = "int8" }), k, pa) end,
         "channel mismatch: data has 2 channel blocks but kernel expects 1")
end

-- ---- resnet18_v1: packed == unpacked, bit for bit -----------------------------------------
local mod, params = networks.get_network("resnet18_v1", { image_size = 64 })
local qmod = quantize.quantize(mod, params)
local pmod = graph_pack.graph_pack(qmod, { bfactor = 1, cfactor = 16, weight_bits = 8,
                                           start_name = "nn.max_pool2d",
                                           stop_name = "nn.global_avg_pool2d" })
do
  local packed, plain, transposes = 0, 0, 0
  relay.visit(pmod.main.body, function(n)
    if n.kind ~= "call" then return end
    if n.op == "nn.conv2d" then
      if n.attrs.data_layout == "NCHW1n16c" then
        assert(n.attrs.kernel_layout == "OIHW16o16i" and n.args[2].type.dtype == "int8"
               and #n.args[2].type.shape == 6)
        packed = packed + 1
      else
        assert(n.args[1].type.dtype == "float32", "the unpacked conv is the float stem")
        plain = plain + 1
      end
    elseif n.op == "transpose" then
      transposes = transposes + 1
    elseif n.op == "nn.global_avg_pool2d" or n.op == "nn.max_pool2d" then
      assert(#n.type.shape == 4, n.op .. " stays NCHW")
    end
  end)
  assert(packed == 19 and plain == 1 and transposes == 2,
         string.format("%d packed convs, %d plain, %d transposes", packed, plain, transposes))
end
for s = 1, 2 do
  local x = nd.random_uniform({ 1, 3, 64, 64 }, { seed = 40 + s, low = -1, high = 1 })
  same(run(qmod, { data = x }), run(pmod, { data = x }), "resnet18_v1 packed vs unpacked")
end

-- ---- the tutorial's 10 tasks ------------------------------------------------------------
do
  local env = vta.get_env()
  local m224, p224 = networks.get_network("resnet18_v1")
  local packed = graph_pack.graph_pack((quantize.quantize(m224, p224)), { env = env })
  local tasks = extract.packed_conv2d(packed, { target = env.target })
  -- AutoTVM tasks of conv2d_packed.vta; the tutorial's progress lines show the spaces of two
  -- of them: 480 (256 -> 512 1x1 stride 2) and 576 (512 -> 512 3x3 at 7x7)
  local sizes = {}
  for _, t in ipairs(tasks) do
    assert(getmetatable(t) ~= extract.PlainTask, "an AutoTVM task")
    sizes[table.concat(t.args[1][2], ",") .. "|" .. table.concat(t.args[2][2], ",")] = #t.config_space
  end
  assert(sizes["1,16,14,14,1,16|32,16,1,1,16,16"] == 480, "space of the 1x1 256 -> 512 task")
  assert(sizes["1,32,7,7,1,16|32,32,3,3,16,16"] == 576, "space of the 512 -> 512 task")
  assert(#extract.packed_conv2d(packed) == 10, "without a target: the same 10 (plain tasks)")
  -- specs/networks.md §9d: (data blocks, H, kernel out blocks, k, stride, pad)
  local want = {
    "4,56,4,3,1,1", "4,56,8,3,2,1", "4,56,8,1,2,0", "8,28,8,3,1,1", "8,28,16,3,2,1",
    "8,28,16,1,2,0", "16,14,16,3,1,1", "16,14,32,3,2,1", "16,14,32,1,2,0", "32,7,32,3,1,1" }
  local have = {}
  for _, t in ipairs(tasks) do
    local d, k = t.args[1], t.args[2]
    assert(t.name == "conv2d_packed.vta" and d[3] == "int8" and k[3] == "int8")
    assert(#d[2] == 6 and d[2][5] == 1 and d[2][6] == 16 and k[2][5] == 16 and k[2][6] == 16)
    assert(t.args[6] == "NCHW1n16c" and t.args[7] == "int32")
    have[#have + 1] = table.concat({ d[2][2], d[2][3], k[2][1], k[2][3], t.args[3][1], t.args[4][1] }, ",")
  end
  table.sort(have)
  table.sort(want)
  assert(#tasks == 10, #tasks .. " tasks")
  for i = 1, 10 do assert(have[i] == want[i], "task " .. have[i] .. " vs " .. want[i]) end
end

-- ---- errors --------------------------------------------------------------------------------
raises(function() graph_pack.graph_pack(qmod, { start_name = "nn.avg_pool2d" }) end,
       "the start operator 'nn.avg_pool2d' is not in the graph")
raises(function() graph_pack.graph_pack(qmod, { stop_name = "nn.softmax" }) end,
       "the stop operator 'nn.softmax' is not in the graph after the start operator 'nn.max_pool2d'")
raises(function() graph_pack.graph_pack(qmod, { weight_bits = 4 }) end, "only 8-bit weights")
raises(function() graph_pack.graph_pack(qmod, { blocks = 4 }) end, "unknown option 'blocks'")
raises(function() graph_pack.graph_pack(qmod, { env = { BATCH = 1, BLOCK_IN = 16, BLOCK_OUT = 32 } }) end,
       "BLOCK_IN (16) must equal BLOCK_OUT (32)")
-- a conv left float inside the region
raises(function()
  graph_pack.graph_pack((quantize.quantize(mod, params, { skip_conv_layers = { 0, 1 } })))
end, "nn.conv2d (layer resnetv10_stage1_conv0) is not quantized")
-- channels not divisible by the block
do
  local m24, p24 = networks.from_table({
    { "conv2d", name = "stem", channels = 16, kernel_size = 3, padding = 1 }, { "relu" },
    { "max_pool2d", pool_size = 2, strides = 2 },
    { "conv2d", name = "c1", channels = 16, kernel_size = 3, padding = 1 }, { "relu" },
    { "conv2d", name = "c2", channels = 24, kernel_size = 1 }, { "relu" },
    { "global_avg_pool2d" }, { "batch_flatten" }, { "dense", name = "fc", units = 10 },
  }, { input_shape = { 1, 3, 16, 16 } })
  local q24 = quantize.quantize(m24, p24)
  raises(function() graph_pack.graph_pack(q24) end,
         "nn.conv2d (layer c2): 24 output channels are not divisible by BLOCK_OUT 16")
  raises(function() graph_pack.graph_pack(q24, { cfactor = 32 }) end,
         "nn.max_pool2d (after layer stem): 16 channels are not divisible by BLOCK 32")
  -- the same network with 32 channels packs and stays exact
  local m32, p32 = networks.from_table({
    { "conv2d", name = "stem", channels = 16, kernel_size = 3, padding = 1 }, { "relu" },
    { "max_pool2d", pool_size = 2, strides = 2 },
    { "conv2d", name = "c1", channels = 16, kernel_size = 3, padding = 1 }, { "relu" },
    { "conv2d", name = "c2", channels = 32, kernel_size = 1 }, { "relu" },
    { "global_avg_pool2d" }, { "batch_flatten" }, { "dense", name = "fc", units = 10 },
  }, { input_shape = { 2, 3, 16, 16 } })
  local q32 = quantize.quantize(m32, p32)
  local x = nd.random_uniform({ 2, 3, 16, 16 }, { seed = 9, low = -2, high = 2 })
  same(run(q32, { data = x }), run(graph_pack.graph_pack(q32, { bfactor = 2 }), { data = x }),
       "batch 2, BATCH 2")
  raises(function() graph_pack.graph_pack(q32, { bfactor = 4 }) end,
         "nn.max_pool2d (after layer stem): batch 2 is not divisible by BATCH 4")
end

print("test_graph_pack: ok")
