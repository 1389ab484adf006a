-- expect: tunelua: tests/lua/errors/te_reduce_outside.lua:7: compute 'B': reduce axis 'k' used outside a reduction
local te = require "tunelua.te"

-- a reduce axis in a body that is not a reduction
local A = te.placeholder({4, 4}, "float32", "A")
local k = te.reduce_axis({0, 4}, "k")
local B = te.compute({4}, function(i) return A(i, k) end, "B")
