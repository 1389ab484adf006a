--- tunelua.repl: the interactive prompt.
--
-- Line editing and history through readline (history in ~/.tunelua_history),
-- multi-line input for unfinished statements, `tl` predefined, and:
--   help(), help(x), help("tl.autotvm.task.create")   doc comments read from the source
--   Tab                                               completes globals, module fields (lazily
--                                                      loaded modules included), object fields
--                                                      and methods after '.' or ':'
--   an expression typed alone                         its value printed: objects through their
--                                                      __tostring, modules as the list of what
--                                                      they hold, plain tables nested and indented
-- repl.show, repl.complete and repl.help_text are the pieces, callable from Lua (the tests
-- call them directly); the host calls repl.complete from readline's Tab key.
local host = require "tunelua.host"

local repl = {}

local WIDTH = 78       -- a table printed on one line up to this width
local MAX_ITEMS = 100  -- items of one table printed
local MAX_DEPTH = 4    -- nesting printed

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or
            repeat return then true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

local function is_ident(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil and not KEYWORDS[k]
end

-- ---- what a value is -------------------------------------------------------------------------

-- The cdata objects of the Lua layer: their module, its predicate and its method table.
-- (A cdata's metatable cannot be read back from Lua.)
local CDATA = {
  { "tunelua.nd", "is_array", "methods", "array" },
  { "tunelua.autotvm.space", "is_space", "ConfigSpace", "ConfigSpace" },
}

local function cdata_class(v)
  for _, c in ipairs(CDATA) do
    local m = package.loaded[c[1]]
    if type(m) == "table" and m[c[2]] and m[c[2]](v) then return m[c[3]], c[1], c[4] end
  end
end

-- The name under which t is loaded (package.loaded), or nil.
local function module_name(t)
  local best
  for name, m in pairs(package.loaded) do
    if m == t and type(name) == "string" and (not best or #name < #best) then best = name end
  end
  return best
end

local function lazy_of(t)
  local mt = getmetatable(t)
  return type(mt) == "table" and rawget(mt, "__lazy") or nil
end

local function is_module(t)
  return type(t) == "table" and (lazy_of(t) ~= nil or module_name(t) ~= nil)
end

-- The class of an object: its metatable's name in a loaded tunelua module ("tunelua.autotvm.task.Task").
local function class_name(v)
  if type(v) == "cdata" then
    local _, mod, cls = cdata_class(v)
    return mod and (mod .. "." .. cls)
  end
  local mt = getmetatable(v)
  if type(mt) ~= "table" then return nil end
  local names = {}
  for name in pairs(package.loaded) do
    if type(name) == "string" and name:match("^tunelua") then names[#names + 1] = name end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    local m = package.loaded[name]
    if type(m) == "table" then
      for k, x in pairs(m) do
        if x == mt and type(k) == "string" then return name .. "." .. k end
      end
    end
  end
end

-- The name of a function: "module.field" of a loaded tunelua module holding it, or nil.
local function function_name(f)
  local names = {}
  for name, m in pairs(package.loaded) do
    if type(name) == "string" and name:match("^tunelua") and type(m) == "table" then names[#names + 1] = name end
  end
  table.sort(names, function(a, b) return #a > #b or (#a == #b and a < b) end)  -- the defining module first
  for _, name in ipairs(names) do
    for k, x in pairs(package.loaded[name]) do
      if x == f and type(k) == "string" then return name .. "." .. k end
    end
  end
end

local function add_table_names(set, t, seen)
  if type(t) ~= "table" or seen[t] then return end
  seen[t] = true
  for k in pairs(t) do if is_ident(k) then set[k] = true end end
end

--- repl.names(v) -> sorted list of the names v offers after '.' or ':': its fields, the
-- names a lazy module loads on access, the methods of its metatable (or of its cdata type),
-- a config's knobs.
function repl.names(v)
  local set, seen = {}, {}
  local tv = type(v)
  if tv == "table" then
    add_table_names(set, v, seen)
    local lz = lazy_of(v)
    if lz then
      add_table_names(set, lz.submodules, {})
      add_table_names(set, lz.functions, {})
    end
  end
  if tv == "cdata" then
    add_table_names(set, (cdata_class(v)), seen)
  elseif tv == "table" or tv == "string" or tv == "userdata" then
    -- the __index chain: a table of methods, or a function over the metatable's methods
    local mt, hops = getmetatable(v), 0
    while type(mt) == "table" and hops < 8 do
      local idx = rawget(mt, "__index")
      if type(idx) == "table" then
        add_table_names(set, idx, seen)
        mt = getmetatable(idx)
      else
        if type(idx) == "function" then
          -- methods kept in the metatable itself, or in a table the function looks names up
          -- in (an upvalue named like `stage_methods`)
          for k, x in pairs(mt) do if is_ident(k) and type(x) == "function" then set[k] = true end end
          for i = 1, 32 do
            local name, up = debug.getupvalue(idx, i)
            if not name then break end
            if type(up) == "table" and name:match("methods$") then add_table_names(set, up, seen) end
          end
        end
        break
      end
      hops = hops + 1
    end
  end
  -- a config's knobs (cfg.tile_oc)
  local sp = package.loaded["tunelua.autotvm.space"]
  if tv == "table" and type(sp) == "table" and getmetatable(v) == sp.Config then
    for _, kb in ipairs(v.space:knobs()) do set[kb.name] = true end
  end
  local out = {}
  for k in pairs(set) do if k:sub(1, 2) ~= "__" then out[#out + 1] = k end end
  table.sort(out)
  return out
end

-- ---- printing --------------------------------------------------------------------------------

local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == "\n" then return "\\n" elseif c == "\t" then return "\\t"
    elseif c == '"' then return '\\"' elseif c == "\\" then return "\\\\" end
    return string.format("\\%03d", c:byte())
  end) .. '"'
end

local function source_of(f)
  local info = debug.getinfo(f, "S")
  if info.what == "C" or not info.source:match("^@") then return nil end
  local path = info.source:sub(2):gsub("^.*/lua/", "")
  return path .. ":" .. info.linedefined
end

local function show_function(f)
  local src = source_of(f)
  return src and ("function (" .. src .. ")") or tostring(f)
end

local function indent_lines(s, pad)
  return (s:gsub("\n", "\n" .. pad))
end

local KEY_RANK = { number = 1, string = 2 }

-- The keys of a plain table: 1..n of its sequence, then the rest sorted.
local function sorted_keys(t)
  local n = 0
  while rawget(t, n + 1) ~= nil do n = n + 1 end
  local rest = {}
  for k in pairs(t) do
    if not (type(k) == "number" and k >= 1 and k <= n and k == math.floor(k)) then rest[#rest + 1] = k end
  end
  table.sort(rest, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return (KEY_RANK[ta] or 3) < (KEY_RANK[tb] or 3) end
    if a == "name" or b == "name" then return a == "name" end   -- an object's name first
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return n, rest
end

local render

-- A module as the list of what it holds, by kind; names a lazy module loads on access
-- are listed without loading them.
local function render_module(t)
  local name = module_name(t)
  local lz = lazy_of(t)
  local groups = { submodules = {}, functions = {}, tables = {}, values = {} }
  local function put(g, s) groups[g][#groups[g] + 1] = s end
  local seen = {}
  for k, x in pairs(t) do
    if is_ident(k) and k:sub(1, 1) ~= "_" then
      seen[k] = true
      if type(x) == "function" then put("functions", k)
      elseif is_module(x) then put("submodules", k)
      elseif type(x) == "table" then put("tables", k)
      else put("values", k .. " = " .. (type(x) == "string" and quote(x) or tostring(x))) end
    end
  end
  if lz then
    for k in pairs(lz.submodules) do if not seen[k] then put("submodules", k) end end
    for k in pairs(lz.functions) do if not seen[k] then put("functions", k) end end
  end
  local lines = { "module " .. (name or "(unnamed)") ..
                  (lz and "  (submodules load on first use; help(x) for the doc)" or "  (help(x) for the doc)") }
  for _, g in ipairs({ "submodules", "functions", "tables", "values" }) do
    local l = groups[g]
    if #l > 0 then
      table.sort(l)
      local head = string.format("  %-11s ", g .. ":")
      local line = head
      for i, s in ipairs(l) do
        if #line + #s + 1 > WIDTH and line ~= head then
          lines[#lines + 1] = (line:gsub("%s+$", ""))
          line = string.rep(" ", #head)
        end
        line = line .. s .. (i < #l and " " or "")
      end
      line = line:gsub("%s+$", "")
      lines[#lines + 1] = line
    end
  end
  return table.concat(lines, "\n")
end

local function render_table(t, pad, depth, seen)
  if depth > MAX_DEPTH then return "{...}" end
  seen[t] = true
  local n, rest = sorted_keys(t)
  local items, multi = {}, false
  local shown = 0
  local function add(key, val)
    shown = shown + 1
    if shown > MAX_ITEMS then return false end
    local r = render(val, pad .. "  ", depth + 1, seen)
    if r:find("\n") then multi = true end
    items[#items + 1] = { key = key, text = r }
    return true
  end
  local more = 0
  for i = 1, n do if not add(nil, t[i]) then more = n + #rest - MAX_ITEMS; break end end
  if more == 0 then
    for _, k in ipairs(rest) do
      local key = is_ident(k) and k or ("[" .. (type(k) == "string" and quote(k) or tostring(k)) .. "]")
      if not add(key, t[k]) then more = n + #rest - MAX_ITEMS; break end
    end
  end
  seen[t] = nil
  if #items == 0 then return "{}" end
  if not multi then
    local parts = {}
    for i, it in ipairs(items) do parts[i] = it.key and (it.key .. " = " .. it.text) or it.text end
    if more > 0 then parts[#parts + 1] = "... (" .. more .. " more)" end
    local one = "{" .. table.concat(parts, ", ") .. "}"
    if #pad + #one <= WIDTH then return one end
  end
  local lines = { "{" }
  -- a list of short items: packed to the width
  local short = #rest == 0 and not multi
  for _, it in ipairs(items) do if #it.text > 24 then short = false end end
  if short then
    local line = pad .. "  "
    for _, it in ipairs(items) do
      if #line + #it.text + 2 > WIDTH and line:match("%S") then
        lines[#lines + 1] = (line:gsub("%s+$", ""))
        line = pad .. "  "
      end
      line = line .. it.text .. ", "
    end
    lines[#lines + 1] = (line:gsub("%s+$", ""))
    if more > 0 then lines[#lines + 1] = pad .. "  ... (" .. more .. " more)" end
    lines[#lines + 1] = pad .. "}"
    return table.concat(lines, "\n")
  end
  -- one item a line; a sequence's items numbered
  for i, it in ipairs(items) do
    local key = it.key or (n > 1 and ("[" .. i .. "]") or nil)
    lines[#lines + 1] = pad .. "  " .. (key and (key .. " = ") or "") .. it.text .. ","
  end
  if more > 0 then lines[#lines + 1] = pad .. "  ... (" .. more .. " more)" end
  lines[#lines + 1] = pad .. "}"
  return table.concat(lines, "\n")
end

render = function(v, pad, depth, seen)
  local tv = type(v)
  if tv == "string" then return quote(v) end
  if tv == "function" then return show_function(v) end
  if tv ~= "table" then return indent_lines(tostring(v), pad) end
  local mt = getmetatable(v)
  if type(mt) == "table" and rawget(mt, "__tostring") then return indent_lines(tostring(v), pad) end
  if seen[v] then return "<cycle>" end
  if is_module(v) then
    if depth > 0 then return "<module " .. (module_name(v) or "?") .. ">" end
    return render_module(v)
  end
  return render_table(v, pad, depth, seen)
end

--- repl.show(v) -> the text the REPL prints for a value: a string as it is, an object through
-- its __tostring, a module as its lists of names, a plain table nested and indented (one line
-- when it fits in 78 columns; at most 100 items and 4 levels).
function repl.show(v)
  if type(v) == "string" then return v end
  return render(v, "", 0, {})
end

-- ---- completion ------------------------------------------------------------------------------

-- Index v by k without raising (an object's __index may refuse a name).
local function try_index(v, k)
  local tv = type(v)
  if tv ~= "table" and tv ~= "cdata" and tv ~= "string" and tv ~= "userdata" then return nil end
  local ok, r = pcall(function() return v[k] end)
  if ok then return r end
end

-- The value of a dotted name ("tl.autotvm.task") in env, or nil; lazy modules load.
local function resolve(path, env)
  if not path:match("^[%a_][%w_]*$") and not path:match("^[%a_][%w_]*[%.%w_]*[%w_]$") then return nil end
  local v = env
  for part in path:gmatch("[^%.]+") do
    if not is_ident(part) then return nil end
    v = try_index(v, part)
    if v == nil then return nil end
  end
  return v
end

--- repl.complete(word, line, start) -> sorted list of completions of word (a prefix like
-- "tl.au", "task:ins", "pri"): the globals of the REPL (and Lua's keywords) for a bare name,
-- the names of the value before the last '.' (repl.names), or its methods after ':'.
-- line and start (0-based offset of word in line) are optional: inside a string literal
-- nothing is offered.
function repl.complete(word, line, start)
  local env = repl.env or _G
  if line and start then
    local before = line:sub(1, start)
    local _, dq = before:gsub('"', "")
    local _, sq = before:gsub("'", "")
    if dq % 2 == 1 or sq % 2 == 1 then return {} end
  end
  local out = {}
  local base, sep, part = word:match("^(.*)([%.:])([%w_]*)$")
  if base then
    local v = resolve(base, env)
    if v == nil then return out end
    for _, k in ipairs(repl.names(v)) do
      if k:sub(1, #part) == part and (k:sub(1, 1) ~= "_" or part:sub(1, 1) == "_") then
        if sep == "." or type(try_index(v, k)) == "function" then out[#out + 1] = base .. sep .. k end
      end
    end
    return out
  end
  if not word:match("^[%w_]*$") then return out end
  local set = {}
  for k in pairs(KEYWORDS) do set[k] = true end
  for k in pairs(env) do if is_ident(k) then set[k] = true end end
  for k in pairs(_G) do if is_ident(k) then set[k] = true end end
  for k in pairs(set) do
    if k:sub(1, #word) == word and (k:sub(1, 1) ~= "_" or word:sub(1, 1) == "_") then out[#out + 1] = k end
  end
  table.sort(out)
  return out
end

-- ---- help ------------------------------------------------------------------------------------

local file_lines = {}
local function lines_of(path)
  if file_lines[path] == nil then
    local f = io.open(path, "r")
    local l = false
    if f then
      l = {}
      for s in f:lines() do l[#l + 1] = s end
      f:close()
    end
    file_lines[path] = l
  end
  return file_lines[path] or nil
end

local function strip_comment(s) return (s:gsub("^%s*%-%-%-?%s?", "")) end

--- repl.doc(f) -> the comment block right above the definition of Lua function f (its
-- "---" doc comment), without the dashes; nil when it has none.
function repl.doc(f)
  local info = debug.getinfo(f, "S")
  if info.what == "C" or not info.source:match("^@") then return nil end
  local l = lines_of(info.source:sub(2))
  if not l then return nil end
  local i, out = info.linedefined - 1, {}
  while i >= 1 and l[i]:match("^%s*%-%-") and not l[i]:match("^%s*%-%-%s*%-%-%-%-") do
    table.insert(out, 1, strip_comment(l[i]))
    i = i - 1
  end
  if #out == 0 then return nil end
  return table.concat(out, "\n")
end

-- The comment at the top of a module's file.
local function module_doc(name)
  local path = package.searchpath and package.searchpath(name, package.path)
  local l = path and lines_of(path)
  if not l then return nil end
  local out = {}
  for _, s in ipairs(l) do
    if not s:match("^%s*%-%-") then break end
    out[#out + 1] = strip_comment(s)
  end
  return #out > 0 and table.concat(out, "\n") or nil
end

-- name(a, b, ...) of a Lua function
local function signature(name, f)
  local info = debug.getinfo(f, "u")
  if not info.nparams then return name .. "(...)" end
  local ps = {}
  for i = 1, info.nparams do ps[i] = debug.getlocal(f, i) or ("a" .. i) end
  if info.isvararg then ps[#ps + 1] = "..." end
  return name .. "(" .. table.concat(ps, ", ") .. ")"
end

local function first_line(s) return s and s:match("^[^\n]*") or "" end

-- The methods of an object, one a line with the first line of each doc comment.
local function methods_text(v, skip_self)
  local lines = {}
  for _, k in ipairs(repl.names(v)) do
    local f = k:sub(1, 1) ~= "_" and try_index(v, k)
    if type(f) == "function" then
      local sig = signature(k, f)
      if skip_self then sig = sig:gsub("%(%s*[%a_][%w_]*,?%s*", "(", 1) end
      local d = first_line(repl.doc(f))
      lines[#lines + 1] = string.format("  %-34s %s", sig, d):gsub("%s+$", "")
    end
  end
  return table.concat(lines, "\n")
end

local OVERVIEW = [[
tunelua REPL: `tl` is the tunelua module; an expression typed alone prints its value.
  help(x)                   what x is: a module's doc and contents, a function's doc comment,
                            an object's methods (tasks, configs, spaces, functions, arrays)
  help("tl.autotvm.task")   the same, by name
  Tab                       completes names: globals, module fields (submodules load on
                            first use), fields and methods of objects after '.' and ':'
  Ctrl-D                    exits (history in ~/.tunelua_history)
A walk through a config space: docs/repl.md. The modules:
]]

--- repl.help_text(x) -> the text help(x) prints (see the file's header); with no argument,
-- an overview and the list of tl's modules.
function repl.help_text(...)
  local env = repl.env or _G
  if select("#", ...) == 0 then
    return OVERVIEW .. render_module(require("tunelua"))
  end
  local x = ...
  local label
  if type(x) == "string" then
    local v = resolve(x, env)
    if v == nil and x:match("^tunelua[%w_.]*$") and package.searchpath(x, package.path) then
      v = require(x)
    end
    if v == nil then v = package.loaded[x] end
    if v == nil then
      return "help: no value named '" .. x .. "' (expected a name like \"tl.autotvm.task.create\")"
    end
    label, x = x, v
  end
  local tx = type(x)
  if tx == "function" then
    local src = source_of(x)
    if not src then return (label or tostring(x)) .. ": a built-in function (Lua's library)" end
    local head = signature(label or function_name(x) or "function", x) .. "    -- " .. src
    local d = repl.doc(x)
    return head .. "\n" .. (d or "(no doc comment above its definition)")
  end
  if tx == "table" and is_module(x) then
    local name = module_name(x)
    local d = name and module_doc(name)
    return (d and (d .. "\n\n") or "") .. render_module(x)
  end
  local cls = class_name(x)
  if cls or tx == "cdata" or (tx == "table" and getmetatable(x)) then
    local text = tostring(x)
    local head = first_line(text) .. (text:find("\n") and " ..." or "")
    local parts = { (cls and ("a " .. cls) or "an object") .. ": " .. head }
    local m = methods_text(x, true)
    if m ~= "" then parts[#parts + 1] = "methods (call as x:name(...)):\n" .. m end
    local sp = package.loaded["tunelua.autotvm.space"]
    if tx == "table" and sp and getmetatable(x) == sp.Config then
      local ks = {}
      for _, kb in ipairs(x.space:knobs()) do ks[#ks + 1] = kb.name end
      parts[#parts + 1] = "knobs (x.name -> the chosen entity): " .. table.concat(ks, " ")
    end
    local fs = {}
    if tx == "table" then
      for k, val in pairs(x) do
        if is_ident(k) and type(val) ~= "function" then fs[#fs + 1] = k end
      end
    end
    if #fs > 0 then
      table.sort(fs)
      parts[#parts + 1] = "fields: " .. table.concat(fs, " ")
    end
    return table.concat(parts, "\n")
  end
  return (label and (label .. ": ") or "") .. "a " .. tx .. ": " .. repl.show(x)
end

--- help(x): prints repl.help_text(x).
function repl.help(...)
  io.write(repl.help_text(...), "\n")
end

-- ---- the loop --------------------------------------------------------------------------------

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

--- The REPL's globals: `tl`, `help`; the rest falls through to _G.
function repl.new_env()
  return setmetatable({ tl = require("tunelua"), help = repl.help }, { __index = _G })
end

--- Evaluate one complete chunk and print results; returns ok.
function repl.eval(buf, out)
  out = out or io.stdout
  repl.env = repl.env or repl.new_env()
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
    for i = 2, table.maxn(res) do parts[#parts + 1] = repl.show(res[i]) end
    if #parts > 0 then out:write(table.concat(parts, "\t"), "\n") end
  end
  return true
end

function repl.run()
  local tty = host.isatty(0)
  repl.env = repl.new_env()
  local histfile = os.getenv("HOME") and (os.getenv("HOME") .. "/.tunelua_history")
  if tty then
    io.write("tunelua ", host.version, " (", jit.version, ") -- `tl` is loaded; help() for help, Tab completes; Ctrl-D exits\n")
    if histfile then host.read_history(histfile) end
  end
  local function readline(prompt)
    if tty then return host.readline(prompt, repl.complete) end
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
