--- tunelua.autotvm.measure_opencl: measuring AutoTVM configs of "opencl ..." tasks on the local
-- OpenCL device (docs/measure_opencl.md).
--
--   require "tunelua.autotvm.measure_opencl"     -- registers measure.device_hooks.opencl
--   local option = autotvm.measure_option({builder = autotvm.LocalBuilder({n_parallel = 2}),
--                                          runner = autotvm.LocalRunner({number = 4})})
--   tuner:tune({n_trial = 8, measure_option = option, ...})   -- task target "opencl -device=mali"
--
-- OpenCL drivers are not fork-safe, so this process never initializes OpenCL: every OpenCL call
-- runs in a forked child (tl_proc_call) that sends its answer back through a pipe.
--
--   build_one (in the tuner's process, cheap): instantiate and lower the config (an error is
--     INSTANTIATION_ERROR), generate the OpenCL C (an error is COMPILE_HOST), read the argument
--     signature, and check every kernel's work-group and __local memory against the device's
--     limits (queried once per device in a child): a launch the device cannot run is
--     INSTANTIATION_ERROR naming the limit, and nothing is compiled.
--     With pocl or NVIDIA (programs cached on disk) and n_parallel > 1 it also starts a
--     background child that compiles the program ahead, n_parallel at a time.
--   run_one (one forked child per trial, serial): build the program for the device (a driver
--     error is COMPILE_DEVICE with the build log), fill the arguments with seeded random values,
--     optionally compare one call with the reference outputs (WRONG_ANSWER), then time with the
--     time evaluator (number, repeat, min_repeat_ms, profiling events). A launch refused by the
--     compiled kernel's limits or a failing launch is RUNTIME_DEVICE; a crash (signal) is
--     RUNTIME_DEVICE; running past the builder's timeout while compiling is BUILD_TIMEOUT, past
--     the runner's timeout afterwards RUN_TIMEOUT (the first launch gets the builder's timeout
--     on top: pocl generates a kernel's code when it is first enqueued).
local ffi = require "ffi"
local jit = require "jit"
local core = require "tunelua.core"
local measure = require "tunelua.autotvm.measure"
local record = require "tunelua.autotvm.record"

local C, ctx = core.C, core.ctx
local E = measure.MeasureErrorNo

local M = {}

pcall(ffi.cdef, "long write(int fd, const void *buf, unsigned long n);")
pcall(ffi.cdef, [[
struct tl_oclm_timeval { long tv_sec; long tv_usec; };
struct tl_oclm_itimerval { struct tl_oclm_timeval it_interval, it_value; };
int setitimer(int which, const struct tl_oclm_itimerval *nv, struct tl_oclm_itimerval *old);
]])

-- In a child: SIGALRM (which ends it) after s seconds of wall time; 0 cancels.
local function alarm_after(s)
  local v = ffi.new("struct tl_oclm_itimerval")
  s = math.max(0, s or 0)
  v.it_value.tv_sec = math.floor(s)
  v.it_value.tv_usec = math.floor((s - math.floor(s)) * 1e6)
  if s > 0 and v.it_value.tv_sec == 0 and v.it_value.tv_usec == 0 then v.it_value.tv_usec = 1 end
  ffi.C.setitimer(0, v, nil)   -- ITIMER_REAL
end

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

-- ---- children ---------------------------------------------------------------------------
-- One callback for every child: tl_proc_call forks and calls it in the child, which runs the
-- Lua function in `job` with the pipe's write end and exits.

local job = nil

local function emit(fd, s)
  local p = ffi.cast("const char *", s)
  local n, off = #s, 0
  while off < n do
    local w = tonumber(ffi.C.write(fd, p + off, n - off))
    if w <= 0 then return end
    off = off + w
  end
end

local child_cb = ffi.cast("int (*)(void *, int)", function(_, fd)
  local ok, err = pcall(job, fd)
  if not ok then
    emit(fd, "error " .. E.UNKNOWN_ERROR .. "\n" .. strip_traceback(err))
    return 3
  end
  return 0
end)

