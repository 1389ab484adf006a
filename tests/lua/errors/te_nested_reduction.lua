-- expect: tunelua: tests/lua/errors/te_nested_reduction.lua:8: a reduction (sum, max, ...) may only be the whole body of a compute
local te = require "tunelua.te"

-- reductions sit at the top of a compute body, as in TVM
local A = te.placeholder({4, 4}, "float32", "A")
local k = te.reduce_axis({0, 4}, "k")
local B = te.compute({4}, function(i)
  return te.sum(A(i, k), k) * 2
end, "B")
