--- networks.resnet_3d: TVM's relay.testing.resnet_3d (specs/networks.md §1b).
--
-- The ResNet of networks.resnet with conv3d: default image {3, 16, 112, 112}
-- in NCDHW (kernel OIDHW) or {16, 112, 112, 3} in NDHWC (kernel DHWIO).
-- As in TVM every batch_norm is made without an axis, so it normalizes
-- axis 1 in both layouts (D in NDHWC). Stem: conv3d 3x7x7, stride (1,2,2),
-- pad (1,3,3), bn0, relu, no max pool. Head: global_avg_pool3d.
local layers = require "networks.layers"
local resnet = require "networks.resnet"

local resnet_3d = {}

--- opts: num_layers (18), batch_size, num_classes, image_shape, layout ("NCDHW"|"NDHWC"),
--- dtype, seed, init_params. Returns mod, params.
function resnet_3d.get_workload(opts)
  local R = require "tunelua.relay"
  opts = opts or {}
  local layout = opts.layout or "NCDHW"
  if layout ~= "NCDHW" and layout ~= "NDHWC" then
    error("resnet_3d: layout must be NCDHW or NDHWC, got " .. tostring(layout), 2)
  end
  local image_shape = opts.image_shape or
                      (layout == "NCDHW" and { 3, 16, 112, 112 } or { 16, 112, 112, 3 })
  -- TVM's get_net reads image_shape[2] (0-based): H in NCDHW, W in NDHWC (both 112)
  local units, filters, bottle_neck = resnet.config(opts.num_layers or 18, image_shape[3])
  local dl = layout
  local kl = layout == "NCDHW" and "OIDHW" or "DHWIO"
  local b = layers.builder(opts)
  local data_shape = { opts.batch_size or 1 }
  for i = 1, 4 do data_shape[i + 1] = image_shape[i] end
  local data = b:input("data", data_shape)
  local height = layout == "NCDHW" and data_shape[4] or data_shape[3]
  local body = b:batch_norm(data, { name = "bn_data", epsilon = 2e-5, scale = false })
  if height <= 32 then
    body = b:conv3d(body, { name = "conv0", channels = filters[1], kernel_size = 3, strides = 1,
                            padding = 1, data_layout = dl, kernel_layout = kl })
  else
    body = b:conv3d(body, { name = "conv0", channels = filters[1], kernel_size = { 3, 7, 7 },
                            strides = { 1, 2, 2 }, padding = { 1, 3, 3 }, data_layout = dl,
                            kernel_layout = kl })
    body = R.nn.relu(b:batch_norm(body, { name = "bn0", epsilon = 2e-5 }))
  end
  body = resnet.stages(b, body, units, filters, bottle_neck,
                       { conv = "conv3d", dims = 3, dl = dl, kl = kl })
  body = R.nn.relu(b:batch_norm(body, { name = "bn1", epsilon = 2e-5 }))
  if R.nn.global_avg_pool3d then
    body = R.nn.global_avg_pool3d(body, { layout = dl })
  elseif R.op.get("nn.global_avg_pool3d") then
    body = R.call("nn.global_avg_pool3d", { body }, { layout = dl })
  else
    -- no global_avg_pool3d op in relay yet: the same value as a full-window avg_pool3d
    local s = layers.shape(body)
    local sp = dl == "NCDHW" and { s[3], s[4], s[5] } or { s[2], s[3], s[4] }
    body = R.nn.avg_pool3d(body, { pool_size = sp, strides = { 1, 1, 1 },
                                   padding = { 0, 0, 0 }, layout = dl })
  end
  return resnet.classifier(b, body, opts)
end

return resnet_3d