-- Run fn(fd) in a forked child with a time limit; returns {status, code, seconds, out, err}.
local function in_child(fn, timeout)
  job = fn
  local res = ffi.new("tl_proc_result *[1]")
  local rc = C.tl_proc_call(ctx, child_cb, nil, timeout, 1048576, res)
  job = nil
  if rc ~= 0 then
    local m = core.errmsg()
    C.tl_clearerr(ctx)
    error("measure_opencl: cannot start a child: " .. m, 0)
  end
  local r = res[0]
  local len = ffi.new("size_t[1]")
  local o = C.tl_proc_stdout(r, len)
  local out = o ~= nil and ffi.string(o, len[0]) or ""
  local e = C.tl_proc_stderr(r, len)
  local err = e ~= nil and ffi.string(e, len[0]) or ""
  local t = { status = tonumber(C.tl_proc_status(r)), code = tonumber(C.tl_proc_code(r)),
              seconds = tonumber(C.tl_proc_seconds(r)), out = out, err = err }
  C.tl_proc_result_free(r)
  return t
end
-- A C function that calls back into Lua must not be called from a compiled trace.
jit.off(in_child)
M.in_child = in_child

-- ---- device limits (queried in a child, once per device) --------------------------------------

local dev_cache = {}

--- device_info(dev) -> the device's properties (tl_opencl_device_info's JSON as a table) or nil,
--- reason ("no OpenCL device", ...). Never initializes OpenCL in this process.
function M.device_info(dev)
  dev = dev or 0
  local c = dev_cache[dev]
  if c then return c.info, c.reason end
  local r = in_child(function(fd)
    local n = C.tl_opencl_device_count()
    if dev >= n then
      emit(fd, "none\n" .. string.format("no OpenCL device %d (%d found)", dev, n))
      return
    end
    local js = ffi.new("const char *[1]")
    if C.tl_opencl_device_info(ctx, dev, js) ~= 0 then
      emit(fd, "none\n" .. core.errmsg())
      return
    end
    emit(fd, "info\n" .. ffi.string(js[0]))
  end, 60)
  local info, reason
  local head, body = r.out:match("^(%a+)\n(.*)$")
  if r.status == C.TL_PROC_OK and head == "info" then
    local ok, t = pcall(record.json_decode, body)
    if ok and type(t) == "table" then info = t else reason = "bad device info: " .. tostring(t) end
  elseif head == "none" then
    reason = body
  else
    reason = string.format("the device query child failed (status %d, code %d): %s", r.status,
                           r.code, r.err:sub(1, 2000))
  end
  dev_cache[dev] = { info = info, reason = reason }
  return info, reason
end

-- ---- targets, signatures, kernels ------------------------------------------------------------

local function device_of_target(target)
  local t = target
  if type(t) == "table" then t = t.str or t.kind end
  t = tostring(t or "opencl")
  local n, msg = require("tunelua.target").device_id(require("tunelua.target").record(t))
  if not n then error(string.format("target '%s': %s", t, msg), 0) end
  return n
end
M.device_of_target = device_of_target

