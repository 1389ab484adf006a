--- networks.squeezenet: SqueezeNet 1.0 / 1.1 as TVM's relay.testing.squeezenet
--- builds it (specs/networks.md §4). NCHW only.
--
-- Every conv is conv2d + bias_add(<prefix>_conv_bias) + relu. A fire module
-- is a 1x1 squeeze `<p>_input`, then `<p>_left` 1x1 and `<p>_right` 3x3/p1
-- on the squeeze output, concatenated on axis 1 (left first). Max pools are
-- 3x3/s2/p0 in floor mode. Head: dropout(0.5), conv_final 1x1 + bias + relu,
-- global_avg_pool2d, batch_flatten, softmax.
local layers = require "networks.layers"

local squeezenet = {}

local function fire_conv(b, x, channels, k, pad, prefix)
  local R = require "tunelua.relay"
  x = b:conv2d(x, { name = prefix .. "_conv", channels = channels, kernel_size = k,
                    strides = 1, padding = pad, data_layout = "NCHW", kernel_layout = "OIHW" })
  x = b:bias_add(x, prefix .. "_conv_bias", 1)
  return R.nn.relu(x)
end

local function fire(b, x, s, e1, e3, prefix)
  local R = require "tunelua.relay"
  x = fire_conv(b, x, s, 1, 0, prefix .. "_input")
  local left = fire_conv(b, x, e1, 1, 0, prefix .. "_left")
  local right = fire_conv(b, x, e3, 3, 1, prefix .. "_right")
  return R.concatenate({ left, right }, { axis = 1 })
end

local function pool(x)
  local R = require "tunelua.relay"
  return R.nn.max_pool2d(x, { pool_size = { 3, 3 }, strides = { 2, 2 }, padding = { 0, 0 },
                              layout = "NCHW" })
end

--- opts: version ("1.0" | "1.1"), batch_size, num_classes, image_shape, dtype, seed,
--- init_params. Returns mod, params.
function squeezenet.get_workload(opts)
  local R = require "tunelua.relay"
  opts = opts or {}
  local version = opts.version or "1.0"
  if version ~= "1.0" and version ~= "1.1" then
    error("squeezenet: version must be '1.0' or '1.1', got " .. tostring(version), 2)
  end
  local image_shape = opts.image_shape or { 3, 224, 224 }
  local b = layers.builder(opts)
  local x = b:input("data", { opts.batch_size or 1, image_shape[1], image_shape[2],
                              image_shape[3] })
  local function conv1(ch, k, s, p)
    x = b:conv2d(x, { name = "conv1", channels = ch, kernel_size = k, strides = s, padding = p,
                      data_layout = "NCHW", kernel_layout = "OIHW" })
    x = R.nn.relu(b:bias_add(x, "conv1_bias", 1))
  end
  if version == "1.0" then
    conv1(96, 7, 2, 3)
    x = pool(x)
    x = fire(b, x, 16, 64, 64, "fire1")
    x = fire(b, x, 16, 64, 64, "fire2")
    x = fire(b, x, 32, 128, 128, "fire3")
    x = pool(x)
    x = fire(b, x, 32, 128, 128, "fire4")
    x = fire(b, x, 48, 192, 192, "fire5")
    x = fire(b, x, 48, 192, 192, "fire6")
    x = fire(b, x, 64, 256, 256, "fire7")
    x = pool(x)
    x = fire(b, x, 64, 256, 256, "fire8")
  else
    conv1(64, 3, 2, 1)
    x = pool(x)
    x = fire(b, x, 16, 64, 64, "fire1")
    x = fire(b, x, 16, 64, 64, "fire2")
    x = pool(x)
    x = fire(b, x, 32, 128, 128, "fire3")
    x = fire(b, x, 32, 128, 128, "fire4")
    x = pool(x)
    x = fire(b, x, 48, 192, 192, "fire5")
    x = fire(b, x, 48, 192, 192, "fire6")
    x = fire(b, x, 64, 256, 256, "fire7")
    x = fire(b, x, 64, 256, 256, "fire8")
  end
  x = R.nn.dropout(x, { rate = 0.5 })
  x = b:conv2d(x, { name = "conv_final", channels = opts.num_classes or 1000, kernel_size = 1,
                    strides = 1, padding = 0, data_layout = "NCHW", kernel_layout = "OIHW" })
  x = R.nn.relu(b:bias_add(x, "conv_final_bias", 1))
  x = R.nn.global_avg_pool2d(x, { layout = "NCHW" })
  x = R.nn.batch_flatten(x)
  x = R.nn.softmax(x, { axis = -1 })
  return b:finish(x, opts)
end

return squeezenet
