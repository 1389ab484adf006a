-- expect: tunelua: tests/lua/errors/topi_pool_kernel_too_large.lua:5: pool2d: kernel 7x7 (dilated 7x7) is larger than the padded input 6x6 (padding (1, 1, 1, 1)) for data (1, 3, 4, 4)
-- a pooling window larger than the padded input
local tl = require "tunelua"
local X = tl.te.placeholder({ 1, 3, 4, 4 }, "float32", "X")
tl.topi.nn.avg_pool2d(X, { kernel = { 7, 7 }, padding = { 1, 1, 1, 1 } })
