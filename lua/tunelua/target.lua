--- tunelua.target: target strings, parsed once by the engine (tl_target_parse,
--- targets/targets.c); the only Lua reader of target strings.
--
--   local target = require "tunelua.target"
--   local t = target.parse("llvm -mcpu=skylake-avx512")
--   t.family, t.kind, t.lanes, t.schedules, t.backend   -- "x86", "llvm", 16, "cpu", "c"
--   t.keys, t.options, t.device, t.model, t.tophub       -- {"cpu"}, {mcpu = ...}, nil, nil, {package, version}
--   t.strategy   -- {{op = "conv2d", template = "conv2d_NCHWc.x86", args = "conv_layout"}, ...}
--   t.device_type, t.on_device                           -- C.TL_DEV_CPU, false
--   t.toolchain, t.cc, t.cflags, t.cross_prefix          -- the C build: tl_toolchain *, nil
--                                                        -- (the default), "-O3 -march=native", ""
--   t:check_host()        -- true, or nil and why its kernels cannot run on this CPU
--
-- The engine's questions go to these fields, never to the kind: t.backend picks the code
-- generator and build (tables keyed by it: tunelua.build, the executor, measure hooks),
-- t.on_device says the kernels run on a device (not as host C), t.toolchain is what C builds
-- pass to the engine (tl_lowered_build, tl_graph_lib_build, tl_measure_build_*).
--
-- target.parse is strict: an unknown kind, a malformed word or an option the family does
-- not take raises an error naming it and the string. target.record reads a target as a log
-- names it (any kind, any option; family nil when no family takes the kind). Both return
-- one object per string (cached): treat it as read-only.
local ffi = require "ffi"
local core = require "tunelua.core"

local bit = require "bit"

local C, ctx = core.C, core.ctx

local target = {}

local Target = {}
Target.__index = Target
Target.__tostring = function(t) return t.str end
target.Target = Target

local function str_or_nil(p) if p ~= nil then return ffi.string(p) end end

local out_t = ffi.typeof("tl_target *[1]")
local strs_t = ffi.typeof("const char *[4]")

