--- tunelua.rpc.json: the small JSON codec of the RPC layer (session headers, summaries).
-- encode: tables with [1] (or json.array(t)) are arrays, other tables objects; json.null is null.
-- decode: objects -> tables, arrays -> tables with n = length in field `n` omitted; null -> json.null.
local json = {}

json.null = setmetatable({}, { __tostring = function() return "null" end })
local array_mt = {}
function json.array(t) return setmetatable(t or {}, array_mt) end

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
                  ["\r"] = "\\r", ["\t"] = "\\t" }
local function esc(s)
  return (s:gsub('[%c"\\]', function(c) return escapes[c] or string.format("\\u%04x", c:byte()) end))
end

local function enc(v, out)
  local t = type(v)
  if v == nil or v == json.null then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = v and "true" or "false"
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then error("json: cannot encode " .. tostring(v)) end
    if v == math.floor(v) and math.abs(v) < 2^53 then out[#out + 1] = string.format("%d", v)
    else out[#out + 1] = string.format("%.17g", v) end
  elseif t == "string" then out[#out + 1] = '"' .. esc(v) .. '"'
  elseif t == "table" then
    if getmetatable(v) == array_mt or v[1] ~= nil or next(v) == nil and getmetatable(v) == array_mt then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        enc(v[i], out)
      end
      out[#out + 1] = "]"
    else
      out[#out + 1] = "{"
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = '"' .. esc(k) .. '":'
        enc(v[k], out)
      end
      out[#out + 1] = "}"
    end
  else
    error("json: cannot encode a " .. t)
  end
end

function json.encode(v)
  local out = {}
  enc(v, out)
  return table.concat(out)
end

local function skip(s, i) return s:find("[^ \t\r\n]", i) or #s + 1 end

local dec
local function dec_string(s, i)
  local out, j = {}, i + 1
  while true do
    local c = s:sub(j, j)
    if c == "" then error("json: unterminated string") end
    if c == '"' then return table.concat(out), j + 1 end
    if c == "\\" then
      local e = s:sub(j + 1, j + 1)
      local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }
      if e == "u" then
        local code = tonumber(s:sub(j + 2, j + 5), 16) or 63
        if code < 128 then out[#out + 1] = string.char(code)
        elseif code < 2048 then out[#out + 1] = string.char(192 + math.floor(code / 64), 128 + code % 64)
        else out[#out + 1] = string.char(224 + math.floor(code / 4096), 128 + math.floor(code / 64) % 64, 128 + code % 64) end
        j = j + 6
      else
        out[#out + 1] = map[e] or e
        j = j + 2
      end
    else
      local k = s:find('["\\]', j) or #s + 1
      out[#out + 1] = s:sub(j, k - 1)
      j = k
    end
  end
end

dec = function(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == "{" then
    local t = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == "}" then return t, i + 1 end
    while true do
      local k
      k, i = dec_string(s, skip(s, i))
      i = skip(s, i)
      if s:sub(i, i) ~= ":" then error("json: expected ':' at " .. i) end
      t[k], i = dec(s, i + 1)
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == "}" then return t, i + 1 end
      if d ~= "," then error("json: expected ',' or '}' at " .. i) end
      i = i + 1
    end
  elseif c == "[" then
    local t = json.array({})
    i = skip(s, i + 1)
    if s:sub(i, i) == "]" then return t, i + 1 end
    while true do
      t[#t + 1], i = dec(s, i)
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == "]" then return t, i + 1 end
      if d ~= "," then error("json: expected ',' or ']' at " .. i) end
      i = i + 1
    end
  elseif c == '"' then return dec_string(s, i)
  elseif s:sub(i, i + 3) == "true" then return true, i + 4
  elseif s:sub(i, i + 4) == "false" then return false, i + 5
  elseif s:sub(i, i + 3) == "null" then return json.null, i + 4
  else
    local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
    if not num or num == "" then error("json: unexpected '" .. c .. "' at " .. i) end
    return tonumber(num), i + #num
  end
end

function json.decode(s)
  local v, i = dec(s, 1)
  i = skip(s, i)
  if i <= #s then error("json: trailing text at " .. i) end
  return v
end

return json
