--- tunelua.nd: N-d arrays on a device (DLPack DLTensors), from Lua.
--
--   local nd = require "tunelua.nd"
--   local a = nd.array({{1, 2}, {3, 4}})            -- float32, cpu:0
--   local b = nd.empty({2, 2}, "float16", "cpu")
--   a:copyto(nd.empty(a:shape()))
--   local r = nd.random_uniform({128, 64}, {low = -1, high = 1, seed = 7})
--   print(a)  -- tl.nd.array(shape=(2, 2), dtype=float32, device=cpu:0) ...
--
-- An array *is* the cdata `tl_array *` (the FFI metatype of struct tl_array
-- gives it its methods), so it can be passed straight to any C function of
-- libtunelua; `arr.handle` is the array itself, for code that wants to be
-- explicit. Arrays made here are owned by the Lua GC (ffi.gc with
-- tl_array_free); a `tl_array *` that C hands out must be adopted with
-- nd.adopt before it is used from Lua. Do not keep ffi.cast copies of an
-- array pointer longer than the array.
--
-- Indices are 1-based; shapes are Lua tables of dimensions. Values cross as
-- Lua numbers (doubles): exact for every dtype except int64 beyond 2^53;
-- bool arrays read as Lua booleans and accept booleans or numbers. Misuse
-- raises a one-line error at the caller's line.
local ffi = require "ffi"
local core = require "tunelua.core"

local C, ctx = core.C, core.ctx

local nd = {}

-- The DLPack structs (dlpack.h, v0.6), for arr:dltensor(). Another module
-- may have declared them first.
if not pcall(ffi.typeof, "DLTensor") then
  ffi.cdef [[
typedef struct { int device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void *data; DLDevice device; int ndim; DLDataType dtype;
  int64_t *shape; int64_t *strides; uint64_t byte_offset;
} DLTensor;
]]
end

local array_t = ffi.typeof("tl_array *")
local out_t = ffi.typeof("tl_array *[1]")
local dims_t = ffi.typeof("int64_t[?]")
local int1_t = ffi.typeof("int[1]")

-- ---- dtypes ----------------------------------------------------------------

local DT_COUNT = C.TL_NDTYPES
local dtype_name, dtype_code = {}, {}
for i = 0, DT_COUNT - 1 do
  local name = ffi.string(C.tl_dtype_name(i))
  dtype_name[i] = name
  dtype_code[name] = i
end

--- The dtype names, in enum order.
nd.dtypes = {}
for i = 0, DT_COUNT - 1 do nd.dtypes[i + 1] = dtype_name[i] end

local ptr_ctype = {
  float32 = ffi.typeof("float *"), float16 = ffi.typeof("uint16_t *"),
  int8 = ffi.typeof("int8_t *"), uint8 = ffi.typeof("uint8_t *"),
  int32 = ffi.typeof("int32_t *"), int64 = ffi.typeof("int64_t *"),
  float64 = ffi.typeof("double *"), int16 = ffi.typeof("int16_t *"),
  bool = ffi.typeof("uint8_t *"),
}
local is_float = { float16 = true, float32 = true, float64 = true }
local max_digits = { float16 = 5, float32 = 9, float64 = 17 }

-- Helpers below take `level`: the error level, counted from the helper
-- itself, that points at the user's call. A public function passes 3 to a
-- helper it calls directly (1 = helper, 2 = public function, 3 = user).

local function dtype_arg(dtype, level, default)
  if dtype == nil then dtype = default or "float32" end
  if type(dtype) ~= "string" then
    error("dtype must be a string such as 'float32', got " .. type(dtype), level)
  end
  local code = dtype_code[dtype]
  if not code then
    local out = int1_t()
    core.check(C.tl_dtype_parse(ctx, dtype, out), level)
    code = out[0]
  end
  return code
end

-- ---- devices ---------------------------------------------------------------

local dev_names = { cpu = C.TL_DEV_CPU, opencl = C.TL_DEV_OPENCL,
                    ext_dev = C.TL_DEV_EXT_DEV, vta = C.TL_DEV_EXT_DEV }
