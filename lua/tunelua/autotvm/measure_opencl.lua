--- tunelua.autotvm.measure_opencl: measuring AutoTVM configs of "opencl ..." tasks on the local
-- OpenCL device (docs/measure_opencl.md).
--
--   require "tunelua.autotvm.measure_opencl"     -- registers measure.device_hooks.opencl
--   local option = autotvm.measure_option({builder = autotvm.LocalBuilder({n_parallel = 2}),
--                                          runner = autotvm.LocalRunner({number = 4})})
--   tuner:tune({n_trial = 8, measure_option = option, ...})   -- task target "opencl -device=mali"
--
-- This file only prepares the inputs and reads the results; the measurement itself is C
-- (core/measure/measure_opencl.c), the same code that measures OpenCL trials for the RPC
-- server. OpenCL drivers are not fork-safe, so this module never initializes OpenCL in this
-- process: the device query, the compiles ahead and every trial run in forked children. When
-- the process has initialized OpenCL itself (a kernel run before tuning), the C side execs a
-- fresh tunelua-measure-opencl per child instead (docs/measure_opencl.md).
--
--   build_one (in the tuner's process, cheap): instantiate and lower the config (an error is
--     INSTANTIATION_ERROR), generate the OpenCL C and its manifest (tl_measure_opencl_source)
--     and check every kernel's work-group and __local memory against the device's limits
--     (tl_measure_opencl_fits; a launch the device cannot run is INSTANTIATION_ERROR naming the
--     limit, and nothing is compiled). With pocl or NVIDIA (programs cached on disk) and
--     n_parallel > 1 it also starts a background compile (tl_measure_opencl_compile_ahead).
--   run_one (serial): tl_measure_opencl_run, in the persistent worker process (use_worker below)
--     or in a child per trial.
local ffi = require "ffi"
local core = require "tunelua.core"
local measure = require "tunelua.autotvm.measure"
local json = require "tunelua.json"

local C, ctx = core.C, core.ctx
local E = measure.MeasureErrorNo

local M = {}

-- Per-process counters (seconds summed over trials), for reporting the cost of a trial.
-- wait_s: waiting for the compile-ahead children; compile_s: the driver compile in run children.
M.stats = { builds = 0, build_s = 0, runs = 0, child_s = 0, compile_s = 0, wait_s = 0 }

local function now() return tonumber(C.tl_now()) end

local strip_traceback = measure.strip_traceback

local function config_index(inp)
  local c = inp.config
  if type(c) == "number" then return c end
  if (type(c) == "table" or type(c) == "cdata") and c.is_fallback then return -1 end
  if type(c) == "table" or type(c) == "cdata" then return c.index end
  return nil
end

-- A malloc'd C string as a Lua string (nil for NULL), freed.
local function take(p)
  if p == nil then return nil end
  local s = ffi.string(p)
  C.tl_measure_str_free(p)
  return s
end

local function errmsg()
  local m = core.errmsg()
  C.tl_clearerr(ctx)
  return m
end

-- ---- device limits (queried in a child, once per device) --------------------------------------

local dev_cache = {}

--- device_info(dev) -> the device's properties (tl_opencl_device_info's JSON as a table) or nil,
--- reason ("no OpenCL device 0 (0 found)", ...). Never initializes OpenCL in this process.
function M.device_info(dev)
  dev = dev or 0
  local c = dev_cache[dev]
  if not c then
    c = {}
    local out = ffi.new("char *[1]")
    if C.tl_measure_opencl_device_info(ctx, dev, out) ~= 0 then
      c.reason = errmsg()
    else
      c.json = take(out[0])
      local ok, t = pcall(json.decode, c.json)
      if ok and type(t) == "table" then c.info = t else c.reason = "bad device info: " .. tostring(t) end
    end
    dev_cache[dev] = c
  end
  return c.info, c.reason, c.json
end

--- fits(manifest, info_json) -> nil when the manifest's kernels fit the device, else the reason.
function M.fits(manifest, info_json)
  if C.tl_measure_opencl_fits(ctx, manifest, info_json) ~= 0 then return errmsg() end
  return nil
end

-- ---- targets ---------------------------------------------------------------------------------

