--- tunelua.json: the JSON codec of the Lua layer (logs, C-side arguments, RPC messages).
--
--   local json = require "tunelua.json"
--   json.encode(v)    -- compact text ("," and ":"): what the C side and the RPC wire read
--   json.dumps(v)     -- text as Python's json.dumps writes it (", " and ": ", floats in
--                     -- repr form): the AutoTVM log and anything compared with TVM's output
--   json.decode(s)    -- the value; malformed text raises "invalid JSON: <what> at offset N"
--                     -- (so does nesting deeper than json.MAX_DEPTH arrays and objects)
--
-- Values: json.null is JSON null (a list keeps its positions); strings, booleans, numbers
-- (cdata numbers too) as such. A table with t[1] is an array, any other table an object
-- with its keys sorted, or in the order t.__order lists (__order itself is not written).
-- An empty table is an object for encode and an array for dumps; json.array(t) makes it
-- an array for both (decode returns empty arrays marked so, and they encode back as []).
-- Integral numbers print as integers unless wrapped by json.float(v).
local json = {}

json.null = setmetatable({}, { __tostring = function() return "null" end })

local array_mt = {}
--- json.array(t) -> t, marked as an array (so that an empty t encodes as [])
function json.array(t) return setmetatable(t or {}, array_mt) end

local Float = {}
--- json.float(v) -> a number that prints as a float (1.0, not 1)
function json.float(v) return setmetatable({ v = v }, Float) end

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
                  ["\r"] = "\\r", ["\t"] = "\\t" }
local function escape(c) return escapes[c] or string.format("\\u%04x", c:byte()) end

--- json.quote(s) -> s as a JSON string literal
function json.quote(s) return '"' .. s:gsub('[%c"\\]', escape) .. '"' end
local quote = json.quote

