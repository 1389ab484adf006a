--- DeadCodeElimination: rebuild the function from its output, so only nodes the
--- output depends on remain (the IR has no let bindings: unreachable nodes are all
--- the dead code there is; function parameters are kept, as TVM keeps them).
local util = require "tunelua.relay.pass.util"

local M = {}

local function transform(f)
  local relay = require "tunelua.relay"
  local body = relay.mutate(f.body)
  return util.refunction(f, body)
end

M.transform = transform
M.pass = util.make("DeadCodeElimination", transform)
return M