-- The OpenCL device number of a target (nil: the first device).
local function device_of_target(target)
  local t = target
  if type(t) == "table" then t = t.str or t.kind end
  if t == nil then return 0 end
  t = tostring(t)
  local n, msg = require("tunelua.target").device_id(require("tunelua.target").record(t))
  if not n then error(string.format("target '%s': %s", t, msg), 0) end
  return n
end
M.device_of_target = device_of_target

-- ---- build ------------------------------------------------------------------------------------

-- Tasks measured on remote devices (RPCRunner:set_task marks them): build_one ships OpenCL C and
-- its manifest instead of checking a local device.
M.remote_tasks = setmetatable({}, { __mode = "k" })

--- build_one(builder, inp) -> build result {lowered, fname, device, build_timeout, time_cost,
--- error_no, error_msg} (+ ocl_source, ocl_manifest, remote for a remote task). Runs in the
--- tuner's process; never touches OpenCL.
function M.build_one(builder, inp)
  local t0 = now()
  local task = inp.task
  local r = { build_timeout = builder and builder.timeout or 10 }
  local function done(eno, msg)
    r.error_no, r.error_msg = eno, msg
    r.time_cost = now() - t0
    M.stats.builds = M.stats.builds + 1
    M.stats.build_s = M.stats.build_s + r.time_cost
    if eno ~= 0 then r.lowered = nil end
    return r
  end
  local okd, dev = pcall(device_of_target, task.target)
  if not okd then return done(E.INSTANTIATION_ERROR, strip_traceback(dev)) end
  r.device = dev
  local index = config_index(inp)
  if type(index) ~= "number" then return done(E.INSTANTIATION_ERROR, "the input has no config index") end
  local ok, l = pcall(task.lower, task, index)
  if not ok then return done(E.INSTANTIATION_ERROR, strip_traceback(l)) end
  if type(l) ~= "table" or type(l.handle) ~= "cdata" then
    return done(E.INSTANTIATION_ERROR, "task:lower did not return a lowered function")
  end
  r.lowered = l
  local sp, mp, en, mg = ffi.new("char *[1]"), ffi.new("char *[1]"), ffi.new("int[1]"),
                         ffi.new("char *[1]")
  if C.tl_measure_opencl_source(ctx, l.handle, sp, mp, en, mg) ~= 0 then
    return done(E.UNKNOWN_ERROR, errmsg())
  end
  local src, man, msg = take(sp[0]), take(mp[0]), take(mg[0])
  if en[0] ~= 0 then return done(tonumber(en[0]), msg) end
  r.fname = json.decode(man).name
  if M.remote_tasks[task] then
    -- measured on a remote device (RPCRunner): the server checks its device's limits
    r.ocl_source, r.ocl_manifest, r.remote = src, man, true
    return done(0, nil)
  end
  local info, reason, info_json = M.device_info(dev)
  if not info then return done(E.COMPILE_DEVICE, "opencl: " .. tostring(reason)) end
  local why = M.fits(man, info_json)
  if why then return done(E.INSTANTIATION_ERROR, why) end
  done(0, nil)
  if M.ahead_enabled(info, builder) then
    -- errors are ignored: the run child compiles again and reports them
    if C.tl_measure_opencl_compile_ahead(ctx, l.handle, dev, r.build_timeout, builder.n_parallel) ~= 0 then
      errmsg()
    end
  end
  return r
end

