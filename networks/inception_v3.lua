--- networks.inception_v3: Inception v3 as TVM's relay.testing.inception_v3
--- builds it (specs/networks.md §5). NCHW only, default image {3, 299, 299}.
--
-- Conv(...) = conv2d `<name><suffix>_conv1` (no bias) + batch norm
-- `<name><suffix>_bn` (scale=False, eps 2e-5, axis 1) + relu. Average pools
-- count padding. Blocks 7A (mixed, mixed_1, mixed_2), 7B (mixed_3), 7C
-- (mixed_4..7), 7D (mixed_8), 7E (mixed_9 avg, mixed_10 max), then an 8x8
-- average pool, batch_flatten, dense fc1_weight + bias_add fc2_bias (sic),
-- softmax. At another image size the head pool takes the whole final
-- feature map (8x8 at 299), so smaller images still build.
local layers = require "networks.layers"

local inception = {}

local function Conv(b, x, nf, o)
  local R = require "tunelua.relay"
  o = o or {}
  local full = o.name .. (o.suffix or "")
  x = b:conv2d(x, { name = full .. "_conv1", channels = nf, kernel_size = o.kernel or { 1, 1 },
                    strides = o.stride or { 1, 1 }, padding = o.pad or { 0, 0 },
                    data_layout = "NCHW", kernel_layout = "OIHW" })
  x = b:batch_norm(x, { name = full .. "_bn", epsilon = 2e-5, scale = false, axis = 1 })
  return R.nn.relu(x)
end

local function Pooling(x, kernel, stride, pad, pool_type)
  local R = require "tunelua.relay"
  if pool_type == "max" then
    return R.nn.max_pool2d(x, { pool_size = kernel, strides = stride, padding = pad,
                                layout = "NCHW" })
  end
  return R.nn.avg_pool2d(x, { pool_size = kernel, strides = stride, padding = pad,
                              layout = "NCHW", count_include_pad = true })
end

local function concat(list)
  return require("tunelua.relay").concatenate(list, { axis = 1 })
end

local function block7A(b, x, n1, n3r, n3a, n3b, n5r, n5, pool, proj, name)
  local t1 = Conv(b, x, n1, { name = name .. "_conv" })
  local t5 = Conv(b, x, n5r, { name = name .. "_tower", suffix = "_conv" })
  t5 = Conv(b, t5, n5, { kernel = { 5, 5 }, pad = { 2, 2 }, name = name .. "_tower",
                         suffix = "_conv_1" })
  local t3 = Conv(b, x, n3r, { name = name .. "_tower_1", suffix = "_conv" })
  t3 = Conv(b, t3, n3a, { kernel = { 3, 3 }, pad = { 1, 1 }, name = name .. "_tower_1",
                          suffix = "_conv_1" })
  t3 = Conv(b, t3, n3b, { kernel = { 3, 3 }, pad = { 1, 1 }, name = name .. "_tower_1",
                          suffix = "_conv_2" })
  local p = Pooling(x, { 3, 3 }, { 1, 1 }, { 1, 1 }, pool)
  local cp = Conv(b, p, proj, { name = name .. "_tower_2", suffix = "_conv" })
  return concat({ t1, t5, t3, cp })
end

local function block7B(b, x, n3, nd3r, nd3a, nd3b, pool, name)
  local t3 = Conv(b, x, n3, { kernel = { 3, 3 }, pad = { 0, 0 }, stride = { 2, 2 },
                             name = name .. "_conv" })
  local td = Conv(b, x, nd3r, { name = name .. "_tower", suffix = "_conv" })
  td = Conv(b, td, nd3a, { kernel = { 3, 3 }, pad = { 1, 1 }, stride = { 1, 1 },
                           name = name .. "_tower", suffix = "_conv_1" })
  td = Conv(b, td, nd3b, { kernel = { 3, 3 }, pad = { 0, 0 }, stride = { 2, 2 },
                           name = name .. "_tower", suffix = "_conv_2" })
  local p = Pooling(x, { 3, 3 }, { 2, 2 }, { 0, 0 }, pool)
  return concat({ t3, td, p })