local dev_display = { [C.TL_DEV_CPU] = "cpu", [C.TL_DEV_OPENCL] = "opencl",
                      [C.TL_DEV_EXT_DEV] = "ext_dev" }
local DEVICE_HELP = "expected cpu, opencl, ext_dev or vta, optionally with ':<id>'"

local function device_str(dev_type, dev_id)
  return (dev_display[dev_type] or ("device" .. dev_type)) .. ":" .. dev_id
end

local function device_id_arg(id, what, level)
  if id == nil then return 0 end
  if type(id) ~= "number" or id < 0 or id % 1 ~= 0 then
    error(string.format("invalid device id %s in %s (expected a non-negative integer)",
                        tostring(id), what), level)
  end
  return id
end

-- nil, "cpu", "cpu:1", "opencl", {type = "opencl", id = 1}, or a device-type
-- number -> dev_type, dev_id.
local function device_arg(dev, level)
  local t = type(dev)
  if dev == nil then return C.TL_DEV_CPU, 0 end
  if t == "string" then
    local name, colon, id = dev:match("^([%a_]+)(:?)(%d*)$")
    local dt = name and dev_names[name]
    if not dt or (colon == ":") ~= (id ~= "") then
      error(string.format("unknown device '%s' (%s)", dev, DEVICE_HELP), level)
    end
    return dt, id ~= "" and tonumber(id) or 0
  elseif t == "table" then
    local ty, dt = dev.type, nil
    if type(ty) == "string" then
      dt = dev_names[ty]
    elseif type(ty) == "number" then
      dt = ty
    end
    if not dt then
      error(string.format("unknown device type %s in device table (%s)", tostring(ty),
                          DEVICE_HELP), level)
    end
    return dt, device_id_arg(dev.id, "device table", level + 1)
  elseif t == "number" then
    return dev, 0
  end
  error(string.format("device must be a string such as 'cpu:0' or a table {type=, id=}, got %s",
                      t), level)
end

-- ---- shapes ----------------------------------------------------------------

local function shape_display(shape)
  local parts = {}
  for i = 1, #shape do parts[i] = tostring(shape[i]) end
  if #parts == 1 then return "(" .. parts[1] .. ",)" end
  return "(" .. table.concat(parts, ", ") .. ")"
end

local function index_display(idx)
  return "(" .. table.concat(idx, ", ") .. ")"
end

-- A Lua shape (table or number) -> ndim, int64_t[ndim]. Negative dimensions
-- pass through: C reports them.
local function shape_arg(shape, level)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" then
    error("shape must be a table of dimensions such as {2, 3}, got " .. type(shape), level)
  end
  local n = #shape
  local dims = dims_t(math.max(n, 1))
  for i = 1, n do
    local d = shape[i]
    if type(d) == "cdata" then d = tonumber(d) end
    if type(d) ~= "number" then
      error(string.format("invalid shape %s: dimension %d is a %s, expected an integer",
                          shape_display(shape), i, type(shape[i])), level)
    end
    if d % 1 ~= 0 then
      error(string.format("invalid shape %s: dimension %d is not an integer",
                          shape_display(shape), i), level)
    end
    dims[i - 1] = d
  end
  return n, dims
end

-- ---- construction ----------------------------------------------------------

local function is_array(x)
  return type(x) == "cdata" and ffi.istype(array_t, x) and x ~= nil
end
nd.is_array = is_array

--- Take ownership of a `tl_array *` made by C: the Lua GC frees it.
function nd.adopt(ptr)
  if type(ptr) ~= "cdata" or not ffi.istype(array_t, ptr) or ptr == nil then
    error("nd.adopt expects a non-NULL tl_array * cdata", 2)
  end
  return ffi.gc(ptr, C.tl_array_free)
end

local function alloc(ndim, dims, code, dev_type, dev_id, level)
  local out = out_t()
  core.check(C.tl_array_empty(ctx, ndim, dims, code, dev_type, dev_id, out), level)
  return ffi.gc(out[0], C.tl_array_free)
end

