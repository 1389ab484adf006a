--- tunelua.auto_scheduler.hardware_params: the hardware params the auto-scheduler's rules and
--- checks read (core/ansor/hwparams.c), TVM's HardwareParams.
--
--   local hp = auto_scheduler.hardware_params_of("llvm")              -- this host's
--   local hp = auto_scheduler.hardware_params_of("opencl", { device = 0 })   -- a local device's
--   local hp = auto_scheduler.HardwareParams{ target = "opencl -device=mali", warp_size = 4 }
--   local hp = auto_scheduler.HardwareParams(-1, 16, 64, 32768, 2147483647, 256, 1, 1)
--
-- A HardwareParams has the eight integer fields (num_cores, vector_unit_bytes,
-- cache_line_bytes, max_shared_memory_per_block, max_local_memory_per_block,
-- max_threads_per_block, max_vthread_extent, warp_size), .target and .target_host (strings or
-- nil), and :handle() (a tl_ansor_hw cdata, freed by the GC). Fields not given take the
-- target's defaults (hardware_params_of; "llvm" without a target); given ones are checked by
-- the engine: a value out of range or an unknown keyword is an error naming it.
--
-- Defaults: a CPU target's num_cores is this process's affinity mask, vector_unit_bytes its
-- float32 lanes x 4 (the host's, or -mcpu's: 64 with AVX-512, 32 with AVX2), cache_line_bytes
-- 64, the GPU fields 0. An OpenCL target's come from a device when one is named (opts.device,
-- queried in a child process, or opts.device_info, a device's tl_opencl_device_info table or
-- JSON text, e.g. one an RPC server reported): shared memory = its local memory, local memory
-- unchecked (INT32_MAX), threads = its max work-group size, warp = its subgroup size,
-- vthread = max(1, warp / 4). Without one, -device=mali and adreno take TVM's fixed tables and
-- any other OpenCL target queries local device 0.
local ffi = require "ffi"
local core = require "tunelua.core"
local target = require "tunelua.target"
local json = require "tunelua.json"

local C, ctx = core.C, core.ctx

local M = {}

M.fields = {}
for i = 0, C.tl_ansor_hw_num_fields() - 1 do M.fields[i + 1] = ffi.string(C.tl_ansor_hw_field_name(i)) end
local is_field = {}
for _, f in ipairs(M.fields) do is_field[f] = true end

local HardwareParams = {}
HardwareParams.__index = HardwareParams
M.HardwareParams_mt = HardwareParams

local function fail(lvl)
  local m = core.errmsg()
  C.tl_clearerr(ctx)
  error(m, lvl + 1)
end

local function wrap(h)
  return ffi.gc(h, C.tl_ansor_hw_free)
end

local function object_of(h, tgt, host)
  local o = setmetatable({ target = tgt, target_host = host }, HardwareParams)
  local v = ffi.new("int64_t[1]")
  for _, f in ipairs(M.fields) do
    if C.tl_ansor_hw_get(ctx, h, f, v) ~= 0 then fail(1) end
    o[f] = tonumber(v[0])
  end
  return o
end

local function device_json(tgt, opts, lvl)
  if opts.device_info ~= nil then
    local di = opts.device_info
    if type(di) == "table" then return json.encode(di) end
    if type(di) == "string" then return di end
    error("hardware_params_of: device_info must be a table or JSON text, got " .. type(di), lvl + 1)
  end
  local dev = opts.device
  if dev == nil then
    if tgt.backend ~= "opencl" then return nil end
    for _, k in ipairs(tgt.keys) do
      if k == "mali" or k == "adreno" then return nil end
    end
    dev = 0
  end
  if type(dev) ~= "number" or dev < 0 or dev % 1 ~= 0 then
    error("hardware_params_of: device must be a non-negative integer, got " .. tostring(dev), lvl + 1)
  end
  if tgt.backend ~= "opencl" then
    error("hardware_params_of: target '" .. tgt.str .. "' runs on the host; device applies to "
          .. "OpenCL targets", lvl + 1)
  end
  local info, reason, text = require("tunelua.autotvm.measure_opencl").device_info(dev)
  if not info then error("hardware_params_of: target '" .. tgt.str .. "': " .. tostring(reason), lvl + 1) end
  return text
