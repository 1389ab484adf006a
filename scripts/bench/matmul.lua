-- Benchmark: 1024x1024x1024 fp32 matmul, tunelua (hand-written schedule) vs
-- OpenBLAS sgemm measured in the same run. Prints a table with GFLOPS and the
-- ratio, and the time tunelua spends lowering + emitting C per kernel (the C
-- compiler's own time is reported separately).
--
--   tunelua scripts/bench/matmul.lua [N] [repeats] [--threads T] [--target T] [--cflags F]
--   tunelua scripts/bench/matmul.lua --target "llvm -mcpu=core-avx2" --cflags "-O3 -march=haswell"
--                                       -- the AVX2 kernel on an AVX-512 machine
--   taskset -c 0,1 tunelua scripts/bench/matmul.lua          -- 2 threads, both sides
--   OPENBLAS_CORETYPE=SkylakeX tunelua scripts/bench/matmul.lua
--
-- Both sides run T threads (default: the CPUs of the process's affinity mask,
-- not all online CPUs), in this process, so OpenBLAS's threads inherit the
-- same mask. The OpenBLAS kernel that ran is printed (openblas_get_corename,
-- openblas_get_config): Debian's OpenBLAS 0.3.21 does not recognise some
-- newer CPUs and falls back to a slower kernel (Prescott/SSE3, or Haswell on
-- AVX-512 machines); OPENBLAS_CORETYPE (Haswell, SkylakeX, Zen, ...) forces
-- one in a dynamic-arch build such as Debian's.
local tl = require "tunelua"
local te = tl.te
local ffi = require "ffi"
local bit = require "bit"

local pos, THREADS, TARGET, CFLAGS = {}, nil, "c", nil
do
  local i = 1
  while i <= #arg do
    if arg[i] == "--threads" then
      THREADS = tonumber(arg[i + 1])
      if not THREADS or THREADS < 1 then error("--threads: expected a positive integer, got " .. tostring(arg[i + 1])) end
      i = i + 2
    elseif arg[i] == "--target" or arg[i] == "--cflags" then
      if arg[i + 1] == nil then error(arg[i] .. ": expected a value") end
      if arg[i] == "--target" then TARGET = arg[i + 1] else CFLAGS = arg[i + 1] end
      i = i + 2
    else
      pos[#pos + 1] = arg[i]
      i = i + 1
    end
  end
end
local N = tonumber(pos[1]) or 1024
local REPEATS = tonumber(pos[2]) or 5
local M, K = N, N
local flop = 2 * M * N * K

-- The CPUs this process may run on (sched_getaffinity), as a list.
ffi.cdef [[ int sched_getaffinity(int pid, size_t size, uint8_t *mask); ]]
local function affinity_cpus()
  local mask = ffi.new("uint8_t[128]")
  if ffi.C.sched_getaffinity(0, 128, mask) ~= 0 then return nil end
  local cpus = {}
  for i = 0, 128 * 8 - 1 do
    if bit.band(mask[bit.rshift(i, 3)], bit.lshift(1, bit.band(i, 7))) ~= 0 then cpus[#cpus + 1] = i end
  end
  return cpus
end
local cpus = affinity_cpus() or {}
THREADS = THREADS or math.max(#cpus, 1)
tl.set_num_threads(THREADS)

local function cpu_model()
  local f = io.open("/proc/cpuinfo")
  if not f then return "unknown CPU" end
  local s = f:read("*a")
  f:close()
  return s:match("model name%s*:%s*([^\n]+)") or "unknown CPU"
end

local median = require("tunelua.stats").median

-- The schedule: B packed into [N/bn][K][bn] panels, C computed in bm x bn
-- register tiles (a local accumulator computed at the tile), k split by 4 and
-- unrolled, the bn columns vectorized, tiles in parallel. The tile comes from
-- the target's vectors and registers: bn = two vectors, bm = registers / 4 rows
-- (AVX-512: 8 x 32, 16 accumulators of 32 zmm; AVX2: 4 x 16, 8 of 16 ymm, which
-- leaves the B vectors and the broadcast in registers). The tiles are visited a
-- group of B panels (about 512 KB, in L2) at a time across all row blocks, so
-- that each panel is read from L3 once per group rather than once per tile.
local tgt = require("tunelua.target").parse(TARGET)
local BM, BN, KF = math.max(2, math.floor(tgt.registers / 4)), 2 * tgt.lanes, 4
local function panel_group(bn)
  local g = math.max(1, math.floor(512 * 1024 / (K * bn * 4)))
  while g > 1 and (N / bn) % g ~= 0 do g = g - 1 end
  return g
end

local function matmul_schedule(bm, bn, kf)
  local A = te.placeholder({M, K}, "float32", "A")
  local B = te.placeholder({K, N}, "float32", "B")
  local packedB = te.compute({N / bn, K, bn}, function(x, y, z) return B(y, x * bn + z) end, "packedB")
  local k = te.reduce_axis({0, K}, "k")
  local C = te.compute({M, N}, function(i, j)
    return te.sum(A(i, k) * packedB(te.floordiv(j, bn), k, te.floormod(j, bn)), {k})
  end, "C")
  local s = te.create_schedule(C.op)
  local CC = s:cache_write(C, "local")
  local xo, yo, xi, yi = s[C]:tile(C.op.axis[1], C.op.axis[2], bm, bn)
  local yoo, yoi = s[C]:split(yo, {factor = panel_group(bn)})
  s[C]:reorder(yoo, xo, yoi, xi, yi)
  s[CC]:compute_at(s[C], yoi)
  local xc, yc = s[CC].op.axis[1], s[CC].op.axis[2]
  local ko, ki = s[CC]:split(s[CC].op.reduce_axis[1], {factor = kf})
  s[CC]:reorder(ko, ki, xc, yc)
  s[CC]:unroll(ki)
  s[CC]:unroll(xc)
  s[CC]:vectorize(yc)
  s[C]:vectorize(yi)
  local fused = s[C]:fuse(yoo, xo, yoi)
  s[C]:parallel(fused)
  local px = s[packedB].op.axis[1]
  s[packedB]:vectorize(s[packedB].op.axis[3])
  s[packedB]:parallel(px)
  return s, {A, B, C}
end

local now = tl.core.C.tl_now
local s, args = matmul_schedule(BM, BN, KF)
local BOPTS = CFLAGS and {cflags = CFLAGS} or nil
local f = tl.build(s, args, TARGET, BOPTS)

local a = tl.nd.random_uniform({M, K}, {seed = 1})
local b = tl.nd.random_uniform({K, N}, {seed = 2})
local c = tl.nd.empty({M, N})
f(a, b, c)

-- OpenBLAS peer, same process, same thread count and affinity mask
local ok_blas, blas = pcall(ffi.load, "openblas")
local blas_times, blas_core
local c_ref = tl.nd.empty({M, N})
if ok_blas then
  ffi.cdef [[
    void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
    void openblas_set_num_threads(int n);
    int openblas_get_num_threads(void);
    char *openblas_get_corename(void);
    char *openblas_get_config(void);
  ]]
  blas.openblas_set_num_threads(THREADS)
  blas_core = string.format("%s (%s; %d threads)", ffi.string(blas.openblas_get_corename()),
                            ffi.string(blas.openblas_get_config()), blas.openblas_get_num_threads())
  local pa, pb, pc = a:data_ptr(), b:data_ptr(), c_ref:data_ptr()
  local function sgemm()
    blas.cblas_sgemm(101, 111, 111, M, N, K, 1.0, pa, K, pb, N, 0.0, pc, N)
  end
  sgemm()
  tl.testing.assert_allclose(c, c_ref, {rtol = 1e-4, atol = 1e-4})
  blas_times = {}
  for r = 1, REPEATS do
    local t = tl.core.C.tl_now()
    local n = 0
    repeat sgemm(); n = n + 1 until tl.core.C.tl_now() - t > 0.3
    blas_times[r] = (tl.core.C.tl_now() - t) / n
  end
end

local times = f:time_evaluator({number = 1, repeats = REPEATS, min_repeat_ms = 300})(a, b, c)
local t_tl = median(times)
print(string.format("matmul %dx%dx%d fp32, %d threads (affinity CPUs %s), median of %d repeats", M, N,
                    K, THREADS, table.concat(cpus, ","), REPEATS))
print("CPU: " .. cpu_model())
print(string.format("tunelua: target %s (%d-lane vectors, %d registers), %s; tile %dx%d, k unrolled by %d, " ..
                    "B panels in groups of %d", TARGET, tgt.lanes, tgt.registers, CFLAGS or tgt.cflags, BM, BN,
                    KF, panel_group(BN)))
if blas_core then
  print("OpenBLAS kernel: " .. blas_core .. (os.getenv("OPENBLAS_CORETYPE") and
        (", forced by OPENBLAS_CORETYPE=" .. os.getenv("OPENBLAS_CORETYPE")) or ""))
end
print(string.format("%-22s %12s %10s %8s", "implementation", "time (ms)", "GFLOPS", "ratio"))
local g_tl = flop / t_tl / 1e9
if blas_times then
  local t_b = median(blas_times)
  local g_b = flop / t_b / 1e9
  print(string.format("%-22s %12.3f %10.1f %8.2f", "OpenBLAS sgemm", t_b * 1e3, g_b, 1.0))
  print(string.format("%-22s %12.3f %10.1f %8.2f", "tunelua", t_tl * 1e3, g_tl, g_b > 0 and g_tl / g_b or 0))
else
  print(string.format("%-22s %12.3f %10.1f %8s", "tunelua", t_tl * 1e3, g_tl, "n/a"))
  print("OpenBLAS not found (libopenblas-dev): " .. tostring(blas))
end

-- Compile-time costs: lowering + C emission per kernel (a build whose object
-- is already cached: lower, emit, hash, dlopen), and the C compiler's own time.
local function kernel_costs(label, make)
  local s2, a2 = make()
  local f2 = tl.build(s2, a2, TARGET, BOPTS)           -- compiles (or hits the cache)
  local lows, emits = {}, {}
  for r = 1, 5 do
    local s3, a3 = make()
    local t = now()
    tl.lower(s3, a3)
    lows[r] = now() - t
    t = now()
    tl.build(s3, a3, TARGET, BOPTS)
    emits[r] = now() - t
  end
  print(string.format("%-34s %8.2f ms %12.2f ms %10.2f s", label, median(lows) * 1e3,
                      median(emits) * 1e3, f2.compile_seconds))
end
print()
print(string.format("%-34s %11s %15s %12s", "kernel", "lower", "lower+emit+load", "C compiler"))
kernel_costs("matmul (packed, tiled)", function() return matmul_schedule(BM, BN, KF) end)
kernel_costs("conv2d 1x64x56x56, 64x3x3, pad 1", function()
  local data = te.placeholder({1, 64, 56, 56}, "float32", "data")
  local kernel = te.placeholder({64, 64, 3, 3}, "float32", "kernel")
  local out = tl.topi.nn.conv2d(data, kernel, {strides = {1, 1}, padding = {1, 1}, dilation = {1, 1}})
  local s2 = te.create_schedule(out.op)
  local n, co, h, w = out.op.axis[1], out.op.axis[2], out.op.axis[3], out.op.axis[4]
  local wo, wi = s2[out]:split(w, {factor = 8})
  s2[out]:vectorize(wi)
  s2[out]:parallel(co)
  return s2, {data, kernel, out}
end)
print("(C compiler time is 0 when the kernel was already in the cache)")
