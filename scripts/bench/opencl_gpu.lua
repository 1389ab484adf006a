-- scripts/bench/opencl_gpu.lua: OpenCL GPU benchmark of hand schedules.
--
--   tunelua scripts/bench/opencl_gpu.lua [--quick] [--device N] [--wallclock]
--
-- Builds a float32 matmul (shared-memory tiles, 4x4 or 8x8 register tiles
-- per work-item, unrolled and float4-vectorized inner loops) and the 3x3
-- conv2d layers of resnet-18 (register tiles of 4 output channels x 4
-- columns; "direct": the padded input inlined, "shared tiles": padded input
-- and weights fetched into __local memory per 8 input channels) with
-- tl.build(s, args, "opencl"), checks a sample
-- of the outputs against a host reference, times them with the time
-- evaluator (profiling events) and prints GFLOPS and the fraction of the
-- device's fp32 peak (NVIDIA: compute units x 128 lanes x 2 flop x clock;
-- other devices: not estimated). No vendor library is compared here: this
-- measures our generated code only. --quick uses small sizes (pocl).
-- See docs/opencl.md for figures.
local tl = require "tunelua"
local te = require "tunelua.te"
local ocl = require "tunelua.opencl"
local nd = tl.nd

local quick, dev, wallclock = false, 0, false
do
  local i = 1
  while arg and arg[i] do
    local a = arg[i]
    if a == "--quick" then quick = true
    elseif a == "--wallclock" then wallclock = true
    elseif a == "--device" then i = i + 1; dev = tonumber(arg[i])
    else error("opencl_gpu: unknown option " .. a .. " (expected --quick, --device N, --wallclock)") end
    i = i + 1
  end
end

if not ocl.available() then
  print("opencl_gpu: no OpenCL device; nothing to measure")
  return
end
local info = ocl.device(dev)
local DEV = "opencl:" .. dev
local target = "opencl -device_id=" .. dev
local peak
if info.vendor:find("NVIDIA") then peak = info.compute_units * 128 * 2 * info.max_clock_mhz * 1e6 end
print(ocl.info():match("[^\n]*"))
print(string.format("fp32 peak: %s", peak and string.format("%.1f GFLOPS (%d CUs x 128 x 2 x %d MHz)",
      peak / 1e9, info.compute_units, info.max_clock_mhz) or "not estimated for this device"))

local function time_it(f, args, flop)
  local ev = f:time_evaluator({ number = quick and 2 or 20, repeats = 3, min_repeat_ms = quick and 0 or 50,
                                wallclock = wallclock })
  local t = ev(unpack(args))
  local best = math.min(t[1], t[2], t[3])
  return best, flop / best / 1e9
end

