-- expect: tunelua: tests/lua/errors/topi_pool_negative_stride.lua:5: pool2d: strides must be positive, got (2, 0) for data (1, 3, 8, 8)
-- pooling refuses a non-positive stride
local tl = require "tunelua"
local X = tl.te.placeholder({ 1, 3, 8, 8 }, "float32", "X")
tl.topi.nn.max_pool2d(X, { kernel = { 2, 2 }, strides = { 2, 0 } })