-- The argument signature from the lowered function's header:
-- "func f(A: float32[1, 8], B: int32[4])" -> {name = "f", args = {{name, dtype, shape}, ...}}
local function signature(lowered)
  local text = tostring(lowered)
  local name, args = text:match("^func%s+([%w_]+)%((.-)%)\n")
  if not name then error("cannot read the signature of the lowered function", 0) end
  local sig = { name = name, args = {} }
  for an, dt, dims in args:gmatch("([%w_%.]+):%s*([%w_]+)%[([^%]]*)%]") do
    local shape = {}
    for d in dims:gmatch("[^,%s]+") do
      local v = tonumber(d)
      if not v then
        error(string.format("argument '%s' has a symbolic extent '%s' (not measurable)", an, d), 0)
      end
      shape[#shape + 1] = v
    end
    sig.args[#sig.args + 1] = { name = an, dtype = dt, shape = shape }
  end
  if #sig.args == 0 then error("the lowered function has no array arguments", 0) end
  return sig
end
M.signature = signature

local ELEM_BYTES = { float = 4, half = 2, double = 8, int = 4, uint = 4, char = 1, uchar = 1,
                     short = 2, ushort = 2, long = 8, ulong = 8, bool = 1 }

-- The kernels of OpenCL C source: {{name, block = {x, y, z}, local_bytes}, ...}
local function kernels_of(src)
  local ks = {}
  local starts = {}
  local p = 1
  while true do
    local s = src:find("__kernel ", p, true)
    if not s then break end
    starts[#starts + 1] = s
    p = s + 1
  end
  for i, s in ipairs(starts) do
    local chunk = src:sub(s, (starts[i + 1] or (#src + 1)) - 1)
    local x, y, z, name = chunk:match("reqd_work_group_size%((%d+),%s*(%d+),%s*(%d+)%)%)%)%s*void%s+([%w_]+)%(")
    if name then
      local lb = 0
      for ty, n in chunk:gmatch("__local%s+([%a_][%w_]*)%s+[%w_]+%[(%d+)%];") do
        local base, lanes = ty:match("^(%a+)(%d*)$")
        lb = lb + tonumber(n) * (ELEM_BYTES[base or ty] or 4) * (tonumber(lanes) or 1)
      end
      ks[#ks + 1] = { name = name, block = { tonumber(x), tonumber(y), tonumber(z) }, local_bytes = lb }
    end
  end
  return ks
end
M.kernels_of = kernels_of

-- nil when the kernels fit the device, else the reason.
local function check_limits(ks, info)
  if not info then return nil end
  local maxwg = tonumber(info.max_work_group_size)
  local sizes = type(info.max_work_item_sizes) == "table" and info.max_work_item_sizes or {}
  local lmem = tonumber(info.local_mem_bytes)
  local dname = tostring(info.name or "?")
  for _, k in ipairs(ks) do
    local b = k.block
    local n = b[1] * b[2] * b[3]
    for d = 1, 3 do
      local lim = tonumber(sizes[d])
      if lim and b[d] > lim then
        return string.format("kernel '%s': invalid work-group size %dx%dx%d: dimension %d (%d) " ..
                             "exceeds the device's max work-item size %d (%s)", k.name, b[1], b[2],
                             b[3], d - 1, b[d], lim, dname)
      end
    end
    if maxwg and n > maxwg then
      return string.format("kernel '%s': invalid work-group size %dx%dx%d = %d work-items exceeds " ..
                           "the device's max work-group size %d (%s)", k.name, b[1], b[2], b[3], n,
                           maxwg, dname)
    end
    if lmem and k.local_bytes > lmem then
      return string.format("kernel '%s' uses %d bytes of __local memory, more than the device's %d (%s)",
                           k.name, k.local_bytes, lmem, dname)
    end
  end
  return nil
end

-- ---- build ------------------------------------------------------------------------------------

-- Tasks measured on remote devices (RPCRunner:set_task marks them): build_one ships OpenCL C and
-- its manifest (tl_opencl_source_manifest) instead of checking a local device.
M.remote_tasks = setmetatable({}, { __mode = "k" })

--- build_one(builder, inp) -> build result {lowered, sig, fname, kernels, device, build_timeout,
--- time_cost, error_no, error_msg}. Runs in the tuner's process; never touches OpenCL.
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
  local oks, sig = pcall(signature, l)
  if not oks then return done(E.INSTANTIATION_ERROR, strip_traceback(sig)) end
  r.sig, r.fname = sig, sig.name
  local src = ffi.new("const char *[1]")
  if C.tl_opencl_source(ctx, l.handle, src) ~= 0 then
    local m = core.errmsg()
    C.tl_clearerr(ctx)
    return done(E.COMPILE_HOST, "generating OpenCL C failed: " .. m)
  end
  r.kernels = kernels_of(ffi.string(src[0]))
  if M.remote_tasks[task] then
    -- measured on a remote device (RPCRunner): ship OpenCL C + manifest; the server checks the
    -- device's limits; nothing here touches OpenCL
    local sp, mp = ffi.new("char *[1]"), ffi.new("char *[1]")
    if C.tl_opencl_source_manifest(ctx, l.handle, sp, mp) ~= 0 then
      local m = core.errmsg()
      C.tl_clearerr(ctx)
      return done(E.COMPILE_HOST, "generating OpenCL C failed: " .. m)
    end
    r.ocl_source, r.ocl_manifest = ffi.string(sp[0]), ffi.string(mp[0])
    C.tl_opencl_str_free(sp[0])
    C.tl_opencl_str_free(mp[0])
    r.remote = true
    return done(0, nil)
  end
  local info, reason = M.device_info(dev)
  if not info then return done(E.COMPILE_DEVICE, "opencl: " .. tostring(reason)) end
  local why = check_limits(r.kernels, info)
  if why then return done(E.INSTANTIATION_ERROR, why) end
  done(0, nil)
  if M.ahead_enabled(info, builder) then M.compile_ahead(r, builder.n_parallel) end
  return r
end

-- ---- compiling ahead (drivers with an on-disk program cache) --------------------------------------
-- pocl and NVIDIA's OpenCL keep compiled programs in a cache on disk, shared by processes. When
-- the device's driver is one of them and the builder has n_parallel > 1, build_one also starts a
-- background child (a raw fork) that compiles the program and exits; at most n_parallel of them
-- run at once. run_one waits for all of them before it starts its own child, so timing never
-- overlaps a compile, and that child's compile is a cache hit. With other drivers nothing is
-- started (the compile might be wasted) unless M.compile_ahead = true or
-- TUNELUA_OCL_COMPILE_AHEAD=1; TUNELUA_OCL_COMPILE_AHEAD=0 turns it off.

-- one declaration at a time: another module may have declared some of them already
for _, d in ipairs({ "int fork(void);", "int waitpid(int pid, int *status, int options);",
                     "void _exit(int status);", "int setpgid(int pid, int pgid);",
                     "int open(const char *path, int flags, ...);", "int dup2(int oldfd, int newfd);" }) do
  pcall(ffi.cdef, d)
end

local primers = {}   -- pids of compile children, oldest first

local function wait_pid(pid)
  local st = ffi.new("int[1]")
  while true do
    local r = ffi.C.waitpid(pid, st, 0)
    if r == pid or r < 0 then
      if r < 0 and ffi.errno() == 4 then          -- EINTR
      else return end
    end
  end
end

local function wait_primers(max_left)
  while #primers > max_left do
    wait_pid(table.remove(primers, 1))
  end
end
M.wait_primers = function() wait_primers(0) end

-- nil/false: never; true: always; "auto" (default): when the driver caches programs on disk
-- (pocl, NVIDIA).
M.compile_ahead = "auto"

function M.ahead_enabled(info, builder)
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

function M.compile_ahead(br, n_parallel)
  wait_primers(math.max(0, n_parallel - 1))
  local pid = ffi.C.fork()
  if pid == 0 then
    -- the child: compile, then leave without running the parent's exit handlers
    pcall(function()
      ffi.C.setpgid(0, 0)
      local null = ffi.C.open("/dev/null", 1)   -- O_WRONLY: the driver's chatter goes nowhere
      if null >= 0 then ffi.C.dup2(null, 1); ffi.C.dup2(null, 2) end
      alarm_after(br.build_timeout or 10)
      local mp = ffi.new("tl_ocl_module *[1]")
      if C.tl_opencl_build(ctx, br.lowered.handle, br.device, mp) == 0 then
        C.tl_ocl_module_free(mp[0])
      end
    end)
    ffi.C._exit(0)
  end
  if pid > 0 then primers[#primers + 1] = pid end
end

-- ---- run (in the child) ------------------------------------------------------------------------

local arrs_t = ffi.typeof("tl_array *[?]")

local function ck(rc, what)
  if rc ~= 0 then
    local m = core.errmsg()
    C.tl_clearerr(ctx)
    error((what and (what .. ": ") or "") .. m, 0)
  end
end

-- Host arrays of sig filled with seeded random values, and their device copies.
local function make_args(sig, dev)
  local n = #sig.args
  local host, devs = {}, arrs_t(n)
  local out = ffi.new("tl_array *[1]")
  local dt = ffi.new("int[1]")
  for i, a in ipairs(sig.args) do
    ck(C.tl_dtype_parse(ctx, a.dtype, dt), "argument " .. a.name)
    local shape = ffi.new("int64_t[?]", #a.shape + 1)
    for d, v in ipairs(a.shape) do shape[d - 1] = v end
    ck(C.tl_array_empty(ctx, #a.shape, shape, dt[0], C.TL_DEV_CPU, 0, out), "argument " .. a.name)
    local h = ffi.gc(out[0], C.tl_array_free)
    local isf = a.dtype:match("^float") ~= nil
    ck(C.tl_array_random(ctx, h, 0, 0, isf and 1 or 10, 1000 + i), "argument " .. a.name)
    ck(C.tl_array_empty(ctx, #a.shape, shape, dt[0], C.TL_DEV_OPENCL, dev, out),
       "allocating argument " .. a.name .. " on opencl:" .. dev)
    devs[i - 1] = ffi.gc(out[0], C.tl_array_free)
    ck(C.tl_array_copyto(ctx, h, devs[i - 1]), "copying argument " .. a.name)
    host[i] = h
  end
  return host, devs, n
end

-- Errors of tl_opencl_build: a driver or extension refusal is COMPILE_DEVICE, a launch the
-- device cannot run (checked before compiling) INSTANTIATION_ERROR.
local function build_error_no(rc)
  if rc == C.TL_E_RUNTIME then return E.INSTANTIATION_ERROR end
  if rc == C.TL_E_BUILD or rc == C.TL_E_UNSUPPORTED then return E.COMPILE_DEVICE end
  return E.COMPILE_DEVICE
end

local function child_build(fd, br, run_limit)
  emit(fd, "phase compile\n")
  alarm_after(br.build_timeout or 10)
  local mp = ffi.new("tl_ocl_module *[1]")
  local rc = C.tl_opencl_build(ctx, br.lowered.handle, br.device, mp)
  if rc ~= 0 then
    local m = core.errmsg()
    C.tl_clearerr(ctx)
    emit(fd, string.format("error %d\n%s", build_error_no(rc), m))
    return nil
  end
  local m = ffi.gc(mp[0], C.tl_ocl_module_free)
  emit(fd, string.format("compile %.9g\n", tonumber(C.tl_ocl_module_compile_seconds(m))))
  return m
end

-- The run phase starts with one launch that gets the build's time limit on
-- top of the run's: some drivers (pocl) generate a kernel's device code only
-- when it is first enqueued, which must not eat the time the kernel itself is
-- given. Then the run's own limit applies. Returns false after reporting a
-- failure.
local function first_launch(fd, m, devs, n, build_limit, run_limit)
  emit(fd, "phase run\n")
  alarm_after(build_limit + run_limit)
  local rc = C.tl_ocl_module_call(ctx, m, devs, n)
  if rc ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    emit(fd, string.format("error %d\n%s", E.RUNTIME_DEVICE, msg))
    return false
  end
  alarm_after(run_limit)
  return true
end

-- Child: compile the reference, run it once on the seeded inputs, write every argument's bytes.
local function child_reference(fd, br, path, run_limit)
  local m = child_build(fd, br, run_limit)
  if not m then return end
  local host, devs, n = make_args(br.sig, br.device)
  if not first_launch(fd, m, devs, n, br.build_timeout or 10, run_limit) then return end
  ck(C.tl_ocl_module_call(ctx, m, devs, n), "running the reference")
  local f = assert(io.open(path, "wb"))
  for i = 1, n do
    ck(C.tl_array_copyto(ctx, devs[i - 1], host[i]), "reading back the reference")
    f:write(ffi.string(C.tl_array_data(host[i]), C.tl_array_nbytes(host[i])))
  end
  f:close()
  emit(fd, "ok\n")
end

local function child_run(fd, br, o)
  local m = child_build(fd, br, o.run_limit)
  if not m then return end
  local host, devs, n = make_args(br.sig, br.device)
  if not first_launch(fd, m, devs, n, br.build_timeout or 10, o.run_limit) then return end
  if o.ref_path then
    local rc = C.tl_ocl_module_call(ctx, m, devs, n)
    if rc ~= 0 then
      local msg = core.errmsg()
      C.tl_clearerr(ctx)
      emit(fd, string.format("error %d\n%s", E.RUNTIME_DEVICE, msg))
      return
    end
    local f = assert(io.open(o.ref_path, "rb"))
    local data = f:read("*a")
    f:close()
    local off = 0
    local worst, werr = ffi.new("int64_t[1]"), ffi.new("double[1]")
    for i = 1, n do
      local h = host[i]
      local nb = tonumber(C.tl_array_nbytes(h))
      ck(C.tl_array_copyto(ctx, devs[i - 1], h), "reading back argument " .. br.sig.args[i].name)
      if off + nb > #data then
        emit(fd, string.format("error %d\nthe reference has other arguments than the config",
                               E.WRONG_ANSWER))
        return
      end
      local want = ffi.new("uint8_t[?]", nb)
      ffi.copy(want, ffi.cast("const char *", data) + off, nb)
      off = off + nb
      -- compare through a host array holding the reference bytes
      local outp = ffi.new("tl_array *[1]")
      local a = br.sig.args[i]
      local dt = ffi.new("int[1]")
      ck(C.tl_dtype_parse(ctx, a.dtype, dt))
      local shape = ffi.new("int64_t[?]", #a.shape + 1)
      for d, v in ipairs(a.shape) do shape[d - 1] = v end
      ck(C.tl_array_empty(ctx, #a.shape, shape, dt[0], C.TL_DEV_CPU, 0, outp))
      local ref = ffi.gc(outp[0], C.tl_array_free)
      ffi.copy(C.tl_array_data(ref), want, nb)
      local c = C.tl_array_allclose(ctx, h, ref, o.rtol, o.atol, worst, werr)
      if c > 0 then ck(c, "comparing argument " .. a.name) end
      if c ~= 0 then
        emit(fd, string.format("error %d\nwrong answer: argument %d ('%s') differs from the " ..
                               "reference at flat index %d (|diff| = %g: got %.9g, expected %.9g)",
                               E.WRONG_ANSWER, i, a.name, tonumber(worst[0]), tonumber(werr[0]),
                               C.tl_array_get(h, worst[0]), C.tl_array_get(ref, worst[0])))
        return
      end
    end
    if off ~= #data then
      emit(fd, string.format("error %d\nthe reference has other arguments than the config",
                             E.WRONG_ANSWER))
      return
    end
  end
  local secs = ffi.new("double[?]", o.repeats)
  local rc = C.tl_ocl_module_time(ctx, m, devs, n, o.number, o.repeats, o.min_repeat_ms, 0, secs)
  if rc ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    emit(fd, string.format("error %d\n%s", E.RUNTIME_DEVICE, msg))
    return
  end
  local parts = {}
  for i = 0, o.repeats - 1 do parts[#parts + 1] = string.format("%.9g", tonumber(secs[i])) end
  emit(fd, "costs " .. table.concat(parts, " ") .. "\n")
end

-- ---- run (in the parent) -----------------------------------------------------------------------

local SIGNAMES = { [4] = "Illegal instruction", [6] = "Aborted", [7] = "Bus error",
                   [8] = "Floating point exception", [9] = "Killed", [11] = "Segmentation fault" }

-- The outcome of a child: {error_no, error_msg, costs, compile_s, phase}.
local function parse_child(r, what, build_limit, run_limit)
  local limit = build_limit + run_limit
  local out = r.out
  local phase = nil
  for p in out:gmatch("phase (%a+)\n") do phase = p end
  local compile_s = tonumber(out:match("compile (%S+)\n"))
  local res = { phase = phase, compile_s = compile_s }
  local eno, emsg = out:match("error (%d+)\n(.*)$")
  if r.status == C.TL_PROC_TIMEOUT then
    if phase == "run" then
      res.error_no, res.error_msg = E.RUN_TIMEOUT, string.format("%s timed out after %g s", what, run_limit)
    else
      res.error_no = E.BUILD_TIMEOUT
      res.error_msg = string.format("%s: compiling for the device timed out (limit %g s)", what, limit)
    end
  elseif eno then
    res.error_no, res.error_msg = tonumber(eno), emsg
  elseif r.status == C.TL_PROC_SIGNAL and r.code == 14 then   -- SIGALRM: the child's own limits
    if phase == "run" then
      res.error_no = E.RUN_TIMEOUT
      res.error_msg = string.format("%s timed out after %g s", what, run_limit)
    else
      res.error_no = E.BUILD_TIMEOUT
      res.error_msg = string.format("%s: compiling for the device timed out after %g s", what,
                                    build_limit)
    end
  elseif r.status == C.TL_PROC_SIGNAL then
    res.error_no = E.RUNTIME_DEVICE
    res.error_msg = string.format("%s crashed while %s: signal %d (%s)", what,
      phase == "run" and "running" or "compiling", r.code, SIGNAMES[r.code] or "?")
  elseif r.status ~= C.TL_PROC_OK then
    res.error_no = E.RUNTIME_DEVICE
    res.error_msg = string.format("%s: the child exited with status %d: %s", what, r.code,
                                  r.err:sub(1, 2000))
  else
    local cs = out:match("costs ([^\n]*)\n")
    if cs then
      res.costs = {}
      for v in cs:gmatch("%S+") do res.costs[#res.costs + 1] = tonumber(v) end
      res.error_no = 0
    elseif out:match("ok\n") then
      res.error_no = 0
    else
      res.error_no, res.error_msg = E.UNKNOWN_ERROR, what .. ": the child sent no result"
    end
  end
  return res
end

local tmp_counter = 0
local function tmp_path()
  pcall(ffi.cdef, "int getpid(void);")
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
  local r = in_child(function(fd) child_reference(fd, br, path, runner.timeout) end,
                     2 * timeout + runner.timeout + 1)
  local p = parse_child(r, "reference", timeout, runner.timeout)
  if p.error_no ~= 0 then
    os.remove(path)
    st.err = string.format("reference: %s: %s", measure.error_name(p.error_no), tostring(p.error_msg))
    return st
  end
  st.path, st.sig = path, br.sig
  st.guard = ffi.gc(ffi.new("char[1]"), function() os.remove(path) end)
  return st
end

--- run_one(runner, inp, br) -> MeasureResult. One forked child per trial.
function M.run_one(runner, inp, br)
  local t0 = now()
  local ts = os.time()
  local btime = br.build_timeout or 10
  local what = string.format("kernel '%s'", tostring(br.fname))
  local o = { number = runner.number, repeats = runner.repeats or runner["repeat"] or 3,
              min_repeat_ms = runner.min_repeat_ms or 0, rtol = 1e-4, atol = 1e-5,
              run_limit = runner.timeout }
  if runner.check_correctness then
    local st = reference_of(runner, inp.task, btime)
    if not st.path then
      measure.sleep(runner.cooldown_interval)
      return measure.MeasureResult({ 1e9 }, E.WRONG_ANSWER, (br.time_cost or 0) + now() - t0, ts,
                                   "check_correctness: no reference: " .. tostring(st.err))
    end
    o.ref_path = st.path
  end
  -- the child stops itself (SIGALRM) after btime while compiling and runner.timeout after
  -- that; the parent's limit is the backstop
  local tw = now()
  wait_primers(0)
  M.stats.wait_s = M.stats.wait_s + (now() - tw)
  local r = in_child(function(fd) child_run(fd, br, o) end, 2 * btime + runner.timeout + 1)
  local p = parse_child(r, what, btime, runner.timeout)
  M.stats.runs = M.stats.runs + 1
  M.stats.child_s = M.stats.child_s + r.seconds
  M.stats.compile_s = M.stats.compile_s + (p.compile_s or 0)
  measure.sleep(runner.cooldown_interval)
  local all = (br.time_cost or 0) + now() - t0
  if p.error_no ~= 0 then
    return measure.MeasureResult({ 1e9 }, p.error_no, all, ts, p.error_msg)
  end
  local costs = p.costs or {}
  if #costs == 0 then
    return measure.MeasureResult({ 1e9 }, E.UNKNOWN_ERROR, all, ts, what .. ": no costs")
  end
  measure.trim_costs(costs)
  local res = measure.MeasureResult(costs, 0, all, ts, nil)
  return res
end

--- register(): installs the hook as measure.device_hooks.opencl (done on require).
function M.register()
  measure.device_hooks.opencl = { build_one = M.build_one, run_one = M.run_one, module = M }
end
M.register()

return M
