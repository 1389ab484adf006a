--- tunelua.rpc.runner: RPCRunner, the LocalRunner's interface on devices of an RPC tracker.
--
--   autotvm.RPCRunner(key, host, port, {number = 4, repeat = 3, min_repeat_ms = 0, timeout = 10,
--     n_parallel = 1, cooldown_interval = 0.1, priority = 1, wait_limit = 600,
--     wait_report_interval = 60, check_correctness = false, enable_cpu_cache_flush = false,
--     auth_key = nil, auth_key_file = nil,    -- the farm's key (docs/rpc.md "Security")
--     lost_retries = 0})                      -- measure a trial whose device died again
--
-- runner:run(inputs, build_results) ships each built module to a device of `key` (zlib), times it
-- there in a child of the session (a crash is error 4, a hang error 7) and returns MeasureResults.
-- n_parallel sessions run at once (one thread each in C). A device that dies mid-measurement gives
-- its trial an error record (RUNTIME_DEVICE, "device lost ..."), is re-requested and tuning goes
-- on; with lost_retries = k such a trial is measured again (up to k times) on the next device of
-- the key, so a device server killed and restarted mid-job (a crashed phone app) loses no trial.
-- When no device comes for wait_limit seconds (a line is printed every wait_report_interval
-- seconds, once a minute by default, while waiting) run() raises an error that says how to
-- resume; the log written so far is intact. check_correctness builds the task's reference kernel
-- (as LocalRunner does) on the host; it is uploaded once per session and every trial's outputs
-- are compared with it on the device (a mismatch is WRONG_ANSWER).
-- Tasks whose target starts with "opencl" ship OpenCL C + a manifest instead of a .so: set_task
-- marks them for remote building (measure_opencl.remote_tasks), and the server measures them on
-- its OpenCL device in a child of the session (tl_rpc_measure_batch_opencl).
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
  r.wait_report_interval = o.wait_report_interval or 60
  r.lost_retries = o.lost_retries or 0
  r.auth_key = require("tunelua.rpc").auth_key(o)   -- the farm's key (docs/rpc.md "Security")
  if type(r.n_parallel) ~= "number" or r.n_parallel < 1 then error("RPCRunner: n_parallel must be >= 1", 3) end
  if type(r.wait_limit) ~= "number" or r.wait_limit < 0 then
    error("RPCRunner: wait_limit must be a number of seconds >= 0", 3)
  end
  if type(r.lost_retries) ~= "number" or r.lost_retries < 0 or r.lost_retries % 1 ~= 0 then
    error("RPCRunner: lost_retries must be a whole number >= 0", 3)
  end
  if type(r.wait_report_interval) ~= "number" or r.wait_report_interval <= 0 then
    error("RPCRunner: wait_report_interval must be a number of seconds > 0", 3)
  end
  return r
end

-- Whether a task's kernels run on an OpenCL device (its target's device type).
local function is_opencl(task)
  local measure = require "tunelua.autotvm.measure"
  return measure.target_of(task).device_type == C.TL_DEV_OPENCL
end

-- The reference of an OpenCL task (check_correctness): task:lower_reference() when the task has
-- it, else the fallback config, as OpenCL C + manifest built on the host.
local function opencl_reference(task)
  local mo = require "tunelua.autotvm.measure_opencl"
  local inp
  if task.lower_reference then
    local wrap = setmetatable({ lower = function() return task:lower_reference() end }, { __index = task })
    inp = { task = wrap, config = { index = 0 } }
  else
    inp = { task = task, config = -1 }
  end
  mo.remote_tasks[inp.task] = true
  local br = mo.build_one({ timeout = 10 }, inp)
  if br.error_no ~= 0 then return nil, tostring(br.error_msg) end
  return { source = br.ocl_source, manifest = br.ocl_manifest }
end

