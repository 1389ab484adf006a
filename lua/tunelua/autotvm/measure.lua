--- tunelua.autotvm.measure: measure configs of a task (docs/measure.md).
--
--   local measure = require "tunelua.autotvm.measure"
--   local option = measure.measure_option({builder = measure.LocalBuilder({n_parallel = 2}),
--                                          runner = measure.LocalRunner({number = 4})})
--   local batch = measure.create_measure_batch(task, option)
--   local results = batch({measure.MeasureInput(task, task.config_space:get(3)), ...})
--   -- results[i] = {costs = {...}, error_no = 0, all_cost = s, timestamp = t, error_msg = nil}
--
-- The builder lowers each config (task:lower(index)) in this process, generates C, and compiles
-- the sources in parallel, each compiler a child process group with a time limit. The runner
-- times each kernel serially in a forked child (tl_measure_run): a crash, a hang or a wrong
-- answer becomes an error record, never a dead tuning run. RPCRunner does the same on devices
-- handed out by an RPC tracker (tunelua.rpc).
local ffi = require "ffi"
local core = require "tunelua.core"

local C, ctx = core.C, core.ctx

local measure = {}

local MeasureErrorNo = {
  NO_ERROR = 0, INSTANTIATION_ERROR = 1, COMPILE_HOST = 2, COMPILE_DEVICE = 3,
  RUNTIME_DEVICE = 4, WRONG_ANSWER = 5, BUILD_TIMEOUT = 6, RUN_TIMEOUT = 7, UNKNOWN_ERROR = 8,
}
measure.MeasureErrorNo = MeasureErrorNo
local ERR_NAME = {}
for k, v in pairs(MeasureErrorNo) do ERR_NAME[v] = k end
measure.error_name = function(n) return ERR_NAME[n] or ("ERROR_" .. tostring(n)) end


-- Measurement follows the task's target (tunelua.target): a target whose kernels run on a
-- device (t.on_device) is measured by the hook of its backend, measure.device_hooks[t.backend] =
-- {build_one = fn(builder, input) -> build result, run_one = fn(runner, input, build result) ->
-- result}; without one its configs are error records. Other targets are host C kernels, built
-- with the target's toolchain.
measure.device_hooks = {}
-- The module defining each backend's hook, loaded on first use.
local hook_modules = { opencl = "tunelua.autotvm.measure_opencl", vta = "tunelua.autotvm.measure_vta" }
setmetatable(measure.device_hooks, { __index = function(t, k)
  if hook_modules[k] then
    require(hook_modules[k])
    return rawget(t, k)
  end
end })

-- The parsed target of a task, as a log record names it (nil: "llvm").
local function target_of(task)
  local t = type(task) == "table" and task.target or nil
  if type(t) == "table" then t = t.str or t.kind end
  return require("tunelua.target").record(t or "llvm")
end
measure.target_of = target_of

-- The device hook measuring a task's configs, or nil (host C kernels).
local function hook_of(task)
  local t = target_of(task)
  return t.on_device and t.backend and measure.device_hooks[t.backend] or nil
end
measure.hook_of = hook_of

--- MeasureInput(task, config): config is a config object (.index) or an index.
function measure.MeasureInput(task, config)
  if type(config) == "number" then config = { index = config } end
  return { task = task, config = config }
end

--- MeasureResult(costs, error_no, all_cost, timestamp, error_msg)
function measure.MeasureResult(costs, error_no, all_cost, timestamp, error_msg)
  return { costs = costs, error_no = error_no, all_cost = all_cost, timestamp = timestamp,
           error_msg = error_msg }
end

--- config_index(inp) -> the config index of a MeasureInput (its config an index or an object
--- with .index), or nil.
local function config_index(inp)
  local c = inp.config
  if type(c) == "number" then return c end
  if type(c) == "table" or type(c) == "cdata" then return c.index end
  return nil
end
measure.config_index = config_index

local function opt(o, name, default, kind, lvl)
  local v = o[name]
  if v == nil then return default end
  if type(v) ~= kind then
    error(string.format("%s: expected a %s, got %s", name, kind, type(v)), lvl + 1)
  end
  return v
end

-- A private build directory (mkdtemp, no shell): <base>/tunelua-measure-<pid>-XXXXXX under
-- TUNELUA_MEASURE_DIR, TMPDIR or /tmp. Those a killed tuner left are removed by the next one.
local function tmp_dir()
  local base = os.getenv("TUNELUA_MEASURE_DIR") or os.getenv("TMPDIR") or "/tmp"
  return require("tunelua.file").tmpdir(base, "tunelua-measure")
