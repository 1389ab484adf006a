-- expect: tunelua: tests/lua/errors/nd_unknown_dtype.lua:4: unknown dtype 'float33' (expected one of float32, float16, int8, uint8, int32, int64, float64, int16, bool)
local tl = require "tunelua"

local a = tl.nd.empty({2, 3}, "float33")
