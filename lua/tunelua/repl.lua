--- tunelua.repl: the interactive prompt.
--
-- Line editing and history through readline (history in ~/.tunelua_history),
-- multi-line input for unfinished statements, and the value of an expression
-- typed alone printed through its __tostring. `tl` is predefined.
local host = require "tunelua.host"

local repl = {}

local function show(v)
  if type(v) == "table" and not getmetatable(v) then
    local parts, n = {}, 0
    for k, x in pairs(v) do
      n = n + 1
      if n > 20 then parts[#parts + 1] = "..."; break end
      if type(k) == "string" and k:match("^[%a_][%w_]*$") then
        parts[#parts + 1] = k .. " = " .. tostring(x)
      else
        parts[#parts + 1] = "[" .. tostring(k) .. "] = " .. tostring(x)
      end
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

-- Compile a buffer: as an expression first, then as statements.
-- Returns fn, or nil, "incomplete", or nil, message.
local function compile(buf)
  local f = loadstring("return " .. buf, "=stdin")
  if f then return f end
  local err
  f, err = loadstring(buf, "=stdin")
  if f then return f end
  if err:match("<eof>$") or err:match("'<eof>'") then return nil, "incomplete" end
  return nil, err
end

--- Evaluate one complete chunk and print results; returns ok.
function repl.eval(buf, out)
  out = out or io.stdout
  local f, err = compile(buf)
  if not f then
    out:write(err, "\n")
    return false
  end
  setfenv(f, repl.env)
  local res = { xpcall(f, function(e) return debug.traceback(tostring(e), 2) end) }
  if not res[1] then
    local msg = res[2]:match("^(.-)\nstack traceback:") or res[2]
    out:write(msg, "\n")
    return false
  end
  if #res > 1 or res.n then
    local parts = {}
    for i = 2, table.maxn(res) do parts[#parts + 1] = show(res[i]) end
    if #parts > 0 then out:write(table.concat(parts, "\t"), "\n") end
  end
  return true
end

function repl.run()
  local tty = host.isatty(0)
  repl.env = setmetatable({ tl = require("tunelua") }, { __index = _G })
  local histfile = os.getenv("HOME") and (os.getenv("HOME") .. "/.tunelua_history")
  if tty then
    io.write("tunelua ", host.version, " (", jit.version, ") -- `tl` is loaded; Ctrl-D exits\n")
    if histfile then host.read_history(histfile) end
  end
  local function readline(prompt)
    if tty then return host.readline(prompt) end
    return io.read("*l")
  end
  local buf = nil
  while true do
    local line = readline(buf and ">> " or "tl> ")
    if not line then break end
    if tty and line:match("%S") then host.add_history(line) end
    buf = buf and (buf .. "\n" .. line) or line
    if buf:match("^%s*$") then
      buf = nil
    else
      local f, err = compile(buf)
      if f or err ~= "incomplete" then
        repl.eval(buf)
        buf = nil
      end
    end
  end
  if buf then repl.eval(buf) end
  if tty then
    io.write("\n")
    if histfile then host.write_history(histfile) end
  end
  return 0
end

return repl
