-- expect: tunelua: tests/lua/errors/topi_conv_channel_mismatch.lua:6: conv2d: channel mismatch: data has 6 channels (groups=1) but kernel expects 4 for data (2, 8, 8, 6) and kernel (3, 3, 4, 16)
-- the kernel's input channels must match the data's (NHWC x HWIO)
local tl = require "tunelua"
local X = tl.te.placeholder({ 2, 8, 8, 6 }, "float32", "X")
local W = tl.te.placeholder({ 3, 3, 4, 16 }, "float32", "W")
tl.topi.nn.conv2d(X, W, { layout = "NHWC" })
