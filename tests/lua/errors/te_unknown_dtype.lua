-- expect: tunelua: tests/lua/errors/te_unknown_dtype.lua:5: unknown dtype 'fp32' (expected one of float32, float16, int8, uint8, int32, int64, float64, int16, bool)
local te = require "tunelua.te"

-- TVM's dtype spellings only
local A = te.placeholder({16}, "fp32", "A")
