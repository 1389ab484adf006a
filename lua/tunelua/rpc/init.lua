--- tunelua.rpc: the device farm from scripts (docs/rpc.md).
--
--   local rpc = require "tunelua.rpc"
--   local remote = rpc.request_remote("rk3399", "127.0.0.1", 9190, {timeout = 60})
--   remote:upload("/tmp/k.so", "k.so")
--   local m = remote:load_module("k.so")
--   local a, b, c = remote:empty({1024}, "float32"), remote:empty({1024}), remote:empty({1024})
--   a:copyfrom(nd_array); b:random()
--   local costs = m:time_evaluator("f", {number = 10, ["repeat"] = 3})(a, b, c)
--   m:call("f", a, b, c); c:copyto(nd_array)
--   remote:close()
--
--   rpc.summary(host, port) -> {queue_info = ..., server_info = ...}
--
-- A farm with an auth key (docs/rpc.md "Security"): give {auth_key = K} or {auth_key_file = F}
-- to connect/request_remote/summary/tracker_call/RPCRunner, or set TUNELUA_RPC_AUTH_KEY or
-- TUNELUA_RPC_AUTH_KEY_FILE.
--   rpc.text_summary(summary) -> TVM's "Server List" and "Queue Status" text
local ffi = require "ffi"
local core = require "tunelua.core"
local json = require "tunelua.json"

local C, ctx = core.C, core.ctx

local rpc = { json = json }

local function take_string(p)
  if p == nil then return nil end
  local s = ffi.string(p)
  C.tl_rpc_free(p)
  return s
end

local function tracker_addr(host, port, lvl)
  host = host or os.getenv("TVM_TRACKER_HOST") or "127.0.0.1"
  port = port or tonumber(os.getenv("TVM_TRACKER_PORT") or "") or 9190
  if type(host) ~= "string" then error("rpc: host must be a string", lvl + 1) end
  if type(port) ~= "number" or port ~= math.floor(port) or port < 1 or port > 65535 then
    error("rpc: port must be an integer in 1..65535, got " .. tostring(port), lvl + 1)
  end
  return host, port
end

--- rpc.read_key_file(path) -> the key: the file's first line (a trailing newline dropped).
-- Raises naming the file when it cannot be read, is empty or is over 1024 bytes.
function rpc.read_key_file(path)
  local f, err = io.open(path, "rb")
  if not f then error("rpc: cannot read the auth key file: " .. tostring(err), 2) end
  local s = f:read("*a") or ""
  f:close()
  s = s:gsub("\r?\n$", "")
  if s == "" then error("rpc: the auth key file '" .. path .. "' is empty", 2) end
  if #s > 1024 then error("rpc: the auth key in '" .. path .. "' is over 1024 bytes", 2) end
  if s:find("[\r\n]") then error("rpc: the auth key file '" .. path .. "' has more than one line", 2) end
  return s
end

--- rpc.auth_key(o) -> the key of options {auth_key, auth_key_file}, else of the environment
-- (TUNELUA_RPC_AUTH_KEY, TUNELUA_RPC_AUTH_KEY_FILE), else nil.
function rpc.auth_key(o)
  o = o or {}
  if o.auth_key ~= nil and o.auth_key_file ~= nil then
    error("rpc: give auth_key or auth_key_file, not both", 2)
  end
  if o.auth_key ~= nil then
    if type(o.auth_key) ~= "string" or o.auth_key == "" or #o.auth_key > 1024 then
      error("rpc: auth_key must be a non-empty string of at most 1024 bytes", 2)
    end
    return o.auth_key
  end
  if o.auth_key_file ~= nil then return rpc.read_key_file(o.auth_key_file) end
  local k = os.getenv("TUNELUA_RPC_AUTH_KEY")
  if k and k ~= "" then return k end
  local f = os.getenv("TUNELUA_RPC_AUTH_KEY_FILE")
  if f and f ~= "" then return rpc.read_key_file(f) end
  return nil
