--- tunelua.rpc.runner: RPCRunner, the LocalRunner's interface on devices of an RPC tracker.
--
--   autotvm.RPCRunner(key, host, port, {number = 4, repeat = 3, min_repeat_ms = 0, timeout = 10,
--     n_parallel = 1, cooldown_interval = 0.1, priority = 1, wait_limit = 600})
--
-- runner:run(inputs, build_results) ships each built module to a device of `key` (zlib), times it
-- there in a child of the session (a crash is error 4, a hang error 7) and returns MeasureResults.
-- n_parallel sessions run at once (one thread each in C). A device that dies mid-measurement gives
-- its trial an error record (RUNTIME_DEVICE, "device lost ..."), is re-requested and tuning goes
-- on. When no device comes for wait_limit seconds (a line is printed once a minute while waiting)
-- run() raises an error that says how to resume; the log written so far is intact.
local ffi = require "ffi"
local core = require "tunelua.core"

local C, ctx = core.C, core.ctx

local M = {}
local RPCRunner = {}
RPCRunner.__index = RPCRunner

function M.new(key, host, port, o, runner_opts, _)
  if type(key) ~= "string" or key == "" then error("RPCRunner: key must be a device key string", 3) end
  host = host or os.getenv("TVM_TRACKER_HOST") or "127.0.0.1"
  port = port or tonumber(os.getenv("TVM_TRACKER_PORT") or "") or 9190
  if type(host) ~= "string" then error("RPCRunner: host must be a string", 3) end
  if type(port) ~= "number" then error("RPCRunner: port must be a number", 3) end
  o = o or {}
  if type(o) ~= "table" then error("RPCRunner: expected an options table", 3) end
  local r = setmetatable({ key = key, host = host, port = port }, RPCRunner)
  runner_opts(r, o, 3)
  r.n_parallel = o.n_parallel or 1
  r.priority = o.priority or 1
  r.wait_limit = o.wait_limit or 600
  if type(r.n_parallel) ~= "number" or r.n_parallel < 1 then error("RPCRunner: n_parallel must be >= 1", 3) end
  return r
end

function RPCRunner:set_task(task) self.task = task end
function RPCRunner:get_build_kwargs() return {} end

function RPCRunner:run(inputs, build_results)
  local measure = require "tunelua.autotvm.measure"
  local E = measure.MeasureErrorNo
  local out, jobs = {}, {}
  for i, br in ipairs(build_results) do
    if br.error_no ~= 0 then
      out[i] = measure.MeasureResult({ 1e9 }, br.error_no, br.time_cost or 0, os.time(), br.error_msg)
    else
      jobs[#jobs + 1] = i
    end
  end
  local n = #jobs
  local stopped = nil
  if n > 0 then
    local keep = {}
    local so = ffi.new("const char *[?]", n)
    local fn = ffi.new("const char *[?]", n)
    local sg = ffi.new("const char *[?]", n)
    for j, i in ipairs(jobs) do
      local br = build_results[i]
      keep[#keep + 1] = br.so_path
      keep[#keep + 1] = br.sig
      so[j - 1], sg[j - 1] = br.so_path, br.sig
      if br.fname then keep[#keep + 1] = br.fname; fn[j - 1] = br.fname end
    end
    local rep = self.repeats
    local costs = ffi.new("double[?]", n * rep)
    local nc = ffi.new("int[?]", n)
    local en = ffi.new("int[?]", n)
    local msgs = ffi.new("char *[?]", n)
    local t0 = C.tl_now()
    local rc = C.tl_rpc_measure_batch(ctx, self.host, self.port, self.key, self.priority, n, so, fn, sg,
                                      self.number, rep, self.min_repeat_ms,
                                      self.enable_cpu_cache_flush and 1 or 0, self.timeout,
                                      self.n_parallel, self.cooldown_interval, self.wait_limit,
                                      costs, nc, en, msgs)
    local per = (C.tl_now() - t0) / n
    if rc ~= 0 then
      stopped = core.errmsg()
      C.tl_clearerr(ctx)
    end
    for j, i in ipairs(jobs) do
      local m = msgs[j - 1] ~= nil and ffi.string(msgs[j - 1]) or nil
      if msgs[j - 1] ~= nil then C.tl_rpc_free(msgs[j - 1]) end
      local e = tonumber(en[j - 1])
      local c = {}
      for k = 0, nc[j - 1] - 1 do c[#c + 1] = tonumber(costs[(j - 1) * rep + k]) end
      if e == 0 then measure.trim_costs(c) else c = { 1e9 } end
      if e < 0 then e, m = E.UNKNOWN_ERROR, m end
      out[i] = measure.MeasureResult(c, e, (build_results[i].time_cost or 0) + per, os.time(), m)
    end
    keep = nil
  end
  measure.cleanup(build_results)
  if stopped then
    error(string.format("RPCRunner: %s; tuning stopped. The log is intact: start devices " ..
      "('tunelua rpc server --tracker %s:%d --key %s') and re-run the same tuning command with the " ..
      "same log file to resume.", stopped, self.host, self.port, self.key), 0)
  end
  return out
end

return M
