--- tunelua.testing: assertions for tests, in the spirit of numpy.testing.
--
--   local testing = require "tunelua.testing"
--   testing.assert_allclose(out, ref, { rtol = 1e-5, atol = 1e-8 })
--   testing.assert_equal(a:shape(), { 2, 3 })
--
-- Arguments may be tl.nd arrays, nested Lua tables of numbers or plain
-- numbers (a number is compared with every element of the other side).
-- Tables become float64 arrays, device arrays are copied to the cpu. A
-- failure raises one line at the caller's level naming what differs and
-- where, with 1-based multi-indices:
--
--   not close (rtol=1e-05, atol=1e-08): 3 of 100 elements differ; worst at
--   (2, 7): 1.5 vs 1.25 (abs err 0.25, rel err 0.2)
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"

local C, ctx = core.C, core.ctx

local testing = {}

local function is_scalar(x)
  return type(x) == "number" or type(x) == "boolean"
end

-- x as a cpu array; tables and numbers become float64. `level` as in nd.
local function host_array(x, level)
  local a = nd._asarray(x, "float64", level + 1)
  if C.tl_array_device(a, nil) ~= C.TL_DEV_CPU then a = a:copyto("cpu") end
  return a
end

-- Both sides as cpu arrays of one shape (a scalar side is broadcast), or a
-- shape-mismatch error at `level`.
local function operands(actual, desired, prefix, level)
  if is_scalar(actual) and not is_scalar(desired) then
    local b = host_array(desired, level + 1)
    return nd.full(b:shape(), actual, "float64"), b
  end
  local a = host_array(actual, level + 1)
  local b
  if is_scalar(desired) then
    b = nd.full(a:shape(), desired, "float64")
  else
    b = host_array(desired, level + 1)
  end
  local sa, sb = a:shape(), b:shape()
  local same = #sa == #sb
  for i = 1, #sa do same = same and sa[i] == sb[i] end
  if not same then
    error(string.format("%sshape mismatch: actual %s vs desired %s", prefix,
                        nd._shape_display(sa), nd._shape_display(sb)), level)
  end
  return a, b
end

local function unravel(flat, shape)
  local idx = {}
  for d = #shape, 1, -1 do
    idx[d] = flat % shape[d] + 1
    flat = math.floor(flat / shape[d])
  end
  return idx
end

local function tolerance(opts, key, default, level)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "number" or v < 0 or v ~= v then
    error(string.format("%s must be a non-negative number, got %s", key, tostring(v)), level)
  end
  return v
end

local function check_opts(opts, allowed, what, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(string.format("%s: options must be a table, got %s", what, type(opts)), level)
  end
  for k in pairs(opts) do
    if not allowed[k] then
      error(string.format("%s: unknown option '%s'", what, tostring(k)), level)
    end
  end
  return opts
end

-- Compare a and b with the C test; nil when all close, else the parts of a
-- failure message.
local function compare(a, b, rtol, atol, level)
  local nbad, worst, err = ffi.new("int64_t[1]"), ffi.new("int64_t[1]"), ffi.new("double[1]")
  core.check(C.tl_array_compare(ctx, a, b, rtol, atol, nbad, worst, err), level)
  if nbad[0] == 0 then return nil end
  local shape, w = a:shape(), tonumber(worst[0])
  local x, y = C.tl_array_get(a, w), C.tl_array_get(b, w)
  local where = nd._index_display(unravel(w, shape))
  if #shape == 0 then where = "()" end
  return {
    nbad = tonumber(nbad[0]), n = a:numel(), where = where,
    x = nd.format_value(x, a:dtype()), y = nd.format_value(y, b:dtype()),
    abs = err[0], rel = err[0] / math.abs(y),
  }
end

--- Raise unless |actual - desired| <= atol + rtol * |desired| everywhere.
--- opts: rtol (default 1e-7), atol (default 0), err_msg (a prefix).
function testing.assert_allclose(actual, desired, opts)
  opts = check_opts(opts, { rtol = true, atol = true, err_msg = true }, "assert_allclose", 3)
  local rtol = tolerance(opts, "rtol", 1e-7, 3)
  local atol = tolerance(opts, "atol", 0, 3)
  local prefix = opts.err_msg and (tostring(opts.err_msg) .. ": ") or ""
  local a, b = operands(actual, desired, prefix, 3)
  local f = compare(a, b, rtol, atol, 3)
  if f then
    error(string.format("%snot close (rtol=%g, atol=%g): %d of %d elements differ; worst at %s: " ..
                        "%s vs %s (abs err %.3g, rel err %.3g)", prefix, rtol, atol, f.nbad, f.n,
                        f.where, f.x, f.y, f.abs, f.rel), 2)
  end
end

-- Plain Lua values, compared deeply; returns a description of the first
-- difference or nil.
local function deep_diff(x, y, path)
  if type(x) == "table" and type(y) == "table" then
    for k, v in pairs(x) do
      local d = deep_diff(v, y[k], path .. "[" .. (type(k) == "string" and string.format("%q", k)
                                                   or tostring(k)) .. "]")
      if d then return d end
    end
    for k, v in pairs(y) do
      if x[k] == nil then
        return deep_diff(nil, v, path .. "[" .. (type(k) == "string" and string.format("%q", k)
                                                 or tostring(k)) .. "]")
      end
    end
    return nil
  end
  if x == y or (x ~= x and y ~= y) then return nil end
  local function show(v)
    if type(v) == "string" then return string.format("%q", v) end
    return tostring(v)
  end
  return string.format("%s%s vs %s", path ~= "" and ("at " .. path .. ": ") or "", show(x),
                       show(y))
end

local function numeric(x)
  return nd.is_array(x) or is_scalar(x)
end

--- Raise unless actual and desired are equal: arrays (or tables of numbers
--- next to an array) element by element, NaN equal to NaN; other Lua values
--- deeply. opts: err_msg (a prefix).
function testing.assert_equal(actual, desired, opts)
  opts = check_opts(opts, { err_msg = true }, "assert_equal", 3)
  local prefix = opts.err_msg and (tostring(opts.err_msg) .. ": ") or ""
  if (nd.is_array(actual) or nd.is_array(desired)) and
     (numeric(actual) or type(actual) == "table") and (numeric(desired) or type(desired) == "table") then
    local a, b = operands(actual, desired, prefix, 3)
    local f = compare(a, b, 0, 0, 3)
    if f then
      error(string.format("%snot equal: %d of %d elements differ; largest difference at %s: %s vs %s",
                          prefix, f.nbad, f.n, f.where, f.x, f.y), 2)
    end
    return
  end
  local d = deep_diff(actual, desired, "")
  if d then error(prefix .. "not equal: " .. d, 2) end
end

--- testing.compare_logits(a, b) -> same_top1, rel_err: whether the logits a and b (lists of
--- numbers, such as nd's :flat()) are largest at the same index (the first one on ties), and
--- the relative error ||a - b|| / ||a|| (2-norms).
function testing.compare_logits(a, b)
  local am, bm, num, den = 1, 1, 0, 0
  for k = 1, #a do
    if a[k] > a[am] then am = k end
    if b[k] > b[bm] then bm = k end
    num, den = num + (a[k] - b[k]) ^ 2, den + a[k] ^ 2
  end
  return am == bm, math.sqrt(num / den)
end

return testing
