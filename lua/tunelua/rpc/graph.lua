--- tunelua.rpc.graph: a compiled network run on an RPC server (the session's graph ops,
--- docs/rpc.md), with GraphModule's methods.
--
--   local remote = rpc.request_remote("rk3399", "127.0.0.1", 9190)
--   local m = remote:graph_module(lib)      -- lib: executor.build's (C or OpenCL target)
--   m:set_input("data", x)
--   m:run()                                 -- the inputs travel, the outputs come back
--   local y = m:get_output(0)               -- a host array
--   m:benchmark({number = 1, repeats = 10}) -- timed on the server (tl_graph_exec_time)
--   m:vta_cycles()                          -- a network with VTA groups: their simulated
--                                           -- cycles of the last run on the server's vta-sim
--
-- The network is exported (executor.export) to a private temporary directory, uploaded
-- (kernels, graph description, params) and loaded by graph_load; the local files are removed.
local ffi = require "ffi"
local nd = require "tunelua.nd"
local file = require "tunelua.file"
local executor = require "tunelua.graph.executor"

local M = {}

local RemoteGraph = {}
RemoteGraph.__index = RemoteGraph
M.RemoteGraph = RemoteGraph

--- M.load(session, lib, {device = 0}) -> a remote graph module (an OpenCL network on the
--- server's OpenCL device `device`)
function M.load(sess, lib, o)
  o = o or {}
  if not executor.exportable(lib) then
    error("graph_module: expected a network built by executor.build", 3)
  end
  local dir = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-graph")
  local ok, r = pcall(function()
    -- names of its own per network of the session (a shared object is loaded once per path)
    sess.graph_seq = (sess.graph_seq or 0) + 1
    local files = executor.export(lib, dir, string.format("g%d-", sess.graph_seq))
    for _, f in ipairs(files) do sess:upload(dir .. "/" .. f, f) end
    return sess:call({ op = "graph_load", name = files[1], params = files[2], device = o.device })
  end)
  file.remove(dir)
  if not ok then error(r, 3) end
  local m = setmetatable({ sess = sess, id = r.graph, steps = r.steps, inputs = {}, input_order = {},
                           outputs = {}, values = {}, device = sess.key, addr = sess.addr,
                           vta_groups = r.vta_groups, vta_env = rawget(lib, "vta_env") }, RemoteGraph)
  for i, d in ipairs(r.inputs) do
    m.inputs[d.name] = { index = i, shape = d.shape, dtype = d.dtype }
    m.input_order[i] = d.name
  end
  for i, d in ipairs(r.outputs) do m.outputs[i] = { shape = d.shape, dtype = d.dtype } end
  return m
end

--- m:set_input(name, array) or m:set_input({name = array}): sent with the next run or benchmark.
function RemoteGraph:set_input(name, value)
  if type(name) == "table" and value == nil then
    for k, v in pairs(name) do self:set_input(k, v) end
    return
  end
  local n, b = executor.find_input(self.inputs, self.input_order, name, 2)
  if not nd.is_array(value) then value = nd.array(value, b.dtype) end
  local sh = value:shape()
  local ok = #sh == #b.shape and value:dtype() == b.dtype
  for d = 1, #sh do ok = ok and sh[d] == b.shape[d] end
  if not ok then
    error(string.format("set_input: '%s' takes %s [%s], got %s [%s]", n, b.dtype,
      table.concat(b.shape, ", "), value:dtype(), table.concat(sh, ", ")), 2)
  end
  self.values[n] = ffi.string(value:data_ptr(), value:nbytes())
  self.dirty = true
end

function RemoteGraph:get_num_inputs() return #self.input_order end
function RemoteGraph:get_num_outputs() return #self.outputs end

local function nbytes(d)
  local n = nd.empty({ 1 }, d.dtype):nbytes()
  for _, x in ipairs(d.shape) do n = n * x end
  return n
end

--- m:run(): one run on the server; the inputs set since the last run travel with it (unset
--- inputs are zeros), the outputs come back.
function RemoteGraph:run(inputs)
  if inputs then self:set_input(inputs) end
  local payload = nil
  if self.dirty then
    local parts = {}
    for i, name in ipairs(self.input_order) do
      parts[i] = self.values[name] or string.rep("\0", nbytes(self.inputs[name]))
    end
    payload = table.concat(parts)
  end
  local r, out = self.sess:call({ op = "graph_run", graph = self.id }, payload, 2)
  self.dirty = false
  self.out_bytes = out or ""
  self.last_seconds = r.seconds
  self.last_vta_cycles = r.vta_cycles
end

--- m:vta_cycles() -> a network with VTA groups: the list of each group's simulated cycles
--- of the last run on the server (kernel order, as lib:vta_cycles() lists them), their total
--- and the total's seconds at the configuration's clock; nil for a network without VTA groups.
function RemoteGraph:vta_cycles()
  if not self.vta_groups then return nil end
  if not self.last_vta_cycles then self:run() end
  local l, total = {}, 0
  for i, c in ipairs(self.last_vta_cycles) do
    l[i] = c
    total = total + c
  end
  local mhz = self.vta_env and self.vta_env.CLOCK_MHZ or 100
  return l, total, total / (mhz * 1e6)
end

--- m:get_output(i) -> output i (0-based) of the last run as a host array (runs once if none).
function RemoteGraph:get_output(i)
  i = i or 0
  local d = self.outputs[i + 1]
  if not d then
    error(string.format("get_output: index %s out of range (%d outputs)", tostring(i), #self.outputs), 2)
  end
  if not self.out_bytes or self.dirty then self:run() end
  local off = 0
  for k = 1, i do off = off + nbytes(self.outputs[k]) end
  local a = nd.empty(d.shape, d.dtype)
  if off + a:nbytes() > #self.out_bytes then error("get_output: the server sent too few bytes", 2) end
  ffi.copy(a:data_ptr(), ffi.cast("const char *", self.out_bytes) + off, a:nbytes())
  return a
end

--- m:benchmark({number = 1, repeats = 3, min_repeat_ms = 0, quiet = false}) -> {mean, median,
--- std, results}: whole runs timed on the server; prints "Mean inference time (std dev): ...".
function RemoteGraph:benchmark(opts)
  opts = opts or {}
  if self.dirty then self:run() end
  local r = self.sess:call({ op = "graph_time", graph = self.id, number = opts.number or 1,
                             ["repeat"] = opts.repeats or opts["repeat"] or 3,
                             min_repeat_ms = opts.min_repeat_ms or 0 }, nil, 2)
  local secs = {}
  for i, v in ipairs(r.costs) do secs[i] = v end
  local res = executor.bench_result(secs)
  if not opts.quiet then print(tostring(res)) end
  return res
end

return M