end

--- rpc.use_auth_key(key): the key this process presents as a client (nil: none).
function rpc.use_auth_key(key)
  core.check(C.tl_rpc_set_auth_key(ctx, key), 2)
end

-- ---- sessions ------------------------------------------------------------------------

local Session = {}
Session.__index = Session
local RemoteArray = {}
RemoteArray.__index = RemoteArray
local RemoteModule = {}
RemoteModule.__index = RemoteModule

local function wrap(handle)
  local h = ffi.gc(handle, C.tl_rpc_close)
  return setmetatable({ handle = h, key = ffi.string(C.tl_rpc_sess_key(h)),
                        addr = ffi.string(C.tl_rpc_sess_addr(h)), timeout = 60 }, Session)
end

--- rpc.connect(host, port, {key = match_key, timeout = 10}) -> session (no tracker)
function rpc.connect(host, port, o)
  o = o or {}
  rpc.use_auth_key(rpc.auth_key(o))
  local out = ffi.new("tl_rpc_sess *[1]")
  core.check(C.tl_rpc_connect(ctx, host, port, o.key or "", o.timeout or 10, out), 2)
  return wrap(out[0])
end

--- rpc.request_remote(key, host, port, {timeout = 60, priority = 1}) -> session
function rpc.request_remote(key, host, port, o)
  o = o or {}
  if type(key) ~= "string" or key == "" then error("request_remote: key must be a device key string", 2) end
  host, port = tracker_addr(host, port, 2)
  rpc.use_auth_key(rpc.auth_key(o))
  local out = ffi.new("tl_rpc_sess *[1]")
  core.check(C.tl_rpc_request(ctx, host, port, key, o.priority or 1, o.timeout or 60, out), 2)
  local s = wrap(out[0])
  s.timeout = o.session_timeout or 600
  return s
end

--- session:call(header_table, payload_string) -> reply table, reply payload (string or nil)
-- Raises on a transport error or a reply with ok = false.
function Session:call(h, blob, lvl)
  lvl = (lvl or 1) + 1
  if not self.handle then error("rpc: the session is closed", lvl) end
  local text = json.encode(h)
  local resp = ffi.new("char *[1]")
  local rb = ffi.new("void *[1]")
  local rn = ffi.new("uint64_t[1]")
  core.check(C.tl_rpc_call(ctx, self.handle, text, blob, blob and #blob or 0, self.timeout,
                           resp, rb, rn), lvl)
  local r = json.decode(take_string(resp[0]))
  local payload = nil
  if rb[0] ~= nil then
    payload = ffi.string(rb[0], tonumber(rn[0]))
    C.tl_rpc_free(rb[0])
  end
  if r.ok ~= true then error("rpc " .. self.addr .. ": " .. tostring(r.error), lvl) end
  return r, payload
end

function Session:hello() return self:call({ op = "hello" }, nil, 2) end

--- session:upload(local_path, name)   (zlib-compressed on the wire)
function Session:upload(path, name)
  name = name or path:match("([^/]+)$")
  core.check(C.tl_rpc_upload(ctx, self.handle, path, name, self.timeout), 2)
  return name
end

--- session:remove(name)  ("" removes every uploaded file)
function Session:remove(name) self:call({ op = "remove", name = name or "" }, nil, 2) end

--- session:load_module(name) -> remote module
function Session:load_module(name)
  self:call({ op = "load", name = name }, nil, 2)
  return setmetatable({ sess = self, name = name }, RemoteModule)
end

--- session:load_opencl(source_name, manifest_name, {device = 0}) -> remote module
-- An uploaded OpenCL C file and its uploaded manifest (tunelua_opencl.h), built on the server's
-- OpenCL device in the session. module:call(nil, ...) and module:time_evaluator(nil, o)(...)
-- then run every kernel on the host arrays given (copied to the device and back).
function Session:load_opencl(name, manifest, o)
  o = o or {}
  local r = self:call({ op = "load", kind = "opencl", name = name, manifest = manifest,
                        device = o.device or 0 }, nil, 2)
  return setmetatable({ sess = self, name = name, kernels = r.kernels }, RemoteModule)
