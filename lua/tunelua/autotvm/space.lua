--- tunelua.autotvm.space: config spaces and configs (specs/algorithms.md A1).
--
--   local sp = task.config_space
--   print(sp)                 -- the knobs, their candidate counts, the total size
--   #sp                       -- number of valid configs
--   local cfg = sp:get(193)   -- a config; tostring(cfg) as TVM prints it:
--                             -- [('tile_ic', [-1, 3]), ...,('unroll_kw', False)],None,193
--   cfg["tile_oc"].size, cfg["unroll_kw"].val, cfg:entity()
--
-- A space wraps a C tl_atvm_space (the task's own, or one being defined by a
-- Lua template). Index p maps to entity (p / prod(dims before j)) % dims[j]
-- of knob j: the first-defined knob is the least significant digit.
local ffi = require "ffi"
local core = require "tunelua.core"
local json = require "tunelua.json"

local C, ctx = core.C, core.ctx
local i64arr = ffi.typeof("int64_t[?]")

local space = {}

local KINDS = { [0] = "sp", [1] = "re", [2] = "an", [3] = "ot" }
local AN = { [0] = "none", "vec", "unroll", "blockIdx.x", "blockIdx.y", "blockIdx.z",
  "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread", "fuse" }
space.KINDS, space.ANNOTATIONS = KINDS, AN

local ConfigSpace, Config, Entity = {}, {}, {}
space.ConfigSpace, space.Config, space.Entity = ConfigSpace, Config, Entity


-- A ConfigSpace is a small cdata (so that #space works under LuaJIT's
-- Lua 5.1 semantics): the space pointer plus an id into a registry holding
-- its Lua-side fields (the owning task keeps the C space alive).
pcall(ffi.cdef, "struct tl_lua_config_space { tl_atvm_space *sp; int32_t id; };")
local fields, next_id = {}, 0
local SpaceT

--- space.wrap(cdata tl_atvm_space*, owner) -> ConfigSpace
-- The registry keeps what the C space needs alive (the task handle or the
-- space cdata) strongly and the owning Lua task weakly, so a task and its
-- space are collected together.
function space.wrap(sp, owner)
  next_id = next_id + 1
  local weak = setmetatable({ owner = owner }, { __mode = "v" })
  fields[next_id] = { keep = sp, handle = owner and owner.handle, weak = weak }
  return SpaceT(sp, next_id)
end

function ConfigSpace.__len(s) return tonumber(C.tl_atvm_space_total(s.sp)) end
function ConfigSpace.num_knobs(s) return C.tl_atvm_space_nknobs(s.sp) end
function ConfigSpace.range_length(s) return tonumber(C.tl_atvm_space_total(s.sp)) end

--- s:knobs() -> list of {name, kind, dim}
function ConfigSpace.knobs(s)
  local out = {}
  for k = 0, C.tl_atvm_space_nknobs(s.sp) - 1 do
    out[k + 1] = { name = ffi.string(C.tl_atvm_space_name(s.sp, k)), kind = KINDS[C.tl_atvm_space_kind(s.sp, k)],
                   dim = tonumber(C.tl_atvm_space_dim(s.sp, k)) }
  end
  return out
end

--- Entity j (0-based) of knob k (0-based) as a Lua value: split sizes, a
-- permutation, a list of annotation names, or the "ot" value.
function ConfigSpace.entity_value(s, k, j)
  local kind = KINDS[C.tl_atvm_space_kind(s.sp, k)]
  if kind == "ot" then
    local txt = ffi.string(C.tl_atvm_space_other_json(s.sp, k, j))
    return (json.decode(txt))
  end
  local buf = i64arr(32)
  local n = C.tl_atvm_space_entity_ints(s.sp, k, j, buf, 32)
  local out = {}
  local ann = kind == "an" and ffi.string(C.tl_atvm_space_other_json(s.sp, k, j)):find('"') ~= nil
  for i = 0, n - 1 do out[i + 1] = ann and AN[tonumber(buf[i])] or tonumber(buf[i]) end
  return out