end

local function block7C(b, x, n1, nd7r, nd7a, nd7b, nq7r, nq7a, nq7b, nq7c, nq7d, pool, proj,
                       name)
  local t1 = Conv(b, x, n1, { kernel = { 1, 1 }, name = name .. "_conv" })
  local td = Conv(b, x, nd7r, { name = name .. "_tower", suffix = "_conv" })
  td = Conv(b, td, nd7a, { kernel = { 1, 7 }, pad = { 0, 3 }, name = name .. "_tower",
                           suffix = "_conv_1" })
  td = Conv(b, td, nd7b, { kernel = { 7, 1 }, pad = { 3, 0 }, name = name .. "_tower",
                           suffix = "_conv_2" })
  local tq = Conv(b, x, nq7r, { name = name .. "_tower_1", suffix = "_conv" })
  tq = Conv(b, tq, nq7a, { kernel = { 7, 1 }, pad = { 3, 0 }, name = name .. "_tower_1",
                           suffix = "_conv_1" })
  tq = Conv(b, tq, nq7b, { kernel = { 1, 7 }, pad = { 0, 3 }, name = name .. "_tower_1",
                           suffix = "_conv_2" })
  tq = Conv(b, tq, nq7c, { kernel = { 7, 1 }, pad = { 3, 0 }, name = name .. "_tower_1",
                           suffix = "_conv_3" })
  tq = Conv(b, tq, nq7d, { kernel = { 1, 7 }, pad = { 0, 3 }, name = name .. "_tower_1",
                           suffix = "_conv_4" })
  local p = Pooling(x, { 3, 3 }, { 1, 1 }, { 1, 1 }, pool)
  local cp = Conv(b, p, proj, { kernel = { 1, 1 }, name = name .. "_tower_2", suffix = "_conv" })
  return concat({ t1, td, tq, cp })
end

local function block7D(b, x, n3r, n3, nd7r, nd7a, nd7b, nd73, pool, name)
  local t3 = Conv(b, x, n3r, { name = name .. "_tower", suffix = "_conv" })
  t3 = Conv(b, t3, n3, { kernel = { 3, 3 }, pad = { 0, 0 }, stride = { 2, 2 },
                         name = name .. "_tower", suffix = "_conv_1" })
  local td = Conv(b, x, nd7r, { name = name .. "_tower_1", suffix = "_conv" })
  td = Conv(b, td, nd7a, { kernel = { 1, 7 }, pad = { 0, 3 }, name = name .. "_tower_1",
                           suffix = "_conv_1" })
  td = Conv(b, td, nd7b, { kernel = { 7, 1 }, pad = { 3, 0 }, name = name .. "_tower_1",
                           suffix = "_conv_2" })
  td = Conv(b, td, nd73, { kernel = { 3, 3 }, stride = { 2, 2 }, name = name .. "_tower_1",
                           suffix = "_conv_3" })
  local p = Pooling(x, { 3, 3 }, { 2, 2 }, { 0, 0 }, pool)
  return concat({ t3, td, p })
end

