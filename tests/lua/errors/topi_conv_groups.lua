-- expect: tunelua: tests/lua/errors/topi_conv_groups.lua:6: conv2d: groups=4 does not divide 6 input channels for data (1, 6, 8, 8) and kernel (8, 2, 3, 3)
-- groups must divide the input channels
local tl = require "tunelua"
local X = tl.te.placeholder({ 1, 6, 8, 8 }, "float32", "X")
local W = tl.te.placeholder({ 8, 2, 3, 3 }, "float32", "W")
tl.topi.nn.conv2d(X, W, { groups = 4 })