end

-- The C source and signature of a config: task:lower(index) gives a tunelua.build Lowered
-- (its .handle a tl_lowered *) or a table {source = C text, sig = JSON signature} (hand-made
-- kernels). Raises on instantiation errors.
-- The C source and signature of a lowered function; toolchain (a target's, optional) gives the
-- vector width the code generator prints (128-bit for arm_cpu).
local function source_of(lowered, toolchain)
  if type(lowered) == "table" and lowered.source and lowered.sig then
    return lowered.source, lowered.sig
  end
  local h = type(lowered) == "table" and lowered.handle or lowered
  if type(h) ~= "cdata" then error("lower returned neither a Lowered nor {source, sig}") end
  local src, sig = ffi.new("char *[1]"), ffi.new("char *[1]")
  core.check(C.tl_measure_lowered_source_for(ctx, h, toolchain, src, sig), 2)
  local s, g = ffi.string(src[0]), ffi.string(sig[0])
  C.tl_measure_str_free(src[0])
  C.tl_measure_str_free(sig[0])
  return s, g
end
measure.source_of = source_of

-- An error as a trial's reason: no traceback, and no "file.lua:N: " position
-- of the Lua code that raised it (the message names the task and config).
local function strip_traceback(msg)
  msg = tostring(msg):gsub("\nstack traceback:.*$", "")
  return (msg:gsub("^[^%s:]+%.lua:%d+: ", ""))
end
measure.strip_traceback = strip_traceback

-- Compile the items of one toolchain (those with it.toolchain == toolchain) in parallel.
local function compile_group(items, dir, toolchain, cflags, timeout, n_parallel)
  local n = #items
  local srcs = ffi.new("const char *[?]", n + 1)
  local paths = ffi.new("const char *[?]", n + 1)
  local keep = {}
  local mine = {}
  for i, it in ipairs(items) do
    mine[i] = it.source ~= nil and it.toolchain == toolchain
    if mine[i] then
      it.so_path = string.format("%s/k%d.so", dir, i)
      keep[#keep + 1] = it.source
      keep[#keep + 1] = it.so_path
      srcs[i - 1] = it.source
      paths[i - 1] = it.so_path
    end
  end
  local codes = ffi.new("int[?]", n + 1)
  local secs = ffi.new("double[?]", n + 1)
  local msgs = ffi.new("char *[?]", n + 1)
  core.check(C.tl_measure_build_batch(ctx, n, srcs, paths, toolchain, cflags, timeout, n_parallel,
                                      codes, secs, msgs), 2)
  for i, it in ipairs(items) do
    local msg = msgs[i - 1] ~= nil and ffi.string(msgs[i - 1]) or nil
    if msgs[i - 1] ~= nil then C.tl_measure_str_free(msgs[i - 1]) end
    if mine[i] then
      it.time_cost = (it.time_cost or 0) + tonumber(secs[i - 1])
      local c = tonumber(codes[i - 1])
      if c ~= 0 then
        it.error_no = (msg and msg:match("timed out")) and MeasureErrorNo.BUILD_TIMEOUT
                      or MeasureErrorNo.COMPILE_HOST
        it.error_msg = msg or "compile failed"
        it.so_path = nil
      end
    end
  end
  keep = nil
end

-- Compile (source, sig) pairs in parallel. items[i] = {source=, sig=, toolchain=} (toolchain:
-- the task's target's, nil for the defaults) or {error_no=, error_msg=}; cflags (the builder's)
-- replaces the toolchains' flags. One compiler batch per toolchain.
local function compile_items(items, dir, cflags, timeout, n_parallel)
  local seen, toolchains = {}, {}
  for _, it in ipairs(items) do
    if it.source then
      local key = it.toolchain and tostring(ffi.cast("uintptr_t", it.toolchain)) or "default"
      if not seen[key] then
        seen[key] = true
        toolchains[#toolchains + 1] = it.toolchain or false
      end
    end
  end
  for _, tc in ipairs(toolchains) do
    compile_group(items, dir, tc or nil, cflags, timeout, n_parallel)
  end
  return items
end

-- ---- LocalBuilder ---------------------------------------------------------------------------

local Builder = {}
Builder.__index = Builder

--- LocalBuilder({n_parallel = cores, timeout = 10, cflags = nil, build_func = "default"})
function measure.LocalBuilder(o)
  o = o or {}
  if type(o) ~= "table" then error("LocalBuilder: expected an options table", 2) end
  local b = setmetatable({}, Builder)
  b.n_parallel = opt(o, "n_parallel", tonumber(C.tl_num_cores()), "number", 2)
  b.timeout = opt(o, "timeout", 10, "number", 2)
  b.cflags = opt(o, "cflags", nil, "string", 2)
  b.build_func = o.build_func or "default"
  if b.n_parallel < 1 then error("LocalBuilder: n_parallel must be >= 1", 2) end
  return b
end

-- All inputs of one C task (tunelua_autotvm.h): each config is instantiated, lowered and
-- generated in a forked child, then compiled, n_parallel at a time (tl_measure_build_task_batch).
local function c_task_of(inputs)
  local t = inputs[1] and inputs[1].task
  if type(t) ~= "table" or type(t.handle) ~= "cdata" or target_of(t).on_device then
    return nil
  end
  for _, inp in ipairs(inputs) do
    if inp.task ~= t or type(config_index(inp)) ~= "number" then return nil end
  end
  return t
end

function Builder:build_c_task(task, inputs)
  local n = #inputs
  local dir = tmp_dir()
  local idx = ffi.new("int64_t[?]", n)
  local paths = ffi.new("const char *[?]", n)
  local keep = {}
  for i, inp in ipairs(inputs) do
    idx[i - 1] = config_index(inp)
    keep[i] = string.format("%s/k%d.so", dir, i)
    paths[i - 1] = keep[i]
  end
  local eno = ffi.new("int[?]", n)
  local secs = ffi.new("double[?]", n)
  local msgs = ffi.new("char *[?]", n)
  local sigs = ffi.new("char *[?]", n)
  core.check(C.tl_measure_build_task_batch(ctx, task.handle, n, idx, paths, target_of(task).toolchain,
                                           self.cflags, self.timeout, self.n_parallel, eno, secs,
                                           msgs, sigs), 3)
  local items = {}
  for i = 1, n do
    local it = { dir = dir, time_cost = tonumber(secs[i - 1]), error_no = tonumber(eno[i - 1]) }
    if msgs[i - 1] ~= nil then it.error_msg = ffi.string(msgs[i - 1]); C.tl_measure_str_free(msgs[i - 1]) end
    if sigs[i - 1] ~= nil then it.sig = ffi.string(sigs[i - 1]); C.tl_measure_str_free(sigs[i - 1]) end
    if it.error_no == 0 then
      it.so_path = keep[i]
      it.fname = it.sig:match('"name"%s*:%s*"([^"]*)"')
    end
    items[i] = it
  end
  return items
end

--- builder:build(inputs) -> build results {so_path, sig, fname, dir, time_cost, error_no, error_msg}
function Builder:build(inputs)
  local ctask = c_task_of(inputs)
  if ctask then return self:build_c_task(ctask, inputs) end
  local items, dir = {}, nil
  for i, inp in ipairs(inputs) do
    local it = { time_cost = 0 }
    items[i] = it
    local tgt = target_of(inp.task)
    local hook = hook_of(inp.task)
    if hook and hook.build_one then
      local ok, r = pcall(hook.build_one, self, inp)
      if ok then
        for k, v in pairs(r) do it[k] = v end
      else
        it.error_no, it.error_msg = MeasureErrorNo.UNKNOWN_ERROR, strip_traceback(r)
      end
    elseif tgt.on_device then
      local name = tgt.backend or tgt.kind
      it.error_no = MeasureErrorNo.COMPILE_DEVICE
      it.error_msg = string.format("measuring target '%s' needs the %s runtime's measure hook " ..
        "(measure.device_hooks.%s), which is not registered", tgt.kind, name, name)
    else
      local t0 = os.clock()
      local ok, l = pcall(function() return inp.task:lower(config_index(inp)) end)
      local src, sig
      if ok then
        ok, src, sig = pcall(source_of, l, tgt.toolchain)
        if not ok then l = src end
      end
      it.time_cost = os.clock() - t0
      if not ok then
        it.error_no = MeasureErrorNo.INSTANTIATION_ERROR
        it.error_msg = strip_traceback(l)
      else
        it.source, it.sig, it.toolchain = src, sig, tgt.toolchain
        it.fname = sig:match('"name"%s*:%s*"([^"]*)"')
      end
    end
  end
  local need = false
  for _, it in ipairs(items) do if it.source then need = true end end
  if need then
    dir = tmp_dir()
    compile_items(items, dir, self.cflags, self.timeout, self.n_parallel)
  end
  for _, it in ipairs(items) do
    it.dir = dir
    it.source, it.toolchain = nil, nil
    if not it.error_no then it.error_no = 0 end
  end
  return items
end

-- Remove what a build left behind. The guards of reference kernels run this as a finalizer,
-- so it never loops with pairs(): a compiled pairs() loop whose end had no side trace yet spun
-- forever there (see "Finalizers" in docs/architecture.md).
local function cleanup(build_results)
  local dirs, seen = {}, {}
  for _, br in ipairs(build_results) do
    if br.so_path then os.remove(br.so_path) end
    local d = br.dir
    if d and not seen[d] then
      seen[d] = true
      dirs[#dirs + 1] = d
    end
  end
  for i = 1, #dirs do
    pcall(require("tunelua.file").remove, dirs[i])
  end
end
measure.cleanup = cleanup

-- Sort and drop the min and the max when there are more than 2 costs (TVM's rule).
local function trim_costs(c)
  if #c > 2 then
    table.sort(c)
    table.remove(c, #c)
    table.remove(c, 1)
  end
  return c
end
measure.trim_costs = trim_costs

local function sleep(s)
  if s and s > 0 then
    pcall(ffi.cdef, "int usleep(unsigned int);")
    ffi.C.usleep(math.floor(s * 1e6))
  end
end
measure.sleep = sleep

-- ---- LocalRunner ---------------------------------------------------------------------------

local Runner = {}
Runner.__index = Runner

local function runner_opts(r, o, lvl)
  r.number = opt(o, "number", 4, "number", lvl + 1)
  r["repeat"] = opt(o, "repeat", nil, "number", lvl + 1) or opt(o, "repeats", 3, "number", lvl + 1)
  r.repeats = r["repeat"]
  r.min_repeat_ms = opt(o, "min_repeat_ms", 0, "number", lvl + 1)
  r.timeout = opt(o, "timeout", 10, "number", lvl + 1)
  r.cooldown_interval = opt(o, "cooldown_interval", 0.1, "number", lvl + 1)
  r.enable_cpu_cache_flush = opt(o, "enable_cpu_cache_flush", false, "boolean", lvl + 1)
  r.check_correctness = opt(o, "check_correctness", false, "boolean", lvl + 1)
  if r.number < 1 then error("number must be >= 1", lvl + 1) end
  if r.repeats < 1 or r.repeats > 1024 then error("repeat must be in [1, 1024]", lvl + 1) end
end

-- CPU groups: a list of CPU lists ("2,3"), checked (each a CPU list, none sharing a CPU) by
-- tl_cpu_groups_check; raises "<what>: <why>" at level lvl (0: no position).
local function check_groups(groups, what, lvl)
  local n = #groups
  local arr = ffi.new("const char *[?]", math.max(n, 1))
  for i, g in ipairs(groups) do arr[i - 1] = g end
  local err = ffi.new("char[512]")
  if C.tl_cpu_groups_check(arr, n, err, 512) ~= 0 then
    error(what .. ": " .. ffi.string(err), lvl > 0 and lvl + 1 or 0)
  end
  return groups
end

--- measure.parse_cpu_groups(spec, what) -> a list of CPU lists: spec is one CPU list or
--- several separated by ';' ("2,3;4,5"); raises an error naming `what` (default
--- TUNELUA_MEASURE_CPUS) and what was expected when a group is empty, malformed or shares
--- a CPU with another.
function measure.parse_cpu_groups(spec, what)
  what = what or "TUNELUA_MEASURE_CPUS"
  if type(spec) ~= "string" then error(what .. ": expected a string of CPU lists", 0) end
  local groups = {}
  for part in (spec .. ";"):gmatch("([^;]*);") do
    local g = part:match("^%s*(.-)%s*$")
    if g == "" then
      error(string.format("%s='%s': group %d is empty: expected CPU lists separated by ';' " ..
                          "(e.g. 2,3;4,5)", what, spec, #groups + 1), 0)
    end
    groups[#groups + 1] = g
  end
  return check_groups(groups, string.format("%s='%s'", what, spec), 0)
end

--- LocalRunner({number = 4, repeat = 3, min_repeat_ms = 0, timeout = 10, cooldown_interval = 0.1,
---   enable_cpu_cache_flush = false, check_correctness = false, cpu_groups = nil})
--- cpu_groups = {"2,3", "4,5", ...} (disjoint CPU lists; overrides TUNELUA_MEASURE_CPUS): the
--- kernels of a batch are timed concurrently, one measurement child per group, each pinned to
--- its group (tl_measure_run_batch); cooldown_interval is then a pause per group.
function measure.LocalRunner(o)
  o = o or {}
  if type(o) ~= "table" then error("LocalRunner: expected an options table", 2) end
  local r = setmetatable({ n_parallel = 1 }, Runner)
  runner_opts(r, o, 2)
  if o.cpu_groups ~= nil then
    local g = o.cpu_groups
    if type(g) ~= "table" or #g == 0 then
      error("LocalRunner: cpu_groups: expected a non-empty list of CPU lists such as {\"2,3\", \"4,5\"}", 2)
    end
    local copy = {}
    for i, v in ipairs(g) do
      if type(v) ~= "string" then
        error(string.format("LocalRunner: cpu_groups: group %d: expected a CPU list string such as \"2,3\", got %s",
                            i, type(v)), 2)
      end
      copy[i] = v
    end
    r.cpu_groups = check_groups(copy, "LocalRunner: cpu_groups", 2)
  end
  return r
end

-- The CPU groups a runner times on concurrently: its cpu_groups, else those of
-- TUNELUA_MEASURE_CPUS when it names several ("2,3;4,5"); nil for one group or none (each
-- child then applies TUNELUA_MEASURE_CPUS itself, serially).
function Runner:groups()
  if self.cpu_groups then return self.cpu_groups end
  local spec = os.getenv("TUNELUA_MEASURE_CPUS")
  if not spec or not spec:find(";", 1, true) then return nil end
  return measure.parse_cpu_groups(spec)
end

-- The reference kernel for check_correctness: task:lower_reference() when the task has it,
-- else config 0 (TVM's old rule), built once per task.
local function build_reference(task, cflags, index)
  local ok, l
  if task.lower_reference and not index then
    ok, l = pcall(task.lower_reference, task)
  else
    ok, l = pcall(task.lower, task, index or 0)
  end
  if not ok then return nil, "reference: " .. strip_traceback(l) end
  local ok2, src, sig = pcall(source_of, l)
  if not ok2 then return nil, "reference: " .. strip_traceback(src) end
  local it = { source = src, sig = sig, fname = sig:match('"name"%s*:%s*"([^"]*)"'),
               toolchain = target_of(task).toolchain }
  local dir = tmp_dir()
  compile_items({ it }, dir, cflags, 60, 1)
  if not it.so_path then return nil, "reference: " .. tostring(it.error_msg) end
  it.dir = dir
  return it
end
measure.build_reference = build_reference

-- A blocked task's configs take inputs of their own channel blocks: the reference of config
-- index is the config with the same blocks (tile_ic, tile_oc) and every other knob at its
-- first value (config 0's rule, per layout); a Winograd task's tile_size is kept too (its
-- transformed weight's shape depends on it).
local KEEP = { tile_ic = true, tile_oc = true, tile_size = true }
local function blocked_reference_index(task, index)
  local sp = task.config_space
  local digits = sp:point2knob(index)
  for k, kb in ipairs(sp:knobs()) do
    if not KEEP[kb.name] then digits[k] = 0 end
  end
  return sp:knob2point(digits)
end

-- The reference for a blocked task's build result br (built once per signature).
function Runner:blocked_reference(inp, br)
  self.brefs = self.brefs or {}
  local key = br.sig
  local r = self.brefs[key]
  if r == nil then
    local index = config_index(inp) or 0
    local sp = inp.task.config_space
    if index < 0 or (type(inp.config) == "table" and inp.config.is_fallback) then
      index = sp:knob2point(sp:fallback_digits())
    end
    local ref, err = build_reference(inp.task, nil, blocked_reference_index(inp.task, index))
    r = ref or { err = err }
    self.brefs[key] = r
    if ref then
      local guard = ffi.gc(ffi.new("char[1]"), function() cleanup({ ref }) end)
      self.bref_guards = self.bref_guards or {}
      self.bref_guards[#self.bref_guards + 1] = guard
    end
  end
  if r.err then return nil, r.err end
  return r
end

--- runner:set_task(task): prepares per-task state (the reference kernel).
function Runner:set_task(task)
  if self.ref then cleanup({ self.ref }) end
  if self.ref_guard then ffi.gc(self.ref_guard, nil) end
  self.task, self.ref, self.ref_err = task, nil, nil
  -- a device hook (OpenCL) checks correctness on its own device
  if self.check_correctness and not hook_of(task) and not task.blocked then
    self.ref, self.ref_err = build_reference(task)
    local ref = self.ref
    -- the reference's directory goes when the runner does (or at exit)
    self.ref_guard = ref and ffi.gc(ffi.new("char[1]"), function() cleanup({ ref }) end) or nil
  end
end

function Runner:get_build_kwargs() return {} end

-- One run in a child; returns a MeasureResult.
function measure.run_one(r, br, ref)
  local costs = ffi.new("double[?]", r.repeats)
  local ncosts = ffi.new("int[1]")
  local eno = ffi.new("int[1]")
  local msg = ffi.new("char *[1]")
  local t0 = os.time()
  local rc = C.tl_measure_run(ctx, br.so_path, br.fname, br.sig, r.number, r.repeats,
                              r.min_repeat_ms, r.enable_cpu_cache_flush and 1 or 0, r.timeout,
                              ref and ref.so_path or nil, ref and ref.fname or nil, 1e-4,
                              costs, ncosts, eno, msg)
  if rc ~= 0 then
    local m = core.errmsg()
    C.tl_clearerr(ctx)
    return measure.MeasureResult({ 1e9 }, MeasureErrorNo.UNKNOWN_ERROR, 0, t0, m)
  end
  local m = msg[0] ~= nil and ffi.string(msg[0]) or nil
  if msg[0] ~= nil then C.tl_measure_str_free(msg[0]) end
  local c = {}
  for i = 0, ncosts[0] - 1 do c[#c + 1] = tonumber(costs[i]) end
  local e = tonumber(eno[0])
  if e ~= 0 then c = { 1e9 } else trim_costs(c) end
  return measure.MeasureResult(c, e, 0, t0, m)
end

-- The kernels of items ({br = build result, ref = reference or nil}) timed concurrently on
-- CPU groups (tl_measure_run_batch); MeasureResults in the order of items, each all_cost its
-- child's wall time.
function measure.run_batch(r, items, groups)
  local n, rep = #items, r.repeats
  local keep = {}
  local function strs(f)
    local a = ffi.new("const char *[?]", n)
    for k, it in ipairs(items) do
      local v = f(it)
      if v ~= nil then
        keep[#keep + 1] = v
        a[k - 1] = v
      end
    end
    keep[#keep + 1] = a
    return a
  end
  local sos = strs(function(it) return it.br.so_path end)
  local fnames = strs(function(it) return it.br.fname end)
  local sigs = strs(function(it) return it.br.sig end)
  local rsos = strs(function(it) return it.ref and it.ref.so_path end)
  local rfnames = strs(function(it) return it.ref and it.ref.fname end)
  local garr = ffi.new("const char *[?]", #groups)
  for g, v in ipairs(groups) do garr[g - 1] = v end
  local costs = ffi.new("double[?]", n * rep)
  local ncosts = ffi.new("int[?]", n)
  local eno = ffi.new("int[?]", n)
  local secs = ffi.new("double[?]", n)
  local msgs = ffi.new("char *[?]", n)
  local t0 = os.time()
  core.check(C.tl_measure_run_batch(ctx, n, sos, fnames, sigs, rsos, rfnames, r.number, rep,
                                    r.min_repeat_ms, r.enable_cpu_cache_flush and 1 or 0,
                                    r.timeout, 1e-4, #groups, garr, r.cooldown_interval, costs,
                                    ncosts, eno, secs, msgs), 2)
  local out = {}
  for k = 1, n do
    local m = msgs[k - 1] ~= nil and ffi.string(msgs[k - 1]) or nil
    if msgs[k - 1] ~= nil then C.tl_measure_str_free(msgs[k - 1]) end
    local c = {}
    for j = 0, ncosts[k - 1] - 1 do c[#c + 1] = tonumber(costs[(k - 1) * rep + j]) end
    local e = tonumber(eno[k - 1])
    if e ~= 0 then c = { 1e9 } else trim_costs(c) end
    out[k] = measure.MeasureResult(c, e, tonumber(secs[k - 1]), t0, m)
  end
  keep = nil
  return out
end

--- runner:run(inputs, build_results) -> MeasureResults (serial, each in a forked child; with
--- CPU groups the plain CPU kernels concurrently, one child per group)
function Runner:run(inputs, build_results)
  local out = {}
  -- kernels of a target this CPU cannot run (an -mcpu of another machine): an error, once
  local checked = {}
  for _, inp in ipairs(inputs) do
    local tgt = target_of(inp.task)
    if not checked[tgt] and not hook_of(inp.task) and not tgt.on_device then
      checked[tgt] = true
      local ok, why = tgt:check_host()
      if not ok then error("LocalRunner: " .. why, 0) end
    end
  end
  local groups = self:groups()
  local pending = {}       -- with groups: the plain CPU kernels, timed together at the end
  for i, inp in ipairs(inputs) do
    local br = build_results[i]
    local res
    local hook = hook_of(inp.task)
    local t0 = os.clock()
    if br.error_no ~= 0 then
      res = measure.MeasureResult({ 1e9 }, br.error_no, br.time_cost or 0, os.time(), br.error_msg)
    elseif hook and hook.run_one then
      local ok, r = pcall(hook.run_one, self, inp, br)
      res = ok and r or measure.MeasureResult({ 1e9 }, MeasureErrorNo.RUNTIME_DEVICE, 0, os.time(),
                                              strip_traceback(r))
    else
      local ref = nil
      if self.check_correctness and inp.task.blocked then
        ref, self.ref_err = self:blocked_reference(inp, br)
      elseif self.check_correctness then
        if not self.ref and self.task ~= inp.task then self:set_task(inp.task) end
        ref = self.ref
      end
      if self.check_correctness and not ref then
        res = measure.MeasureResult({ 1e9 }, MeasureErrorNo.WRONG_ANSWER, 0, os.time(),
                                    "check_correctness: no reference kernel: " .. tostring(self.ref_err))
      elseif groups then
        pending[#pending + 1] = { i = i, br = br, ref = ref }
      else
        res = measure.run_one(self, br, ref)
      end
      if res then
        res.all_cost = (br.time_cost or 0) + (os.clock() - t0)
        if not groups then sleep(self.cooldown_interval) end
      end
    end
    out[i] = res
  end
  if groups and #pending > 0 then
    for k, res in ipairs(measure.run_batch(self, pending, groups)) do
      local p = pending[k]
      res.all_cost = (p.br.time_cost or 0) + res.all_cost
      out[p.i] = res
    end
  end
  cleanup(build_results)
  return out
end

-- ---- measure_option / create_measure_batch ------------------------------------------------

--- measure_option({builder = LocalBuilder(), runner = LocalRunner()}) -> option table
function measure.measure_option(o)
  o = o or {}
  if type(o) ~= "table" then error("measure_option: expected {builder = ..., runner = ...}", 2) end
  local b, r = o.builder, o.runner
  if b == nil or b == "local" then b = measure.LocalBuilder() end
  if r == nil or r == "local" then r = measure.LocalRunner() end
  if type(b) ~= "table" or type(b.build) ~= "function" then
    error("measure_option: builder must be a LocalBuilder (an object with :build)", 2)
  end
  if type(r) ~= "table" or type(r.run) ~= "function" then
    error("measure_option: runner must be a LocalRunner or RPCRunner (an object with :run)", 2)
  end
  return { builder = b, runner = r }
end

--- create_measure_batch(task, option) -> function(inputs) -> results (builds all, then runs)
function measure.create_measure_batch(task, option)
  if type(option) ~= "table" or not option.builder or not option.runner then
    error("create_measure_batch: expected an option from measure_option", 2)
  end
  local builder, runner = option.builder, option.runner
  if runner.set_task then runner:set_task(task) end
  return function(inputs)
    local brs = builder:build(inputs)
    local ok, res = pcall(runner.run, runner, inputs, brs)
    if not ok then
      cleanup(brs)     -- the build directories go on every path
      error(res, 0)
    end
    for i, r in ipairs(res) do
      if r.error_no ~= 0 and (r.all_cost or 0) == 0 then r.all_cost = brs[i].time_cost or 0 end
    end
    return res
  end
end

--- RPCRunner(key, host, port, {...}): see tunelua.rpc (loaded on first use).
function measure.RPCRunner(key, host, port, o)
  local r = require("tunelua.rpc.runner").new(key, host, port, o, runner_opts, Runner)
  return r
end

return measure
