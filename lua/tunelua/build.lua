--- tunelua.build: tl.lower and tl.build -- a schedule to loop IR, to a
-- compiled kernel callable on tl.nd arrays.
--
--   local tl = require "tunelua"
--   print(tl.lower(s, {A, B, C}))                      -- the lowered IR
--   local f = tl.build(s, {A, B, C}, "llvm -mcpu=core-avx2")
--   f(a, b, c)                                         -- tl.nd arrays
--   local t = f:time_evaluator({number = 10, repeats = 3})(a, b, c)
--   print(t.mean, t[1], t[2], t[3])                    -- seconds per call
--   print(f:get_source())                              -- the generated C
--
-- Targets (parsed by tunelua.target): the target's backend picks the code
-- generator and the build (build.backends). "c" and "llvm" both go through the C backend (the
-- system C compiler, with the target's toolchain: compiler, flags, cross prefix); their options (-mcpu=, -mtriple=, -mattr=, -device=, -keys=,
-- -model=, -num-cores=) are kept in f.target; an -mcpu=/-mattr= naming an extension this CPU
-- lacks is an error (the kernels run here; target:check_host). "opencl" (also "opencl -device=mali",
-- "opencl -device_id=1") goes through the OpenCL backend: the function
-- runs on arrays of that OpenCL device (nd.array(x, "float32", "opencl:0"),
-- a:copyto("opencl:0")), f:get_source() is the OpenCL C, f:kernels() the
-- launch configurations, time_evaluator{wallclock = true} times with the
-- host clock instead of profiling events. See docs/opencl.md. opts.cflags overrides the target's
-- compiler flags (default "-O3 -march=native"). Errors are raised at the caller's level.
local ffi = require "ffi"
local core = require "tunelua.core"
local schedule = require "tunelua.schedule"
local targets = require "tunelua.target"

local C, ctx = core.C, core.ctx

local build = {}

-- Helpers take `lvl`: the level error() needs in that very function to
-- reach the user's code; entry points never tail-call.
local function check(rc, lvl)
  if rc ~= 0 then
    local msg = ffi.string(C.tl_errmsg(ctx))
    C.tl_clearerr(ctx)
    if msg == "" then msg = "build: error " .. tonumber(rc) end
    error(msg, lvl)
  end
end

-- ---- arguments ----------------------------------------------------------------------

