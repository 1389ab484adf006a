-- tunelua.nd and tunelua.testing: creation, conversion round trips for every
-- dtype, printing, copies, seeded random fills and the assertion messages.
local tl = require "tunelua"
local ffi = require "ffi"
local nd, testing = tl.nd, tl.testing

local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do
    if not same(a[i], b[i]) then return false end
  end
  return true
end

-- The message of the error fn raises, without its position.
local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error")
  return (tostring(err):gsub("^[^:]*:%d+: ", ""))
end

-- ---- creation ----------------------------------------------------------------

do
  local a = nd.empty({2, 3})
  assert(same(a:shape(), {2, 3}))
  assert(a:dtype() == "float32" and a:device() == "cpu:0")
  assert(a:ndim() == 2 and a:numel() == 6 and a:nbytes() == 24 and #a == 2)
  assert(a.handle == a and nd.is_array(a) and not nd.is_array({}))
  assert(same(a:flat(), {0, 0, 0, 0, 0, 0}))
  assert(tonumber(ffi.cast("uintptr_t", a:data_ptr())) % 64 == 0)

  assert(same(nd.zeros({2}, "int32"):totable(), {0, 0}))
  assert(same(nd.ones({2, 1}, "float16"):totable(), {{1}, {1}}))
  assert(same(nd.full({3}, 2.5, "float64"):totable(), {2.5, 2.5, 2.5}))
  assert(same(nd.full(2, true, "bool"):totable(), {true, true}))
  assert(nd.empty({}, "int8"):numel() == 1)
  assert(nd.array(3.5):totable() == 3.5 and nd.array(3.5):ndim() == 0)
  assert(same(nd.array({}):shape(), {0}))
  assert(same(nd.array({{}, {}}):shape(), {2, 0}))
  assert(nd.empty({4}, "float32", {type = "cpu", id = 0}):device() == "cpu:0")
  assert(nd.empty({4}, nil, "cpu:0"):device() == "cpu:0")
  local dl = nd.array({{1, 2, 3}, {4, 5, 6}}):dltensor()
  assert(dl.ndim == 2 and dl.shape[0] == 2 and dl.shape[1] == 3 and dl.strides == nil)
  assert(dl.dtype.code == 2 and dl.dtype.bits == 32 and dl.dtype.lanes == 1)
  assert(dl.device.device_type == 1 and dl.device.device_id == 0)
end

-- ---- round trips for each dtype -------------------------------------------------

do
  local signed = {{1, -2, 3}, {-4, 5, 127}}
  local unsigned = {{1, 2, 3}, {4, 5, 255}}
  local floats = {{0.5, -2.25, 1024}, {-0.125, 3, 100.5}}
  local cases = {
    float32 = floats, float16 = floats, float64 = {{0.1, -1e300, 1 / 3}, {2, 3, 4}},
    int8 = signed, int16 = {{-32768, 2, 3}, {4, 5, 32767}}, int32 = signed,
    int64 = {{2 ^ 53, -(2 ^ 53), 3}, {4, 5, 6}}, uint8 = unsigned,
    bool = {{true, false, true}, {false, false, true}},
  }
  for _, dt in ipairs(nd.dtypes) do
    local t = assert(cases[dt], dt)
    local a = nd.array(t, dt)
    assert(a:dtype() == dt, dt)
    assert(same(a:shape(), {2, 3}), dt)
    assert(same(a:totable(), t), dt .. ": totable round trip")
    assert(same(nd.array(a:totable(), dt):totable(), t), dt)
    assert(a:get(2, 3) == t[2][3], dt)
    local b = nd.array(a)                       -- a copy, same dtype
    assert(b:dtype() == dt and same(b:totable(), t), dt)
    assert(a:data_ptr() ~= nil, dt)
  end
  -- conversions on store
  local h = nd.array({0.1, 65520, 1e-8}, "float16")
  assert(same(h:flat(), {0.0999755859375, math.huge, 0}))
  assert(same(nd.array({300, -300, -7.9}, "int8"):flat(), {127, -128, -7}))
  assert(same(nd.array({1.5, 2.5}):astype("int32"):flat(), {1, 2}))
  assert(nd.array({1, 0, 2}, "bool"):get(3) == true)
  -- int64 stays exact through the pointer
  local big = nd.empty({1}, "int64")
  big:data_ptr()[0] = 9007199254740993LL
  assert(big:data_ptr()[0] == 9007199254740993LL)
  -- get and set
  local s = nd.zeros({2, 3}, "int32")
  s:set(2, 1, 7)
  assert(s:get(2, 1) == 7 and same(s:flat(), {0, 0, 0, 7, 0, 0}))
  -- a reshape shares storage
  local r = s:reshape({3, 2})
  r:set(1, 1, 9)
  assert(s:get(1, 1) == 9 and same(r:shape(), {3, 2}))
end

-- ---- printing -----------------------------------------------------------------------

do
  local a = nd.array({{1, 2}, {3, 4}})
  assert(tostring(a) == "tl.nd.array(shape=(2, 2), dtype=float32, device=cpu:0)\n[[1, 2],\n [3, 4]]",
         tostring(a))
  assert(tostring(nd.array({1.5, -2, 10}, "float64")) ==
         "tl.nd.array(shape=(3,), dtype=float64, device=cpu:0)\n[1.5,  -2,  10]")
  assert(tostring(nd.array(7, "int64")) == "tl.nd.array(shape=(), dtype=int64, device=cpu:0)\n7")
  assert(tostring(nd.array({true, false}, "bool")):find("[ true, false]", 1, true))
  assert(tostring(nd.array({0 / 0, 1 / 0, -1 / 0})):find("[ nan,  inf, -inf]", 1, true))
  assert(tostring(nd.array({{{1, 2}}, {{3, 4}}}, "int8")):find("[[[1, 2]],\n\n [[3, 4]]]", 1, true))
  -- big arrays are summarized: 3 values at each end of each dimension
  local big = nd.random_uniform({50, 40}, {seed = 1})
  local text = tostring(big)
  assert(text:find("...", 1, true))
  local lines = 0
  for _ in text:gmatch("\n") do lines = lines + 1 end
  assert(lines == 7, text)                      -- header, 3 rows, "...", 3 rows
  local row = text:match("\n(%[%[[^\n]*)")
  local count = 0
  for _ in row:gmatch("%-?%d[%d.e+-]*") do count = count + 1 end
  assert(count == 6 and row:find(", ..., ", 1, true), row)  -- 3 + 3 values
  -- a long 1-d array wraps
  local long = tostring(nd.array({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                                  19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30}, "int32"))
  for line in long:gmatch("[^\n]+") do assert(#line <= 75, line) end
end

-- ---- copies ---------------------------------------------------------------------------

do
  local a = nd.array({{1, 2, 3}, {4, 5, 6}}, "int16")
  local b = nd.empty({2, 3}, "int16")
  assert(a:copyto(b) == b)
  assert(same(b:totable(), a:totable()))
  local c = a:copyto("cpu")
  assert(c ~= a and same(c:totable(), a:totable()) and c:dtype() == "int16")
  local d = a:copy()
  d:set(1, 1, 100)
  assert(a:get(1, 1) == 1)
  assert(error_of(a.copyto, a, nd.empty({3, 2}, "int16")) ==
         "copyto: shape mismatch: source (2, 3) vs destination (3, 2)")
  assert(error_of(a.copyto, a, nd.empty({2, 3}, "int32")) ==
         "copyto: dtype mismatch: source int16 vs destination int32")
  assert(error_of(a.copyto, a, "tpu") ==
         "unknown device 'tpu' (expected cpu, opencl, ext_dev or vta, optionally with ':<id>')")
end

-- ---- random ----------------------------------------------------------------------------

do
  local u1 = nd.random_uniform({1000}, {seed = 42})
  local u2 = nd.random_uniform({1000}, {seed = 42})
  local u3 = nd.random_uniform({1000}, {seed = 43})
  assert(same(u1:flat(), u2:flat()), "same seed, same values")
  assert(not same(u1:flat(), u3:flat()), "another seed, other values")
  local lo, hi, distinct = math.huge, -math.huge, {}
  for _, v in ipairs(u1:flat()) do
    lo, hi = math.min(lo, v), math.max(hi, v)
    distinct[v] = true
  end
  assert(lo >= 0 and hi < 1 and hi - lo > 0.9, "uniform [0, 1) spread")
  local n = 0
  for _ in pairs(distinct) do n = n + 1 end
  assert(n > 990, "non-constant")

  local r = nd.random_uniform({500}, {low = -3, high = 4, seed = 5, dtype = "int8"})
  local seen = {}
  for _, v in ipairs(r:flat()) do
    assert(v >= -3 and v < 4 and v % 1 == 0)
    seen[v] = true
  end
  for v = -3, 3 do assert(seen[v], "every integer of [-3, 4) appears") end

  local g = nd.random_normal({20000}, {mean = 10, std = 2, seed = 9, dtype = "float64"})
  local s, ss = 0, 0
  for _, v in ipairs(g:flat()) do s, ss = s + v, ss + v * v end
  local mean = s / 20000
  assert(math.abs(mean - 10) < 0.1 and math.abs(math.sqrt(ss / 20000 - mean ^ 2) - 2) < 0.1)
  assert(same(nd.random_normal({8}, {seed = 9}):flat(), nd.random_normal({8}, {seed = 9}):flat()))

  -- fill_random in place, reproducible too
  local f = nd.empty({64}, "float16")
  f:fill_random({low = -1, high = 1, seed = 3})
  local first = f:flat()
  assert(same(f:fill_random("uniform", {low = -1, high = 1, seed = 3}):flat(), first))
  f:fill_random("normal", {seed = 3})
  assert(not same(f:flat(), first))
  -- without a seed: a fresh stream each call, reproducible from nd.seed
  nd.seed(100)
  local x1 = nd.random_uniform({16}):flat()
  local x2 = nd.random_uniform({16}):flat()
  nd.seed(100)
  assert(not same(x1, x2) and same(nd.random_uniform({16}):flat(), x1))
end

-- ---- testing ------------------------------------------------------------------------------

do
  local a = nd.array({{1, 2}, {3, 4}})
  testing.assert_allclose(a, {{1, 2}, {3, 4}})
  testing.assert_allclose(a, nd.array({{1, 2}, {3, 4.000001}}, "float64"), {rtol = 1e-5})
  testing.assert_allclose({0 / 0, 1}, {0 / 0, 1})
  testing.assert_allclose(nd.full({3}, 2), 2)

  local ref = {}
  for i = 1, 10 do
    ref[i] = {}
    for j = 1, 10 do ref[i][j] = i + j end
  end
  local out = nd.array(ref)
  out:set(2, 7, 1.5)
  local r = out:get(2, 7)
  ref[2][7] = 1.25
  out:set(5, 5, 10.1)
  out:set(9, 1, 10.2)
  assert(r == 1.5)
  assert(error_of(testing.assert_allclose, out, ref, {rtol = 1e-5, atol = 1e-8}) ==
         "not close (rtol=1e-05, atol=1e-08): 3 of 100 elements differ; worst at (2, 7): " ..
         "1.5 vs 1.25 (abs err 0.25, rel err 0.2)")
  assert(error_of(testing.assert_allclose, nd.zeros({2, 3}), nd.zeros({3, 2})) ==
         "shape mismatch: actual (2, 3) vs desired (3, 2)")
  assert(error_of(testing.assert_allclose, {1, 0 / 0}, {1, 2}):match("worst at %(2%): nan vs 2"))
  assert(error_of(testing.assert_allclose, {1}, {1}, {rtol = -1}) ==
         "rtol must be a non-negative number, got -1")

  testing.assert_equal(nd.array({1, 2}, "int32"), {1, 2})
  testing.assert_equal({1, {2, "x"}}, {1, {2, "x"}})
  assert(error_of(testing.assert_equal, nd.array({1, 2, 3}, "int32"), {1, 5, 3}) ==
         "not equal: 1 of 3 elements differ; largest difference at (2): 2 vs 5")
  assert(error_of(testing.assert_equal, {a = 1}, {a = 2}) == 'not equal: at ["a"]: 1 vs 2')
end

-- ---- misuse -------------------------------------------------------------------------------

do
  assert(error_of(nd.empty, {2}, "float33") ==
         "unknown dtype 'float33' (expected one of float32, float16, int8, uint8, int32, " ..
         "int64, float64, int16, bool)")
  assert(error_of(nd.empty, {2, -1}) == "invalid shape (2, -1): dimension 2 is negative")
  assert(error_of(nd.array, {{1, 2}, {3, 4, 5}}) ==
         "ragged nested table: row 2 at depth 1 has 3 elements, expected 2")
  assert(error_of(nd.array, {{1, "x"}}) == 'entry (1, 2) is a string ("x"), expected a number')
  assert(error_of(nd.empty, {2}, "float32", "gpu:0"):match("^unknown device 'gpu:0'"))
  assert(error_of(nd.empty, "x"):match("^shape must be a table"))
  local a = nd.array({1, 2})
  assert(error_of(a.get, a, 3) == "get: index 3 is out of bounds for dimension 1 of size 2")
  assert(error_of(a.get, a, 1, 1) == "get: expected 1 index for a 1-d array, got 2")
  assert(error_of(a.shape) == "shape: call it as a method, arr:shape(...)")
  -- the error is raised at the caller's line
  local ok, err = pcall(function() local _ = nd.empty({-1}) end)
  assert(not ok and err:match("test_nd%.lua:%d+: invalid shape %(%-1,%)"), err)
end

print("test_nd: ok")