--- runner:set_task(task): with check_correctness, builds the reference kernel (host C, or
--- OpenCL C + manifest for an "opencl" task). An OpenCL task is marked for remote building:
--- the builder ships OpenCL C and a manifest, and the server checks its device's limits.
function RPCRunner:set_task(task)
  local measure = require "tunelua.autotvm.measure"
  if self.ref and self.ref.so_path then measure.cleanup({ self.ref }) end
  if self.ref_guard then ffi.gc(self.ref_guard, nil) end
  self.task, self.ref, self.ref_err, self.ref_guard = task, nil, nil, nil
  if is_opencl(task) then
    require("tunelua.autotvm.measure_opencl").remote_tasks[task] = true
    if self.check_correctness then self.ref, self.ref_err = opencl_reference(task) end
    return
  end
  if self.check_correctness then
    -- a remote batch checks against one reference; a blocked task's configs take inputs of
    -- their own blocks, so with check_correctness it measures its NCHW form
    if task.blocked and task.set_blocked then task:set_blocked(false) end
    self.ref, self.ref_err = measure.build_reference(task)
    local ref = self.ref
    self.ref_guard = ref and ffi.gc(ffi.new("char[1]"), function() measure.cleanup({ ref }) end) or nil
  end
end
function RPCRunner:get_build_kwargs() return {} end

-- One batch on the tracker's devices: call(rep, costs, nc, en, msgs) runs the C measure into
-- output arrays for n jobs of self.repeats costs each. Returns the outputs {costs, nc, en, msgs,
-- rep, per (seconds per job)} and the stop message (nil when the batch ran).
function RPCRunner:measure_batch(n, call)
  local rep = self.repeats
  local b = { rep = rep, costs = ffi.new("double[?]", n * rep), nc = ffi.new("int[?]", n),
              en = ffi.new("int[?]", n), msgs = ffi.new("char *[?]", n) }
  local t0 = C.tl_now()
  require("tunelua.rpc").use_auth_key(self.auth_key)
  local rc = call(rep, b.costs, b.nc, b.en, b.msgs)
  b.per = (C.tl_now() - t0) / n
  local stopped
  if rc ~= 0 then
    stopped = core.errmsg()
    C.tl_clearerr(ctx)
  end
  return b, stopped
end

-- The error that stops tuning when the devices (what: "devices", "a simulator") went away.
function RPCRunner:stop(stopped, what)
  error(string.format("RPCRunner: %s; tuning stopped. The log is intact: start %s " ..
    "('tunelua rpc server --tracker %s:%d --key %s') and re-run the same tuning command with the " ..
    "same log file to resume.", stopped, what, self.host, self.port, self.key), 0)
end

