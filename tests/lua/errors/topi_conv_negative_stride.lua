-- expect: tunelua: tests/lua/errors/topi_conv_negative_stride.lua:6: conv2d: strides must be positive, got (-1, 1) for data (1, 3, 8, 8) and kernel (4, 3, 3, 3)
-- conv2d refuses a negative stride, naming the attribute and the shapes
local tl = require "tunelua"
local X = tl.te.placeholder({ 1, 3, 8, 8 }, "float32", "X")
local W = tl.te.placeholder({ 4, 3, 3, 3 }, "float32", "W")
tl.topi.nn.conv2d(X, W, { strides = { -1, 1 }, padding = { 1, 1, 1, 1 } })
