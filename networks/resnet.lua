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

local function residual_unit(b, x, nf, stride, dim_match, name, bottle_neck, dl, kl)
  local R = require(relay_mod)
  local axis = dl:find("C") - 1
  local act1 = R.nn.relu(b:batch_norm(x, { name = name .. "_bn1", epsilon = 2e-5, axis = axis }))
  local body
  if bottle_neck then
    local q = math.floor(nf * 0.25)
    local c1 = b:conv2d(act1, { name = name .. "_conv1", channels = q, kernel_size = 1,
                                strides = stride, padding = 0, data_layout = dl,
                                kernel_layout = kl })
    local a2 = R.nn.relu(b:batch_norm(c1, { name = name .. "_bn2", epsilon = 2e-5, axis = axis }))
    local c2 = b:conv2d(a2, { name = name .. "_conv2", channels = q, kernel_size = 3,
                              strides = 1, padding = 1, data_layout = dl, kernel_layout = kl })
    local a3 = R.nn.relu(b:batch_norm(c2, { name = name .. "_bn3", epsilon = 2e-5, axis = axis }))
    body = b:conv2d(a3, { name = name .. "_conv3", channels = nf, kernel_size = 1, strides = 1,
                          padding = 0, data_layout = dl, kernel_layout = kl })
  else
    local c1 = b:conv2d(act1, { name = name .. "_conv1", channels = nf, kernel_size = 3,
                                strides = stride, padding = 1, data_layout = dl,
                                kernel_layout = kl })
    local a2 = R.nn.relu(b:batch_norm(c1, { name = name .. "_bn2", epsilon = 2e-5, axis = axis }))
    body = b:conv2d(a2, { name = name .. "_conv2", channels = nf, kernel_size = 3, strides = 1,
                          padding = 1, data_layout = dl, kernel_layout = kl })
  end
  local shortcut = x
  if not dim_match then
    shortcut = b:conv2d(act1, { name = name .. "_sc", channels = nf, kernel_size = 1,
                                strides = stride, padding = 0, data_layout = dl,
                                kernel_layout = kl })
  end
  return R.add(body, shortcut)
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
  for i = 1, #units do
    local s = i == 1 and 1 or 2
    body = residual_unit(b, body, filters[i + 1], { s, s }, false,
                         string.format("stage%d_unit%d", i, 1), bottle_neck, dl, kl)
    for j = 2, units[i] do
      body = residual_unit(b, body, filters[i + 1], { 1, 1 }, true,
                           string.format("stage%d_unit%d", i, j), bottle_neck, dl, kl)
    end
  end
  body = R.nn.relu(b:batch_norm(body, { name = "bn1", epsilon = 2e-5, axis = axis }))
  body = R.nn.global_avg_pool2d(body, { layout = dl })
  body = R.nn.batch_flatten(body)
  body = b:dense_add_bias(body, { name = "fc1", units = opts.num_classes or 1000 })
  body = R.nn.softmax(body, { axis = -1 })
  return b:finish(body, opts)
end

return resnet
