-- Shared by the topi tests (tests/lua/test_topi*.lua; required by path as
-- "tests.lua.lib.topi_check", not a test of its own).
local tl = require "tunelua"
local nd = require "tunelua.nd"

local M = {}

--- Builds schedule s over ins and outs (C backend, -O1), calls it on arrays (one per input)
--- and returns the output arrays.
function M.build_run(s, ins, outs, arrays)
  local args = {}
  for _, t in ipairs(ins) do args[#args + 1] = t end
  for _, t in ipairs(outs) do args[#args + 1] = t end
  local f = tl.build(s, args, "c", { cflags = "-O1" })
  local call, res = {}, {}
  for i, a in ipairs(arrays) do call[i] = a end
  for i, t in ipairs(outs) do
    res[i] = nd.empty(t.shape, t.dtype)
    call[#call + 1] = res[i]
  end
  f(unpack(call))
  return res
end

return M