end

function ConfigSpace.point2knob(s, index)
  local digits, n = {}, C.tl_atvm_space_nknobs(s.sp)
  for k = 0, n - 1 do
    local d = tonumber(C.tl_atvm_space_dim(s.sp, k))
    digits[k + 1] = index % d
    index = math.floor(index / d)
  end
  return digits
end

function ConfigSpace.knob2point(s, digits)
  local p, m = 0, 1
  for k = 0, C.tl_atvm_space_nknobs(s.sp) - 1 do
    p = p + digits[k + 1] * m
    m = m * tonumber(C.tl_atvm_space_dim(s.sp, k))
  end
  return p
end

function ConfigSpace.is_index_valid(s, i) return i >= 0 and i < #s end

function ConfigSpace.fallback_digits(s)
  local d = {}
  for k = 0, C.tl_atvm_space_nknobs(s.sp) - 1 do d[k + 1] = tonumber(C.tl_atvm_space_fallback_digit(s.sp, k)) end
  return d
end

--- s:get(index) -> Config (index -1: the fallback config)
function ConfigSpace.get(s, index)
  if type(index) ~= "number" or index ~= math.floor(index) or index < -1 or index >= #s then
    error(string.format("space:get: index must be an integer in [-1, %d), got %s", #s, tostring(index)), 2)
  end
  local digits = index >= 0 and s:point2knob(index) or s:fallback_digits()
  return setmetatable({ space = s, index = index >= 0 and index or s:knob2point(digits), digits = digits,
                        is_fallback = index < 0, code_hash = nil }, Config)
end

--- s:index_of(entity) -> index of a log's entity list ({{name, kind, value}...}) or nil, reason
function ConfigSpace.index_of(s, entity)
  local knobs = s:knobs()
  if #entity ~= #knobs then
    return nil, string.format("the entity has %d knobs, the space has %d", #entity, #knobs)
  end
  local digits = {}
  for k, kb in ipairs(knobs) do
    local it = entity[k]
    if it[1] ~= kb.name or it[2] ~= kb.kind then
      return nil, string.format("knob %d is '%s' (%s), the space has '%s' (%s)", k, tostring(it[1]),
                                tostring(it[2]), kb.name, kb.kind)
    end
    local j = tonumber(C.tl_atvm_space_find_entity(s.sp, k - 1, json.dumps(it[3])))
    if j < 0 then
      return nil, string.format("knob '%s' has no entity %s", kb.name, json.dumps(it[3]))
    end
    digits[k] = j
  end
  return s:knob2point(digits)
end

local function pyrepr(v)
  local tv = type(v)
  if tv == "boolean" then return v and "True" or "False" end
  if tv == "string" then return "'" .. v .. "'" end
  if tv == "number" then
    if v == math.floor(v) then return string.format("%d", v) end
    return json.float_text(v)
  end
  if tv == "table" then
    local p = {}
    for i = 1, #v do p[i] = pyrepr(v[i]) end
    return "[" .. table.concat(p, ", ") .. "]"
  end
  return "None"
end
space.pyrepr = pyrepr

ConfigSpace.__index = function(s, k)
  local m = ConfigSpace[k]
  if m ~= nil then return m end
  local f = fields[s.id]
  if not f then return nil end
  if k == "owner" then return f.weak.owner end
  return f[k]
end
ConfigSpace.__gc = function(s) fields[s.id] = nil end
ConfigSpace.__tostring = function(s)
  local lines = { "ConfigSpace (len=" .. #s .. ", range_length=" .. s:range_length() .. ", knobs=" .. s:num_knobs() .. ")" }
  lines[#lines + 1] = string.format("  %3s  %-16s %-4s %8s  %s", "#", "knob", "kind", "count", "first candidates")
  for k, kb in ipairs(s:knobs()) do
    local ex = {}
    for j = 0, math.min(kb.dim, 3) - 1 do ex[#ex + 1] = pyrepr(s:entity_value(k - 1, j)) end
    if kb.dim > 3 then ex[#ex + 1] = "..." end
    lines[#lines + 1] = string.format("  %3d  %-16s %-4s %8d  %s", k - 1, kb.name, kb.kind, kb.dim, table.concat(ex, " "))
  end
  lines[#lines + 1] = string.format("  total: %d configs", #s)
  return table.concat(lines, "\n")
end

-- ---- configs ---------------------------------------------------------------------------------

Entity.__index = Entity
Entity.__tostring = function(e) return pyrepr(e.value) end

--- e:apply(s, tensor_or_stage, axis | axes) -> the new axes (split), the reordered
-- axes (reorder); annotations unroll/vectorize the axes (annotate).
function Entity.apply(e, s, t, axes)
  local st = s[t]
  if e.kind == "sp" then
    local l = {}
    for i = 2, #e.size do l[#l + 1] = e.size[i] end
    return st:split_n(axes, l, true)
  elseif e.kind == "re" then
    local new = {}
    for _, i in ipairs(e.perm) do if axes[i + 1] then new[#new + 1] = axes[i + 1] end end
    st:reorder(unpack(new))
    return unpack(new)
  elseif e.kind == "an" then
    for i, a in ipairs(e.anns) do
      if a == "unroll" then st:unroll(axes[i]) elseif a == "vec" then st:vectorize(axes[i]) end
    end
    return
  end
  error("config: knob '" .. e.name .. "' (ot) has no apply; read .val", 2)
end

--- cfg:entity() -> list of {name, kind, value} (the log's "entity")
function Config.entity(c)
  local out = {}
  for k, kb in ipairs(c.space:knobs()) do
    out[k] = { kb.name, kb.kind, c.space:entity_value(k - 1, c.digits[k]) }
  end
  return out
end

--- cfg:get(name) -> Entity with .size (sp) / .perm (re) / .anns (an) / .val (ot)
function Config.get(c, name)
  local k = C.tl_atvm_space_find(c.space.sp, name)
  if k < 0 then error("config: no knob '" .. tostring(name) .. "'", 2) end
  local kind = KINDS[C.tl_atvm_space_kind(c.space.sp, k)]
  local v = c.space:entity_value(k, c.digits[k + 1])
  local e = setmetatable({ name = name, kind = kind, value = v }, Entity)
  if kind == "sp" then e.size = v elseif kind == "re" then e.perm = v
  elseif kind == "an" then e.anns = v else e.val = v end
  return e
end

--- cfg:to_json_dict() -> {index, code_hash, entity}
function Config.to_json_dict(c)
  return { index = c.index, code_hash = c.code_hash, entity = c:entity() }
end

--- cfg:features() -> the "knob" feature vector (config.get_flatten_feature())
function Config.features(c)
  local out = {}
  for k, kb in ipairs(c.space:knobs()) do
    local v = c.space:entity_value(k - 1, c.digits[k])
    if kb.kind == "ot" then out[#out + 1] = (v == true and 1) or (v == false and 0) or tonumber(v) or (c.digits[k])
    elseif kb.kind == "an" and type(v[1]) == "string" then
      for _, a in ipairs(v) do
        for code = 0, 10 do out[#out + 1] = (AN[code] == a) and 1 or 0 end
      end
    else for _, x in ipairs(v) do out[#out + 1] = x end end
  end
  return out
end

Config.__index = function(c, k)
  if Config[k] then return Config[k] end
  local sp = rawget(c, "space")
  if type(k) == "string" and sp and C.tl_atvm_space_find(sp.sp, k) >= 0 then return Config.get(c, k) end
  return nil
end
Config.__tostring = function(c)
  local p = {}
  for k, it in ipairs(c:entity()) do p[k] = "('" .. it[1] .. "', " .. pyrepr(it[3]) .. ")" end
  return "[" .. table.concat(p, ", ") .. "]," .. (c.code_hash and tostring(c.code_hash) or "None") .. "," .. c.index
end

SpaceT = ffi.metatype("struct tl_lua_config_space", ConfigSpace)

function space.is_space(x) return ffi.istype(SpaceT, x) end

return space
