-- expect: tunelua: tests/lua/errors/topi_depthwise_channel_mismatch.lua:6: depthwise_conv2d: channel mismatch: data has 8 channels but kernel expects 6 for data (1, 8, 10, 10) and kernel (6, 1, 3, 3)
-- a depthwise kernel for another channel count
local tl = require "tunelua"
local X = tl.te.placeholder({ 1, 8, 10, 10 }, "float32", "X")
local W = tl.te.placeholder({ 6, 1, 3, 3 }, "float32", "W")
tl.topi.nn.depthwise_conv2d(X, W, { padding = { 1, 1, 1, 1 } })
