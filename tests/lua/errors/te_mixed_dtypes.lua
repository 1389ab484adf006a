-- expect: tunelua: tests/lua/errors/te_mixed_dtypes.lua:7: add: operands have different dtypes float32 and int32 (cast one side)
local te = require "tunelua.te"

-- mixing dtypes without a cast names both
local A = te.placeholder({8}, "float32", "A")
local I = te.placeholder({8}, "int32", "I")
local B = te.compute({8}, function(i) return A(i) + I(i) end, "B")