-- The MeasureResults of a measured batch b (RPCRunner:measure_batch; job j is input jobs[j]);
-- frees the messages. With require_costs a success without costs is an error.
local function collect_results(out, jobs, build_results, b, require_costs)
  local msgs, en, nc, costs, rep, per = b.msgs, b.en, b.nc, b.costs, b.rep, b.per
  local measure = require "tunelua.autotvm.measure"
  local E = measure.MeasureErrorNo
  for j, i in ipairs(jobs) do
    local m = msgs[j - 1] ~= nil and ffi.string(msgs[j - 1]) or nil
    if msgs[j - 1] ~= nil then C.tl_rpc_free(msgs[j - 1]) end
    local e = tonumber(en[j - 1])
    local c = {}
    for k = 0, nc[j - 1] - 1 do c[#c + 1] = tonumber(costs[(j - 1) * rep + k]) end
    if e == 0 then measure.trim_costs(c) else c = { 1e9 } end
    if require_costs and e == 0 and #c == 0 then e, m, c = E.UNKNOWN_ERROR, "no costs", { 1e9 } end
    if e < 0 then e = E.UNKNOWN_ERROR end
    out[i] = measure.MeasureResult(c, e, (build_results[i].time_cost or 0) + per, os.time(), m)
  end
end

function RPCRunner:run(inputs, build_results)
  local measure = require "tunelua.autotvm.measure"
  local E = measure.MeasureErrorNo
  local out, jobs = {}, {}
  if self.check_correctness and not self.ref and inputs[1] and self.task ~= inputs[1].task then
    self:set_task(inputs[1].task)
  end
  local ref = self.check_correctness and self.ref or nil
  for i, br in ipairs(build_results) do
    if br.error_no ~= 0 then
      out[i] = measure.MeasureResult({ 1e9 }, br.error_no, br.time_cost or 0, os.time(), br.error_msg)
    elseif self.check_correctness and not ref then
      out[i] = measure.MeasureResult({ 1e9 }, E.WRONG_ANSWER, br.time_cost or 0, os.time(),
        "check_correctness: no reference kernel: " .. tostring(self.ref_err))
    else
      jobs[#jobs + 1] = i
    end
  end
  if #jobs > 0 and build_results[jobs[1]].vta_config then
    local stopped = self:run_vta(jobs, build_results, out)
    measure.cleanup(build_results)
    if stopped then self:stop(stopped, "a simulator") end
    return out
  end
  if inputs[1] and is_opencl(inputs[1].task) then
    -- built without set_task (a local OpenCL build): generate the OpenCL C + manifest here
    local keep = {}
    for _, i in ipairs(jobs) do
      local br = build_results[i]
      if not br.ocl_source and br.lowered and br.lowered.handle then
        local sp, mp = ffi.new("char *[1]"), ffi.new("char *[1]")
        if C.tl_opencl_source_manifest(ctx, br.lowered.handle, sp, mp) == 0 then
          br.ocl_source, br.ocl_manifest = ffi.string(sp[0]), ffi.string(mp[0])
          C.tl_opencl_str_free(sp[0])
          C.tl_opencl_str_free(mp[0])
        else
          C.tl_clearerr(ctx)
        end
      end
      if br.ocl_source then
        keep[#keep + 1] = i
      else
        out[i] = measure.MeasureResult({ 1e9 }, E.COMPILE_HOST, br.time_cost or 0, os.time(),
          "RPCRunner: the build result has no OpenCL C to ship")
      end
    end
    jobs = keep
  end
  local n = #jobs
  local stopped = nil
  if n > 0 and build_results[jobs[1]].ocl_source then
    stopped = self:run_opencl(jobs, build_results, ref, out)
  elseif n > 0 then
    stopped = self:run_c(jobs, build_results, ref, out)
    -- a trial whose device was lost mid-measurement is measured again on the next device
    -- (lost_retries times at most; a kernel that takes its device down keeps its error)
    for _ = 1, self.lost_retries do
      if stopped then break end
      local again = {}
      for _, i in ipairs(jobs) do
        local r = out[i]
        if r.error_no == E.RUNTIME_DEVICE and tostring(r.error_msg):match("^device lost") then
          again[#again + 1] = i
        end
      end
      if #again == 0 then break end
      io.stderr:write(string.format("rpc: %d trial(s) lost with their device; measuring again on " ..
        "the next device of key '%s'\n", #again, self.key))
      stopped = self:run_c(again, build_results, ref, out)
    end
  end
  measure.cleanup(build_results)
  if stopped then self:stop(stopped, "devices") end
  return out
end

-- C jobs (shared objects) on the devices: results into out. Returns the stop message or nil.
function RPCRunner:run_c(jobs, build_results, ref, out)
  local n = #jobs
  local stopped = nil
  do
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
    local b
    b, stopped = self:measure_batch(n, function(rep, costs, nc, en, msgs)
      return C.tl_rpc_measure_batch(ctx, self.host, self.port, self.key, self.priority, n, so, fn, sg,
                                    self.number, rep, self.min_repeat_ms,
                                    self.enable_cpu_cache_flush and 1 or 0, self.timeout,
                                    self.n_parallel, self.cooldown_interval, self.wait_limit,
                                    self.wait_report_interval, ref and ref.so_path or nil,
                                    ref and ref.fname or nil, 1e-4, costs, nc, en, msgs)
    end)
    collect_results(out, jobs, build_results, b, false)
    keep = nil
  end
  return stopped
end

-- VTA jobs (conv2d_packed.vta, measure_vta's build results): the servers run the configs on
-- their simulator (tl_rpc_measure_batch_vta); the costs are simulated seconds. Returns the
-- stop message or nil.
function RPCRunner:run_vta(jobs, build_results, out)
  local n = #jobs
  local first = build_results[jobs[1]]
  local idx = ffi.new("int64_t[?]", n)
  for j, i in ipairs(jobs) do idx[j - 1] = build_results[i].index end
  local b, stopped = self:measure_batch(n, function(rep, costs, nc, en, msgs)
    return C.tl_rpc_measure_batch_vta(ctx, self.host, self.port, self.key, self.priority, n,
                                      first.vta_config, first.vta_args, idx, rep, self.timeout,
                                      self.n_parallel, self.cooldown_interval, self.wait_limit,
                                      self.wait_report_interval, costs, nc, en, msgs)
  end)
  local en, msgs = b.en, b.msgs
  -- on success the message is the simulator's counters, not an error
  local stats = {}
  for j = 1, n do
    if en[j - 1] == 0 and msgs[j - 1] ~= nil then
      stats[j] = ffi.string(msgs[j - 1])
      C.tl_rpc_free(msgs[j - 1])
      msgs[j - 1] = nil
    end
  end
  collect_results(out, jobs, build_results, b, true)
  for j, i in ipairs(jobs) do
    if stats[j] then out[i].vta_stats = require("tunelua.json").decode(stats[j]) end
  end
  return stopped
end

local tmp_counter = 0

-- OpenCL jobs: each build result's OpenCL C and manifest go to files that are shipped to the
-- devices (tl_rpc_measure_batch_opencl) and removed afterwards. Returns the stop message or nil.
function RPCRunner:run_opencl(jobs, build_results, ref, out)
  local measure = require "tunelua.autotvm.measure"
  local mo = require "tunelua.autotvm.measure_opencl"
  local n = #jobs
  local base = os.getenv("TUNELUA_MEASURE_DIR") or os.getenv("TMPDIR") or "/tmp"
  tmp_counter = tmp_counter + 1
  local prefix = string.format("%s/tunelua-oclrpc-%d-%d", base, ffi.C.getpid(), tmp_counter)
  local files = {}
  local function put(path, text)
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
    files[#files + 1] = path
    return path
  end
  local keep = {}
  local srcs = ffi.new("const char *[?]", n)
  local mans = ffi.new("const char *[?]", n)
  for j, i in ipairs(jobs) do
    local br = build_results[i]
    keep[#keep + 1] = put(string.format("%s-%d.cl", prefix, j), br.ocl_source)
    srcs[j - 1] = keep[#keep]
    keep[#keep + 1] = put(string.format("%s-%d.json", prefix, j), br.ocl_manifest)
    mans[j - 1] = keep[#keep]
  end
  local rsrc, rman
  if ref then
    rsrc = put(prefix .. "-ref.cl", ref.source)
    rman = put(prefix .. "-ref.json", ref.manifest)
  end
  local dev = mo.device_of_target(self.task and self.task.target)
  local btime = 10
  for _, i in ipairs(jobs) do btime = build_results[i].build_timeout or btime end
  local b, stopped = self:measure_batch(n, function(rep, costs, nc, en, msgs)
    return C.tl_rpc_measure_batch_opencl(ctx, self.host, self.port, self.key, self.priority, n,
                                         srcs, mans, dev, self.number, rep, self.min_repeat_ms,
                                         btime, self.timeout, self.n_parallel,
                                         self.cooldown_interval, self.wait_limit,
                                         self.wait_report_interval, rsrc, rman, 1e-4, costs, nc,
                                         en, msgs)
  end)
  for _, p in ipairs(files) do os.remove(p) end
  collect_results(out, jobs, build_results, b, true)
  keep = nil
  return stopped
end

return M
