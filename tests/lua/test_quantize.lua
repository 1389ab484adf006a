-- tunelua.relay.quantize: qconfig checks, power-of-two weight quantization, the integer
-- graph of small convs against an independent Lua computation of the same arithmetic
-- (exact), and resnet18_v1 quantized as the VTA tutorial does (global_scale 8, the stem
-- skipped) against the float network on random inputs (top-1 agreement and relative logits
-- error printed; the error bounded).
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"
local networks = require "networks"
local quantize = require "tunelua.relay.quantize"
local executor = require "tunelua.graph.executor"
local testing = require "tunelua.testing"
local raises = require("tests.lua.lib.util").raises

-- ---- qconfig ----------------------------------------------------------------------------
do
  local c = quantize.qconfig { global_scale = 8.0, skip_conv_layers = { 0 } }
  assert(c.global_scale == 8 and c.skip_conv_layers[1] == 0 and c.nbit_input == 8)
  assert(quantize.activation_scale(c) == 1 / 16)
  assert(tostring(c):find("global_scale=8", 1, true))
  raises(function() quantize.qconfig { global_scael = 8 } end, "unknown option 'global_scael'")
  raises(function() quantize.qconfig { global_scale = -1 } end, "global_scale must be a positive number")
  raises(function() quantize.qconfig { calibrate_mode = "kl_divergence" } end, "calibrate_mode must be")
  raises(function() quantize.qconfig { skip_conv_layers = { -1 } } end, "skip_conv_layers[1]")
  raises(function() quantize.qconfig { nbit_weight = 4 } end, "nbit_weight/dtype_weight")
end

-- ---- comparing logits (the network check below) ------------------------------------------
do
  local same, e = testing.compare_logits({ 1, 3, 3, 2 }, { 1, 3, 3, 2 })
  assert(same and e == 0)
  same, e = testing.compare_logits({ 3, 4, 0 }, { 3, 4, 5 })   -- ||(0, 0, -5)|| / ||(3, 4, 0)||
  assert(not same and e == 1, "top-1 2 vs 3, error 1, got " .. tostring(e))
  assert(testing.compare_logits({ 2, 2, 1 }, { 2, 1, 2 }), "ties: the first index")
end

-- ---- weights ----------------------------------------------------------------------------
do
  local q, s = quantize.quantize_weight(nd.array({ 0.3, -0.5, 0.26, 0.0, 0.001 }, "float32"))
  assert(s == 1 / 256, "max 0.5 -> scale 2^-1/128, got " .. s)
  local v = q:flat()
  local want = { 77, -127, 67, 0, 0 }     -- 76.8, -128 clipped, 66.56, 0, 0.256
  for i = 1, 5 do assert(v[i] == want[i], string.format("w_q[%d] = %d, expected %d", i, v[i], want[i])) end
  local _, s2 = quantize.quantize_weight(nd.array({ 0.7, -0.2 }, "float32"))
  assert(s2 == 1 / 128, "max 0.7 -> scale 2^0/128")
end

-- ---- small graphs, exact -----------------------------------------------------------------
-- x (C, H, W) and w (O, C, 3, 3) as flat Lua lists; 3x3 conv, pad 1, stride 1 -> (O, H, W)
local function conv3(x, w, C, H, W, O)
  local y = {}
  for o = 0, O - 1 do
    for i = 0, H - 1 do
      for j = 0, W - 1 do
        local acc = 0
        for c = 0, C - 1 do
          for di = 0, 2 do
            for dj = 0, 2 do
              local ii, jj = i + di - 1, j + dj - 1
              if ii >= 0 and ii < H and jj >= 0 and jj < W then
                acc = acc + x[(c * H + ii) * W + jj + 1] * w[((o * C + c) * 3 + di) * 3 + dj + 1]
              end
            end
          end
        end
        y[(o * H + i) * W + j + 1] = acc
      end
    end
  end
  return y
end
local function rnd(v) return v >= 0 and math.floor(v + 0.5) or -math.floor(-v + 0.5) end
local function clamp(v) return math.max(-127, math.min(127, v)) end

-- the quantized graph built for the host and run on x -> its output (flat), x quantized to
-- int8 as the graph's input is (rounded at the activation scale), that scale (1/16)
local function run_int8(qmod, x)
  local m = executor.GraphModule(executor.build(qmod, { target = "llvm", quiet = true }))
  m:set_input("data", x)
  m:run()
  local sa = 1 / 16
  local xq = {}
  for i, v in ipairs(x:flat()) do xq[i] = clamp(rnd(v / sa)) end
  return m:get_output(0):flat(), xq, sa
