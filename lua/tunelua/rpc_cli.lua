--- tunelua.rpc_cli: `tunelua rpc tracker|server|query ...` (docs/rpc.md).
local core = require "tunelua.core"

local C, ctx = core.C, core.ctx

local M = {}

local USAGE = [==[
usage: tunelua rpc tracker [--host 0.0.0.0] [--port 9190] [--port-end 9199] [--stop-key K] [-v]
       tunelua rpc server --tracker HOST:PORT --key KEY [--host 0.0.0.0] [--port 9090]
                          [--port-end 9199] [--custom-addr ADDR] [--timeout SECS] [-v]
       tunelua rpc server --key KEY --port PORT            (standalone, no tracker)
       tunelua rpc query [--host 127.0.0.1] [--port 9190]]==]

local function parse(args, spec)
  local o = {}
  local i = 1
  while i <= #args do
    local a = args[i]
    local name, val = a:match("^%-%-([%w%-]+)=(.*)$")
    if not name then name = a:match("^%-%-([%w%-]+)$") end
    if a == "-v" or a == "--verbose" then
      o.verbose = true
      i = i + 1
    elseif name and spec[name] then
      if val == nil then
        val = args[i + 1]
        i = i + 1
      end
      if val == nil then error("rpc: option --" .. name .. " needs a value", 0) end
      if spec[name] == "number" then
        local v = tonumber(val)
        if not v then error("rpc: option --" .. name .. " expects a number, got '" .. val .. "'", 0) end
        val = v
      end
      o[name] = val
      i = i + 1
    else
      error("rpc: unknown option '" .. a .. "'\n" .. USAGE, 0)
    end
  end
  return o
end

local function fail(rc)
  io.stderr:write("tunelua rpc: ", core.errmsg(), "\n")
  C.tl_clearerr(ctx)
  return rc ~= 0 and 1 or 0
end

function M.main(args)
  local cmd = args[1]
  local rest = {}
  for i = 2, #args do rest[#rest + 1] = args[i] end
  if cmd == "tracker" then
    local o = parse(rest, { host = "string", port = "number", ["port-end"] = "number", ["stop-key"] = "string" })
    local port = o.port or 9190
    local rc = C.tl_rpc_tracker_run(ctx, o.host or "0.0.0.0", port, o["port-end"] or (o.port and port + 1 or 9199),
                                    o["stop-key"], o.verbose and 1 or 0)
    if rc ~= 0 then return fail(rc) end
    return 0
  elseif cmd == "server" then
    local o = parse(rest, { tracker = "string", key = "string", host = "string", port = "number",
                            ["port-end"] = "number", ["custom-addr"] = "string", timeout = "number" })
    if not o.key then error("rpc server: --key KEY is required\n" .. USAGE, 0) end
    local th, tp
    if o.tracker then
      th, tp = o.tracker:match("^(.+):(%d+)$")
      if not th then error("rpc server: --tracker expects HOST:PORT, got '" .. o.tracker .. "'", 0) end
      tp = tonumber(tp)
    end
    local port = o.port or 9090
    local rc = C.tl_rpc_server_run(ctx, th, tp or 0, o.key, o.host or "0.0.0.0", port,
                                   o["port-end"] or (o.port and port + 1 or 9199), o["custom-addr"],
                                   o.timeout or 0, o.verbose and 1 or 0)
    if rc ~= 0 then return fail(rc) end
    return 0
  elseif cmd == "query" then
    local o = parse(rest, { host = "string", port = "number" })
    local rpc = require "tunelua.rpc"
    local host, port = o.host or os.getenv("TVM_TRACKER_HOST") or "127.0.0.1",
                       o.port or tonumber(os.getenv("TVM_TRACKER_PORT") or "") or 9190
    local ok, data = pcall(rpc.summary, host, port)
    if not ok then
      io.stderr:write("tunelua rpc query: ", tostring(data), "\n")
      return 1
    end
    io.write(string.format("Tracker address %s:%d\n\n", host, port))
    io.write(rpc.text_summary(data))
    return 0
  else
    io.stderr:write(USAGE, "\n")
    return cmd and 1 or 0
  end
end

return M
