-- expect: tunelua: tests/lua/errors/nd_negative_dim.lua:5: invalid shape (2, -1): dimension 2 is negative
local tl = require "tunelua"

-- a negative dimension is reported with its 1-based position
local a = tl.nd.zeros({2, -1})