end

local function defaults(t, opts, lvl)
  local tgt = target.parse(t, lvl + 1)
  local dj = device_json(tgt, opts or {}, lvl + 1)
  local th = ffi.new("tl_target *[1]")
  if C.tl_target_parse(ctx, tgt.str, th) ~= 0 then fail(lvl + 1) end
  local out = ffi.new("tl_ansor_hw *[1]")
  local rc = C.tl_ansor_hw_new(ctx, th[0], dj, out)
  C.tl_target_free(th[0])
  if rc ~= 0 then fail(lvl + 1) end
  return wrap(out[0]), tgt
end

--- hardware_params_of(target[, {device = n} | {device_info = table_or_json}]) -> HardwareParams
function M.hardware_params_of(t, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("hardware_params_of: options must be a table, got " .. type(opts), 2)
  end
  local h, tgt = defaults(t, opts, 2)
  return object_of(h, tgt.str, nil)
end

--- HardwareParams{field = value, ..., target =, target_host =, device =, device_info =}
--- or HardwareParams(num_cores, vector_unit_bytes, ..., warp_size[, target[, target_host]])
function M.HardwareParams(a, ...)
  local kw
  if type(a) == "table" and getmetatable(a) == nil then
    kw = a
    for k in pairs(kw) do
      if not (is_field[k] or k == "target" or k == "target_host" or k == "device" or k == "device_info") then
        error("HardwareParams: unknown field '" .. tostring(k) .. "' (expected one of "
              .. table.concat(M.fields, ", ") .. ", target, target_host)", 2)
      end
    end
  else
    local args = { a, ... }
    kw = {}
    for i, f in ipairs(M.fields) do kw[f] = args[i] end
    kw.target, kw.target_host = args[#M.fields + 1], args[#M.fields + 2]
  end
  for _, f in ipairs(M.fields) do
    local v = kw[f]
    if v ~= nil and (type(v) ~= "number" or v % 1 ~= 0) then
      error("HardwareParams: " .. f .. " must be an integer, got " .. tostring(v), 2)
    end
  end
  local tstr = kw.target
  local given = true
  for _, f in ipairs(M.fields) do given = given and kw[f] ~= nil end
  local h
  if given then
    local vals = ffi.new("int64_t[?]", #M.fields)
    for i, f in ipairs(M.fields) do vals[i - 1] = kw[f] end
    local out = ffi.new("tl_ansor_hw *[1]")
    if C.tl_ansor_hw_new_values(ctx, vals, out) ~= 0 then fail(2) end
    h = wrap(out[0])
    if tstr ~= nil then tstr = target.parse(tstr, 2).str end
  else
    local tgt
    h, tgt = defaults(tstr or "llvm", { device = kw.device, device_info = kw.device_info }, 2)
    tstr = tstr ~= nil and tgt.str or nil
    for _, f in ipairs(M.fields) do
      if kw[f] ~= nil and C.tl_ansor_hw_set(ctx, h, f, kw[f]) ~= 0 then fail(2) end
    end
  end
  local host = kw.target_host
  if host ~= nil then host = target.parse(host, 2).str end
  return object_of(h, tstr, host)
end

--- hp:handle() -> a tl_ansor_hw cdata holding these values (freed by the GC)
function HardwareParams:handle()
  local vals = ffi.new("int64_t[?]", #M.fields)
  for i, f in ipairs(M.fields) do vals[i - 1] = self[f] end
  local out = ffi.new("tl_ansor_hw *[1]")
  if C.tl_ansor_hw_new_values(ctx, vals, out) ~= 0 then fail(2) end
  return wrap(out[0])
end

HardwareParams.__tostring = function(o)
  local parts = {}
  for _, f in ipairs(M.fields) do parts[#parts + 1] = f .. "=" .. o[f] end
  if o.target then parts[#parts + 1] = "target=" .. o.target end
  if o.target_host then parts[#parts + 1] = "target_host=" .. o.target_host end
  return "HardwareParams(" .. table.concat(parts, ", ") .. ")"
end

return M