--- json.float_text(v) -> v as Python's repr prints a float: the shortest digits that
--- round-trip, fixed notation for decimal exponents in [-4, 16), else d.ddde+XX.
function json.float_text(v)
  if v ~= v then return "NaN" end
  if v == math.huge then return "Infinity" elseif v == -math.huge then return "-Infinity" end
  if v == 0 then return (1 / v < 0) and "-0.0" or "0.0" end
  local e
  for p = 0, 16 do
    e = string.format("%." .. p .. "e", v)
    if tonumber(e) == v then break end
  end
  local sign, int, frac, exp = e:match("^(-?)(%d)%.?(%d*)e([-+]%d+)$")
  local digits = (int .. frac):gsub("0+$", "")
  if digits == "" then digits = "0" end
  local x = tonumber(exp)
  if x >= -4 and x < 16 then
    local s
    if x >= 0 then
      if #digits <= x + 1 then
        s = digits .. string.rep("0", x + 1 - #digits) .. ".0"
      else
        s = digits:sub(1, x + 1) .. "." .. digits:sub(x + 2)
      end
    else
      s = "0." .. string.rep("0", -x - 1) .. digits
    end
    return sign .. s
  end
  local m = digits:sub(1, 1) .. (#digits > 1 and ("." .. digits:sub(2)) or "")
  return string.format("%s%se%s%02d", sign, m, x < 0 and "-" or "+", math.abs(x))
end
local float_text = json.float_text

local function is_integral(v) return v == math.floor(v) and math.abs(v) < 2 ^ 53 end

-- compact numbers: JSON has no NaN or infinity; an infinity is written as the largest
-- magnitude the C side reads back as a huge double
local function compact_number(v)
  if is_integral(v) then return string.format("%d", v) end
  if v ~= v then error("json: cannot encode NaN", 0) end
  if v == math.huge then return "1e308" elseif v == -math.huge then return "-1e308" end
  return string.format("%.17g", v)
end

local function python_number(v)
  if is_integral(v) then return string.format("%d", v) end
  return float_text(v)
end

local COMPACT = { item = ",", key = ":", number = compact_number, empty_is_array = false }
local PYTHON = { item = ", ", key = ": ", number = python_number, empty_is_array = true }

local function is_array(t, style)
  if getmetatable(t) == array_mt or #t > 0 then return true end
  return style.empty_is_array and next(t) == nil
end

local function enc(v, style)
  if v == nil or v == json.null then return "null" end
  local tv = type(v)
  if tv == "boolean" then return tostring(v) end
  if tv == "number" then return style.number(v) end
  if tv == "string" then return quote(v) end
  if tv == "cdata" then return enc(tonumber(v), style) end
  if tv ~= "table" then error("json: cannot encode a " .. tv, 0) end
  if getmetatable(v) == Float then return float_text(v.v) end
  local parts = {}
  if is_array(v, style) then
    for i = 1, #v do parts[i] = enc(v[i], style) end
    return "[" .. table.concat(parts, style.item) .. "]"
  end
  local keys = v.__order
  if keys then
    for _, k in ipairs(keys) do parts[#parts + 1] = quote(k) .. style.key .. enc(v[k], style) end
  else
    keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for i, k in ipairs(keys) do parts[i] = quote(k) .. style.key .. enc(v[k], style) end
  end
  return "{" .. table.concat(parts, style.item) .. "}"
end

--- json.encode(v) -> compact JSON text
function json.encode(v) return enc(v, COMPACT) end

--- json.dumps(v) -> JSON text as Python's json.dumps writes it
function json.dumps(v) return enc(v, PYTHON) end

-- ---- decode ---------------------------------------------------------------------------

local unescape = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r',
                   t = '\t' }

local function utf8(h)
  if h < 128 then return string.char(h) end
  if h < 2048 then return string.char(192 + math.floor(h / 64), 128 + h % 64) end
  return string.char(224 + math.floor(h / 4096), 128 + math.floor(h / 64) % 64, 128 + h % 64)
end

--- json.decode(s) -> value (NaN, Infinity and -Infinity read as Python writes them)
json.MAX_DEPTH = 512   -- nesting deeper than this is refused (a recursive reader's stack is finite)

function json.decode(s)
  local pos, depth = 1, 0
  local function err(msg) error("invalid JSON: " .. msg .. " at offset " .. (pos - 1), 0) end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or (#s + 1) end
  local value
  local function str()
    pos = pos + 1
    local out = {}
    while true do
      local a = s:find('["\\]', pos)
      if not a then err("unterminated string") end
      out[#out + 1] = s:sub(pos, a - 1)
      if s:sub(a, a) == '"' then pos = a + 1; break end
      local c = s:sub(a + 1, a + 1)
      if unescape[c] then out[#out + 1] = unescape[c]; pos = a + 2
      elseif c == "u" then
        local h = tonumber(s:sub(a + 2, a + 5), 16)
        if not h then err("bad \\u escape") end
        out[#out + 1] = utf8(h)
        pos = a + 6
      else err("bad escape") end
    end
    return table.concat(out)
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" or c == "[" then
      depth = depth + 1
      if depth > json.MAX_DEPTH then err("nested deeper than " .. json.MAX_DEPTH .. " levels") end
    end
    if c == "{" then
      pos = pos + 1
      local obj = {}
      ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1; depth = depth - 1; return obj end
      while true do
        ws()
        if s:sub(pos, pos) ~= '"' then err("expected a key") end
        local k = str()
        ws()
        if s:sub(pos, pos) ~= ":" then err("expected ':'") end
        pos = pos + 1
        obj[k] = value()
        ws()
        local d = s:sub(pos, pos)
        pos = pos + 1
        if d == "}" then break elseif d ~= "," then err("expected ',' or '}'") end
      end
      depth = depth - 1
      return obj
    elseif c == "[" then
      pos = pos + 1
      local arr = {}
      ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1; depth = depth - 1; return json.array(arr) end
      while true do
        arr[#arr + 1] = value()
        ws()
        local d = s:sub(pos, pos)
        pos = pos + 1
        if d == "]" then break elseif d ~= "," then err("expected ',' or ']'") end
      end
      depth = depth - 1
      return arr
    elseif c == '"' then
      return str()
    elseif s:sub(pos, pos + 3) == "true" then pos = pos + 4; return true
    elseif s:sub(pos, pos + 4) == "false" then pos = pos + 5; return false
    elseif s:sub(pos, pos + 3) == "null" then pos = pos + 4; return json.null
    elseif s:sub(pos, pos + 2) == "NaN" then pos = pos + 3; return 0 / 0
    elseif s:sub(pos, pos + 7) == "Infinity" then pos = pos + 8; return math.huge
    elseif s:sub(pos, pos + 8) == "-Infinity" then pos = pos + 9; return -math.huge
    else
      local a, b = s:find("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not a then err("unexpected character '" .. c .. "'") end
      local v = tonumber(s:sub(a, b))
      if not v then err("bad number") end
      pos = b + 1
      return v
    end
  end
  if type(s) ~= "string" then error("json.decode: expected a string, got " .. type(s), 2) end
  local v = value()
  ws()
  if pos <= #s then err("trailing text") end
  return v
end

return json
