--- tunelua.rpc_cli: `tunelua rpc tracker|server|query ...` (docs/rpc.md).
local core = require "tunelua.core"

local C, ctx = core.C, core.ctx

local M = {}

local USAGE = [==[
usage: tunelua rpc tracker [--host 127.0.0.1] [--port 9190] [--port-end 9199] [--stop-key K]
                           [--idle-timeout SECS] [--max-conns-per-peer N] [AUTH] [-v]
       tunelua rpc server --tracker HOST:PORT --key KEY [--host 127.0.0.1] [--port 9090]
                          [--port-end 9199] [--custom-addr ADDR] [--timeout SECS]
                          [--vta-config FILE] [AUTH] [-v]
       tunelua rpc server --key KEY --port PORT            (standalone, no tracker)
       tunelua rpc query [--host 127.0.0.1] [--port 9190] [AUTH]
AUTH: --auth-key KEY | --auth-key-file FILE (else $TUNELUA_RPC_AUTH_KEY[_FILE]): the farm's
shared secret, required by trackers and servers that have one (docs/rpc.md "Security").
--host 0.0.0.0 listens on every interface: anyone who reaches the port can run code on servers.]==]

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
      elseif spec[name] == "port" or spec[name] == "port-end" then
        -- a listening port: 0 = any free one; a range end is exclusive, so up to 65536
        local hi = spec[name] == "port" and 65535 or 65536
        local v = tonumber(val)
        if not v or v ~= math.floor(v) or v < 0 or v > hi then
          error(string.format("rpc: option --%s expects an integer in 0..%d%s, got '%s'", name, hi,
                              spec[name] == "port" and " (0: any free port)" or "", val), 0)
        end
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

local AUTH = { ["auth-key"] = "string", ["auth-key-file"] = "string" }
local function with_auth(spec)
  for k, v in pairs(AUTH) do spec[k] = v end
  return spec
end

-- The farm's key from --auth-key, --auth-key-file or the environment (nil: none).
local function auth_of(o, what)
  local rpc = require "tunelua.rpc"
  if o["auth-key"] and o["auth-key-file"] then
    error("rpc " .. what .. ": give --auth-key or --auth-key-file, not both", 0)
  end
  if o["auth-key"] == "" then error("rpc " .. what .. ": --auth-key must not be empty", 0) end
  local ok, k = pcall(rpc.auth_key, { auth_key = o["auth-key"], auth_key_file = o["auth-key-file"] })
  if not ok then error("rpc " .. what .. ": " .. tostring(k):gsub("^rpc: ", ""), 0) end
  return k
end

-- A bind address other than loopback is public: say what that means.
local function warn_public(what, host, key)
  if host:match("^127%.") or host == "localhost" then return end
  io.stderr:write(string.format("tunelua rpc %s: WARNING: listening on %s: every host that reaches " ..
    "this port can %s%s (docs/rpc.md \"Security\")\n", what, host,
    what == "server" and "upload and run native code here" or "use this farm's devices, which run uploaded native code",
    key and "; an auth key is required" or "; no auth key is set (--auth-key-file)"))
end

local function port_of(s, opt)
  local v = tonumber(s)
  if not v or v ~= math.floor(v) or v < 1 or v > 65535 then
    error(string.format("rpc: option %s expects a port in 1..65535, got '%s'", opt, tostring(s)), 0)
  end
  return v
end

function M.main(args)
  local cmd = args[1]
  local rest = {}
  for i = 2, #args do rest[#rest + 1] = args[i] end
  if cmd == "tracker" then
    local o = parse(rest, with_auth({ host = "string", port = "port", ["port-end"] = "port-end",
                                      ["stop-key"] = "string", ["idle-timeout"] = "number",
                                      ["max-conns-per-peer"] = "number" }))
    local key = auth_of(o, "tracker")
    local host = o.host or "127.0.0.1"
    local port = o.port or 9190
    local mpp = o["max-conns-per-peer"]
    if mpp and (mpp < 1 or mpp ~= math.floor(mpp)) then
      error("rpc: option --max-conns-per-peer expects an integer >= 1, got " .. mpp, 0)
    end
    if o["idle-timeout"] and o["idle-timeout"] < 0 then
      error("rpc: option --idle-timeout expects seconds >= 0 (0: never), got " .. o["idle-timeout"], 0)
    end
    warn_public("tracker", host, key)
    local rc = C.tl_rpc_tracker_run(ctx, host, port, o["port-end"] or (o.port and port + 1 or 9199),
                                    o["stop-key"], key, o["idle-timeout"] or -1, mpp or 0,
                                    o.verbose and 1 or 0)
    if rc ~= 0 then return fail(rc) end
    return 0
  elseif cmd == "server" then
    local o = parse(rest, with_auth({ tracker = "string", key = "string", host = "string", port = "port",
                                      ["port-end"] = "port-end", ["custom-addr"] = "string", timeout = "number",
                                      ["vta-config"] = "string" }))
    if not o.key then error("rpc server: --key KEY is required\n" .. USAGE, 0) end
    if o["vta-config"] and C.tl_rpc_server_set_vta_config(ctx, o["vta-config"]) ~= 0 then
      error("rpc server: --vta-config: " .. core.errmsg(), 0)
    end
    local key = auth_of(o, "server")
    local th, tp
    if o.tracker then
      th, tp = o.tracker:match("^(.+):([^:]*)$")
      if not th then error("rpc server: --tracker expects HOST:PORT, got '" .. o.tracker .. "'", 0) end
      tp = port_of(tp, "--tracker")
    end
    local host = o.host or "127.0.0.1"
    local port = o.port or 9090
    warn_public("server", host, key)
    local rc = C.tl_rpc_server_run(ctx, th, tp or 0, o.key, host, port,
                                   o["port-end"] or (o.port and port + 1 or 9199), o["custom-addr"],
                                   o.timeout or 0, key, o.verbose and 1 or 0)
    if rc ~= 0 then return fail(rc) end
    return 0
  elseif cmd == "query" then
    local o = parse(rest, with_auth({ host = "string", port = "number" }))
    local rpc = require "tunelua.rpc"
    local key = auth_of(o, "query")
    local host = o.host or os.getenv("TVM_TRACKER_HOST") or "127.0.0.1"
    local port = o.port or (os.getenv("TVM_TRACKER_PORT") and port_of(os.getenv("TVM_TRACKER_PORT"), "TVM_TRACKER_PORT")) or 9190
    port_of(port, "--port")
    local ok, data = pcall(rpc.summary, host, port, nil, { auth_key = key })
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