-- ---- compiling ahead (drivers with an on-disk program cache) --------------------------------------
-- pocl and NVIDIA's OpenCL keep compiled programs in a cache on disk, shared by processes. When
-- the device's driver is one of them and the builder has n_parallel > 1, build_one also sends the
-- program to be compiled in the background: to a pool of persistent compile workers (exec'd
-- tunelua-measure-opencl --worker processes, each starting the driver once; by default
-- min(n_parallel, 8) of them, see compile_workers), or with the pool off to a child of its own
-- per compile, at most n_parallel at once. run_one waits for every compile before its trial, so
-- timing never overlaps a compile, and the trial's compile is a cache hit. With other drivers
-- nothing is compiled ahead unless M.compile_ahead = true or TUNELUA_OCL_COMPILE_AHEAD=1;
-- TUNELUA_OCL_COMPILE_AHEAD=0 turns it off (the trial's process compiles each program itself).

-- nil/false: never; true: always; "auto" (default): when the driver caches programs on disk
-- (pocl, NVIDIA).
M.compile_ahead = "auto"

function M.ahead_enabled(info, builder)
  local k = os.getenv("TUNELUA_OCL_COMPILE_WORKERS")
  if k and k ~= "" and not (k:match("^%d+$") and tonumber(k) <= 32) then
    error("TUNELUA_OCL_COMPILE_WORKERS='" .. k .. "': expected the number of compile workers, " ..
          "an integer 0..32 (0: a child per compile)", 0)
  end
  local v = os.getenv("TUNELUA_OCL_COMPILE_AHEAD")
  local mode = M.compile_ahead
  if v == "0" then mode = false elseif v == "1" then mode = true end
  if not mode or not info then return false end
  if (builder and builder.n_parallel or 1) < 2 then return false end
  if mode == true then return true end
  local text = tostring(info.platform) .. " " .. tostring(info.version) .. " " .. tostring(info.vendor)
  return text:find("[Pp]o[Cc][Ll]") ~= nil or text:find("Portable Computing Language", 1, true) ~= nil
         or text:find("NVIDIA", 1, true) ~= nil
end

-- ---- run ---------------------------------------------------------------------------------------

local tmp_counter = 0
local function tmp_path()
  tmp_counter = tmp_counter + 1
  local base = os.getenv("TUNELUA_MEASURE_DIR") or os.getenv("TMPDIR") or "/tmp"
  return string.format("%s/tunelua-oclref-%d-%d-%d.bin", base, ffi.C.getpid(), os.time(), tmp_counter)
end

-- The reference outputs of a task (check_correctness): task:lower_reference() when the task has
-- it, else the fallback config, run once on the device in a child; its arguments' bytes are kept
-- in a file that goes when the runner does.
local function reference_of(runner, task, timeout)
  local st = runner._oclm_ref
  if st and st.task == task then return st end
  if st and st.path then os.remove(st.path) end
  st = { task = task }
  runner._oclm_ref = st
  local inp
  if task.lower_reference then
    inp = { task = setmetatable({ lower = function() return task:lower_reference() end },
                                { __index = task }), config = { index = 0 } }
  else
    inp = { task = task, config = -1 }
  end
  local br = M.build_one({ timeout = timeout }, inp)
  if br.error_no ~= 0 then
    st.err = string.format("reference (%s): %s: %s", task.lower_reference and "lower_reference"
                           or "fallback config", measure.error_name(br.error_no), tostring(br.error_msg))
    return st
  end
  local path = tmp_path()
  local en, mg = ffi.new("int[1]"), ffi.new("char *[1]")
  local rc = C.tl_measure_opencl_reference(ctx, br.lowered.handle, br.fname, br.device, timeout,
                                           runner.timeout, path, en, mg)
  if rc ~= 0 or en[0] ~= 0 then
    os.remove(path)
    st.err = rc ~= 0 and ("reference: " .. errmsg()) or string.format("reference: %s: %s",
      measure.error_name(tonumber(en[0])), tostring(take(mg[0])))
    return st
  end
  st.path = path
  st.guard = ffi.gc(ffi.new("char[1]"), function() os.remove(path) end)
  return st
end

--- run_one(runner, inp, br) -> MeasureResult. In the worker, or one child per trial
--- (tl_measure_opencl_run).
function M.run_one(runner, inp, br)
  local t0 = now()
  local ts = os.time()
  local btime = br.build_timeout or 10
  local ref_path
  if runner.check_correctness then
    local st = reference_of(runner, inp.task, btime)
    if not st.path then
      measure.sleep(runner.cooldown_interval)
      return measure.MeasureResult({ 1e9 }, E.WRONG_ANSWER, (br.time_cost or 0) + now() - t0, ts,
                                   "check_correctness: no reference: " .. tostring(st.err))
    end
    ref_path = st.path
  end
  local tw = now()
  C.tl_measure_opencl_wait_ahead()
  M.stats.wait_s = M.stats.wait_s + (now() - tw)
  local rep = runner.repeats or runner["repeat"] or 3
  local costs, nc, en = ffi.new("double[?]", rep), ffi.new("int[1]"), ffi.new("int[1]")
  local mg, secs = ffi.new("char *[1]"), ffi.new("double[2]")
  local rc = C.tl_measure_opencl_run(ctx, br.lowered.handle, br.fname, br.device, runner.number,
                                     rep, runner.min_repeat_ms or 0, btime, runner.timeout,
                                     ref_path, 1e-4, costs, nc, en, mg, secs)
  local eno, msg = tonumber(en[0]), take(mg[0])
  if rc ~= 0 then eno, msg = E.UNKNOWN_ERROR, errmsg() end
  M.stats.runs = M.stats.runs + 1
  M.stats.child_s = M.stats.child_s + secs[0]
  M.stats.compile_s = M.stats.compile_s + secs[1]
  measure.sleep(runner.cooldown_interval)
  local all = (br.time_cost or 0) + now() - t0
  if eno ~= 0 then return measure.MeasureResult({ 1e9 }, eno, all, ts, msg) end
  local c = {}
  for i = 0, nc[0] - 1 do c[#c + 1] = tonumber(costs[i]) end
  if #c == 0 then
    return measure.MeasureResult({ 1e9 }, E.UNKNOWN_ERROR, all, ts,
                                 string.format("kernel '%s': no costs", tostring(br.fname)))
  end
  measure.trim_costs(c)
  return measure.MeasureResult(c, 0, all, ts, nil)
end

-- ---- where trials run ------------------------------------------------------------------------
-- By default every trial runs in one persistent worker process (tunelua-measure-opencl --worker,
-- exec'd, so this process still never initializes OpenCL): the driver starts once, not once per
-- trial. A kernel that crashes or hangs ends the worker; the trial is reported as with a child
-- per trial, and the next trial starts a fresh worker. use_worker(false) (or TUNELUA_OCL_WORKER=0
-- in the environment) measures every trial in a child of its own instead.

--- use_worker(on): true = the persistent worker, false = a child per trial, nil = the default
--- (the worker unless TUNELUA_OCL_WORKER=0).
function M.use_worker(on)
  C.tl_measure_opencl_use_worker(on == nil and -1 or (on and 1 or 0))
end

--- worker_pid() -> the running worker's process id, or nil when none runs.
function M.worker_pid()
  local p = tonumber(C.tl_measure_opencl_worker_pid())
  return p ~= 0 and p or nil
end

--- stop_worker(): ends the worker and the compile pool's workers now (the next trial, the next
--- compile ahead start others).
function M.stop_worker()
  C.tl_measure_opencl_worker_stop()
  C.tl_measure_opencl_ahead_stop()
end

--- compile_workers(k): how many persistent workers compile ahead: k > 0, k of them (at most 32);
--- 0, a child per compile; nil, the default (TUNELUA_OCL_COMPILE_WORKERS from the environment,
--- else min(the builder's n_parallel, 8)).
function M.compile_workers(k)
  if k ~= nil and (type(k) ~= "number" or k < 0 or k % 1 ~= 0) then
    error("compile_workers: expected nil or an integer >= 0, got " .. tostring(k), 2)
  end
  C.tl_measure_opencl_compile_workers(k == nil and -1 or k)
end

--- compile_worker_pids() -> the running compile workers' process ids (a list, maybe empty).
function M.compile_worker_pids()
  local buf = ffi.new("int[32]")
  local n = math.min(tonumber(C.tl_measure_opencl_ahead_pids(buf, 32)), 32)
  local out = {}
  for i = 0, n - 1 do out[#out + 1] = tonumber(buf[i]) end
  return out
end

--- compile_counts() -> compiles sent to the pool so far, and how many of them ended their worker.
function M.compile_counts()
  local a, b = ffi.new("int[1]"), ffi.new("int[1]")
  C.tl_measure_opencl_ahead_counts(a, b)
  return tonumber(a[0]), tonumber(b[0])
end

--- register(): installs the hook as measure.device_hooks.opencl (done on require).
function M.register()
  measure.device_hooks.opencl = { build_one = M.build_one, run_one = M.run_one, module = M }
end
M.register()

return M