local function arg_ids(s, args, verb, lvl)
  if not schedule.is_schedule(s) then
    error(verb .. ": expected a schedule (te.create_schedule) first", lvl)
  end
  if type(args) ~= "table" or #args == 0 then
    error(verb .. ": expected a list of argument tensors, e.g. {A, B, C}", lvl)
  end
  local arr = ffi.new("int[?]", #args)
  for i, t in ipairs(args) do arr[i - 1] = s:tensor_id(t, lvl + 1) end
  return arr, #args
end

-- ---- lowered functions --------------------------------------------------------------------

local Lowered = {}
Lowered.__index = Lowered
Lowered.__tostring = function(l) return ffi.string(C.tl_lowered_text(l.handle)) end

local function lower(s, args, opts, lvl)
  opts = opts or {}
  local arr, n = arg_ids(s, args, "lower", lvl + 1)
  local name = opts.name or "default_function"
  if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") then
    error("lower: the function name must be a C identifier, got " .. tostring(name), lvl)
  end
  local out = ffi.new("tl_lowered *[1]")
  check(C.tl_lower(ctx, s.handle, arr, n, name, out), lvl + 1)
  return setmetatable({ handle = ffi.gc(out[0], C.tl_lowered_free), name = name, nargs = n,
                        lower_seconds = C.tl_lowered_seconds(out[0]) }, Lowered)
end

--- tl.lower(s, {A, B, C}, {name = "f"}) -> a lowered function (tostring: the IR)
function build.lower(s, args, opts)
  if type(opts) == "string" then opts = { name = opts } end
  local l = lower(s, args, opts, 3)
  return l
end

function Lowered:text() return ffi.string(C.tl_lowered_text(self.handle)) end

-- ---- targets ---------------------------------------------------------------------------------

--- The parsed target (tunelua.target) of a target string or table {str = ...} / {kind = ...};
--- nil means "llvm". Errors name the string: build: unknown target 'cuda' (expected ...).
function build.parse_target(t, lvl)
  lvl = lvl or 2
  if t == nil then t = "llvm" end
  if type(t) == "table" and getmetatable(t) ~= targets.Target then
    if type(t.str) == "string" then t = t.str
    elseif type(t.kind) == "string" then t = t.kind
    else error("build: a target table needs a 'str' or 'kind' field", lvl) end
  end
  if type(t) ~= "string" and getmetatable(t) ~= targets.Target then
    error("build: the target must be a string like \"llvm\" or \"c\"", lvl)
  end
  local r, msg = targets.try_parse(t)
  if not r then error("build: " .. msg, lvl) end
  return r
end

-- ---- compiled functions -------------------------------------------------------------------------

local Func = {}
Func.__index = Func

local arrs_t = ffi.typeof("tl_array *[?]")

local function pack_args(f, verb, lvl, ...)
  local n = select("#", ...)
  if n ~= f.nargs then
    error(string.format("%s: %s takes %d arrays, got %d", verb, f.name, f.nargs, n), lvl)
  end
  local arr = arrs_t(n)
  for i = 1, n do
    local a = select(i, ...)
    if type(a) ~= "cdata" or not ffi.istype("tl_array *", a) then
      error(string.format("%s: argument %d of %s is not a tl.nd array", verb, i, f.name), lvl)
    end
    arr[i - 1] = a
  end
  return arr, n
end

Func.__call = function(f, ...)
  local arr, n = pack_args(f, "call", 3, ...)
  check(C.tl_module_call(ctx, f.module, f.name, arr, n), 3)
end

-- The time evaluator of a C or an OpenCL function f: timer(arr, n, number, repeat, min_ms, flag,
-- secs) runs the module's timing call (flag: the cache flush or the wall clock option).
local function time_evaluator(f, opts, flag_name, timer)
  opts = opts or {}
  local number = opts.number or 10
  local rep = opts.repeats or opts["repeat"] or 3
  local min_ms = opts.min_repeat_ms or 0
  local flag = opts[flag_name] and 1 or 0
  if type(number) ~= "number" or number < 1 or type(rep) ~= "number" or rep < 1 then
    error("time_evaluator: number and repeat must be positive integers", 3)
  end
  return function(...)
    local arr, n = pack_args(f, "time_evaluator", 3, ...)
    local secs = ffi.new("double[?]", rep)
    check(timer(arr, n, number, rep, min_ms, flag, secs), 3)
    local out, sum = {}, 0
    for i = 0, rep - 1 do
      out[i + 1] = secs[i]
      sum = sum + secs[i]
    end
    out.mean = sum / rep
    out.results = { unpack(out) }
    return out
  end
end

--- f:time_evaluator({number = 10, repeats = 3, min_repeat_ms = 0, cache_flush = false})
-- -> function(a, b, ...) returning {seconds per call of each repeat..., mean = m}
function Func:time_evaluator(opts)
  local f = self
  local ev = time_evaluator(f, opts, "cache_flush", function(arr, n, number, rep, min_ms, flush, secs)
    return C.tl_module_time(ctx, f.module, f.name, arr, n, number, rep, min_ms, flush, secs)
  end)
  return ev                              -- not a tail call: error levels count this frame
end

function Func:get_source() return ffi.string(C.tl_module_source(self.module)) end
function Func:lowered() return self.lowered_func end
Func.__tostring = function(f) return string.format("Function(%s, %s)", f.name, f.target.str) end

-- ---- OpenCL functions ------------------------------------------------------------------------

local OclFunc = {}
OclFunc.__index = OclFunc

OclFunc.__call = function(f, ...)
  local arr, n = pack_args(f, "call", 3, ...)
  check(C.tl_ocl_module_call(ctx, f.module, arr, n), 3)
end

--- f:time_evaluator({number = 10, repeats = 3, min_repeat_ms = 0, wallclock = false})
function OclFunc:time_evaluator(opts)
  local f = self
  local ev = time_evaluator(f, opts, "wallclock", function(arr, n, number, rep, min_ms, wall, secs)
    return C.tl_ocl_module_time(ctx, f.module, arr, n, number, rep, min_ms, wall, secs)
  end)
  return ev                              -- not a tail call: error levels count this frame
end

function OclFunc:get_source() return ffi.string(C.tl_ocl_module_source(self.module)) end
function OclFunc:lowered() return self.lowered_func end

--- f:kernels() -> {{name =, grid = {x, y, z}, block = {x, y, z}}, ...}
function OclFunc:kernels()
  local out = {}
  local g, b = ffi.new("int64_t[3]"), ffi.new("int64_t[3]")
  for k = 0, C.tl_ocl_module_num_kernels(self.module) - 1 do
    local name = C.tl_ocl_module_kernel(self.module, k, g, b)
    out[#out + 1] = { name = ffi.string(name), grid = { tonumber(g[0]), tonumber(g[1]), tonumber(g[2]) },
                      block = { tonumber(b[0]), tonumber(b[1]), tonumber(b[2]) } }
  end
  return out
end
OclFunc.__tostring = function(f) return string.format("Function(%s, %s)", f.name, f.target.str) end

local function device_id_of(tgt, lvl)
  local n, msg = targets.device_id(tgt)
  if not n then error("build: target option " .. msg, lvl) end
  return n
end

local function build_opencl(l, tgt, opts, lvl)
  local dev = device_id_of(tgt, lvl + 1)
  local out = ffi.new("tl_ocl_module *[1]")
  check(C.tl_opencl_build(ctx, l.handle, dev, out), lvl + 1)
  local m = ffi.gc(out[0], C.tl_ocl_module_free)
  return setmetatable({ module = m, name = l.name, nargs = l.nargs, target = tgt, lowered_func = l,
                        device = "opencl:" .. dev, device_id = dev, lower_seconds = l.lower_seconds,
                        compile_seconds = C.tl_ocl_module_compile_seconds(m) }, OclFunc)
end

-- A C function: the target's toolchain, opts.cflags over its flags.
local function build_c(l, tgt, opts, lvl)
  local ok, why = tgt:check_host()
  if not ok then error("build: " .. why, lvl) end
  local out = ffi.new("tl_module *[1]")
  check(C.tl_lowered_build(ctx, l.handle, tgt.toolchain, opts.cflags, out), lvl + 1)
  local m = ffi.gc(out[0], C.tl_module_free)
  local f = setmetatable({ module = m, name = l.name, nargs = l.nargs, target = tgt, lowered_func = l,
                           lower_seconds = l.lower_seconds,
                           compile_seconds = C.tl_module_compile_seconds(m),
                           cache_hit = C.tl_module_cache_hit(m) ~= 0 }, Func)
  return f
end

--- The build of each backend (a target's .backend): fn(lowered, target, opts, lvl) -> function.
build.backends = { c = build_c, opencl = build_opencl }

--- OpenCL C of a schedule without building it (no device needed).
function build.opencl_source(s, args, opts)
  if type(opts) == "string" then opts = { name = opts } end
  local l = lower(s, args, opts, 3)
  local src = ffi.new("const char *[1]")
  check(C.tl_opencl_source(ctx, l.handle, src), 2)
  return ffi.string(src[0])
end

--- tl.build(s, {A, B, C}, target, {name = "f", cflags = "-O2"}) -> callable f(a, b, c)
function build.build(s, args, target, opts)
  if type(target) == "table" and target.kind == nil and target.str == nil and opts == nil then
    opts, target = target, nil
  end
  opts = opts or {}
  if type(opts) == "string" then opts = { name = opts } end
  local tgt = build.parse_target(target, 3)
  local l = lower(s, args, opts, 3)
  local f = build.backends[tgt.backend](l, tgt, opts, 3)
  return f
end

return build