local results = {}
local function report(name, secs, gflops)
  local frac = peak and string.format("%5.1f%%", gflops * 1e9 / peak * 100) or "   n/a"
  print(string.format("%-34s %10.3f ms %9.1f GFLOPS %s of peak", name, secs * 1e3, gflops, frac))
  results[#results + 1] = { name = name, secs = secs, gflops = gflops }
end

-- ---- matmul ----------------------------------------------------------------------------------

local matmul, conv2d, conv2d_run, conv2d_shared
function matmul(M, N, K, tile, nt, kt)
  local A = te.placeholder({M, K}, "float32", "A")
  local B = te.placeholder({K, N}, "float32", "B")
  local k = te.reduce_axis({0, K}, "k")
  local Cm = te.compute({M, N}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
  local s = te.create_schedule(Cm.op)
  local AA = s:cache_read(A, "shared", {Cm})
  local BB = s:cache_read(B, "shared", {Cm})
  local CL = s:cache_write(Cm, "local")
  local by, yi = s[Cm]:split(Cm.op.axis[1], {factor = tile})
  local bx, xi = s[Cm]:split(Cm.op.axis[2], {factor = tile})
  local ty, yii = s[Cm]:split(yi, {nparts = nt})
  local tx, xii = s[Cm]:split(xi, {nparts = nt})
  s[Cm]:reorder(by, bx, ty, tx, yii, xii)
  s[Cm]:bind(by, "blockIdx.y")
  s[Cm]:bind(bx, "blockIdx.x")
  s[Cm]:bind(ty, "threadIdx.y")
  s[Cm]:bind(tx, "threadIdx.x")
  s[Cm]:unroll(yii)
  s[Cm]:vectorize(xii)
  s[CL]:compute_at(s[Cm], tx)
  local ko, ki = s[CL]:split(CL.op.reduce_axis[1], {factor = kt})
  s[CL]:reorder(ko, ki, CL.op.axis[1], CL.op.axis[2])
  s[CL]:unroll(ki)
  s[CL]:unroll(CL.op.axis[1])
  s[CL]:vectorize(CL.op.axis[2])
  for _, T in ipairs({AA, BB}) do
    s[T]:compute_at(s[CL], ko)
    local fz = s[T]:fuse(T.op.axis[1], T.op.axis[2])
    local fty, r = s[T]:split(fz, {nparts = nt})
    local ftx, rr = s[T]:split(r, {nparts = nt})
    s[T]:bind(fty, "threadIdx.y")
    s[T]:bind(ftx, "threadIdx.x")
    s[T]:vectorize(rr)
  end
  local f = tl.build(s, {A, B, Cm}, target, { name = "matmul" })
  local a = nd.random_uniform({M, K}, {low = -1, high = 1, seed = 1})
  local b = nd.random_uniform({K, N}, {low = -1, high = 1, seed = 2})
  local da, db, dc = a:copyto(DEV), b:copyto(DEV), nd.empty({M, N}, "float32", DEV)
  f(da, db, dc)
  local c = dc:copyto("cpu")
  for t = 1, 16 do
    local i, j = (t * 37) % M + 1, (t * 101) % N + 1
    local acc = 0
    for kk = 1, K do acc = acc + a:get(i, kk) * b:get(kk, j) end
    assert(math.abs(c:get(i, j) - acc) <= 1e-3 * (1 + math.abs(acc)),
           string.format("matmul C[%d,%d] = %g, expected %g", i, j, c:get(i, j), acc))
  end
  local secs, gf = time_it(f, {da, db, dc}, 2 * M * N * K)
  report(string.format("matmul %dx%dx%d (tile %d, %dx%d/thread)", M, N, K, tile, tile / nt, tile / nt), secs, gf)
end

-- ---- conv2d (NCHW, 3x3, stride 1, pad 1) ------------------------------------------------------

function conv2d(N, CI, H, W, CO, shared)
  local KH = 3
  if shared then
    local s, X, Wt, O = conv2d_shared(N, CI, H, W, CO)
    return conv2d_run(s, X, Wt, O, N, CI, H, W, CO, "shared tiles")
  end
  local pad = 1
  local X = te.placeholder({N, CI, H, W}, "float32", "X")
  local Wt = te.placeholder({CO, CI, KH, KH}, "float32", "W")
  local P = te.compute({N, CI, H + 2 * pad, W + 2 * pad}, function(n, c, h, w)
    return te.if_then_else(te.all(te.ge(h, pad), te.lt(h, H + pad), te.ge(w, pad), te.lt(w, W + pad)),
                           X(n, c, h - pad, w - pad), 0.0)
  end, "pad")
  local rc = te.reduce_axis({0, CI}, "rc")
  local ry = te.reduce_axis({0, KH}, "ry")
  local rx = te.reduce_axis({0, KH}, "rx")
  local O = te.compute({N, CO, H, W}, function(n, f, y, x)
    return te.sum(P(n, rc, y + ry, x + rx) * Wt(f, rc, ry, rx), {rc, ry, rx})
  end, "conv")
  local s = te.create_schedule(O.op)
  s[P]:compute_inline()
  local OL = s:cache_write(O, "local")
  local n, f, y, x = O.op.axis[1], O.op.axis[2], O.op.axis[3], O.op.axis[4]
  -- per work-item: 4 output channels x 1 row x 4 columns; a block: 2 channel groups x 7 rows x
  -- (W/4) column groups (at most 196 work-items: the compiled kernel's limit on the H200 is 256)
  local fo, fi = s[O]:split(f, {factor = 4})
  local bz, tz = s[O]:split(fo, {factor = 2})
  local yo, yi = s[O]:split(y, {factor = 7})
  local xo, xi = s[O]:split(x, {factor = 4})
  s[O]:reorder(n, bz, yo, tz, yi, xo, fi, xi)   -- n has extent 1 (batch 1)
  s[O]:bind(bz, "blockIdx.z")
  s[O]:bind(yo, "blockIdx.y")
  s[O]:bind(tz, "threadIdx.z")
  s[O]:bind(yi, "threadIdx.y")
  s[O]:bind(xo, "threadIdx.x")
  s[O]:unroll(fi)
  s[O]:vectorize(xi)
  s[OL]:compute_at(s[O], xo)
  local orc, ory, orx = OL.op.reduce_axis[1], OL.op.reduce_axis[2], OL.op.reduce_axis[3]
  s[OL]:reorder(orc, ory, orx, OL.op.axis[1], OL.op.axis[2], OL.op.axis[3], OL.op.axis[4])
  s[OL]:unroll(ory)
  s[OL]:unroll(orx)
  s[OL]:unroll(OL.op.axis[2])
  s[OL]:unroll(OL.op.axis[4])
  return conv2d_run(s, X, Wt, O, N, CI, H, W, CO, "direct")
end

function conv2d_run(s, X, Wt, O, N, CI, H, W, CO, what)
  local KH = 3
  local fn = tl.build(s, {X, Wt, O}, target, { name = "conv2d" })
  local xa = nd.random_uniform({N, CI, H, W}, {low = -1, high = 1, seed = 3})
  local wa = nd.random_uniform({CO, CI, KH, KH}, {low = -1, high = 1, seed = 4})
  local dx, dw, dy = xa:copyto(DEV), wa:copyto(DEV), nd.empty({N, CO, H, W}, "float32", DEV)
  fn(dx, dw, dy)
  local yh = dy:copyto("cpu")
  for t = 1, 8 do
    local nn, ff, yy, xx = 1, (t * 13) % CO + 1, (t * 5) % H + 1, (t * 11) % W + 1
    local acc = 0
    for c = 1, CI do
      for dy_ = 0, 2 do
        for dx_ = 0, 2 do
          local iy, ix = yy + dy_ - 1, xx + dx_ - 1
          if iy >= 1 and iy <= H and ix >= 1 and ix <= W then
            acc = acc + xa:get(nn, c, iy, ix) * wa:get(ff, c, dy_ + 1, dx_ + 1)
          end
        end
      end
    end
    assert(math.abs(yh:get(nn, ff, yy, xx) - acc) <= 1e-3 * (1 + math.abs(acc)),
           string.format("conv2d out[%d,%d,%d,%d] = %g, expected %g", nn, ff, yy, xx, yh:get(nn, ff, yy, xx), acc))
  end
  local secs, gf = time_it(fn, {dx, dw, dy}, 2 * N * CO * H * W * CI * KH * KH)
  report(string.format("conv2d %dx%dx%dx%d -> %d, 3x3 (%s)", N, CI, H, W, CO, what), secs, gf)
end

-- conv2d with shared-memory tiles: a block computes FC output channels x 7 rows x the full
-- width (4 channels x 4 columns per work-item); per chunk of 8 input channels the padded input
-- tile and the weights are fetched into __local memory by all work-items together.
function conv2d_shared(N, CI, H, W, CO)
  local KH, pad, RC = 3, 1, 8
  local X = te.placeholder({N, CI, H, W}, "float32", "X")
  local Wt = te.placeholder({CO, CI, KH, KH}, "float32", "W")
  local P = te.compute({N, CI, H + 2 * pad, W + 2 * pad}, function(n, c, h, w)
    return te.if_then_else(te.all(te.ge(h, pad), te.lt(h, H + pad), te.ge(w, pad), te.lt(w, W + pad)),
                           X(n, c, h - pad, w - pad), 0.0)
  end, "pad")
  local rc = te.reduce_axis({0, CI}, "rc")
  local ry = te.reduce_axis({0, KH}, "ry")
  local rx = te.reduce_axis({0, KH}, "rx")
  local O = te.compute({N, CO, H, W}, function(n, f, y, x)
    return te.sum(P(n, rc, y + ry, x + rx) * Wt(f, rc, ry, rx), {rc, ry, rx})
  end, "conv")
  local s = te.create_schedule(O.op)
  local OL = s:cache_write(O, "local")
  local PS = s:cache_read(P, "shared", {OL})
  local WS = s:cache_read(Wt, "shared", {OL})
  s[P]:compute_inline()
  local n, f, y, x = O.op.axis[1], O.op.axis[2], O.op.axis[3], O.op.axis[4]
  local fo, fi = s[O]:split(f, {factor = 4})
  local bz, tz = s[O]:split(fo, {factor = 2})
  local yo, yi = s[O]:split(y, {factor = 7})
  local xo, xi = s[O]:split(x, {factor = 4})
  s[O]:reorder(n, bz, yo, tz, yi, xo, fi, xi)
  s[O]:bind(bz, "blockIdx.z")
  s[O]:bind(yo, "blockIdx.y")
  s[O]:bind(tz, "threadIdx.z")
  s[O]:bind(yi, "threadIdx.y")
  s[O]:bind(xo, "threadIdx.x")
  s[O]:unroll(fi)
  s[O]:vectorize(xi)
  s[OL]:compute_at(s[O], xo)
  local rco, rci = s[OL]:split(OL.op.reduce_axis[1], {factor = RC})
  s[OL]:reorder(rco, rci, OL.op.reduce_axis[2], OL.op.reduce_axis[3], OL.op.axis[1], OL.op.axis[2],
                OL.op.axis[3], OL.op.axis[4])
  s[OL]:unroll(OL.op.reduce_axis[2])
  s[OL]:unroll(OL.op.reduce_axis[3])
  s[OL]:unroll(OL.op.axis[2])
  s[OL]:unroll(OL.op.axis[4])
  local ntx = math.ceil(W / 4)
  for _, T in ipairs({PS, WS}) do
    s[T]:compute_at(s[OL], rco)
    local ax = T.op.axis
    local fz = s[T]:fuse(ax[1], ax[2], ax[3], ax[4])
    local a, r = s[T]:split(fz, {nparts = 2})
    local b, r2 = s[T]:split(r, {nparts = 7})
    local c = s[T]:split(r2, {nparts = ntx})
    s[T]:bind(a, "threadIdx.z")
    s[T]:bind(b, "threadIdx.y")
    s[T]:bind(c, "threadIdx.x")
  end
  return s, X, Wt, O
end

-- a failing case (e.g. a work-group the compiled kernel cannot run) is reported, not fatal
local function try(fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then print("  FAILED: " .. tostring(err)) end
end
local real_matmul, real_conv2d = matmul, conv2d
matmul = function(...) try(real_matmul, ...) end
conv2d = function(...) try(real_conv2d, ...) end

local t0 = os.clock()
if quick then
  matmul(128, 128, 64, 64, 16, 16)
  matmul(128, 128, 64, 128, 16, 8)
  conv2d(1, 16, 28, 28, 32)
  conv2d(1, 16, 28, 28, 32, true)
else
  matmul(1024, 1024, 1024, 64, 16, 16)
  matmul(2048, 2048, 2048, 64, 16, 16)
  matmul(4096, 4096, 4096, 64, 16, 16)
  matmul(2048, 2048, 2048, 128, 16, 8)
  matmul(4096, 4096, 4096, 128, 16, 8)
  conv2d(1, 64, 56, 56, 64)
  conv2d(1, 128, 28, 28, 128)
  conv2d(1, 256, 14, 14, 256)
  conv2d(1, 512, 7, 7, 512)
  conv2d(1, 64, 56, 56, 64, true)
  conv2d(1, 128, 28, 28, 128, true)
  conv2d(1, 256, 14, 14, 256, true)
  conv2d(1, 512, 7, 7, 512, true)
end
print(string.format("opencl_gpu: %d kernels measured (%.1f s host CPU time)", #results, os.clock() - t0))
