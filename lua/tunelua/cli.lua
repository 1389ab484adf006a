--- tunelua.cli: the command line of the tunelua executable.
--
--   tunelua                     REPL
--   tunelua script.lua args...  run a script (it sees `arg` as in lua)
--   tunelua -e CODE [-i]        run CODE (then the REPL with -i)
--   tunelua -i script.lua       run the script, then the REPL
--   tunelua SUBCOMMAND ...      rpc, log, ... (see `commands` below)
local host = require "tunelua.host"

local cli = {}

-- Subcommands: name -> module with a main(args) returning an exit status.
cli.commands = {
  rpc = { module = "tunelua.rpc_cli", help = "device farm: tracker, server, query" },
  log = { module = "tunelua.log_cli", help = "tuning logs: best, distill, summary, plot" },
}

local function usage()
  local lines = {
    "usage: tunelua [options] [script.lua [args...]]",
    "       tunelua <command> [args...]",
    "",
    "options:",
    "  -e CODE      run CODE",
    "  -i           enter the REPL after running the script or -e CODE",
    "  -v, --version  print the version",
    "  -h, --help   print this help",
    "",
    "With no script, tunelua starts a REPL.",
    "",
    "commands:",
  }
  local names = {}
  for k in pairs(cli.commands) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    lines[#lines + 1] = string.format("  %-10s %s", k, cli.commands[k].help)
  end
  return table.concat(lines, "\n")
end

local function errorhandler(e)
  if type(e) ~= "string" then e = tostring(e) end
  return debug.traceback(e, 2)
end

--- cli.message(err) -> the message of a failure as the user sees it: no traceback, and no
--- leading position in tunelua's own files (lua/tunelua/..., networks/..., scripts/...:N: ),
--- which says where the error was raised, not what to change. A user's own chunk keeps its.
function cli.message(err)
  local msg = err:match("^(.-)\nstack traceback:") or err
  while true do
    local path, rest = msg:match("^([^\n:]-%.lua):%d+: (.*)$")
    if not path then break end
    if not (path:match("lua/tunelua/") or path:match("^networks/") or path:match("/networks/")
            or path:match("^scripts/") or path:match("/scripts/")) then
      break
    end
    msg = rest
  end
  return msg
end

-- Report a failure: stdout flushed first (a piped run keeps its order), the message, and the
-- whole error with its traceback under TUNELUA_DEBUG=1 (or TUNELUA_TRACEBACK).
local function report(err)
  io.stdout:flush()
  if os.getenv("TUNELUA_DEBUG") == "1" or os.getenv("TUNELUA_TRACEBACK") then
    io.stderr:write("tunelua: ", err, "\n")
  else
    io.stderr:write("tunelua: ", cli.message(err), "\n")
  end
end

local function run_chunk(fn, ...)
  local ok, err = xpcall(fn, errorhandler, ...)
  if not ok then
    report(err)
    return false
  end
  return true
end

local function run_script(path, argv, first)
  local f, err = loadfile(path)
  if not f then
    if err:match("^cannot open") then
      err = string.format("cannot open script '%s': %s", path,
                          err:match(": ([^:]*)$") or "not found")
    end
    io.stderr:write("tunelua: ", err, "\n")
    return false
  end
  local a = { [0] = path, [-1] = argv[0] }
  for i = first, #argv do a[#a + 1] = argv[i] end
  _G.arg = a
  return run_chunk(f, unpack(a, 1, #a))
end

--- Entry point: argv[0] is the executable. Returns the exit status.
function cli.main(argv)
  local i, interactive, ran = 1, false, false
  while i <= #argv do
    local a = argv[i]
    if a == "-h" or a == "--help" then
      print(usage())
      return 0
    elseif a == "-v" or a == "--version" then
      print("tunelua " .. host.version .. " (" .. jit.version .. ")")
      return 0
    elseif a == "-i" then
      interactive = true
      i = i + 1
    elseif a == "-e" then
      local code = argv[i + 1]
      if not code then
        io.stderr:write("tunelua: '-e' needs an argument\n", usage(), "\n")
        return 1
      end
      local f, err = loadstring(code, "=(command line)")
      if not f then
        io.stderr:write("tunelua: ", err, "\n")
        return 1
      end
      -- `tl` is predefined as in the REPL; the chunk's globals are the program's
      setfenv(f, setmetatable({ tl = require("tunelua") }, { __index = _G, __newindex = _G }))
      if not run_chunk(f) then return 1 end
      ran = true
      i = i + 2
    elseif a == "--" then
      i = i + 1
      break
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      io.stderr:write("tunelua: unknown option '", a, "'\n", usage(), "\n")
      return 1
    else
      break
    end
  end
  local a = argv[i]
  if a and not ran and cli.commands[a] and not a:match("%.lua$") then
    local cmd = cli.commands[a]
    local args = {}
    for k = i + 1, #argv do args[#args + 1] = argv[k] end
    local status
    local okr = run_chunk(function() status = require(cmd.module).main(args) end)
    if not okr then return 1 end
    return status or 0
  end
  if a then
    if not run_script(a, argv, i + 1) then return 1 end
    ran = true
  end
  if interactive or not ran then
    return require("tunelua.repl").run()
  end
  return 0
end

return cli
