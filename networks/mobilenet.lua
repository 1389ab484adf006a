--- networks.mobilenet: MobileNet v1 as TVM's relay.testing.mobilenet builds it
--- (specs/networks.md §2).
--
-- conv_block_1 (3x3/s2 conv, batch norm *without an axis* -- axis 1 in both
-- layouts, so in NHWC it normalizes over H and its vars have 112 entries,
-- as in TVM -- relu), 13 separable blocks (depthwise 3x3 + BN + relu,
-- pointwise 1x1 + BN + relu, BN on the channel axis), global_avg_pool2d,
-- batch_flatten, dense (fc_weight) + bias_add (fc_bias, axis 1), softmax.
-- Depthwise kernels are (C,1,3,3) OIHW in NCHW and (3,3,C,1) HWOI in NHWC.
local layers = require "networks.layers"

local mobilenet = {}

local function conv_block(b, x, name, channels, strides, layout)
  local R = require "tunelua.relay"
  local conv = b:conv2d(x, { name = name .. "_conv", channels = channels, kernel_size = 3,
                             strides = strides, padding = 1, data_layout = layout,
                             kernel_layout = layers.conv_kernel_layout(layout) })
  local bn = b:batch_norm(conv, { name = name .. "_bn", epsilon = 1e-5 })  -- axis 1 (sic)
  return R.nn.relu(bn)
end

local function separable_conv_block(b, x, name, dw, pw, downsample, layout)
  local R = require "tunelua.relay"
  local strides = downsample and 2 or 1
  local wshape = layout == "NCHW" and { dw, 1, 3, 3 } or { 3, 3, dw, 1 }
  local dkl = layers.conv_kernel_layout(layout, true)
  local weight = b:var(name .. "_weight", wshape, dkl)
  local axis = layout:find("C") - 1
  local c1 = b:conv2d(x, { name = name .. "_depthwise_conv1", weight = weight, channels = dw,
                           groups = dw, kernel_size = 3, strides = strides, padding = 1,
                           data_layout = layout, kernel_layout = dkl })
  local a1 = R.nn.relu(b:batch_norm(c1, { name = name .. "_bn1", epsilon = 1e-5, axis = axis }))
  local c2 = b:conv2d(a1, { name = name .. "_conv2", channels = pw, kernel_size = 1, strides = 1,
                            padding = 0, data_layout = layout,
                            kernel_layout = layers.conv_kernel_layout(layout) })
  return R.nn.relu(b:batch_norm(c2, { name = name .. "_bn2", epsilon = 1e-5, axis = axis }))
end

--- opts: batch_size, num_classes, image_shape ({3,224,224}; {224,224,3} for NHWC),
--- layout, dtype, alpha (1.0), is_shallow, seed, init_params. Returns mod, params.
function mobilenet.get_workload(opts)
  local R = require "tunelua.relay"
  opts = opts or {}
  local layout = opts.layout or "NCHW"
  if layout ~= "NCHW" and layout ~= "NHWC" then
    error("mobilenet: layout must be NCHW or NHWC, got " .. tostring(layout), 2)
  end
  local image_shape = opts.image_shape or (layout == "NCHW" and { 3, 224, 224 } or { 224, 224, 3 })
  local alpha = opts.alpha or 1.0
  local function c(n) return math.floor(n * alpha) end
  local b = layers.builder(opts)
  local data = b:input("data", { opts.batch_size or 1, image_shape[1], image_shape[2],
                                 image_shape[3] })
  local body = conv_block(b, data, "conv_block_1", c(32), 2, layout)
  local blocks = {
    { 32, 64, false }, { 64, 128, true }, { 128, 128, false }, { 128, 256, true },
    { 256, 256, false }, { 256, 512, true },
  }
  if opts.is_shallow then
    blocks[#blocks + 1] = { 512, 1024, true }
    blocks[#blocks + 1] = { 1024, 1024, true }
  else
    for _ = 7, 11 do blocks[#blocks + 1] = { 512, 512, false } end
    blocks[#blocks + 1] = { 512, 1024, true }
    blocks[#blocks + 1] = { 1024, 1024, false }
  end
  for i, blk in ipairs(blocks) do
    body = separable_conv_block(b, body, "separable_conv_block_" .. i, c(blk[1]), c(blk[2]),
                                blk[3], layout)
  end
  body = R.nn.global_avg_pool2d(body, { layout = layout })
  body = R.nn.batch_flatten(body)
  body = b:dense(body, { name = "fc", units = opts.num_classes or 1000 })
  body = b:bias_add(body, "fc_bias", 1)
  body = R.nn.softmax(body, { axis = -1 })
  return b:finish(body, opts)
end

return mobilenet
