--- EliminateCommonSubexpr: calls with the same op, the same attributes and the same
--- (already deduplicated) arguments become one node.
local util = require "tunelua.relay.pass.util"

local M = {}

local function transform(f)
  local relay = require "tunelua.relay"
  local enc = require("tunelua.topi").encode_attrs
  local seen = {}
  local ids = setmetatable({}, { __mode = "k" })
  local nid = 0
  local function id(n)
    local v = ids[n]
    if not v then nid = nid + 1; v = nid; ids[n] = v end
    return v
  end
  local body = relay.mutate(f.body, function(n)
    if n.kind ~= "call" or type(n.op) ~= "string" then return nil end
    local a = {}
    for k, v in pairs(n.attrs) do if k ~= "name" then a[k] = v end end
    local ok, ea = pcall(enc, a)
    if not ok then return nil end
    local parts = { n.op, ea }
    for _, x in ipairs(n.args) do parts[#parts + 1] = tostring(id(x)) end
    local key = table.concat(parts, "|")
    if seen[key] then return seen[key] end
    seen[key] = n
  end)
  return util.refunction(f, body)
end

M.transform = transform
M.pass = util.make("EliminateCommonSubexpr", transform)
return M