local function block7E(b, x, n1, nd3r, nd3a, nd3b, n33r, n33, n33a, n33b, pool, proj, name)
  local t1 = Conv(b, x, n1, { kernel = { 1, 1 }, name = name .. "_conv" })
  local td = Conv(b, x, nd3r, { name = name .. "_tower", suffix = "_conv" })
  local tda = Conv(b, td, nd3a, { kernel = { 1, 3 }, pad = { 0, 1 }, name = name .. "_tower",
                                  suffix = "_mixed_conv" })
  local tdb = Conv(b, td, nd3b, { kernel = { 3, 1 }, pad = { 1, 0 }, name = name .. "_tower",
                                  suffix = "_mixed_conv_1" })
  local t3 = Conv(b, x, n33r, { name = name .. "_tower_1", suffix = "_conv" })
  t3 = Conv(b, t3, n33, { kernel = { 3, 3 }, pad = { 1, 1 }, name = name .. "_tower_1",
                          suffix = "_conv_1" })
  local t3a = Conv(b, t3, n33a, { kernel = { 1, 3 }, pad = { 0, 1 }, name = name .. "_tower_1",
                                  suffix = "_mixed_conv" })
  local t3b = Conv(b, t3, n33b, { kernel = { 3, 1 }, pad = { 1, 0 }, name = name .. "_tower_1",
                                  suffix = "_mixed_conv_1" })
  local p = Pooling(x, { 3, 3 }, { 1, 1 }, { 1, 1 }, pool)
  local cp = Conv(b, p, proj, { kernel = { 1, 1 }, name = name .. "_tower_2", suffix = "_conv" })
  return concat({ t1, tda, tdb, t3a, t3b, cp })
end

--- opts: batch_size, num_classes, image_shape ({3,299,299}), dtype, seed, init_params.
--- Returns mod, params.
function inception.get_workload(opts)
  local R = require "tunelua.relay"
  opts = opts or {}
  local image_shape = opts.image_shape or { 3, 299, 299 }
  local b = layers.builder(opts)
  local data = b:input("data", { opts.batch_size or 1, image_shape[1], image_shape[2],
                                 image_shape[3] })
  local x = Conv(b, data, 32, { kernel = { 3, 3 }, stride = { 2, 2 }, name = "conv" })
  x = Conv(b, x, 32, { kernel = { 3, 3 }, name = "conv_1" })
  x = Conv(b, x, 64, { kernel = { 3, 3 }, pad = { 1, 1 }, name = "conv_2" })
  x = Pooling(x, { 3, 3 }, { 2, 2 }, { 0, 0 }, "max")
  x = Conv(b, x, 80, { kernel = { 1, 1 }, name = "conv_3" })
  x = Conv(b, x, 192, { kernel = { 3, 3 }, name = "conv_4" })
  x = Pooling(x, { 3, 3 }, { 2, 2 }, { 0, 0 }, "max")
  x = block7A(b, x, 64, 64, 96, 96, 48, 64, "avg", 32, "mixed")
  x = block7A(b, x, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_1")
  x = block7A(b, x, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_2")
  x = block7B(b, x, 384, 64, 96, 96, "max", "mixed_3")
  x = block7C(b, x, 192, 128, 128, 192, 128, 128, 128, 128, 192, "avg", 192, "mixed_4")
  x = block7C(b, x, 192, 160, 160, 192, 160, 160, 160, 160, 192, "avg", 192, "mixed_5")
  x = block7C(b, x, 192, 160, 160, 192, 160, 160, 160, 160, 192, "avg", 192, "mixed_6")
  x = block7C(b, x, 192, 192, 192, 192, 192, 192, 192, 192, 192, "avg", 192, "mixed_7")
  x = block7D(b, x, 192, 320, 192, 192, 192, 192, "max", "mixed_8")
  x = block7E(b, x, 320, 384, 384, 384, 448, 384, 384, 384, "avg", 192, "mixed_9")
  x = block7E(b, x, 320, 384, 384, 384, 448, 384, 384, 384, "max", 192, "mixed_10")
  local s = layers.shape(x)
  local kh, kw = 8, 8
  if s[3] ~= 8 or s[4] ~= 8 then kh, kw = s[3], s[4] end
  x = Pooling(x, { kh, kw }, { 1, 1 }, { 0, 0 }, "avg")
  x = R.nn.batch_flatten(x)
  x = b:dense(x, { name = "fc1", units = opts.num_classes or 1000 })
  x = b:bias_add(x, "fc2_bias", -1)
  x = R.nn.softmax(x, { axis = -1 })
  return b:finish(x, opts)
end

return inception
