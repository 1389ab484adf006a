-- networks/: every benchmark network builds as specs/networks.md describes it
-- (parameter counts and names, conv counts, shapes), parameters are
-- initialized as TVM's init.py does, the reference interpreter agrees with
-- hand-computed values, and small versions of the networks run through it.
local networks = require "networks"
local layers = require "networks.layers"
local reference = require "networks.reference"
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"
local topi = require "tunelua.topi"

local function numel(s)
  local n = 1
  for _, d in ipairs(s) do n = n * d end
  return n
end

local function same_list(a, b, what)
  assert(#a == #b, string.format("%s: %d vs %d entries", what, #a, #b))
  for i = 1, #a do
    assert(a[i] == b[i], string.format("%s: entry %d is %s, expected %s", what, i,
                                       tostring(a[i]), tostring(b[i])))
  end
end

local function approx(a, b, tol, what)
  assert(math.abs(a - b) <= (tol or 1e-6) * math.max(1, math.abs(b)),
         string.format("%s: %.9g vs %.9g", what or "value", a, b))
end

local has_conv3d = false
for _, n in ipairs(topi.list()) do if n == "conv3d" then has_conv3d = true end end

-- ---- every network, every layout: structure ------------------------------------------------

-- name -> {params incl. data, scalar weights, conv2d calls, distinct conv shapes}
local expect = {
  ["resnet-18"] = { 100, 11699892, 21, 12 },
  ["resnet-34"] = { 180, 21815476, 37, 12 },
  ["resnet-50"] = { 260, 25595060, 53, 20 },
  ["resnet-101"] = { 515, 44639412, 104, 20 },
  ["resnet-152"] = { 770, 60329140, 155, 20 },
  -- Gluon's v1: torchvision's counts (11689512, 21797672, 25557032) plus the running
  -- means and variances, and for resnet50_v1 the biases of each bottleneck's 1x1 convs
  ["resnet18_v1"] = { 103, 11699112, 20, 11 },
  ["resnet34_v1"] = { 183, 21814696, 36, 11 },
  ["resnet50_v1"] = { 300, 25629032, 53, 20 },
  ["mobilenet"] = { 138, 4253864, 27, 19 },
  ["vgg-11"] = { 23, 132863336, 8, 7 },
  ["vgg-13"] = { 27, 133047848, 10, 9 },
  ["vgg-16"] = { 33, 138357544, 13, 9 },
  ["vgg-19"] = { 39, 143667240, 16, 9 },
  ["vgg-11-bn"] = { 55, 132874344, 8, 7 },
  ["vgg-13-bn"] = { 67, 133059624, 10, 9 },
  ["vgg-16-bn"] = { 85, 138374440, 13, 9 },
  ["vgg-19-bn"] = { 103, 143689256, 16, 9 },
  ["squeezenet_v1.0"] = { 53, 1248424, 26, 22 },
  ["squeezenet_v1.1"] = { 53, 1235496, 26, 18 },
  ["inception_v3"] = { 473, 23869000, 94, 43 },
  ["resnet3d-18"] = { 100, nil, 0, 0 },
  ["resnet3d-34"] = { 180, nil, 0, 0 },
}

local built = 0
for _, name in ipairs(networks.list()) do
  assert(expect[name], "no expectations for " .. name)
  for _, layout in ipairs(networks.layouts(name)) do
    if name:match("^resnet3d") and not has_conv3d then
      -- topi has no conv3d operator yet: the 3-D networks cannot be typed
      local ok, err = pcall(networks.get_network, name, { layout = layout, init_params = false })
      assert(not ok and tostring(err):find("conv3d"), tostring(err))
    else
      local mod, params, ishape, oshape = networks.get_network(name, { layout = layout,
                                                                      init_params = false })
      built = built + 1
      local f = mod.main
      local e = expect[name]
      assert(#f.params == e[1], string.format("%s %s: %d params, expected %d", name, layout,
                                              #f.params, e[1]))
      assert(next(params) == nil)
      assert(f.params[1].name == "data")
      same_list(f.params[1].type.shape, ishape, name .. " input shape")
      same_list(oshape, { 1, 1000 }, name .. " output shape")
      same_list(f.body.type.shape, { 1, 1000 }, name .. " body type")
      if name:match("_v1$") then     -- Gluon's models end in the logits
        assert(f.body.op == "nn.bias_add" and f.body.args[1].op == "nn.dense",
               name .. ": the output is not dense + bias")
      else
        assert(f.body.op == "nn.softmax", name .. ": the output is not a softmax")
      end
      local scalars = 0
      for i = 2, #f.params do scalars = scalars + numel(f.params[i].type.shape) end
      local want = e[2]
      -- the stem batch norm normalizes H (112) instead of C (32) in NHWC: 4 x 80 more
      if name == "mobilenet" and layout == "NHWC" then want = want + 4 * 80 end
      if want then
        assert(scalars == want, string.format("%s %s: %d weights, expected %d", name, layout,
                                              scalars, want))
      end
      local convs, distinct, keys = 0, 0, {}
      relay.visit(f.body, function(n)
        if n.kind == "call" and n.op == "nn.conv2d" then
          convs = convs + 1
          local k = table.concat(n.args[1].type.shape, ",") .. "|" ..
                    table.concat(n.args[2].type.shape, ",") .. "|" ..
                    table.concat(n.attrs.strides, ",")
          if not keys[k] then
            keys[k] = true
            distinct = distinct + 1
          end
        end
      end)
      assert(convs == e[3] and distinct == e[4],
             string.format("%s %s: %d convs (%d shapes), expected %d (%d)", name, layout, convs,
                           distinct, e[3], e[4]))
      -- our free-vars order is relay's
      local fv = relay.free_vars(f.body)
      for i, v in ipairs(f.params) do assert(fv[i] == v, name .. ": parameter order") end
    end
  end
end
assert(built >= 21, "built " .. built .. " networks")

-- default input shapes and layouts
do
  local _, _, s = networks.get_network("inception_v3", { init_params = false })
  same_list(s, { 1, 3, 299, 299 }, "inception_v3 input")
  _, _, s = networks.get_network("mobilenet", { layout = "NHWC", init_params = false })
  same_list(s, { 1, 224, 224, 3 }, "mobilenet NHWC input")
  for _, bad in ipairs { "vgg-16", "squeezenet_v1.1", "inception_v3" } do
    local ok, err = pcall(networks.get_network, bad, { layout = "NHWC" })
    assert(not ok and tostring(err):find("supports only the NCHW layout"), tostring(err))
  end
  local ok, err = pcall(networks.get_network, "resnet-19")
  assert(not ok and tostring(err):find("unknown network 'resnet%-19'"), tostring(err))
  ok, err = pcall(networks.get_network, "resnet-18", { batchsize = 2 })
  assert(not ok and tostring(err):find("unknown option 'batchsize'"), tostring(err))
end

-- batch 2
do
  local mod, _, ishape, oshape = networks.get_network("resnet-18", { batch_size = 2,
                                                                    init_params = false })
  same_list(ishape, { 2, 3, 224, 224 }, "batch 2 input")
  same_list(oshape, { 2, 1000 }, "batch 2 output")
  same_list(mod.main.body.type.shape, { 2, 1000 }, "batch 2 body")
end

-- ---- names, order and shapes as specs/networks.md §0 lists them ---------------------------

do
  local mod, params = networks.get_network("resnet-18")
  local p = mod.main.params
  local first = { "data", "bn_data_gamma", "bn_data_beta", "bn_data_moving_mean",
                  "bn_data_moving_var", "conv0_weight", "bn0_gamma", "bn0_beta",
                  "bn0_moving_mean", "bn0_moving_var", "stage1_unit1_bn1_gamma" }
  for i, n in ipairs(first) do assert(p[i].name == n, "resnet-18 param " .. i .. ": " .. p[i].name) end
  local last = { "bn1_gamma", "bn1_beta", "bn1_moving_mean", "bn1_moving_var", "fc1_weight",
                 "fc1_bias" }
  for i, n in ipairs(last) do
    local q = p[#p - #last + i]
    assert(q.name == n, "resnet-18 tail param: " .. q.name)
  end
  same_list(p[6].type.shape, { 64, 3, 7, 7 }, "conv0_weight")
  same_list(params.fc1_weight:shape(), { 1000, 512 }, "fc1_weight")
  -- the main branch comes before the projection shortcut
  local pos = {}
  for i, v in ipairs(p) do pos[v.name] = i end
  assert(pos["stage1_unit1_conv2_weight"] < pos["stage1_unit1_sc_weight"])
  assert(pos["stage1_unit1_sc_weight"] < pos["stage1_unit2_bn1_gamma"])
  assert(pos["stage1_unit2_sc_weight"] == nil, "stage1 unit2 has an identity shortcut")
  assert(pos["stage4_unit1_sc_weight"] ~= nil)
  -- bn eps 2e-5 on the channel axis; bn_data without scale
  local seen = 0
  relay.visit(mod.main.body, function(n)
    if n.kind == "call" and n.op == "nn.batch_norm" then
      seen = seen + 1
      approx(n.attrs.epsilon, 2e-5, 1e-9, "epsilon")
      assert(n.attrs.axis == 1)
      if n.args[2].name == "bn_data_gamma" then
        assert(n.attrs.scale == false or n.attrs.scale == 0)
      end
    end
  end)
  assert(seen == 1 + 1 + 8 * 2 + 1, "resnet-18 has " .. seen .. " batch norms")

  -- initialization: gamma/var 1, beta/mean/bias 0, Xavier weights in range, not constant
  for name, a in pairs(params) do
    local v = a:flat()
    if name:match("gamma$") or name:match("var$") then
      for i = 1, #v do assert(v[i] == 1, name) end
    elseif name:match("beta$") or name:match("mean$") or name:match("bias$") then
      for i = 1, #v do assert(v[i] == 0, name) end
    end
  end
  local w = params.conv0_weight:flat()
  local scale = math.sqrt(3 / ((3 * 49 + 64 * 49) / 2))
  local lo, hi, sum = 1, -1, 0
  for i = 1, #w do
    lo, hi, sum = math.min(lo, w[i]), math.max(hi, w[i]), sum + w[i]
  end
  assert(lo >= -scale and hi <= scale and hi - lo > 1.8 * scale, "conv0_weight range")
  assert(math.abs(sum / #w) < 0.1 * scale, "conv0_weight mean")

  -- NHWC: HWIO weights, exactly the NCHW values transposed; BN on axis 3
  local mod2, params2 = networks.get_network("resnet-18", { layout = "NHWC" })
  local p2 = mod2.main.params
  same_list(p2[6].type.shape, { 7, 7, 3, 64 }, "NHWC conv0_weight")
  same_list(p2[2].type.shape, { 3 }, "NHWC bn_data_gamma")
  local t = layers.permute(params.conv0_weight, "OIHW", "HWIO", { 7, 7, 3, 64 })
  assert(reference.compare(params2.conv0_weight, t, { rtol = 0, atol = 0 }))
  local t2 = layers.permute(params.stage3_unit1_conv1_weight, "OIHW", "HWIO", { 3, 3, 128, 256 })
  assert(reference.compare(params2.stage3_unit1_conv1_weight, t2, { rtol = 0, atol = 0 }))

  -- init = "he": U(+-sqrt(6 / fan_in)) on the logical shape
  local _, ph = networks.get_network("resnet-18", { init = "he", image_size = 48 })
  local hv, hs = ph.conv0_weight:flat(), math.sqrt(6 / (3 * 49))
  local hlo, hhi = 1, -1
  for i = 1, #hv do hlo, hhi = math.min(hlo, hv[i]), math.max(hhi, hv[i]) end
  assert(hlo >= -hs and hhi <= hs and hhi - hlo > 1.8 * hs, "he init range")

  -- seeded: the same seed gives the same values, another seed others
  local _, params3 = networks.get_network("resnet-18", { seed = 0 })
  assert(reference.compare(params3.fc1_weight, params.fc1_weight, { rtol = 0, atol = 0 }))
  local _, params4 = networks.get_network("resnet-18", { seed = 1 })
  assert(not reference.compare(params4.fc1_weight, params.fc1_weight, { rtol = 0, atol = 0 }))
end

do -- mobilenet: stem BN on axis 1 (H in NHWC), depthwise HWOI, dense bias axis 1
  local m1 = networks.get_network("mobilenet", { init_params = false })
  local m2 = networks.get_network("mobilenet", { layout = "NHWC", init_params = false })
  local function param(mod, name)
    for _, p in ipairs(mod.main.params) do if p.name == name then return p end end
    error("no param " .. name)
  end
  same_list(param(m1, "conv_block_1_bn_gamma").type.shape, { 32 }, "NCHW stem bn")
  same_list(param(m2, "conv_block_1_bn_gamma").type.shape, { 112 }, "NHWC stem bn")
  same_list(param(m2, "separable_conv_block_1_weight").type.shape, { 3, 3, 32, 1 }, "dw HWOI")
  same_list(param(m1, "separable_conv_block_1_weight").type.shape, { 32, 1, 3, 3 }, "dw OIHW")
  same_list(param(m2, "separable_conv_block_13_conv2_weight").type.shape, { 1, 1, 1024, 1024 },
            "pw HWIO")
  same_list(param(m1, "fc_weight").type.shape, { 1000, 1024 }, "fc_weight")
  local dw = 0
  relay.visit(m2.main.body, function(n)
    if n.kind == "call" and n.op == "nn.conv2d" and n.attrs.groups > 1 then
      dw = dw + 1
      assert(n.attrs.kernel_layout == "HWOI")
    end
  end)
  assert(dw == 13)
end

do -- inception: bias named fc2_bias, BN scale=False, avg pools count padding
  local mod = networks.get_network("inception_v3", { init_params = false })
  local p = mod.main.params
  assert(p[#p].name == "fc2_bias" and p[#p - 1].name == "fc1_weight")
  assert(p[2].name == "conv_conv1_weight" and p[3].name == "conv_bn_gamma")
  local avg, concat = 0, 0
  relay.visit(mod.main.body, function(n)
    if n.kind == "call" and n.op == "nn.avg_pool2d" then
      avg = avg + 1
      assert(n.attrs.count_include_pad == true or n.attrs.count_include_pad == 1)
    elseif n.kind == "call" and n.op == "concatenate" then
      concat = concat + 1
    end
  end)
  assert(avg == 9 and concat == 11, "avg pools " .. avg .. ", concatenates " .. concat)
end

-- ---- the reference interpreter on hand-computed cases ---------------------------------------

local K = reference.kernels
local function A(t) return nd.array(t, "float32") end
local function close(actual, desired, what)
  local ok, msg = reference.compare(actual, A(desired), { rtol = 1e-6, atol = 1e-6 })
  assert(ok, what .. ": " .. tostring(msg))
end

do
  local x = A({ { { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } } } })
  local w = A({ { { { 1, 0 }, { 0, -1 } } } })
  close(K["nn.conv2d"]({ x, w }, {}), { { { { -4, -4 }, { -4, -4 } } } }, "conv2d")
  close(K["nn.conv2d"]({ x, w }, { strides = { 2, 2 }, padding = { 1, 1 } }),
        { { { { -1, -3 }, { -7, -4 } } } }, "conv2d stride 2 pad 1")
  -- NHWC data with HWIO weights gives the same numbers
  local xh = layers.permute(x, "NCHW", "NHWC", { 1, 3, 3, 1 })
  local wh = layers.permute(w, "OIHW", "HWIO", { 2, 2, 1, 1 })
  close(K["nn.conv2d"]({ xh, wh }, { strides = 2, padding = 1, data_layout = "NHWC",
                                     kernel_layout = "HWIO" }),
        { { { { -1 }, { -3 } }, { { -7 }, { -4 } } } }, "conv2d NHWC")
  -- dilation 2: the corners of the 3x3 input
  close(K["nn.conv2d"]({ x, w }, { dilation = 2 }), { { { { 1 - 9 } } } }, "conv2d dilated")
  -- groups: two channels, each with its own 1x1 weight
  local x2 = A({ { { { 1, 2 } }, { { 3, 4 } } } })
  local w2 = A({ { { { 10 } } }, { { { -1 } } } })
  close(K["nn.conv2d"]({ x2, w2 }, { groups = 2 }), { { { { 10, 20 } }, { { -3, -4 } } } },
        "depthwise conv2d")
  -- conv3d with a unit depth is conv2d; a 2x2x2 sum kernel over a 2x2x2 cube
  local x3 = A({ { { { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } } } })
  local w3 = A({ { { { { 1, 1 }, { 1, 1 } }, { { 1, 1 }, { 1, 1 } } } } })
  close(K["nn.conv3d"]({ x3, w3 }, {}), { { { { { 36 } } } } }, "conv3d")
  close(K["nn.conv3d"]({ x3, w3 }, { padding = { 0, 0, 1 } }),
        { { { { { 16, 36, 20 } } } } }, "conv3d padded W")
  -- pools
  local p = A({ { { { 1, 2, 5, 6 }, { 3, 4, 7, 8 }, { 0, 0, 1, 1 }, { 0, -2, 1, 9 } } } })
  close(K["nn.max_pool2d"]({ p }, { pool_size = { 2, 2 }, strides = { 2, 2 } }),
        { { { { 4, 8 }, { 0, 9 } } } }, "max_pool2d")
  close(K["nn.avg_pool2d"]({ p }, { pool_size = { 2, 2 }, strides = { 2, 2 } }),
        { { { { 2.5, 6.5 }, { -0.5, 3 } } } }, "avg_pool2d")
  local q = A({ { { { 1, 2 }, { 3, 4 } } } })
  close(K["nn.avg_pool2d"]({ q }, { pool_size = { 3, 3 }, padding = { 1, 1 },
                                    count_include_pad = true }),
        { { { { 10 / 9, 10 / 9 }, { 10 / 9, 10 / 9 } } } }, "avg_pool2d count_include_pad")
  close(K["nn.avg_pool2d"]({ q }, { pool_size = { 3, 3 }, padding = { 1, 1 } }),
        { { { { 2.5, 2.5 }, { 2.5, 2.5 } } } }, "avg_pool2d excluding pad")
  close(K["nn.max_pool2d"]({ A({ { { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } } } }) },
                           { pool_size = { 2, 2 }, strides = { 2, 2 }, ceil_mode = true }),
        { { { { 5, 6 }, { 8, 9 } } } }, "max_pool2d ceil_mode")
  close(K["nn.global_avg_pool2d"]({ p }, {}), { { { { 46 / 16 } } } }, "global_avg_pool2d")
  local ph = layers.permute(x2, "NCHW", "NHWC", { 1, 1, 2, 2 })
  close(K["nn.global_max_pool2d"]({ ph }, { layout = "NHWC" }), { { { { 2, 4 } } } },
        "global_max_pool2d NHWC")
  -- batch norm: (x - mean) / sqrt(var + eps) * gamma + beta, on axis 1
  local bn = K["nn.batch_norm"]({ A({ { 1, 2 } }), A({ 2, 1 }), A({ 0, 1 }), A({ 1, 0 }),
                                  A({ 4, 1 }) }, { epsilon = 0 })
  close(bn[1], { { 0, 3 } }, "batch_norm")
  bn = K["nn.batch_norm"]({ A({ { 3, 2 } }), A({ 2, 1 }), A({ 0, 1 }), A({ 1, 0 }), A({ 4, 1 }) },
                          { epsilon = 0, scale = false })
  close(bn[1], { { 1, 3 } }, "batch_norm scale=False")
  -- dense, bias_add, softmax, concatenate, flatten, broadcast add, layout_transform
  local d = K["nn.dense"]({ A({ { 1, 2 } }), A({ { 1, 1 }, { 2, -1 } }) }, {})
  close(d, { { 3, 0 } }, "dense")
  close(K["nn.bias_add"]({ d, A({ 0.5, -1 }) }, { axis = -1 }), { { 3.5, -1 } }, "bias_add")
  close(K["nn.softmax"]({ A({ { 0, math.log(3) } }) }, {}), { { 0.25, 0.75 } }, "softmax")
  close(K["concatenate"]({ x2, A({ { { { 9, 9 } } } }) }, { axis = 1 }),
        { { { { 1, 2 } }, { { 3, 4 } }, { { 9, 9 } } } }, "concatenate")
  close(K["nn.batch_flatten"]({ x2 }, {}), { { 1, 2, 3, 4 } }, "batch_flatten")
  close(K["add"]({ x2, A({ { { 10 } }, { { 20 } } }) }, {}),
        { { { { 11, 12 } }, { { 23, 24 } } } }, "broadcast add")
  close(K["nn.relu"]({ A({ -1, 0, 2 }) }, {}), { 0, 0, 2 }, "relu")
  close(K["layout_transform"]({ x2 }, { src_layout = "NCHW", dst_layout = "NHWC" }),
        { { { { 1, 3 }, { 2, 4 } } } }, "layout_transform")
  local blocked = K["layout_transform"]({ x2 }, { src_layout = "NCHW", dst_layout = "NCHW2c" })
  same_list(blocked:shape(), { 1, 1, 1, 2, 2 }, "NCHW2c shape")
  close(blocked, { { { { { 1, 3 }, { 2, 4 } } } } }, "layout_transform NCHW2c")
  close(K["layout_transform"]({ blocked }, { src_layout = "NCHW2c", dst_layout = "NCHW" }),
        { { { { 1, 2 } }, { { 3, 4 } } } }, "layout_transform back")
end

-- compare: names the worst element and fails on a real difference
do
  local ok, msg = reference.compare(A({ 1, 2, 3 }), A({ 1, 2, 3.01 }))
  assert(not ok and msg:find("1 of 3 elements differ"), tostring(msg))
  assert(reference.compare(A({ 1, 2, 3 }), A({ 1, 2, 3 + 1e-6 })))
  ok, msg = reference.compare(A({ 1, 2 }), A({ 1, 2, 3 }))
  assert(not ok and msg:find("shape mismatch"))
end

-- ---- a network as a table, evaluated by hand -------------------------------------------------

do
  local mod, params, ishape, oshape = networks.from_table({
    { "conv2d", name = "conv1", channels = 2, kernel_size = 1 },
    { "relu" },
    { "global_avg_pool2d", name = "gap" },
    { "batch_flatten" },
    { "dense", name = "fc", units = 1 },
  }, { input_shape = { 1, 1, 2, 2 } })
  same_list(ishape, { 1, 1, 2, 2 }, "table input")
  same_list(oshape, { 1, 1 }, "table output")
  local names = {}
  for i, p in ipairs(mod.main.params) do names[i] = p.name end
  same_list(names, { "data", "conv1_weight", "fc_weight", "fc_bias" }, "table params")
  params.conv1_weight = A({ { { { 2 } } }, { { { -1 } } } })
  params.fc_weight = A({ { 1, 1 } })
  params.fc_bias = A({ 0.5 })
  -- conv: 2x and -x; relu kills the second; mean of 2x = 5; + 0.5
  local out = reference.run(mod, params, { data = A({ { { { 1, 2 }, { 3, 4 } } } }) })
  close(out[1], { { 5.5 } }, "table network")

  -- residual with named inputs, batch norm, concatenate
  local mod2, params2 = networks.from_table({
    { "conv2d", name = "c1", channels = 4, kernel_size = 3, padding = 1 },
    { "batch_norm", name = "bn1" },
    { "relu", name = "a1" },
    { "conv2d", name = "c2", channels = 4, kernel_size = 3, padding = 1, use_bias = true },
    { "add", name = "res", inputs = { "c2", "a1" } },
    { "concatenate", name = "cat", inputs = { "res", "data" } },
    { "max_pool2d", pool_size = 2, strides = 2 },
  }, { input_shape = { 1, 4, 4, 4 }, seed = 5 })
  same_list(mod2.main.body.type.shape, { 1, 8, 2, 2 }, "table network 2")
  assert(params2.c2_bias and params2.bn1_moving_var)
  local x = nd.random_uniform({ 1, 4, 4, 4 }, { seed = 1 })
  local r = reference.run(mod2, params2, { data = x })[1]
  same_list(r:shape(), { 1, 8, 2, 2 }, "table network 2 value")
  -- the input half of the concatenation went through the max pool only
  local xv, rv = x:flat(), r:flat()
  approx(rv[16 + 1], math.max(xv[1], xv[2], xv[5], xv[6]), 1e-6, "pooled input")
end

-- ---- whole networks through the reference at reduced size ---------------------------------

local function softmax_ok(out, batch, what)
  same_list(out:shape(), { batch, 1000 }, what .. " output shape")
  local v = out:flat()
  for b = 0, batch - 1 do
    local s = 0
    for i = 1, 1000 do
      local p = v[b * 1000 + i]
      assert(p > 0 and p < 1, what .. ": probability out of range")
      s = s + p
    end
    approx(s, 1, 1e-4, what .. " softmax sum")
  end
end

-- NCHW and NHWC networks compute the same function (NHWC params are the NCHW ones transposed)
for _, name in ipairs { "resnet-18", "mobilenet" } do
  local m1, p1, s1 = networks.get_network(name, { image_size = 48 })
  local m2, p2, s2 = networks.get_network(name, { image_size = 48, layout = "NHWC" })
  local x = nd.random_uniform(s1, { low = -1, high = 1, seed = 11 })
  local xh = layers.permute(x, "NCHW", "NHWC", s2)
  local o1 = reference.run(m1, p1, { data = x })[1]
  local o2 = reference.run(m2, p2, { data = xh })[1]
  softmax_ok(o1, 1, name)
  local ok, msg = reference.compare(o2, o1, { rtol = 1e-5 })
  assert(ok, name .. " NHWC vs NCHW: " .. tostring(msg))
end

-- batch 2: each row is the network applied to its own sample
do
  local m, p, s = networks.get_network("squeezenet_v1.1", { image_size = 64, batch_size = 2 })
  local m1 = networks.get_network("squeezenet_v1.1", { image_size = 64, init_params = false })
  local x = nd.random_uniform(s, { low = -1, high = 1, seed = 12 })
  local out = reference.run(m, p, { data = x })[1]
  softmax_ok(out, 2, "squeezenet batch 2")
  local x1 = nd.array(x):reshape({ 2, 3 * 64 * 64 })
  local second = {}
  local xv = x1:flat()
  for i = 1, 3 * 64 * 64 do second[i] = xv[3 * 64 * 64 + i] end
  local o1 = reference.run(m1, p, { data = nd.array(second):reshape({ 1, 3, 64, 64 }) })[1]
  local ov, o1v = out:flat(), o1:flat()
  for i = 1, 1000 do approx(ov[1000 + i], o1v[i], 1e-5, "batch row 2") end
end

do -- inception at 75x75 (the head pool covers the final 1x1 map)
  local m, p, s = networks.get_network("inception_v3", { image_size = 75 })
  local x = nd.random_uniform(s, { low = -1, high = 1, seed = 13 })
  softmax_ok(reference.run(m, p, { data = x })[1], 1, "inception_v3")
end

if has_conv3d then -- resnet3d-18 on 2 frames of 34x34, both layouts compute the same function
  local m1, p1, s1 = networks.get_network("resnet3d-18", { image_size = 34, depth = 2 })
  local m2, p2, s2 = networks.get_network("resnet3d-18", { image_size = 34, depth = 2,
                                                          layout = "NDHWC" })
  same_list(s2, { 1, 2, 34, 34, 3 }, "resnet3d NDHWC input")
  local x = nd.random_uniform(s1, { low = -1, high = 1, seed = 15 })
  local o1 = reference.run(m1, p1, { data = x })[1]
  softmax_ok(o1, 1, "resnet3d-18")
  local o2 = reference.run(m2, p2, { data = layers.permute(x, "NCDHW", "NDHWC", s2) })[1]
  local ok, msg = reference.compare(o2, o1, { rtol = 1e-5 })
  assert(ok, "resnet3d NDHWC vs NCDHW: " .. tostring(msg))
end

print("test_networks: ok")
