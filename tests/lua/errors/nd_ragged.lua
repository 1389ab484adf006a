-- expect: tunelua: tests/lua/errors/nd_ragged.lua:4: ragged nested table: row 2 at depth 1 has 3 elements, expected 2
local tl = require "tunelua"

local a = tl.nd.array({
  {1, 2},
  {3, 4, 5},
})
