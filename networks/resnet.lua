--- networks.resnet: pre-activation ResNet ("v2") as TVM's relay.testing.resnet
--- builds it (specs/networks.md §1).
--
--   local mod, params = require("networks.resnet").get_workload({num_layers = 18,
--       batch_size = 1, image_shape = {3, 224, 224}, layout = "NCHW"})
--
-- Every unit: act1 = relu(bn1(x)); convs without bias; a 1x1 projection
-- shortcut `sc` from act1 on every stage's first unit (stage 1 included);
-- out = add(last conv, shortcut). Head: bn1, relu, global_avg_pool2d,
-- batch_flatten, fc1 (dense + bias), softmax. All batch norms: eps 2e-5 on
-- the channel axis of the layout. Heights <= 28 select the CIFAR config,
-- heights <= 32 the 3x3 stem without bn0/relu/max pool (as in TVM).
local relay_mod = "tunelua.relay"
local layers = require "networks.layers"

local resnet = {}

-- One unit; o: conv (the builder's method, "conv2d" | "conv3d"), dl, kl (data and kernel
-- layouts), axis (the batch norms' axis; nil: batch_norm's default, as resnet_3d has it).
local function residual_unit(b, x, nf, stride, dim_match, name, bottle_neck, o)
  local R = require(relay_mod)
  local dl, kl = o.dl, o.kl
  local function conv(y, suffix, channels, k, st, pad)
    return b[o.conv](b, y, { name = name .. suffix, channels = channels, kernel_size = k,
                             strides = st, padding = pad, data_layout = dl, kernel_layout = kl })
  end
  local function bn_relu(y, suffix)
    return R.nn.relu(b:batch_norm(y, { name = name .. suffix, epsilon = 2e-5, axis = o.axis }))
  end
  local act1 = bn_relu(x, "_bn1")
  local body
  if bottle_neck then
    local q = math.floor(nf * 0.25)
    local a2 = bn_relu(conv(act1, "_conv1", q, 1, stride, 0), "_bn2")
    local a3 = bn_relu(conv(a2, "_conv2", q, 3, 1, 1), "_bn3")
    body = conv(a3, "_conv3", nf, 1, 1, 0)
  else
    local a2 = bn_relu(conv(act1, "_conv1", nf, 3, stride, 1), "_bn2")
    body = conv(a2, "_conv2", nf, 3, 1, 1)
  end
  local shortcut = x
  if not dim_match then shortcut = conv(act1, "_sc", nf, 1, stride, 0) end
  return R.add(body, shortcut)
end

--- The residual stages over body (shared with networks.resnet_3d): units[i] units of
--- filters[i + 1] filters, the first of each stage (but stage 1) with stride 2 in every
--- spatial dimension; o as residual_unit's, with dims (2 or 3).
function resnet.stages(b, body, units, filters, bottle_neck, o)
  local function strides(v)
    local t = {}
    for k = 1, o.dims do t[k] = v end
    return t
  end
  for i = 1, #units do
    for j = 1, units[i] do
      local s = (j == 1 and i > 1) and 2 or 1
      body = residual_unit(b, body, filters[i + 1], strides(s), j > 1,
                           string.format("stage%d_unit%d", i, j), bottle_neck, o)
    end
  end
  return body
end

--- The head after the pooling (shared with networks.resnet_3d): batch_flatten, fc1 (dense +
--- bias, opts.num_classes), softmax; returns mod, params.
function resnet.classifier(b, body, opts)
  local R = require(relay_mod)
  body = R.nn.batch_flatten(body)
  body = b:dense_add_bias(body, { name = "fc1", units = opts.num_classes or 1000 })
  body = R.nn.softmax(body, { axis = -1 })
  return b:finish(body, opts)
end

--- Units per stage, filter list and block kind for (num_layers, height).
function resnet.config(num_layers, height)
  if height <= 28 then
    if (num_layers - 2) % 9 == 0 and num_layers >= 164 then
      local u = (num_layers - 2) / 9
      return { u, u, u }, { 16, 64, 128, 256 }, true
    elseif (num_layers - 2) % 6 == 0 and num_layers < 164 then
      local u = (num_layers - 2) / 6
      return { u, u, u }, { 16, 16, 32, 64 }, false
    end
    error(string.format("resnet: no CIFAR configuration for %d layers (image height %d <= 28 " ..
                        "needs 6n+2 or 9n+2 >= 164 layers)", num_layers, height), 3)
  end
  local units = ({ [18] = { 2, 2, 2, 2 }, [34] = { 3, 4, 6, 3 }, [50] = { 3, 4, 6, 3 },
                   [101] = { 3, 4, 23, 3 }, [152] = { 3, 8, 36, 3 }, [200] = { 3, 24, 36, 3 },
                   [269] = { 3, 30, 48, 8 } })[num_layers]
  if not units then
    error(string.format("resnet: unsupported number of layers %s (expected 18, 34, 50, 101, " ..
                        "152, 200 or 269)", tostring(num_layers)), 3)
  end
  if num_layers >= 50 then return units, { 64, 256, 512, 1024, 2048 }, true end
  return units, { 64, 64, 128, 256, 512 }, false
end

--- opts: num_layers (18), batch_size (1), num_classes (1000), image_shape
--- ({3,224,224}; pass {224,224,3} for NHWC), layout ("NCHW"|"NHWC"), dtype, seed,
--- init_params. Returns mod, params.
function resnet.get_workload(opts)
  local R = require(relay_mod)
  opts = opts or {}
  local layout = opts.layout or "NCHW"
  if layout ~= "NCHW" and layout ~= "NHWC" then
    error("resnet: layout must be NCHW or NHWC, got " .. tostring(layout), 2)
  end
  local image_shape = opts.image_shape or (layout == "NCHW" and { 3, 224, 224 } or { 224, 224, 3 })
  local height = layout == "NCHW" and image_shape[2] or image_shape[1]
  local units, filters, bottle_neck = resnet.config(opts.num_layers or 18, height)
  local dl = layout
  local kl = layout == "NCHW" and "OIHW" or "HWIO"
  local axis = dl:find("C") - 1
  local b = layers.builder(opts)
  local data_shape = { opts.batch_size or 1, image_shape[1], image_shape[2], image_shape[3] }
  local data = b:input("data", data_shape)
  local body = b:batch_norm(data, { name = "bn_data", epsilon = 2e-5, axis = axis, scale = false })
  if height <= 32 then
    body = b:conv2d(body, { name = "conv0", channels = filters[1], kernel_size = 3, strides = 1,
                            padding = 1, data_layout = dl, kernel_layout = kl })
  else
    body = b:conv2d(body, { name = "conv0", channels = filters[1], kernel_size = 7, strides = 2,
                            padding = 3, data_layout = dl, kernel_layout = kl })
    body = R.nn.relu(b:batch_norm(body, { name = "bn0", epsilon = 2e-5, axis = axis }))
    body = R.nn.max_pool2d(body, { pool_size = { 3, 3 }, strides = { 2, 2 }, padding = { 1, 1 },
                                   layout = dl })
  end
  body = resnet.stages(b, body, units, filters, bottle_neck,
                       { conv = "conv2d", dims = 2, dl = dl, kl = kl, axis = axis })
  body = R.nn.relu(b:batch_norm(body, { name = "bn1", epsilon = 2e-5, axis = axis }))
  body = R.nn.global_avg_pool2d(body, { layout = dl })
  return resnet.classifier(b, body, opts)
end

return resnet