-- The Lua object of a parsed tl_target (all fields read once).
local function object_of(h)
  local t = setmetatable({}, Target)
  t.str = ffi.string(C.tl_target_str(h))
  t.kind = ffi.string(C.tl_target_kind(h))
  local fam = ffi.string(C.tl_target_family(h))
  t.family = fam ~= "" and fam or nil
  t.device = str_or_nil(C.tl_target_device(h))
  t.model = str_or_nil(C.tl_target_model(h))
  t.keys = {}
  for i = 0, C.tl_target_num_keys(h) - 1 do t.keys[#t.keys + 1] = ffi.string(C.tl_target_key(h, i)) end
  t.options = {}
  for i = 0, C.tl_target_num_options(h) - 1 do
    local v = C.tl_target_option_value(h, i)
    t.options[ffi.string(C.tl_target_option_name(h, i))] = v ~= nil and ffi.string(v) or true
  end
  t.opts = t.options
  t.mcpu, t.mtriple, t.mattr = t.options.mcpu, t.options.mtriple, t.options.mattr
  t.lanes = C.tl_target_lanes(h)
  t.registers = C.tl_target_registers(h)
  t.schedules = str_or_nil(C.tl_target_schedules(h))
  t.backend = str_or_nil(C.tl_target_backend(h))
  t.device_type = tonumber(C.tl_target_device_type(h))
  t.on_device = t.device_type ~= 0 and t.device_type ~= C.TL_DEV_CPU
  local tc = C.tl_target_toolchain(h)       -- static in the engine: outlives h
  t.toolchain = tc ~= nil and tc or nil
  t.cc = str_or_nil(C.tl_target_cc(h))
  t.cflags = ffi.string(C.tl_target_cflags(h))
  t.cross_prefix = ffi.string(C.tl_target_cross_prefix(h))
  local pkg = str_or_nil(C.tl_target_tophub_package(h))
  t.tophub = pkg and { package = pkg, version = ffi.string(C.tl_target_tophub_version(h)) } or nil
  t.fallback_untuned = C.tl_target_fallback_untuned(h) ~= 0
  t.strategy = {}
  local s = strs_t()
  for i = 0, C.tl_target_num_impls(h) - 1 do
    C.tl_target_impl(h, i, s, s + 1, s + 2, s + 3)
    t.strategy[#t.strategy + 1] = { op = ffi.string(s[0]), template = ffi.string(s[1]),
                                    args = ffi.string(s[2]), when = str_or_nil(s[3]) }
  end
  return t
end

local strict_cache, record_cache = {}, {}

local function parse_with(fn, cache, str)
  local t = cache[str]
  if t then return t end
  local out = out_t()
  if fn(ctx, str, out) ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    return nil, msg
  end
  t = object_of(out[0])
  C.tl_target_free(out[0])
  cache[str] = t
  return t
end

-- The string of a target argument: a string, a parsed target, or a table with str/string.
local function string_of(t)
  if type(t) == "table" then return t.str or t.string end
  return t
end

--- target.try_parse(str_or_table) -> target, or nil and the message
function target.try_parse(t)
  if getmetatable(t) == Target and t.family then return t end
  local str = string_of(t)
  if type(str) ~= "string" then
    return nil, "a target must be a target string such as 'llvm' or 'opencl -device=mali', got "
                .. tostring(str)
  end
  return parse_with(C.tl_target_parse, strict_cache, str)
end

--- target.parse(str_or_table[, level]) -> target; raises the message at level (default 1)
function target.parse(t, level)
  local r, msg = target.try_parse(t)
  if not r then error(msg, (level or 1) + 1) end
  return r
end

--- target.record(str) -> the target as a log record names it (never fails; nil -> "")
function target.record(str)
  if getmetatable(str) == Target then return str end
  str = string_of(str)
  return (parse_with(C.tl_target_parse_record, record_cache, str == nil and "" or tostring(str)))
end

--- target.info(str) -> {kind, keys, model ("unknown" when none), device, options} of a
--- log's target (the fields a dispatch context and TopHub key records by)
function target.info(str)
  local t = target.record(str)
  return { kind = t.kind, keys = t.keys, model = t.model or "unknown", device = t.device,
           options = t.options }
end

--- t:check_host() -> true, or nil and why kernels built for t cannot run on this host
--- ("target 'llvm -mcpu=skylake-avx512' needs AVX-512, which this CPU (...) lacks: ...").
--- Builds and measurements that run here ask this; parsing and RPC builds do not.
function Target:check_host()
  local out = out_t()
  if C.tl_target_parse_record(ctx, self.str, out) ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    return nil, msg
  end
  local rc = C.tl_target_check_host(ctx, out[0])
  C.tl_target_free(out[0])
  if rc == 0 then return true end
  local msg = core.errmsg()
  C.tl_clearerr(ctx)
  return nil, msg
end

--- target.device_id(t) -> the OpenCL device number of -device_id (or -device-id; 0 when
--- absent), or nil and "-device_id=X is not a device number"
function target.device_id(t)
  local id = t.options.device_id
  if id == nil then id = t.options["device-id"] end
  if id == nil or id == true then return 0 end
  local n = tonumber(id)
  if not n or n < 0 or n % 1 ~= 0 then
    return nil, string.format("-device_id=%s is not a device number", tostring(id))
  end
  return n
end

--- target.tophub_packages() -> {package = version} of the families' TopHub packages
function target.tophub_packages()
  local r = {}
  local p, v = ffi.new("const char *[1]"), ffi.new("const char *[1]")
  local i = 0
  while C.tl_target_tophub_list(i, p, v) == 0 do
    if p[0] ~= nil then r[ffi.string(p[0])] = ffi.string(v[0]) end
    i = i + 1
  end
  return r
end

--- target.template_flags(name) -> {prepacked_weight = bool, fallback_deploys = bool}
function target.template_flags(name)
  local f = C.tl_atvm_template_flags(name)
  return { prepacked_weight = bit.band(f, C.TL_TMPL_PREPACKED_WEIGHT) ~= 0,
           fallback_deploys = bit.band(f, C.TL_TMPL_FALLBACK_DEPLOYS) ~= 0 }
end

return target
