-- expect: tunelua: tests/lua/errors/te_bad_shape.lua:5: placeholder 'data': dimension 2 has extent 0 (must be >= 1)
local te = require "tunelua.te"

-- a non-positive extent is reported with its 0-based dimension
local data = te.placeholder({1, 3, 0, 224}, "float32", "data")