end

--- session:measure_opencl(name, manifest, {number, repeat, min_repeat_ms, timeout, build_timeout,
---   device, ref_module, ref_manifest}) -> reply {error_no, costs, error}
function Session:measure_opencl(name, manifest, o)
  o = o or {}
  return (self:call({ op = "measure", kind = "opencl", module = name, manifest = manifest,
                      device = o.device or 0, number = o.number or 4,
                      ["repeat"] = o["repeat"] or o.repeats or 3, min_repeat_ms = o.min_repeat_ms or 0,
                      timeout = o.timeout or 10, build_timeout = o.build_timeout or 10,
                      ref_module = o.ref_module, ref_manifest = o.ref_manifest }, nil, 2))
end

--- session:graph_module(lib, {device = 0}) -> a compiled network (executor.build; an OpenCL
--- one on the server's OpenCL device `device`) run on the server: set_input, run, get_output,
--- benchmark as GraphModule's (tunelua.rpc.graph).
function Session:graph_module(lib, o)
  return require("tunelua.rpc.graph").load(self, lib, o)
end

--- session:empty(shape, dtype) -> remote array
function Session:empty(shape, dtype)
  local r = self:call({ op = "alloc", shape = json.array(shape), dtype = dtype or "float32" }, nil, 2)
  return setmetatable({ sess = self, id = r.id, shape = shape, dtype = dtype or "float32" }, RemoteArray)
end

--- session:measure(name, sig, {number, repeat, min_repeat_ms, timeout}) -> reply {error_no, costs, error}
function Session:measure(name, sig, o)
  o = o or {}
  return (self:call({ op = "measure", module = name, sig = sig, number = o.number or 4,
                      ["repeat"] = o["repeat"] or o.repeats or 3, min_repeat_ms = o.min_repeat_ms or 0,
                      cache_flush = o.enable_cpu_cache_flush or false, timeout = o.timeout or 10 }, nil, 2))
end

function Session:close()
  if self.handle then
    -- a polite goodbye, but never a long wait on a session that is stuck or gone
    local t = self.timeout
    self.timeout = math.min(t or 5, 5)
    pcall(self.call, self, { op = "shutdown" })
    self.timeout = t
    C.tl_rpc_close(ffi.gc(self.handle, nil))
    self.handle = nil
  end
end

local function bytes_of(x)
  if type(x) == "string" then return x end
  local a = type(x) == "table" and x.handle or x
  return ffi.string(C.tl_array_data(a), C.tl_array_nbytes(a))
end

function RemoteArray:copyfrom(x) self.sess:call({ op = "copy_to", id = self.id }, bytes_of(x), 2) return self end
function RemoteArray:random(seed) self.sess:call({ op = "random", id = self.id, seed = seed or 1 }, nil, 2) return self end
function RemoteArray:bytes() local _, b = self.sess:call({ op = "copy_from", id = self.id }, nil, 2) return b or "" end
function RemoteArray:copyto(a)
  local b = self:bytes()
  local h = type(a) == "table" and a.handle or a
  if tonumber(C.tl_array_nbytes(h)) ~= #b then error("copyto: size mismatch", 2) end
  ffi.copy(C.tl_array_data(h), b, #b)
  return a
end
function RemoteArray:free() self.sess:call({ op = "free", id = self.id }, nil, 2) end

local function ids(...)
  local t = json.array({})
  for i = 1, select("#", ...) do t[i] = select(i, ...).id end
  return t
end

function RemoteModule:call(fname, ...)
  self.sess:call({ op = "call", module = self.name, func = fname or "", args = ids(...) }, nil, 2)
end

--- module:time_evaluator(fname, {number = 4, repeat = 3, min_repeat_ms = 0}) -> function(args...) -> costs
function RemoteModule:time_evaluator(fname, o)
  o = o or {}
  return function(...)
    local r = self.sess:call({ op = "time", module = self.name, func = fname or "", args = ids(...),
                               number = o.number or 4, ["repeat"] = o["repeat"] or o.repeats or 3,
                               min_repeat_ms = o.min_repeat_ms or 0,
                               cache_flush = o.enable_cpu_cache_flush or false }, nil, 2)
    local c = {}
    for i, v in ipairs(r.costs) do c[i] = v end
    local sum = 0
    for _, v in ipairs(c) do sum = sum + v end
    c.mean = #c > 0 and sum / #c or 0
    return c
  end
end

-- ---- tracker queries --------------------------------------------------------------------

--- rpc.summary(host, port, timeout, {auth_key = K}) -> {queue_info = {key = {free, pending}},
---   server_info = {{key, addr}}} (and truncated = {queues = N, servers = N} when the tracker
---   had more than one frame holds)
function rpc.summary(host, port, timeout, o)
  host, port = tracker_addr(host, port, 2)
  rpc.use_auth_key(rpc.auth_key(o))
  local out = ffi.new("char *[1]")
  core.check(C.tl_rpc_tracker_summary(ctx, host, port, timeout or 10, out), 2)
  return json.decode(take_string(out[0]))
end

--- rpc.tracker_call(host, port, message_table) -> decoded reply (one raw tracker exchange)
function rpc.tracker_call(host, port, msg, timeout, o)
  rpc.use_auth_key(rpc.auth_key(o))
  local out = ffi.new("char *[1]")
  core.check(C.tl_rpc_tracker_raw(ctx, host, port, json.encode(msg), timeout or 10, out), 2)
  return json.decode(take_string(out[0]))
end

--- rpc.text_summary(summary) -> the "Server List" and "Queue Status" text
function rpc.text_summary(data)
  local lines = {}
  local function add(s) lines[#lines + 1] = s end
  add("Server List")
  add(string.rep("-", 30))
  add("server-address           key")
  add(string.rep("-", 30))
  local servers = {}
  for _, it in ipairs(data.server_info or {}) do servers[#servers + 1] = it end
  table.sort(servers, function(a, b) return tostring(a.key) < tostring(b.key) end)
  local total = {}
  for _, it in ipairs(servers) do
    local addr = {}
    for i, v in ipairs(it.addr or {}) do addr[i] = tostring(v) end
    add(string.format("%21s    %s", table.concat(addr, ":"), tostring(it.key)))
    local k = tostring(it.key):match("^[^:]*:([^:]*)") or tostring(it.key)   -- "server:K" -> K
    total[k] = (total[k] or 0) + 1
  end
  add(string.rep("-", 30))
  add("")
  local keys, w = {}, 0
  for k in pairs(data.queue_info or {}) do keys[#keys + 1] = k; if #k > w then w = #k end end
  table.sort(keys)
  add("Queue Status")
  local title = string.format("%-" .. w .. "s   total  free  pending", "key")
  -- TVM's separator is as long as its title line counted with the newline: one dash more
  local sep = string.rep("-", #title + 1)
  add(sep)
  add(title)
  add(sep)
  for _, k in ipairs(keys) do
    local q = data.queue_info[k]
    local t = total[k] or 0
    if t > 0 or (q.pending or 0) > 0 then
      add(string.format("%-" .. w .. "s   %-5d  %-4d  %-7d", k, t, q.free or 0, q.pending or 0))
    end
  end
  add(sep)
  local tr = data.truncated
  if type(tr) == "table" then
    add(string.format("(the tracker left out %d keys and %d servers to keep its answer within 1 MiB)",
                      tonumber(tr.queues) or 0, tonumber(tr.servers) or 0))
  end
  return table.concat(lines, "\n") .. "\n"
end

return rpc