end

-- conv -> add(bias) -> relu -> conv, and conv -> add(bias) -> conv -> add(data) (negative
-- values through the rounding shift; the residual's left shift to the finer scale)
for _, case in ipairs { { relu = true }, { relu = false, residual = true } } do
  local C, H, W, O = 4, 5, 5, 8
  local x = nd.random_uniform({ 1, C, H, W }, { seed = 11, low = -3, high = 3 })
  local w1 = nd.random_uniform({ O, C, 3, 3 }, { seed = 12, low = -0.4, high = 0.4 })
  local b1 = nd.random_uniform({ O, 1, 1 }, { seed = 13, low = -0.5, high = 0.5 })
  local w2 = nd.random_uniform({ 4, O, 3, 3 }, { seed = 14, low = -0.3, high = 0.3 })
  local data = relay.var("data", { shape = { 1, C, H, W } })
  local y = relay.nn.conv2d(data, relay.var("w1", { shape = { O, C, 3, 3 } }),
                            { channels = O, kernel_size = 3, padding = 1 })
  y = relay.add(y, relay.var("b1", { shape = { O, 1, 1 } }))
  if case.relu then y = relay.nn.relu(y) end
  y = relay.nn.conv2d(y, relay.var("w2", { shape = { 4, O, 3, 3 } }),
                      { channels = 4, kernel_size = 3, padding = 1 })
  if case.residual then y = relay.add(y, data) end
  local mod = relay.Module(y)
  local params = { w1 = w1, b1 = b1, w2 = w2 }
  local qmod, info = quantize.quantize(mod, params, { skip_conv_layers = {} })
  assert(#info.convs == 2 and info.convs[1].quantized and info.convs[2].quantized)
  local n8 = 0
  relay.visit(qmod.main.body, function(n)
    if n.kind == "call" and n.op == "nn.conv2d" then
      assert(n.args[1].type.dtype == "int8" and n.args[2].type.dtype == "int8" and n.type.dtype == "int32")
      n8 = n8 + 1
    end
  end)
  assert(n8 == 2)
  local got, xq, sa = run_int8(qmod, x)
  -- the same arithmetic in Lua
  local w1q, s1 = quantize.quantize_weight(w1)
  local w2q, s2 = quantize.quantize_weight(w2)
  local acc1 = conv3(xq, w1q:flat(), C, H, W, O)
  local bq = {}
  for i, v in ipairs(b1:flat()) do bq[i] = rnd(v / (sa * s1)) end
  local k = math.floor(math.log(sa / (sa * s1)) / math.log(2) + 0.5)
  local x2, neg = {}, 0
  for i, v in ipairs(acc1) do
    local o = math.floor((i - 1) / (H * W)) + 1
    local r = v + bq[o]
    if case.relu then r = math.max(0, r) end
    if r < 0 then neg = neg + 1 end
    x2[i] = clamp(math.floor((r + 2 ^ (k - 1)) / 2 ^ k))     -- arithmetic right shift
  end
  assert(case.relu or neg > #acc1 / 4, "the check sees few negative accumulators")
  local acc2 = conv3(x2, w2q:flat(), O, H, W, 4)
  if case.residual then
    local k2 = math.floor(math.log(sa / (sa * s2)) / math.log(2) + 0.5)
    for i = 1, #acc2 do acc2[i] = acc2[i] + xq[i] * 2 ^ k2 end     -- left shift
  end
  assert(#got == #acc2)
  local nonzero = 0
  for i, v in ipairs(acc2) do
    local want = v * sa * s2
    assert(got[i] == want, string.format("element %d: %.9g, expected %.9g", i, got[i], want))
    if v ~= 0 then nonzero = nonzero + 1 end
  end
  assert(nonzero > #acc2 / 2, "the check sees mostly zeros")
end

-- store_lowbit_output: add(conv(x) + b1, conv(x)) as a downsampling block adds its shortcut;
-- the first operand (int32, read only by the add) is requantized to int8 at s_a and stored
-- behind a fusion boundary, the second keeps its 32 bits, the int8 one is shifted left to its
-- scale; with store_lowbit_output = false both stay int32 (the finer scale's)
for _, lowbit in ipairs { true, false } do
  local C, H, W, O = 4, 5, 5, 8
  local x = nd.random_uniform({ 1, C, H, W }, { seed = 21, low = -3, high = 3 })
  local w1 = nd.random_uniform({ O, C, 3, 3 }, { seed = 22, low = -0.4, high = 0.4 })
  local b1 = nd.random_uniform({ O, 1, 1 }, { seed = 23, low = -0.5, high = 0.5 })
  local w3 = nd.random_uniform({ O, C, 3, 3 }, { seed = 24, low = -0.2, high = 0.2 })
  local data = relay.var("data", { shape = { 1, C, H, W } })
  local y1 = relay.add(relay.nn.conv2d(data, relay.var("w1", { shape = { O, C, 3, 3 } }),
                                       { channels = O, kernel_size = 3, padding = 1 }),
                       relay.var("b1", { shape = { O, 1, 1 } }))
  local y3 = relay.nn.conv2d(data, relay.var("w3", { shape = { O, C, 3, 3 } }),
                             { channels = O, kernel_size = 3, padding = 1 })
  local qmod = quantize.quantize(relay.Module(relay.add(y1, y3)), { w1 = w1, b1 = b1, w3 = w3 },
                                 { skip_conv_layers = {}, store_lowbit_output = lowbit })
  local stops = 0
  relay.visit(qmod.main.body, function(n)
    if n.kind == "call" and n.op == "annotation.stop_fusion" then
      assert(n.type.dtype == "int8", "the boundary holds the int8 value")
      stops = stops + 1
    end
  end)
  assert(stops == (lowbit and 1 or 0), "fusion boundaries: " .. stops)
  local got, xq, sa = run_int8(qmod, x)
  local w1q, s1 = quantize.quantize_weight(w1)
  local w3q, s3 = quantize.quantize_weight(w3)
  assert(s3 < s1, "the second operand has the finer scale")
  local acc1, acc3 = conv3(xq, w1q:flat(), C, H, W, O), conv3(xq, w3q:flat(), C, H, W, O)
  local bq = {}
  for i, v in ipairs(b1:flat()) do bq[i] = rnd(v / (sa * s1)) end
  local k1 = math.floor(math.log(sa / (sa * s1)) / math.log(2) + 0.5)
  local k3 = math.floor(math.log(sa / (sa * s3)) / math.log(2) + 0.5)
  local k13 = math.floor(math.log(s1 / s3) / math.log(2) + 0.5)
  local nonzero = 0
  for i = 1, #acc1 do
    local o = math.floor((i - 1) / (H * W)) + 1
    local r = acc1[i] + bq[o]
    local v
    if lowbit then
      v = acc3[i] + clamp(math.floor((r + 2 ^ (k1 - 1)) / 2 ^ k1)) * 2 ^ k3
    else
      v = acc3[i] + r * 2 ^ k13
    end
    local want = v * sa * s3
    assert(got[i] == want, string.format("lowbit %s, element %d: %.9g, expected %.9g", tostring(lowbit),
                                         i, got[i], want))
    if v ~= 0 then nonzero = nonzero + 1 end
  end
  assert(nonzero > #acc1 / 2, "the check sees mostly zeros")
end

-- ---- resnet18_v1 as the VTA tutorial quantizes it -------------------------------------------
do
  local mod, params = networks.get_network("resnet18_v1")
  local qmod, info = quantize.quantize(mod, params, quantize.qconfig { global_scale = 8.0,
                                                                        skip_conv_layers = { 0 } })
  assert(#info.convs == 20 and not info.convs[1].quantized)
  for i = 2, 20 do assert(info.convs[i].quantized, "conv " .. (i - 1) .. " quantized") end
  local fm = executor.GraphModule(executor.build(mod, { target = "llvm", params = params, quiet = true }))
  local qm = executor.GraphModule(executor.build(qmod, { target = "llvm", quiet = true }))
  local agree, errsum, n = 0, 0, 4
  for s = 1, n do
    local x = nd.random_uniform({ 1, 3, 224, 224 }, { seed = 100 + s, low = -1, high = 1 })
    fm:set_input("data", x); fm:run()
    qm:set_input("data", x); qm:run()
    local same, e = testing.compare_logits(fm:get_output(0):flat(), qm:get_output(0):flat())
    if same then agree = agree + 1 end
    errsum = errsum + e
  end
  print(string.format("resnet18_v1 int8 vs float32 (224x224, %d random inputs): top-1 agreement " ..
                      "%d/%d, mean relative logits error %.4f", n, agree, n, errsum / n))
  assert(errsum / n < 0.1, "relative logits error " .. errsum / n)
end

print("test_quantize: ok")
