-- expect: tunelua: tests/lua/errors/topi_conv_kernel_too_large.lua:6: conv2d: kernel 3x3 (dilated 9x3) is larger than the padded input 7x6 (padding (1, 0, 1, 0)) for data (1, 3, 5, 6) and kernel (4, 3, 3, 3)
-- a dilated kernel larger than the padded input has no output
local tl = require "tunelua"
local X = tl.te.placeholder({ 1, 3, 5, 6 }, "float32", "X")
local W = tl.te.placeholder({ 4, 3, 3, 3 }, "float32", "W")
tl.topi.nn.conv2d(X, W, { dilation = { 4, 1 }, padding = { 1, 0, 1, 0 } })
