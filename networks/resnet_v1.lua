--- networks.resnet_v1: the post-activation ResNet v1 of the Gluon model zoo
--- (resnet18_v1, resnet34_v1, resnet50_v1), as relay.frontend.from_mxnet emits it
--- (specs/networks.md §6); the network VTA's tutorials quantize and pack.
--
--   local mod, params = require("networks.resnet_v1").get_workload({num_layers = 18})
--
-- Stem: conv0 7x7/2 pad 3 (no bias), batch norm, relu, max_pool2d 3/2/1. Stages of
-- 64, 128, 256, 512 channels (bottleneck: 256, 512, 1024, 2048), stride 2 on the first
-- block of stages 2-4. A block's shortcut is its input, or a 1x1/stride conv (no bias) and
-- a batch norm when the channel count changes (so resnet18_v1 and resnet34_v1 have none in
-- stage 1); out = relu(shortcut + body). Basic block (18, 34): conv 3x3/stride, bn, relu,
-- conv 3x3, bn; bottleneck (50): conv 1x1/stride (with bias, as Gluon's), bn, relu,
-- conv 3x3 (no bias), bn, relu, conv 1x1 (with bias), bn. Head: global_avg_pool2d,
-- batch_flatten, dense with bias: the logits (Gluon's models end there, no softmax).
-- Batch norms: eps 1e-5 on axis 1. NCHW only. Parameter names are Gluon's
-- (resnetv10_conv0_weight, resnetv10_stage1_batchnorm0_gamma, ..., resnetv10_dense0_bias;
-- per-stage counters in creation order); values follow networks.layers' rules.
local layers = require "networks.layers"

local resnet_v1 = {}

local PREFIX = "resnetv10_"

local CONFIG = {
  [18] = { units = { 2, 2, 2, 2 }, channels = { 64, 64, 128, 256, 512 }, bottleneck = false },
  [34] = { units = { 3, 4, 6, 3 }, channels = { 64, 64, 128, 256, 512 }, bottleneck = false },
  [50] = { units = { 3, 4, 6, 3 }, channels = { 64, 256, 512, 1024, 2048 }, bottleneck = true },
}

--- The layers supported (18, 34, 50).
function resnet_v1.depths() return { 18, 34, 50 } end

-- Names of one prefix's convs and batch norms in creation order.
local function counter(prefix)
  local n = { conv = 0, batchnorm = 0 }
  return function(kind)
    local name = string.format("%s%s%s%d", PREFIX, prefix, kind, n[kind])
    n[kind] = n[kind] + 1
    return name
  end
end

local function conv(b, x, name, channels, k, stride, pad, bias)
  local y = b:conv2d(x, { name = name, channels = channels, kernel_size = k, strides = stride,
                          padding = pad, data_layout = "NCHW", kernel_layout = "OIHW" })
  if bias then y = b:bias_add(y, name .. "_bias", 1) end
  return y
end

-- batch norm with Gluon's parameter names (gamma, beta, running_mean, running_var)
local function bn(b, x, name)
  local R = require "tunelua.relay"
  local c = layers.shape(x)[2]
  local g = b:var(name .. "_gamma", { c })
  local be = b:var(name .. "_beta", { c })
  local m = b:var(name .. "_running_mean", { c })
  local v = b:var(name .. "_running_var", { c })
  return R.tuple_get(R.nn.batch_norm(x, g, be, m, v, { axis = 1, epsilon = 1e-5 }), 0)
end

local function block(b, x, next_name, channels, stride, downsample, bottleneck)
  local R = require "tunelua.relay"
  local body
  if bottleneck then
    local q = math.floor(channels / 4)
    body = R.nn.relu(bn(b, conv(b, x, next_name("conv"), q, 1, stride, 0, true), next_name("batchnorm")))
    body = R.nn.relu(bn(b, conv(b, body, next_name("conv"), q, 3, 1, 1), next_name("batchnorm")))
    body = bn(b, conv(b, body, next_name("conv"), channels, 1, 1, 0, true), next_name("batchnorm"))
  else
    body = R.nn.relu(bn(b, conv(b, x, next_name("conv"), channels, 3, stride, 1), next_name("batchnorm")))
    body = bn(b, conv(b, body, next_name("conv"), channels, 3, 1, 1), next_name("batchnorm"))
  end
  local shortcut = x
  if downsample then
    shortcut = bn(b, conv(b, x, next_name("conv"), channels, 1, stride, 0), next_name("batchnorm"))
  end
  return R.nn.relu(R.add(shortcut, body))
end

--- opts: num_layers (18 | 34 | 50), batch_size (1), num_classes (1000), image_shape
--- ({3, 224, 224}), dtype, seed, init, init_params. Returns mod, params.
function resnet_v1.get_workload(opts)
  local R = require "tunelua.relay"
  opts = opts or {}
  local depth = opts.num_layers or 18
  local cfg = CONFIG[depth]
  if not cfg then
    error(string.format("resnet_v1: unsupported number of layers %s (expected 18, 34 or 50)",
                        tostring(depth)), 2)
  end
  local image_shape = opts.image_shape or { 3, 224, 224 }
  local b = layers.builder(opts)
  local x = b:input("data", { opts.batch_size or 1, image_shape[1], image_shape[2], image_shape[3] })
  local top = counter("")
  local y = conv(b, x, top("conv"), cfg.channels[1], 7, 2, 3)
  y = R.nn.relu(bn(b, y, top("batchnorm")))
  y = R.nn.max_pool2d(y, { pool_size = { 3, 3 }, strides = { 2, 2 }, padding = { 1, 1 } })
  local in_ch = cfg.channels[1]
  for i, n in ipairs(cfg.units) do
    local ch = cfg.channels[i + 1]
    local next_name = counter(string.format("stage%d_", i))
    for j = 1, n do
      local stride = (j == 1 and i > 1) and 2 or 1
      y = block(b, y, next_name, ch, stride, j == 1 and ch ~= in_ch, cfg.bottleneck)
    end
    in_ch = ch
  end
  y = R.nn.global_avg_pool2d(y)
  y = R.nn.batch_flatten(y)
  y = b:dense_add_bias(y, { name = PREFIX .. "dense0", units = opts.num_classes or 1000 })
  return b:finish(y, opts)
end

return resnet_v1
