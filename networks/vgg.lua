--- networks.vgg: VGG 11/13/16/19 as TVM's relay.testing.vgg builds it
--- (specs/networks.md §3). NCHW only.
--
-- Each conv `conv{i}_{j}`: 3x3/s1/p1, bias_add(conv{i}_{j}_bias, axis 1),
-- optional batch norm `bn{i}_{j}` (axis 1, eps 1e-5), relu; a 2x2/s2 max
-- pool after each block. Classifier: batch_flatten, fc6 (4096) relu
-- dropout(0.5), fc7 (4096) relu dropout(0.5), fc8 (num_classes), softmax.
local layers = require "networks.layers"

local vgg = {}

vgg.spec = {
  [11] = { 1, 1, 2, 2, 2 },
  [13] = { 2, 2, 2, 2, 2 },
  [16] = { 2, 2, 3, 3, 3 },
  [19] = { 2, 2, 4, 4, 4 },
}

--- opts: num_layers (11), batch_norm (false), batch_size, num_classes, image_shape
--- ({3,224,224}), dtype, seed, init_params. Returns mod, params.
function vgg.get_workload(opts)
  local R = require "tunelua.relay"
  opts = opts or {}
  local n = opts.num_layers or 11
  local per_block = vgg.spec[n]
  if not per_block then
    error(string.format("vgg: unsupported number of layers %s (expected 11, 13, 16 or 19)",
                        tostring(n)), 2)
  end
  local filters = { 64, 128, 256, 512, 512 }
  local image_shape = opts.image_shape or { 3, 224, 224 }
  local b = layers.builder(opts)
  local x = b:input("data", { opts.batch_size or 1, image_shape[1], image_shape[2],
                              image_shape[3] })
  for i, num in ipairs(per_block) do
    for j = 1, num do
      local name = string.format("conv%d_%d", i, j)
      x = b:conv2d(x, { name = name, channels = filters[i], kernel_size = 3, padding = 1,
                        strides = 1, data_layout = "NCHW", kernel_layout = "OIHW" })
      x = b:bias_add(x, name .. "_bias", 1)
      if opts.batch_norm then
        x = b:batch_norm(x, { name = string.format("bn%d_%d", i, j), epsilon = 1e-5, axis = 1 })
      end
      x = R.nn.relu(x)
    end
    x = R.nn.max_pool2d(x, { pool_size = { 2, 2 }, strides = { 2, 2 }, padding = { 0, 0 },
                             layout = "NCHW" })
  end
  x = R.nn.batch_flatten(x)
  x = b:dense_add_bias(x, { name = "fc6", units = 4096 })
  x = R.nn.dropout(R.nn.relu(x), { rate = 0.5 })
  x = b:dense_add_bias(x, { name = "fc7", units = 4096 })
  x = R.nn.dropout(R.nn.relu(x), { rate = 0.5 })
  x = b:dense_add_bias(x, { name = "fc8", units = opts.num_classes or 1000 })
  x = R.nn.softmax(x, { axis = -1 })
  return b:finish(x, opts)
end

return vgg