local function new_array(shape, dtype, device, level)
  local ndim, dims = shape_arg(shape, level + 1)
  local code = dtype_arg(dtype, level + 1)
  local dev_type, dev_id = device_arg(device, level + 1)
  local a = alloc(ndim, dims, code, dev_type, dev_id, level + 1)  -- not a tail call: keeps levels
  return a
end

local function on_host(a)
  return C.tl_array_device(a, nil) == C.TL_DEV_CPU
end

local function device_of(a)
  local id = int1_t()
  local t = C.tl_array_device(a, id)
  return t, id[0]
end

-- Return a (on the host) itself placed on device: a new array unless the
-- device is the cpu.
local function place(a, dev_type, dev_id, level)
  if dev_type == C.TL_DEV_CPU and dev_id == 0 then return a end
  local b = alloc(C.tl_array_ndim(a), C.tl_array_shape(a), C.tl_array_dtype(a),
                  dev_type, dev_id, level + 1)
  core.check(C.tl_array_copyto(ctx, a, b), level)
  return b
end

local function number_arg(v, what, level)
  if type(v) == "boolean" then return v and 1 or 0 end
  if type(v) == "cdata" and tonumber(v) then return tonumber(v) end
  if type(v) ~= "number" then
    error(string.format("%s must be a number, got %s", what, type(v)), level)
  end
  return v
end

local function fill(a, v)
  local n = tonumber(C.tl_array_numel(a))
  for i = 0, n - 1 do C.tl_array_set(a, i, v) end
end

--- An array of the given shape (zeroed on the cpu). dtype defaults to
--- "float32", device to "cpu".
function nd.empty(shape, dtype, device)
  local a = new_array(shape, dtype, device, 3)
  return a
end

--- An array filled with value.
function nd.full(shape, value, dtype, device)
  local v = number_arg(value, "nd.full: value", 3)
  local a = new_array(shape, dtype, nil, 3)
  fill(a, v)
  local dev_type, dev_id = device_arg(device, 3)
  a = place(a, dev_type, dev_id, 3)
  return a
end

function nd.zeros(shape, dtype, device)
  local a = new_array(shape, dtype, nil, 3)
  local dev_type, dev_id = device_arg(device, 3)
  a = place(a, dev_type, dev_id, 3)
  return a
end

function nd.ones(shape, dtype, device)
  local a = new_array(shape, dtype, nil, 3)
  fill(a, 1)
  local dev_type, dev_id = device_arg(device, 3)
  a = place(a, dev_type, dev_id, 3)
  return a
end

