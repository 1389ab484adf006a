-- tunelua's OpenCL backend end to end: schedules with blockIdx/threadIdx
-- binding, shared-memory tiling with barriers, virtual threads, float4
-- vectors, reductions and unrolled loops, built with tl.build(s, args,
-- "opencl") and run on the OpenCL device (pocl in CI), each checked against
-- a reference computed on the host; the work-group check, the build log of
-- a failed build and the argument checks.
local tl = require "tunelua"
local te = require "tunelua.te"
local ocl = require "tunelua.opencl"
local nd = tl.nd

if not ocl.available() then
  print("SKIP test_opencl: no OpenCL device (install pocl-opencl-icd; see docs/opencl.md)")
  return
end
print(ocl.info())
local DEV = "opencl:0"

local function expect_error(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching: " .. pattern)
  assert(tostring(err):find(pattern, 1, true), "wrong error:\n  got:      " .. tostring(err) ..
         "\n  expected: ..." .. pattern .. "...")
  return err
end

local function close(got, want, tol, what)
  local diff = math.abs(got - want)
  if diff > tol * (1 + math.abs(want)) then
    error(string.format("%s: got %.9g, expected %.9g", what, got, want), 2)
  end
end

local function on_dev(a) return a:copyto(DEV) end
local function host(a) return a:copyto("cpu") end

-- ---- device queries -----------------------------------------------------------------------
do
  local d = ocl.device(0)
  assert(type(d.name) == "string" and d.max_work_group_size >= 1 and d.local_mem_bytes > 0)
  local hw = ocl.hw_params(0)
  assert(hw.max_work_group_size == d.max_work_group_size and hw.compute_units >= 1)
  expect_error("opencl: no device 99", function() ocl.device(99) end)
end

-- ---- elementwise, non-divisible split (guards), fused relu ---------------------------------
do
  local n = 1000
  local A = te.placeholder({n}, "float32", "A")
  local B = te.placeholder({n}, "float32", "B")
  local Cc = te.compute({n}, function(i) return te.max(A(i) * 2 + B(i), 0) end, "C")
  local s = te.create_schedule(Cc.op)
  local bx, tx = s[Cc]:split(Cc.op.axis[1], {factor = 64})
  s[Cc]:bind(bx, "blockIdx.x")
  s[Cc]:bind(tx, "threadIdx.x")
  local f = tl.build(s, {A, B, Cc}, "opencl")
  local k = f:kernels()
  assert(#k == 1 and k[1].grid[1] == 16 and k[1].block[1] == 64, "launch config")
  assert(f:get_source():find("get_group_id%(0%)") and f:get_source():find("get_local_id%(0%)"))
  local a = nd.random_uniform({n}, {low = -1, high = 1, seed = 1})
  local b = nd.random_uniform({n}, {low = -1, high = 1, seed = 2})
  local dc = nd.empty({n}, "float32", DEV)
  f(on_dev(a), on_dev(b), dc)
  local c = host(dc)
  for i = 1, n do close(c:get(i), math.max(a:get(i) * 2 + b:get(i), 0), 1e-6, "relu(2a+b)[" .. i .. "]") end
  -- the arrays must live on the device
  expect_error("is on cpu:0, expected opencl:0", function() f(a, b, dc) end)
  -- time evaluator: profiling events and wall clock
  local t = f:time_evaluator({number = 3, repeats = 2})(on_dev(a), on_dev(b), dc)
  assert(#t == 2 and t.mean > 0, "time_evaluator")
  local tw = f:time_evaluator({number = 2, repeats = 1, wallclock = true})(on_dev(a), on_dev(b), dc)
  assert(tw.mean > 0)
end

-- ---- vectorized float4 ----------------------------------------------------------------------
do
  local n = 4096
  local A = te.placeholder({n}, "float32", "A")
  local Cc = te.compute({n}, function(i) return te.exp(A(i)) * 0.5 end, "C")
  local s = te.create_schedule(Cc.op)
  local o, v = s[Cc]:split(Cc.op.axis[1], {factor = 4})
  local bx, tx = s[Cc]:split(o, {factor = 128})
  s[Cc]:bind(bx, "blockIdx.x")
  s[Cc]:bind(tx, "threadIdx.x")
  s[Cc]:vectorize(v)
  local f = tl.build(s, {A, Cc}, "opencl")
  local src = f:get_source()
  assert(src:find("vload4") and src:find("vstore4") and src:find("float4"), "float4 code:\n" .. src)
  local a = nd.random_uniform({n}, {low = -2, high = 2, seed = 3})
  local dc = nd.empty({n}, "float32", DEV)
  f(on_dev(a), dc)
  local c = host(dc)
  for i = 1, n do close(c:get(i), math.exp(a:get(i)) * 0.5, 1e-5, "exp[" .. i .. "]") end
end

-- ---- matmul: blocks, threads, shared-memory tiles with barriers, local accumulators ---------
local function matmul_schedule(M, N, K, opts)
  local A = te.placeholder({M, K}, "float32", "A")
  local B = te.placeholder({K, N}, "float32", "B")
  local k = te.reduce_axis({0, K}, "k")
  local Cm = te.compute({M, N}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
  local s = te.create_schedule(Cm.op)
  local AA = s:cache_read(A, "shared", {Cm})
  local BB = s:cache_read(B, "shared", {Cm})
  local CL = s:cache_write(Cm, "local")
  local tile, nt = opts.tile, opts.threads
  local by, yi = s[Cm]:split(Cm.op.axis[1], {factor = tile})
  local bx, xi = s[Cm]:split(Cm.op.axis[2], {factor = tile})
  local vy, yi2
  if opts.vthread then
    vy, yi2 = s[Cm]:split(yi, {nparts = 2})
    yi = yi2
  end
  local ty, yii = s[Cm]:split(yi, {nparts = nt})
  local tx, xii = s[Cm]:split(xi, {nparts = nt})
  if opts.vthread then
    s[Cm]:reorder(by, bx, vy, ty, tx, yii, xii)
    s[Cm]:bind(vy, "vthread")
  else
    s[Cm]:reorder(by, bx, ty, tx, yii, xii)
  end
  s[Cm]:bind(by, "blockIdx.y")
  s[Cm]:bind(bx, "blockIdx.x")
  s[Cm]:bind(ty, "threadIdx.y")
  s[Cm]:bind(tx, "threadIdx.x")
  if opts.vector then s[Cm]:vectorize(xii) end
  s[CL]:compute_at(s[Cm], tx)
  local ko, ki = s[CL]:split(CL.op.reduce_axis[1], {factor = opts.ktile})
  s[CL]:reorder(ko, ki, CL.op.axis[1], CL.op.axis[2])
  s[CL]:unroll(ki)
  if opts.vector then s[CL]:vectorize(CL.op.axis[2]) end
  for _, T in ipairs({AA, BB}) do
    s[T]:compute_at(s[CL], ko)
    local fz = s[T]:fuse(T.op.axis[1], T.op.axis[2])
    local fty, r = s[T]:split(fz, {nparts = nt})
    local ftx = s[T]:split(r, {nparts = nt})
    s[T]:bind(fty, "threadIdx.y")
    s[T]:bind(ftx, "threadIdx.x")
  end
  return s, A, B, Cm
end

local function check_matmul(M, N, K, opts)
  local s, A, B, Cm = matmul_schedule(M, N, K, opts)
  local f = tl.build(s, {A, B, Cm}, "opencl")
  local src = f:get_source()
  assert(src:find("__local float A_shared") and src:find("barrier%(CLK_LOCAL_MEM_FENCE%)"),
         "shared memory and barriers:\n" .. src)
  assert(src:find("#pragma unroll"), "unrolled k loop")
  local a = nd.random_uniform({M, K}, {low = -1, high = 1, seed = 11})
  local b = nd.random_uniform({K, N}, {low = -1, high = 1, seed = 12})
  local dc = nd.empty({M, N}, "float32", DEV)
  f(on_dev(a), on_dev(b), dc)
  local c = host(dc)
  for i = 1, M do
    for j = 1, N do
      local acc = 0
      for kk = 1, K do acc = acc + a:get(i, kk) * b:get(kk, j) end
      close(c:get(i, j), acc, 1e-5, string.format("C[%d, %d]", i, j))
    end
  end
  return f, src
end

do
  local f = check_matmul(64, 96, 48, {tile = 32, threads = 8, ktile = 8, vector = true})
  local k = f:kernels()[1]
  assert(k.grid[1] == 3 and k.grid[2] == 2 and k.block[1] == 8 and k.block[2] == 8, "matmul launch")
  local _, src = check_matmul(64, 64, 32, {tile = 32, threads = 4, ktile = 4, vthread = true})
  assert(src:find("#pragma unroll"))
  -- sizes that no tile divides: guards, with the barriers outside them
  check_matmul(100, 90, 50, {tile = 32, threads = 8, ktile = 8})
  -- a few random tilings of random sizes (seeded)
  local seed = 12345
  local function rnd(n)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n
  end
  for _ = 1, 4 do
    local tile = ({8, 16, 32})[rnd(3) + 1]
    local threads = ({2, 4})[rnd(2) + 1]
    local per = tile / threads
    local opts = {tile = tile, threads = threads, ktile = ({2, 4, 8})[rnd(3) + 1],
                  vector = per % 4 == 0 and rnd(2) == 1, vthread = tile >= 16 and rnd(2) == 1}
    check_matmul(17 + rnd(64), 17 + rnd(64), 5 + rnd(40), opts)
  end
end

-- ---- reductions: row sums and row max, one row per thread, unrolled inner loop -------------
do
  local R, L = 200, 36
  local A = te.placeholder({R, L}, "float32", "A")
  local k = te.reduce_axis({0, L}, "k")
  local S = te.compute({R}, function(i) return te.sum(A(i, k), k) end, "S")
  local k2 = te.reduce_axis({0, L}, "k2")
  local Mx = te.compute({R}, function(i) return te.max(A(i, k2), k2) end, "Mx")
  local s = te.create_schedule({S.op, Mx.op})
  for _, T in ipairs({S, Mx}) do
    local bx, tx = s[T]:split(T.op.axis[1], {factor = 32})
    s[T]:bind(bx, "blockIdx.x")
    s[T]:bind(tx, "threadIdx.x")
    local ko, ki = s[T]:split(T.op.reduce_axis[1], {factor = 4})
    s[T]:unroll(ki)
  end
  local f = tl.build(s, {A, S, Mx}, "opencl")
  assert(#f:kernels() == 2, "one kernel per root stage")
  local a = nd.random_uniform({R, L}, {low = -3, high = 3, seed = 5})
  local ds, dm = nd.empty({R}, "float32", DEV), nd.empty({R}, "float32", DEV)
  f(on_dev(a), ds, dm)
  local hs, hm = host(ds), host(dm)
  for i = 1, R do
    local acc, mx = 0, -math.huge
    for j = 1, L do
      acc = acc + a:get(i, j)
      mx = math.max(mx, a:get(i, j))
    end
    close(hs:get(i), acc, 1e-5, "sum[" .. i .. "]")
    close(hm:get(i), mx, 0, "max[" .. i .. "]")
  end
end

-- ---- two stages: a global temporary between two kernels -------------------------------------
do
  local n = 300
  local A = te.placeholder({n}, "float32", "A")
  local T = te.compute({n}, function(i) return A(i) + 1 end, "T")
  local Cc = te.compute({n}, function(i) return T(n - 1 - i) * 3 end, "C")
  local s = te.create_schedule(Cc.op)
  for _, X in ipairs({T, Cc}) do
    local bx, tx = s[X]:split(X.op.axis[1], {factor = 100})
    s[X]:bind(bx, "blockIdx.x")
    s[X]:bind(tx, "threadIdx.x")
  end
  local f = tl.build(s, {A, Cc}, "opencl")
  assert(#f:kernels() == 2)
  local a = nd.random_uniform({n}, {seed = 9})
  local dc = nd.empty({n}, "float32", DEV)
  f(on_dev(a), dc)
  local c = host(dc)
  for i = 1, n do close(c:get(i), (a:get(n + 1 - i) + 1) * 3, 1e-6, "reverse[" .. i .. "]") end
end

-- ---- an invalid work-group size is an error result, never a crash ---------------------------
do
  local maxwg = ocl.device(0).max_work_group_size
  local n = 2 * maxwg * 2
  local A = te.placeholder({n}, "float32", "A")
  local Cc = te.compute({n}, function(i) return A(i) * 2 end, "C")
  local s = te.create_schedule(Cc.op)
  local bx, tx = s[Cc]:split(Cc.op.axis[1], {factor = 2 * maxwg})
  local ty, tx2 = s[Cc]:split(tx, {nparts = 2})
  s[Cc]:bind(bx, "blockIdx.x")
  s[Cc]:bind(ty, "threadIdx.y")
  s[Cc]:bind(tx2, "threadIdx.x")
  local err = expect_error("invalid work-group size", function() tl.build(s, {A, Cc}, "opencl") end)
  assert(err:find("max work%-group size") or err:find("dimension"), err)
  -- the source is still there to look at
  assert(tl.build and require("tunelua.build").opencl_source(s, {A, Cc}):find("reqd_work_group_size"))
end

-- ---- a kernel build error carries the build log ---------------------------------------------
do
  local err = expect_error("build failed", function()
    ocl.build_program("__kernel void broken(__global float *a) { a[0] = undefined_name_xyz; }")
  end)
  assert(err:find("undefined_name_xyz"), "build log in the message: " .. err)
  ocl.build_program("__kernel void fine(__global float *a) { a[get_global_id(0)] = 1.0f; }")
end

-- ---- float16: kernels when the device has cl_khr_fp16, a clear error otherwise --------------
do
  local n = 256
  local A = te.placeholder({n}, "float16", "A")
  local Cc = te.compute({n}, function(i) return A(i) * 2 end, "C")
  local s = te.create_schedule(Cc.op)
  local bx, tx = s[Cc]:split(Cc.op.axis[1], {factor = 64})
  s[Cc]:bind(bx, "blockIdx.x")
  s[Cc]:bind(tx, "threadIdx.x")
  local src = require("tunelua.build").opencl_source(s, {A, Cc})
  assert(src:find("cl_khr_fp16") and src:find("__global half"), src)
  if ocl.device(0).fp16 then
    local f = tl.build(s, {A, Cc}, "opencl")
    local a = nd.random_uniform({n}, {seed = 4, dtype = "float16"})
    local dc = nd.empty({n}, "float16", DEV)
    f(on_dev(a), dc)
    local c = host(dc)
    for i = 1, n do close(c:get(i), a:get(i) * 2, 1e-3, "half[" .. i .. "]") end
  else
    expect_error("lacks cl_khr_fp16", function() tl.build(s, {A, Cc}, "opencl") end)
  end
end

-- ---- modules that travel: OpenCL C + manifest recreate the module (tl_ocl_module_from_source) ----
do
  local ffi = require "ffi"
  local core = require "tunelua.core"
  local C, cctx = core.C, core.ctx
  local n = 300
  local A = te.placeholder({n}, "float32", "A")
  local T = te.compute({n}, function(i) return A(i) + 1 end, "T")
  local Cc = te.compute({n}, function(i) return T(n - 1 - i) * 3 end, "C")
  local s = te.create_schedule(Cc.op)
  for _, X in ipairs({T, Cc}) do
    local bx, tx = s[X]:split(X.op.axis[1], {factor = 100})
    s[X]:bind(bx, "blockIdx.x")
    s[X]:bind(tx, "threadIdx.x")
  end
  local f = tl.build(s, {A, Cc}, "opencl", {name = "rev"})
  local jp = ffi.new("char *[1]")
  core.check(C.tl_ocl_module_manifest(cctx, f.module, jp))
  local man = ffi.string(jp[0])
  C.tl_opencl_str_free(jp[0])
  assert(man == '{"format": "tunelua-opencl-module", "version": 1, "name": "rev", "args": [' ..
         '{"dtype": "float32", "shape": [300]}, {"dtype": "float32", "shape": [300]}], "temps": [1200], ' ..
         '"kernels": [{"name": "rev_kernel0", "grid": [3, 1, 1], "block": [100, 1, 1], "local_bytes": 0, ' ..
         '"slots": [0, 2]}, {"name": "rev_kernel1", "grid": [3, 1, 1], "block": [100, 1, 1], ' ..
         '"local_bytes": 0, "slots": [1, 2]}], "fp16": false, "fp64": false}', "manifest:\n" .. man)
  -- the device-free variant gives the same texts
  local sp, mp = ffi.new("char *[1]"), ffi.new("char *[1]")
  core.check(C.tl_opencl_source_manifest(cctx, f:lowered().handle, sp, mp))
  assert(ffi.string(mp[0]) == man and ffi.string(sp[0]) == f:get_source())
  C.tl_opencl_str_free(sp[0]); C.tl_opencl_str_free(mp[0])
  local src = f:get_source()
  local out = ffi.new("tl_ocl_module *[1]")
  core.check(C.tl_ocl_module_from_source(cctx, src, man, 0, out))
  local m = ffi.gc(out[0], C.tl_ocl_module_free)
  assert(C.tl_ocl_module_num_kernels(m) == 2)
  local a = nd.random_uniform({n}, {seed = 11})
  local da, dc = on_dev(a), nd.empty({n}, "float32", DEV)
  local arr = ffi.new("tl_array *[2]", da, dc)
  core.check(C.tl_ocl_module_call(cctx, m, arr, 2))
  local c = host(dc)
  for i = 1, n do close(c:get(i), (a:get(n + 1 - i) + 1) * 3, 1e-6, "recreated[" .. i .. "]") end
  local function refused(text, want, code, source)
    local rc = C.tl_ocl_module_from_source(cctx, source or src, text, 0, out)
    local msg = core.errmsg()
    C.tl_clearerr(cctx)
    assert(rc == code and msg:find(want, 1, true), "manifest: got " .. rc .. ": " .. msg .. "\nexpected " .. want)
  end
  local P, R = C.TL_E_PARSE, C.TL_E_RUNTIME
  refused("[1, 2", "opencl manifest: not JSON", P)
  refused("[]", "opencl manifest: expected a JSON object", P)
  refused((man:gsub('"version": 1', '"version": 7')), "version: 7 is out of bounds [1, 1]", P)
  refused((man:gsub('"temps": %[1200%]', '"temps": [1200], "temps2": []')), "unknown key 'temps2'", P)
  refused((man:gsub('"grid": %[3, 1, 1%]', '"grid": [3, 0, 1]', 1)), "kernels[0].grid[1]: 0 is out of bounds", P)
  refused((man:gsub('"block": %[100, 1, 1%]', '"block": ["100", 1, 1]', 1)), "kernels[0].block[0]: expected an integer", P)
  refused((man:gsub('"slots": %[1, 2%]', '"slots": [1, 3]')), "kernels[1].slots[1]: 3 is out of bounds [0, 2]", P)
  refused((man:gsub('rev_kernel1', 'rev_kernel9')), "the source defines no kernel 'rev_kernel9'", P)
  refused((man:gsub('"float32"', '"float33"', 1)), "args[0].dtype: expected a dtype name", P)
  refused((man:gsub('"rev"', '"1rev"', 1)), "name: expected an identifier", P)
  refused(man, "the OpenCL source has 0 bytes", P, "")
  refused(man .. string.rep(" ", 1048576), "the manifest has " .. (#man + 1048576) .. " bytes (expected 1 to 1048576)", P)
  -- a manifest asking for more work-items than the device allows: refused before any launch
  local maxwg = ocl.device(0).max_work_group_size
  refused((man:gsub('"block": %[100, 1, 1%]', '"block": [' .. (2 * maxwg) .. ', 1, 1]', 1)),
          "invalid work-group size", R)
end

-- ---- target strings --------------------------------------------------------------------------
do
  local n = 64
  local A = te.placeholder({n}, "float32", "A")
  local Cc = te.compute({n}, function(i) return A(i) + 1 end, "C")
  local s = te.create_schedule(Cc.op)
  s[Cc]:bind(Cc.op.axis[1], "threadIdx.x")
  local f = tl.build(s, {A, Cc}, "opencl -device=mali")
  assert(f.target.device == "mali" and f.device == "opencl:0")
  expect_error("no device 7", function() tl.build(s, {A, Cc}, "opencl -device_id=7") end)
end

print("test_opencl: ok")
