-- expect: tunelua: tests/lua/errors/te_index_count.lua:7: tensor 'A' has 2 dimensions, got 1 index
local te = require "tunelua.te"

-- indexing a 2-D tensor with one index names the tensor and both counts
local A = te.placeholder({4, 4}, "float32", "A")
local B = te.compute({4}, function(i)
  return A(i) * 2
end, "B")