local function describe(v)
  if type(v) == "string" then
    return string.format("a string (%q)", #v > 20 and v:sub(1, 20) .. "..." or v)
  end
  return (type(v) == "nil" and "nil") or ("a " .. type(v))
end

-- Shape of a nested table, following first elements.
local function infer_shape(t)
  local shape, v = {}, t
  while type(v) == "table" do
    shape[#shape + 1] = #v
    if #v == 0 then break end
    v = v[1]
  end
  return shape
end

-- Copy the leaves of nested table t (of the given shape) into a, in
-- row-major order. Returns an error message or nil.
local function fill_from_table(a, t, shape)
  local ndim, pos, flat = #shape, {}, 0
  local function walk(v, depth)          -- v: a table at depth (0 = t)
    local n = shape[depth + 1]
    if #v ~= n then
      local row = depth == 1 and tostring(pos[1]) or index_display({ unpack(pos, 1, depth) })
      return string.format("ragged nested table: row %s at depth %d has %d element%s, expected %d",
                           row, depth, #v, #v == 1 and "" or "s", n)
    end
    if depth + 1 == ndim then
      for k = 1, n do
        local x = v[k]
        local tx = type(x)
        if tx == "boolean" then
          x = x and 1 or 0
        elseif tx == "cdata" and tonumber(x) then
          x = tonumber(x)
        elseif tx ~= "number" then
          pos[depth + 1] = k
          local where = index_display({ unpack(pos, 1, depth + 1) })
          if tx == "table" then
            return string.format("ragged nested table: entry %s is a table, expected a number",
                                 where)
          end
          return string.format("entry %s is %s, expected a number", where, describe(x))
        end
        C.tl_array_set(a, flat, x)
        flat = flat + 1
      end
    else
      for k = 1, n do
        pos[depth + 1] = k
        local x = v[k]
        if type(x) ~= "table" then
          local where = index_display({ unpack(pos, 1, depth + 1) })
          if type(x) == "number" or type(x) == "boolean" then
            return string.format("ragged nested table: entry %s is a number, expected a table of %d elements",
                                 where, shape[depth + 2])
          end
          return string.format("entry %s is %s, expected a table of %d elements", where,
                               describe(x), shape[depth + 2])
        end
        local err = walk(x, depth + 1)
        if err then return err end
      end
    end
  end
  if ndim == 0 then return nil end
  return walk(t, 0)
end

-- Convert x (array, nested table, number or boolean) into a new cpu array of
-- dtype code (nil: float32, or x's dtype for an array).
local function from_value(x, dtype, level)
  if is_array(x) then
    local code = dtype == nil and C.tl_array_dtype(x) or dtype_arg(dtype, level + 1)
    local src = x
    if not on_host(x) then
      src = alloc(C.tl_array_ndim(x), C.tl_array_shape(x), C.tl_array_dtype(x),
                  C.TL_DEV_CPU, 0, level + 1)
      core.check(C.tl_array_copyto(ctx, x, src), level)
    end
    local a = alloc(C.tl_array_ndim(x), C.tl_array_shape(x), code, C.TL_DEV_CPU, 0, level + 1)
    if code == C.tl_array_dtype(src) then
      core.check(C.tl_array_copyto(ctx, src, a), level)
    else
      for i = 0, tonumber(C.tl_array_numel(src)) - 1 do
        C.tl_array_set(a, i, C.tl_array_get(src, i))
      end
    end
    return a
  end
  local code = dtype_arg(dtype, level + 1)
  local tx = type(x)
  if tx == "number" or tx == "boolean" or (tx == "cdata" and tonumber(x)) then
    local a = alloc(0, nil, code, C.TL_DEV_CPU, 0, level + 1)
    C.tl_array_set(a, 0, number_arg(x, "value", level + 1))
    return a
  end
  if tx ~= "table" then
    error("expected a nested table of numbers, a number or an array, got " .. tx, level)
  end
  local shape = infer_shape(x)
  local ndim, dims = shape_arg(shape, level + 1)
  local a = alloc(ndim, dims, code, C.TL_DEV_CPU, 0, level + 1)
  local err = fill_from_table(a, x, shape)
  if err then error(err, level) end
  return a
end

--- A new array from a nested Lua table of numbers (any rank; booleans count
--- as 1 and 0), a number (rank 0) or another array (a copy, converted to
--- dtype if given). dtype defaults to float32 (an array's own for arrays).
--- A device table (nd.opencl(0), nd.cpu()) may stand in dtype's place:
--- nd.array(x, nd.opencl(0)).
function nd.array(x, dtype, device)
  if type(dtype) == "table" and device == nil then dtype, device = nil, dtype end
  local a = from_value(x, dtype, 3)
  local dev_type, dev_id = device_arg(device, 3)
  a = place(a, dev_type, dev_id, 3)
  return a
end

--- Device values for the device arguments: nd.opencl(1) is {type = "opencl",
--- id = 1} (same as the string "opencl:1"), nd.cpu() the host.
function nd.opencl(id)
  local d = { type = "opencl", id = device_id_arg(id, "nd.opencl", 3) }
  return d
end
function nd.cpu(id)
  local d = { type = "cpu", id = device_id_arg(id, "nd.cpu", 3) }
  return d
end

--- For tunelua modules: x as an array, converting tables and numbers to
--- dtype (default float32); arrays are returned as they are.
function nd._asarray(x, dtype, level)
  if is_array(x) then return x end
  local a = from_value(x, dtype, level + 1)
  return a
end

-- ---- random ----------------------------------------------------------------

local default_seed = 0

--- Seed the stream that random functions use when called without a seed.
function nd.seed(s)
  if type(s) ~= "number" or s < 0 or s % 1 ~= 0 then
    error("nd.seed expects a non-negative integer, got " .. tostring(s), 2)
  end
  default_seed = s
end

local function seed_arg(s, level)
  if s == nil then
    default_seed = default_seed + 1
    return default_seed
  end
  if type(s) == "cdata" and ffi.istype("uint64_t", s) then return s end
  if type(s) ~= "number" or s < 0 or s % 1 ~= 0 or s >= 2 ^ 53 then
    error("seed must be a non-negative integer below 2^53, got " .. tostring(s), level)
  end
  return s
end

local function check_opts(opts, allowed, what, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(string.format("%s: options must be a table, got %s", what, type(opts)), level)
  end
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for n in pairs(allowed) do names[#names + 1] = n end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (expected %s)", what, tostring(k),
                          table.concat(names, ", ")), level)
    end
  end
  return opts
end

local function opt_number(opts, key, default, what, level)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "number" then
    error(string.format("%s: option %s must be a number, got %s", what, key, type(v)), level)
  end
  return v
end

-- Fill host array a. dist "uniform" (low, high) or "normal" (mean, std).
-- Integer dtypes default to [0, 10) ({0, 1} for bool) and get integers.
local function random_fill(a, dist, opts, what, level)
  local code = C.tl_array_dtype(a)
  local name = dtype_name[code]
  local lo, hi, d
  if dist == "uniform" then
    check_opts(opts, { low = true, high = true, seed = true, dtype = true, device = true,
                       dist = true }, what, level + 1)
    local dhigh = is_float[name] and 1 or (name == "bool" and 2 or 10)
    lo = opt_number(opts, "low", 0, what, level + 1)
    hi = opt_number(opts, "high", dhigh, what, level + 1)
    d = 0
  elseif dist == "normal" then
    check_opts(opts, { mean = true, std = true, seed = true, dtype = true, device = true,
                       dist = true }, what, level + 1)
    lo = opt_number(opts, "mean", 0, what, level + 1)
    hi = opt_number(opts, "std", 1, what, level + 1)
    d = 1
  else
    error(string.format("%s: unknown distribution '%s' (expected uniform or normal)", what,
                        tostring(dist)), level)
  end
  local seed = seed_arg(opts.seed, level + 1)
  core.check(C.tl_array_random(ctx, a, d, lo, hi, seed), level)
end

local function random_new(shape, opts, dist, what, level)
  local allowed = { seed = true, dtype = true, device = true }
  if dist == "uniform" then
    allowed.low, allowed.high = true, true
  else
    allowed.mean, allowed.std = true, true
  end
  local o = check_opts(opts, allowed, what, level + 1)
  local a = new_array(shape, o.dtype, nil, level + 1)
  random_fill(a, dist, o, what, level + 1)
  local dev_type, dev_id = device_arg(o.device, level + 1)
  a = place(a, dev_type, dev_id, level + 1)
  return a
end

--- Uniform values in [low, high) (default [0, 1); integers in [0, 10) for
--- integer dtypes, {0, 1} for bool). opts: low, high, seed, dtype, device.
function nd.random_uniform(shape, opts)
  local a = random_new(shape, opts, "uniform", "nd.random_uniform", 3)
  return a
end

--- Normal values (default mean 0, std 1; rounded for integer dtypes).
--- opts: mean, std, seed, dtype, device.
function nd.random_normal(shape, opts)
  local a = random_new(shape, opts, "normal", "nd.random_normal", 3)
  return a
end

-- ---- formatting ----------------------------------------------------------------

--- Printing: arrays with more than `threshold` elements show `edgeitems`
--- values at each end of every dimension; rows wrap at `linewidth`; floats
--- show at most `precision` significant digits.
nd.printoptions = { threshold = 100, edgeitems = 3, linewidth = 75, precision = 6 }

local f32_box = ffi.new("float[1]")
local f16_box                                -- a rank-0 float16 array, made on first use

local function round_to(v, name)
  if name == "float32" then
    f32_box[0] = v
    return f32_box[0]
  elseif name == "float16" then
    if not f16_box then f16_box = alloc(0, nil, C.TL_FLOAT16, C.TL_DEV_CPU, 0, 1) end
    C.tl_array_set(f16_box, 0, v)
    return C.tl_array_get(f16_box, 0)
  end
  return v
end

--- The shortest text that reads back as v in dtype name ("1", "0.1",
--- "1e-08", "nan", "-inf", "true"), or v rounded to `digits` significant
--- digits if that is shorter.
local function format_value(v, name, digits)
  if name == "bool" then return (v ~= 0 and v ~= false) and "true" or "false" end
  if type(v) == "boolean" then v = v and 1 or 0 end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  if not is_float[name] or (v % 1 == 0 and math.abs(v) < 1e16) then
    return string.format("%.0f", v)             -- integral: "10", not "1e+01"
  end
  local most = max_digits[name] or 17
  if digits and digits < most then most = digits end
  local s
  for p = 1, most do
    s = string.format("%." .. p .. "g", v)
    if round_to(tonumber(s), name) == v then return s end
  end
  return s
end
nd.format_value = format_value

local function shape_table(a)
  local n, s = C.tl_array_ndim(a), C.tl_array_shape(a)
  local t = {}
  for i = 1, n do t[i] = tonumber(s[i - 1]) end
  return t
end

local function format_body(a)
  local shape = shape_table(a)
  local ndim, name = #shape, dtype_name[C.tl_array_dtype(a)]
  local opts = nd.printoptions
  if ndim == 0 then return format_value(C.tl_array_get(a, 0), name, opts.precision) end
  local summarize = tonumber(C.tl_array_numel(a)) > opts.threshold
  local edge = opts.edgeitems
  local strides, s = {}, 1
  for d = ndim, 1, -1 do
    strides[d] = s
    s = s * shape[d]
  end
  local shown = {}                       -- per dim: list of 1-based indices or false for "..."
  for d = 1, ndim do
    local list = {}
    if summarize and shape[d] > 2 * edge then
      for k = 1, edge do list[#list + 1] = k end
      list[#list + 1] = false
      for k = shape[d] - edge + 1, shape[d] do list[#list + 1] = k end
    else
      for k = 1, shape[d] do list[#list + 1] = k end
    end
    shown[d] = list
  end
  -- format every shown value first, for a common width
  local texts, width = {}, 0
  local function collect(d, off)
    if d > ndim then
      local t = format_value(C.tl_array_get(a, off), name, opts.precision)
      texts[off] = t
      if #t > width then width = #t end
      return
    end
    for _, k in ipairs(shown[d]) do
      if k then collect(d + 1, off + (k - 1) * strides[d]) end
    end
  end
  collect(1, 0)
  local function build(d, off, indent)
    local parts = {}
    for _, k in ipairs(shown[d]) do
      if not k then
        parts[#parts + 1] = "..."
      elseif d == ndim then
        local t = texts[off + (k - 1) * strides[d]]
        parts[#parts + 1] = string.rep(" ", width - #t) .. t
      else
        parts[#parts + 1] = build(d + 1, off + (k - 1) * strides[d], indent .. " ")
      end
    end
    if d < ndim then
      local sep = ",\n" .. string.rep("\n", ndim - d - 1) .. indent .. " "
      return "[" .. table.concat(parts, sep) .. "]"
    end
    -- the last dimension: wrap long rows; the first line starts at column
    -- #indent, after the enclosing brackets
    if #parts == 0 then return "[]" end
    local lines, line, col = {}, "[", #indent + 1
    for i, p in ipairs(parts) do
      local piece = p .. (i < #parts and "," or "]")
      if i == 1 then
        line, col = line .. piece, col + #piece
      elseif col + 1 + #piece > opts.linewidth then
        lines[#lines + 1] = line
        line, col = indent .. " " .. piece, #indent + 1 + #piece
      else
        line, col = line .. " " .. piece, col + 1 + #piece
      end
    end
    lines[#lines + 1] = line
    return table.concat(lines, "\n")
  end
  return build(1, 0, "")
end

-- ---- methods ---------------------------------------------------------------

local methods = {}

local function self_arg(self, name)
  if not is_array(self) then
    error(string.format("%s: call it as a method, arr:%s(...)", name, name), 3)
  end
  return self
end

local function host_only(self, what, level)
  if not on_host(self) then
    error(string.format("%s: the array is on %s; copy it to the cpu first", what,
                        device_str(device_of(self))), level)
  end
end

function methods.shape(self)
  self_arg(self, "shape")
  return shape_table(self)
end

function methods.ndim(self)
  self_arg(self, "ndim")
  return C.tl_array_ndim(self)
end

function methods.dtype(self)
  self_arg(self, "dtype")
  return dtype_name[C.tl_array_dtype(self)]
end

--- "cpu:0"; also the device type number and id.
function methods.device(self)
  self_arg(self, "device")
  local t, id = device_of(self)
  return device_str(t, id), t, id
end

function methods.numel(self)
  self_arg(self, "numel")
  return tonumber(C.tl_array_numel(self))
end

function methods.nbytes(self)
  self_arg(self, "nbytes")
  return tonumber(C.tl_array_nbytes(self))
end

--- Copy into another array of the same shape and dtype (returned), or onto
--- a device (a new array there).
function methods.copyto(self, target)
  self_arg(self, "copyto")
  if is_array(target) then
    core.check(C.tl_array_copyto(ctx, self, target), 2)
    return target
  end
  if target == nil then
    error("copyto: expected an array or a device such as 'cpu:0', got nil", 2)
  end
  local dev_type, dev_id = device_arg(target, 3)
  local b = alloc(C.tl_array_ndim(self), C.tl_array_shape(self), C.tl_array_dtype(self),
                  dev_type, dev_id, 3)
  core.check(C.tl_array_copyto(ctx, self, b), 2)
  return b
end

--- A copy on the cpu, converted to dtype.
function methods.astype(self, dtype)
  self_arg(self, "astype")
  if dtype == nil then error("astype: expected a dtype such as 'float16'", 2) end
  local a = from_value(self, dtype, 3)
  return a
end

--- A new array with the same elements and another shape, sharing storage.
function methods.reshape(self, shape)
  self_arg(self, "reshape")
  local ndim, dims = shape_arg(shape, 3)
  local out = out_t()
  core.check(C.tl_array_reshape(ctx, self, ndim, dims, out), 2)
  return ffi.gc(out[0], C.tl_array_free)
end

local function value_out(v, is_bool)
  if is_bool then return v ~= 0 end
  return v
end

--- The elements as a flat Lua table, row-major.
function methods.flat(self)
  self_arg(self, "flat")
  host_only(self, "flat", 3)
  local is_bool = C.tl_array_dtype(self) == C.TL_BOOL
  local t = {}
  for i = 0, tonumber(C.tl_array_numel(self)) - 1 do
    t[i + 1] = value_out(C.tl_array_get(self, i), is_bool)
  end
  return t
end

--- The elements as nested Lua tables (a plain value for rank 0).
function methods.totable(self)
  self_arg(self, "totable")
  host_only(self, "totable", 3)
  local shape = shape_table(self)
  local is_bool = C.tl_array_dtype(self) == C.TL_BOOL
  local flat = 0
  local function build(d)
    local t = {}
    for k = 1, shape[d] do
      if d == #shape then
        t[k] = value_out(C.tl_array_get(self, flat), is_bool)
        flat = flat + 1
      else
        t[k] = build(d + 1)
      end
    end
    return t
  end
  if #shape == 0 then return value_out(C.tl_array_get(self, 0), is_bool) end
  return build(1)
end

-- 1-based indices (exactly ndim of them) -> flat 0-based index.
local function flat_index(self, what, level, ...)
  local n = select("#", ...)
  local ndim = C.tl_array_ndim(self)
  if n ~= ndim then
    error(string.format("%s: expected %d ind%s for a %d-d array, got %d", what, ndim,
                        ndim == 1 and "ex" or "ices", ndim, n), level)
  end
  local s = C.tl_array_shape(self)
  local flat = 0
  for d = 1, n do
    local i = select(d, ...)
    if type(i) ~= "number" or i % 1 ~= 0 then
      error(string.format("%s: index %d must be an integer, got %s", what, d, tostring(i)), level)
    end
    local size = tonumber(s[d - 1])
    if i < 1 or i > size then
      error(string.format("%s: index %d is out of bounds for dimension %d of size %d", what, i, d,
                          size), level)
    end
    flat = flat * size + (i - 1)
  end
  return flat
end

--- a:get(i, j, ...): one element, 1-based.
function methods.get(self, ...)
  self_arg(self, "get")
  host_only(self, "get", 3)
  local i = flat_index(self, "get", 3, ...)
  return value_out(C.tl_array_get(self, i), C.tl_array_dtype(self) == C.TL_BOOL)
end

--- a:set(i, j, ..., value): store one element, 1-based.
function methods.set(self, ...)
  self_arg(self, "set")
  host_only(self, "set", 3)
  local n = select("#", ...)
  if n == 0 then error("set: expected indices and a value", 2) end
  local v = number_arg((select(n, ...)), "set: value", 3)
  local i = flat_index(self, "set", 3, unpack({ ... }, 1, n - 1))
  C.tl_array_set(self, i, v)
  return self
end

--- a:fill_random([dist,] [opts]): refill in place. dist "uniform" (default;
--- opts low, high, seed) or "normal" (opts mean, std, seed); opts.dist works
--- too. Returns the array.
function methods.fill_random(self, dist, opts)
  self_arg(self, "fill_random")
  if type(dist) == "table" and opts == nil then
    dist, opts = dist.dist, dist
  end
  opts = opts or {}
  if type(opts) ~= "table" then
    error("fill_random: options must be a table, got " .. type(opts), 2)
  end
  dist = dist or "uniform"
  if on_host(self) then
    random_fill(self, dist, opts, "fill_random", 3)
  else
    local h = alloc(C.tl_array_ndim(self), C.tl_array_shape(self), C.tl_array_dtype(self),
                    C.TL_DEV_CPU, 0, 3)
    random_fill(h, dist, opts, "fill_random", 3)
    core.check(C.tl_array_copyto(ctx, h, self), 2)
  end
  return self
end

--- A typed pointer to the elements (float *, int32_t *, ...; uint16_t * for
--- float16, uint8_t * for bool). Valid while the array lives.
function methods.data_ptr(self)
  self_arg(self, "data_ptr")
  host_only(self, "data_ptr", 3)
  return ffi.cast(ptr_ctype[dtype_name[C.tl_array_dtype(self)]], C.tl_array_data(self))
end

--- The DLTensor inside (DLTensor *). Valid while the array lives.
function methods.dltensor(self)
  self_arg(self, "dltensor")
  return ffi.cast("DLTensor *", C.tl_array_dltensor(self))
end

--- A copy (on the same device).
function methods.copy(self)
  self_arg(self, "copy")
  local t, id = device_of(self)
  local b = alloc(C.tl_array_ndim(self), C.tl_array_shape(self), C.tl_array_dtype(self), t, id, 3)
  core.check(C.tl_array_copyto(ctx, self, b), 2)
  return b
end

nd.methods = methods

local function tostring_array(self)
  local header = string.format("tl.nd.array(shape=%s, dtype=%s, device=%s)",
                               shape_display(shape_table(self)),
                               dtype_name[C.tl_array_dtype(self)], device_str(device_of(self)))
  if not on_host(self) then return header .. "\n<on the device; copy it to the cpu to print>" end
  return header .. "\n" .. format_body(self)
end

ffi.metatype("struct tl_array", {
  __index = function(self, k)
    if k == "handle" then return self end
    return methods[k]
  end,
  __tostring = tostring_array,
  __len = function(self)
    if C.tl_array_ndim(self) == 0 then error("# of a 0-d array is undefined", 2) end
    return tonumber(C.tl_array_shape(self)[0])
  end,
})

-- for tunelua.testing
nd._shape_display = shape_display
nd._index_display = index_display

return nd
