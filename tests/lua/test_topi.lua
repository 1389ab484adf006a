-- tunelua.topi: the numbers of every operator, built with the default CPU
-- schedule (topi.default_schedule), against naive Lua references on random data over random shapes
-- and attributes, edge cases included (1x1 kernels, stride > kernel, padding
-- wider than the border, odd channel counts, batch > 1); plus shapes, tags,
-- patterns and error messages.
local tl = require "tunelua"
local te, nd, topi, testing = tl.te, tl.nd, tl.topi, tl.testing
local schedule = require "tunelua.schedule"
local ffi = require "ffi"
local C = tl.core.C
local create_schedule = te.create_schedule or schedule.create

math.randomseed(1234)
local seed = 100
local function rnd(lo, hi) return math.random(lo, hi) end

local function prod(s) local n = 1 for _, v in ipairs(s) do n = n * v end return n end
local function strides_of(s)
  local st, acc = {}, 1
  for i = #s, 1, -1 do st[i] = acc; acc = acc * s[i] end
  return st
end

-- A random array and its flat values.
local function rand_array(shape, dtype)
  seed = seed + 1
  dtype = dtype or "float32"
  local a
  if dtype:match("^int") or dtype:match("^uint") then
    a = nd.random_uniform(shape, { low = -8, high = 8, dtype = dtype, seed = seed })
  else
    a = nd.random_uniform(shape, { low = -1, high = 1, dtype = dtype, seed = seed })
  end
  return a, a:flat()
end

local function from_flat(shape, flat, dtype)
  local a = nd.empty(shape, dtype or "float32")
  for i = 1, #flat do C.tl_array_set(a, i - 1, flat[i]) end
  return a
end

-- Build outs over ins with the default CPU schedule (topi.default_schedule;
-- TUNELUA_TOPI_EMPTY=1: the empty schedule), run on arrays, return arrays.
local use_empty = os.getenv("TUNELUA_TOPI_EMPTY") == "1"
local build_run = require("tests.lua.lib.topi_check").build_run
local function run(ins, outs, arrays)
  local s = use_empty and create_schedule(#outs == 1 and outs[1].op or outs) or topi.default_schedule(outs, "llvm")
  return build_run(s, ins, outs, arrays)
end

local count = 0
local function check(name, got, shape, want, tol)
  count = count + 1
  local gs = got:shape()
  assert(#gs == #shape, name .. ": rank " .. #gs .. " vs " .. #shape)
  for i = 1, #shape do assert(gs[i] == shape[i], name .. ": shape mismatch at " .. i) end
  testing.assert_allclose(got, from_flat(shape, want, "float64"),
                          { rtol = tol or 1e-4, atol = tol or 1e-4 })
end

-- ---- references ---------------------------------------------------------------------

-- conv2d NCHW/NHWC with groups: x flat, w flat (OIHW or HWIO).
local function ref_conv(x, xs, w, ws, a)
  local nhwc = a.layout == "NHWC"
  local N, Cc, H, W
  if nhwc then N, H, W, Cc = xs[1], xs[2], xs[3], xs[4] else N, Cc, H, W = xs[1], xs[2], xs[3], xs[4] end
  local O, CG, KH, KW
  if nhwc then KH, KW, CG, O = ws[1], ws[2], ws[3], ws[4] else O, CG, KH, KW = ws[1], ws[2], ws[3], ws[4] end
  local p, s, d, g = a.padding, a.strides, a.dilation, a.groups
  local OH = math.floor((H + p[1] + p[3] - ((KH - 1) * d[1] + 1)) / s[1]) + 1
  local OW = math.floor((W + p[2] + p[4] - ((KW - 1) * d[2] + 1)) / s[2]) + 1
  local xst, wst = strides_of(xs), strides_of(ws)
  local out, os = {}, nhwc and { N, OH, OW, O } or { N, O, OH, OW }
  local ost = strides_of(os)
  for n = 0, N - 1 do for o = 0, O - 1 do for y = 0, OH - 1 do for xx = 0, OW - 1 do
    local acc = 0
    local gi = math.floor(o / (O / g))
    for rc = 0, CG - 1 do
      local ci = gi * CG + rc
      for ry = 0, KH - 1 do for rx = 0, KW - 1 do
        local iy, ix = y * s[1] + ry * d[1] - p[1], xx * s[2] + rx * d[2] - p[2]
        if iy >= 0 and iy < H and ix >= 0 and ix < W then
          local xi = nhwc and (n * xst[1] + iy * xst[2] + ix * xst[3] + ci) or
                     (n * xst[1] + ci * xst[2] + iy * xst[3] + ix)
          local wi = nhwc and (ry * wst[1] + rx * wst[2] + rc * wst[3] + o) or
                     (o * wst[1] + rc * wst[2] + ry * wst[3] + rx)
          acc = acc + x[xi + 1] * w[wi + 1]
        end
      end end
    end
    local oi = nhwc and (n * ost[1] + y * ost[2] + xx * ost[3] + o) or (n * ost[1] + o * ost[2] + y * ost[3] + xx)
    out[oi + 1] = acc
  end end end end
  return out, os
end

local function rand_conv_attrs(KH, KW)
  local a = { strides = { rnd(1, 3), rnd(1, 3) }, dilation = { rnd(1, 2), rnd(1, 2) },
              padding = { rnd(0, 3), rnd(0, 3), rnd(0, 3), rnd(0, 3) } }
  if math.random() < 0.3 then a.strides = { KH + 1, KW + 1 } end   -- stride > kernel
  return a
end

-- ---- conv2d ----------------------------------------------------------------------------

for trial = 1, 14 do
  local layout = trial % 2 == 0 and "NHWC" or "NCHW"
  local g = (trial % 3 == 0) and rnd(2, 3) or 1
  local N, CG, OG = rnd(1, 2), rnd(1, 5), rnd(1, 4)
  local Cc, O = CG * g, OG * g
  local KH, KW = rnd(1, 3), rnd(1, 3)
  if trial == 1 then KH, KW = 1, 1 end
  local a = rand_conv_attrs(KH, KW)
  a.groups, a.layout = g, layout
  local H = rnd((KH - 1) * a.dilation[1] + 1, 9)
  local W = rnd((KW - 1) * a.dilation[2] + 1, 9)
  local xs = layout == "NHWC" and { N, H, W, Cc } or { N, Cc, H, W }
  local ws = layout == "NHWC" and { KH, KW, CG, O } or { O, CG, KH, KW }
  local xa, xf = rand_array(xs)
  local wa, wf = rand_array(ws)
  local X, Wt = te.placeholder(xs, "float32", "X"), te.placeholder(ws, "float32", "W")
  local Y = topi.nn.conv2d(X, Wt, a)
  local want, os = ref_conv(xf, xs, wf, ws, a)
  local got = run({ X, Wt }, { Y }, { xa, wa })[1]
  check("conv2d " .. layout .. " #" .. trial, got, os, want)
end

-- int8 x int8 -> int32
do
  local xs, ws = { 1, 3, 5, 5 }, { 2, 3, 3, 3 }
  local xa, xf = rand_array(xs, "int8")
  local wa, wf = rand_array(ws, "int8")
  local X, Wt = te.placeholder(xs, "int8", "X"), te.placeholder(ws, "int8", "W")
  local a = { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 }, groups = 1, out_dtype = "int32" }
  local Y = topi.nn.conv2d(X, Wt, a)
  assert(Y.dtype == "int32")
  local want, os = ref_conv(xf, xs, wf, ws, a)
  check("conv2d int8", run({ X, Wt }, { Y }, { xa, wa })[1], os, want, 0)
end

-- ---- depthwise (as a grouped conv with groups = C) --------------------------------------

for trial = 1, 6 do
  local layout = trial % 2 == 0 and "NHWC" or "NCHW"
  local N, Cc, M, KH, KW = rnd(1, 2), rnd(1, 5), rnd(1, 2), rnd(1, 3), rnd(1, 3)
  local a = rand_conv_attrs(KH, KW)
  a.layout = layout
  local H, W = rnd((KH - 1) * a.dilation[1] + 1, 8), rnd((KW - 1) * a.dilation[2] + 1, 8)
  local xs = layout == "NHWC" and { N, H, W, Cc } or { N, Cc, H, W }
  local ks = layout == "NHWC" and { KH, KW, Cc, M } or { Cc, M, KH, KW }
  local xa, xf = rand_array(xs)
  local ka, kf = rand_array(ks)
  local X, K = te.placeholder(xs, "float32", "X"), te.placeholder(ks, "float32", "K")
  local Y = topi.nn.depthwise_conv2d(X, K, a)
  -- same numbers as a grouped conv with kernel [C*M, 1, KH, KW] (or HWIO [KH, KW, 1, C*M])
  local gw, gs = {}, layout == "NHWC" and { KH, KW, 1, Cc * M } or { Cc * M, 1, KH, KW }
  local kst = strides_of(ks)
  for c = 0, Cc - 1 do for m = 0, M - 1 do for y = 0, KH - 1 do for x = 0, KW - 1 do
    local o = c * M + m
    if layout == "NHWC" then
      gw[(y * KW + x) * Cc * M + o + 1] = kf[y * kst[1] + x * kst[2] + c * kst[3] + m + 1]
    else
      gw[o * KH * KW + y * KW + x + 1] = kf[c * kst[1] + m * kst[2] + y * kst[3] + x + 1]
    end
  end end end end
  a.groups = Cc
  local want, os = ref_conv(xf, xs, gw, gs, a)
  check("depthwise " .. layout .. " #" .. trial, run({ X, K }, { Y }, { xa, ka })[1], os, want)
  assert(Y.op.tag == (layout == "NHWC" and "depthwise_conv2d_nhwc" or "depthwise_conv2d_nchw"))
end

-- ---- conv2d_transpose -----------------------------------------------------------------------

for trial = 1, 6 do
  local N, Cc, OG, g = rnd(1, 2), rnd(1, 3), rnd(1, 3), trial % 3 == 0 and 2 or 1
  Cc = Cc * g
  local KH, KW = rnd(1, 3), rnd(1, 3)
  local s, d = { rnd(1, 3), rnd(1, 3) }, { 1, 1 }
  local p = { rnd(0, KH - 1), rnd(0, KW - 1), rnd(0, KH - 1), rnd(0, KW - 1) }
  local op = { rnd(0, s[1] - 1), rnd(0, s[2] - 1) }
  local H, W = rnd(1, 5), rnd(1, 5)
  local OH = (H - 1) * s[1] + KH - p[1] - p[3] + op[1]
  local OW = (W - 1) * s[2] + KW - p[2] - p[4] + op[2]
  if OH >= 1 and OW >= 1 then
    local xs, ks = { N, Cc, H, W }, { Cc, OG, KH, KW }
    local xa, xf = rand_array(xs)
    local ka, kf = rand_array(ks)
    local X, K = te.placeholder(xs, "float32", "X"), te.placeholder(ks, "float32", "K")
    local Y = topi.nn.conv2d_transpose(X, K, { strides = s, padding = p, dilation = d, groups = g,
                                               output_padding = op })
    local O = OG * g
    local want = {}
    for i = 1, N * O * OH * OW do want[i] = 0 end
    local CG = Cc / g
    for n = 0, N - 1 do for c = 0, Cc - 1 do for y = 0, H - 1 do for x = 0, W - 1 do
      local gi = math.floor(c / CG)
      for og = 0, OG - 1 do for ky = 0, KH - 1 do for kx = 0, KW - 1 do
        local oy, ox = y * s[1] + ky - p[1], x * s[2] + kx - p[2]
        if oy >= 0 and oy < OH and ox >= 0 and ox < OW then
          local o = gi * OG + og
          local oi = ((n * O + o) * OH + oy) * OW + ox + 1
          want[oi] = want[oi] + xf[((n * Cc + c) * H + y) * W + x + 1] * kf[((c * OG + og) * KH + ky) * KW + kx + 1]
        end
      end end end
    end end end end
    check("conv2d_transpose #" .. trial, run({ X, K }, { Y }, { xa, ka })[1], { N, O, OH, OW }, want)
  end
end

-- conv2d_transpose NHWC (HWOI kernel, or IOHW): the NCHW numbers, permuted
for trial = 1, 4 do
  local N, Cc, OG, g = rnd(1, 2), rnd(1, 3), rnd(1, 3), trial == 2 and 2 or 1
  Cc = Cc * g
  local KH, KW = rnd(1, 3), rnd(1, 3)
  local s, d = { rnd(1, 3), rnd(1, 3) }, { 1, trial == 3 and 2 or 1 }
  local p = { rnd(0, KH - 1), rnd(0, KW - 1), rnd(0, KH - 1), rnd(0, KW - 1) }
  local op = { rnd(0, s[1] - 1), rnd(0, s[2] - 1) }
  local H, W = rnd(3, 5), rnd(3, 5)   -- (H - 1) * s >= 2: never an empty output
  local KWd = (KW - 1) * d[2] + 1
  local OH = (H - 1) * s[1] + KH - p[1] - p[3] + op[1]
  local OW = (W - 1) * s[2] + KWd - p[2] - p[4] + op[2]
  local O = OG * g
  local xa, xf = rand_array({ N, Cc, H, W })
  local ka, kf = rand_array({ Cc, OG, KH, KW })
  local Xc, Kc = te.placeholder({ N, Cc, H, W }, "float32", "X"), te.placeholder({ Cc, OG, KH, KW }, "float32", "K")
  local attrs = { strides = s, padding = p, dilation = d, groups = g, output_padding = op }
  local want = run({ Xc, Kc }, { topi.nn.conv2d_transpose(Xc, Kc, attrs) }, { xa, ka })[1]:flat()
  local xn, kn, wn = {}, {}, {}
  for n = 0, N - 1 do for y = 0, H - 1 do for x = 0, W - 1 do for c = 0, Cc - 1 do
    xn[#xn + 1] = xf[((n * Cc + c) * H + y) * W + x + 1]
  end end end end
  local hwoi = trial ~= 4
  if hwoi then
    for y = 0, KH - 1 do for x = 0, KW - 1 do for o = 0, OG - 1 do for c = 0, Cc - 1 do
      kn[#kn + 1] = kf[((c * OG + o) * KH + y) * KW + x + 1]
    end end end end
  end
  for n = 0, N - 1 do for y = 0, OH - 1 do for x = 0, OW - 1 do for o = 0, O - 1 do
    wn[#wn + 1] = want[((n * O + o) * OH + y) * OW + x + 1]
  end end end end
  local ks = hwoi and { KH, KW, OG, Cc } or { Cc, OG, KH, KW }
  local Xn, Kn = te.placeholder({ N, H, W, Cc }, "float32", "Xn"), te.placeholder(ks, "float32", "Kn")
  attrs.layout = "NHWC"
  if not hwoi then attrs.kernel_layout = "IOHW" end
  local Y = topi.nn.conv2d_transpose(Xn, Kn, attrs)
  assert(Y.op.tag == "conv2d_transpose_nhwc")
  check("conv2d_transpose NHWC #" .. trial, run({ Xn, Kn }, { Y }, { from_flat({ N, H, W, Cc }, xn),
        hwoi and from_flat(ks, kn) or ka })[1], { N, OH, OW, O }, wn)
end

-- ---- winograd ----------------------------------------------------------------------------

for _, m in ipairs { 2, 4, 6 } do
  local N, Cc, O, H, W = rnd(1, 2), rnd(1, 4), rnd(1, 4), rnd(3, 9), rnd(3, 9)
  local p = { rnd(0, 2), rnd(0, 2), rnd(0, 2), rnd(0, 2) }
  local xs, ws = { N, Cc, H, W }, { O, Cc, 3, 3 }
  local xa, xf = rand_array(xs)
  local wa, wf = rand_array(ws)
  local X, Wt = te.placeholder(xs, "float32", "X"), te.placeholder(ws, "float32", "W")
  local Y = topi.nn.conv2d_winograd(X, Wt, { tile_size = m, padding = p })
  local want, os = ref_conv(xf, xs, wf, ws, { padding = p, strides = { 1, 1 }, dilation = { 1, 1 }, groups = 1 })
  check("winograd F(" .. m .. "x" .. m .. ",3x3)", run({ X, Wt }, { Y }, { xa, wa })[1], os, want, m == 6 and 2e-3 or 2e-4)
  local d = te.extract(Y)
  local direct = 2 * N * O * os[3] * os[4] * Cc * 9
  assert(d:flop_ansor() == direct, "winograd FLOP attr: " .. d:flop_ansor() .. " vs " .. direct)
  assert(d:flop() == direct, "winograd AutoTVM FLOP: " .. d:flop() .. " vs " .. direct)
  -- the weight transform as its own op, then the pre-transformed path
  local U = topi.nn.winograd_weight_transform(Wt, m)
  assert(U.shape[1] == m + 2 and U.shape[3] == O and U.shape[4] == Cc)
  local Y2 = topi.nn.conv2d_winograd(X, U, { tile_size = m, padding = p, pre_transformed = true })
  check("winograd pre-transformed m=" .. m, run({ X, Wt }, { Y2 }, { xa, wa })[1], os, want, m == 6 and 2e-3 or 2e-4)
end

-- ---- dense, batch_matmul, matmul ---------------------------------------------------------

for trial = 1, 3 do
  local B, K, U = rnd(1, 4), rnd(1, 9), rnd(1, 7)
  local xa, xf = rand_array({ B, K })
  local wa, wf = rand_array({ U, K })
  local ba, bf = rand_array({ U })
  local X, Wt, Bi = te.placeholder({ B, K }, "float32", "X"), te.placeholder({ U, K }, "float32", "W"), te.placeholder({ U }, "float32", "b")
  local Y = topi.nn.dense(X, Wt, Bi)
  local want = {}
  for i = 0, B - 1 do for j = 0, U - 1 do
    local acc = bf[j + 1]
    for k = 0, K - 1 do acc = acc + xf[i * K + k + 1] * wf[j * K + k + 1] end
    want[i * U + j + 1] = acc
  end end
  check("dense", run({ X, Wt, Bi }, { Y }, { xa, wa, ba })[1], { B, U }, want)
end

for trial = 1, 3 do
  local B, M, K, N = rnd(1, 3), rnd(1, 5), rnd(1, 6), rnd(1, 5)
  local YB = trial == 3 and 1 or B
  local xa, xf = rand_array({ B, M, K })
  local ya, yf = rand_array({ YB, N, K })
  local X, Yt = te.placeholder({ B, M, K }, "float32", "X"), te.placeholder({ YB, N, K }, "float32", "Y")
  local Z = topi.nn.batch_matmul(X, Yt)
  local want = {}
  for b = 0, B - 1 do for i = 0, M - 1 do for j = 0, N - 1 do
    local acc, yb = 0, YB == 1 and 0 or b
    for k = 0, K - 1 do acc = acc + xf[(b * M + i) * K + k + 1] * yf[(yb * N + j) * K + k + 1] end
    want[(b * M + i) * N + j + 1] = acc
  end end end
  check("batch_matmul", run({ X, Yt }, { Z }, { xa, ya })[1], { B, M, N }, want)
end

-- ---- pooling ---------------------------------------------------------------------------------

local function ref_pool(x, xs, a)
  local N, Cc, H, W = xs[1], xs[2], xs[3], xs[4]
  local k, s, d, p = a.kernel, a.strides, a.dilation, a.padding
  local o = {}
  local inn = { H, W }
  for i = 1, 2 do
    local kd = (k[i] - 1) * d[i] + 1
    local span = inn[i] + p[i] + p[i + 2] - kd
    o[i] = (a.ceil_mode and math.ceil(span / s[i]) or math.floor(span / s[i])) + 1
    if a.ceil_mode and (o[i] - 1) * s[i] >= inn[i] + p[i] then o[i] = o[i] - 1 end
  end
  local out = {}
  for n = 0, N - 1 do for c = 0, Cc - 1 do for y = 0, o[1] - 1 do for xx = 0, o[2] - 1 do
    local mx, sum, cnt = -math.huge, 0, 0
    for ry = 0, k[1] - 1 do for rx = 0, k[2] - 1 do
      local iy, ix = y * s[1] + ry * d[1] - p[1], xx * s[2] + rx * d[2] - p[2]
      local inside = iy >= 0 and iy < H and ix >= 0 and ix < W
      if inside then
        local v = x[((n * Cc + c) * H + iy) * W + ix + 1]
        mx = math.max(mx, v); sum = sum + v
      end
      if a.count_include_pad then
        if iy < H + p[3] and ix < W + p[4] then cnt = cnt + 1 end
      elseif inside then
        cnt = cnt + 1
      end
    end end
    out[((n * Cc + c) * o[1] + y) * o[2] + xx + 1] = a.pool_type == "max" and mx or sum / math.max(cnt, 1)
  end end end end
  return out, { N, Cc, o[1], o[2] }
end

for trial = 1, 12 do
  local kh, kw = rnd(1, 3), rnd(1, 3)
  local a = { kernel = { kh, kw }, strides = { rnd(1, 3), rnd(1, 3) }, dilation = { 1, 1 },
              padding = { rnd(0, kh - 1), rnd(0, kw - 1), rnd(0, kh - 1), rnd(0, kw - 1) },
              pool_type = trial % 2 == 0 and "max" or "avg", ceil_mode = trial % 3 == 0,
              count_include_pad = trial % 4 < 2 }
  if trial % 5 == 0 then a.dilation = { 2, 2 } end
  local xs = { rnd(1, 2), rnd(1, 3), rnd((kh - 1) * a.dilation[1] + 1, 8), rnd((kw - 1) * a.dilation[2] + 1, 8) }
  local xa, xf = rand_array(xs)
  local X = te.placeholder(xs, "float32", "X")
  local Y = topi.nn.pool2d(X, a)
  local want, os = ref_pool(xf, xs, a)
  check("pool2d " .. a.pool_type .. " #" .. trial, run({ X }, { Y }, { xa })[1], os, want)
end

-- global avg/max pooling of xf: rows of win elements (the spatial dims), one per N*C
local function global_pool_ref(xf, rows, win, pt)
  local want = {}
  for r = 0, rows - 1 do
    local acc, mx = 0, -math.huge
    for i = 0, win - 1 do local v = xf[r * win + i + 1]; acc = acc + v; mx = math.max(mx, v) end
    want[r + 1] = pt == "avg" and acc / win or mx
  end
  return want
end

do
  local xs = { 2, 3, 5, 7 }
  local xa, xf = rand_array(xs)
  local X = te.placeholder(xs, "float32", "X")
  for _, pt in ipairs { "avg", "max" } do
    local Y = topi.nn.global_pool(X, pt)
    local want = global_pool_ref(xf, 6, 35, pt)
    check("global_pool " .. pt, run({ X }, { Y }, { xa })[1], { 2, 3, 1, 1 }, want)
    local oh, ow = 3, 2
    local Z = topi.nn.adaptive_pool(X, { oh, ow }, pt)
    want = {}
    for nc = 0, 5 do for y = 0, oh - 1 do for x = 0, ow - 1 do
      local y0, y1 = math.floor(y * 5 / oh), math.ceil((y + 1) * 5 / oh)
      local x0, x1 = math.floor(x * 7 / ow), math.ceil((x + 1) * 7 / ow)
      local acc, mx = 0, -math.huge
      for i = y0, y1 - 1 do for j = x0, x1 - 1 do
        local v = xf[nc * 35 + i * 7 + j + 1]; acc = acc + v; mx = math.max(mx, v)
      end end
      want[(nc * oh + y) * ow + x + 1] = pt == "avg" and acc / ((y1 - y0) * (x1 - x0)) or mx
    end end end
    check("adaptive_pool " .. pt, run({ X }, { Z }, { xa })[1], { 2, 3, oh, ow }, want)
  end
end

-- ---- element-wise, broadcast, norm -----------------------------------------------------------

do
  local xs = { 2, 3, 4 }
  local xa, xf = rand_array(xs)
  local X = te.placeholder(xs, "float32", "X")
  local unary = {
    { topi.nn.relu(X), function(v) return math.max(v, 0) end },
    { topi.nn.leaky_relu(X, 0.2), function(v) return v > 0 and v or 0.2 * v end },
    { topi.clip(X, -0.5, 0.25), function(v) return math.min(math.max(v, -0.5), 0.25) end },
    { topi.sigmoid(X), function(v) return 1 / (1 + math.exp(-v)) end },
    { topi.tanh(X), math.tanh },
    { topi.exp(X), math.exp },
    { topi.abs(X), math.abs },
    { topi.negative(X), function(v) return -v end },
  }
  for _, u in ipairs(unary) do
    local want = {}
    for i, v in ipairs(xf) do want[i] = u[2](v) end
    check(u[1].op.name, run({ X }, { u[1] }, { xa })[1], xs, want)
    assert(u[1].op.tag == "elemwise")
  end
end

for trial = 1, 6 do
  local s = { rnd(1, 3), rnd(1, 4), rnd(1, 3) }
  local sa, sb = {}, {}
  for i = 1, 3 do sa[i] = math.random() < 0.3 and 1 or s[i]; sb[i] = math.random() < 0.3 and 1 or s[i] end
  if trial % 2 == 0 then table.remove(sb, 1) end
  local aa, af = rand_array(sa)
  local ba, bf = rand_array(sb)
  local A, B = te.placeholder(sa, "float32", "A"), te.placeholder(sb, "float32", "B")
  local ops = { add = function(x, y) return x + y end, subtract = function(x, y) return x - y end,
                multiply = function(x, y) return x * y end, maximum = math.max, minimum = math.min,
                divide = function(x, y) return x / y end }
  local out = {}
  for i = 1, 3 do
    local x, y = sa[i], sb[i - (3 - #sb)] or 1
    out[i] = math.max(x, y)
  end
  local ast, bst = strides_of(sa), strides_of(sb)
  for name, f in pairs(ops) do
    local Y = topi[name](A, B)
    local want = {}
    for i = 0, out[1] - 1 do for j = 0, out[2] - 1 do for k = 0, out[3] - 1 do
      local idx = { i, j, k }
      local ai, bi = 0, 0
      for d = 1, 3 do ai = ai + (sa[d] == 1 and 0 or idx[d]) * ast[d] end
      for d = 1, #sb do local od = d + 3 - #sb; bi = bi + (sb[d] == 1 and 0 or idx[od]) * bst[d] end
      want[(i * out[2] + j) * out[3] + k + 1] = f(af[ai + 1], bf[bi + 1])
    end end end
    check(name .. " broadcast #" .. trial, run({ A, B }, { Y }, { aa, ba })[1], out, want, name == "divide" and 1e-2 or nil)
    assert(Y.op.tag == "broadcast")
  end
end

do
  local xs = { 2, 3, 2, 2 }
  local xa, xf = rand_array(xs)
  local ga, gf = rand_array({ 3 })
  local ba, bf = rand_array({ 3 })
  local ma, mf = rand_array({ 3 })
  local va = from_flat({ 3 }, { 0.5, 1.5, 2.0 })
  local X = te.placeholder(xs, "float32", "X")
  local G, Bt, Mn, V = te.placeholder({ 3 }, "float32", "g"), te.placeholder({ 3 }, "float32", "b"),
                       te.placeholder({ 3 }, "float32", "m"), te.placeholder({ 3 }, "float32", "v")
  local Y = topi.nn.batch_norm(X, G, Bt, Mn, V, { epsilon = 1e-3 })
  local Z = topi.nn.bias_add(X, Bt)
  local vf = { 0.5, 1.5, 2.0 }
  local want, want2 = {}, {}
  for i = 0, 23 do
    local c = math.floor(i / 4) % 3 + 1
    want[i + 1] = (xf[i + 1] - mf[c]) / math.sqrt(vf[c] + 1e-3) * gf[c] + bf[c]
    want2[i + 1] = xf[i + 1] + bf[c]
  end
  check("batch_norm", run({ X, G, Bt, Mn, V }, { Y }, { xa, ga, ba, ma, va })[1], xs, want)
  check("bias_add", run({ X, Bt }, { Z }, { xa, ba })[1], xs, want2)
  local Ci = topi.cast(X, "int32")
  local want3 = {}
  for i, v in ipairs(xf) do want3[i] = v >= 0 and math.floor(v) or math.ceil(v) end
  check("cast", run({ X }, { Ci }, { xa })[1], xs, want3, 0)
end

-- ---- softmax -----------------------------------------------------------------------------

for trial = 1, 4 do
  local xs = { rnd(1, 3), rnd(1, 5), rnd(1, 4) }
  local axis = rnd(-3, 2)
  local ax = axis < 0 and axis + 4 or axis + 1
  local xa, xf = rand_array(xs)
  local X = te.placeholder(xs, "float32", "X")
  local st = strides_of(xs)
  for _, lg in ipairs { false, true } do
    local Y = lg and topi.nn.log_softmax(X, { axis = axis }) or topi.nn.softmax(X, { axis = axis })
    local want = {}
    for i = 0, prod(xs) - 1 do
      local pos = math.floor(i / st[ax]) % xs[ax]
      local base = i - pos * st[ax]
      local mx, sum = -math.huge, 0
      for k = 0, xs[ax] - 1 do mx = math.max(mx, xf[base + k * st[ax] + 1]) end
      for k = 0, xs[ax] - 1 do sum = sum + math.exp(xf[base + k * st[ax] + 1] - mx) end
      want[i + 1] = lg and (xf[i + 1] - mx - math.log(sum)) or math.exp(xf[i + 1] - mx) / sum
    end
    check((lg and "log_softmax" or "softmax") .. " axis " .. axis, run({ X }, { Y }, { xa })[1], xs, want)
  end
end

-- ---- injective ------------------------------------------------------------------------------

do
  local xs = { 2, 3, 4 }
  local xa, xf = rand_array(xs)
  local ya, yf = rand_array({ 2, 2, 4 })
  local X, Yp = te.placeholder(xs, "float32", "X"), te.placeholder({ 2, 2, 4 }, "float32", "Y")
  -- concatenate on axis 1
  local Cc = topi.concatenate({ X, Yp }, 1)
  local want = {}
  for i = 0, 1 do for j = 0, 4 do for k = 0, 3 do
    want[(i * 5 + j) * 4 + k + 1] = j < 3 and xf[(i * 3 + j) * 4 + k + 1] or yf[(i * 2 + j - 3) * 4 + k + 1]
  end end end
  check("concatenate", run({ X, Yp }, { Cc }, { xa, ya })[1], { 2, 5, 4 }, want)
  -- split axis 2 at {1, 3}
  local parts = topi.split(X, { 1, 3 }, 2)
  assert(#parts == 3 and parts[2].shape[3] == 2)
  local res = run({ X }, parts, { xa })
  local bounds = { { 0, 1 }, { 1, 3 }, { 3, 4 } }
  for p = 1, 3 do
    local w, b0, b1 = {}, bounds[p][1], bounds[p][2]
    for i = 0, 5 do for k = b0, b1 - 1 do w[#w + 1] = xf[i * 4 + k + 1] end end
    check("split part " .. p, res[p], { 2, 3, b1 - b0 }, w)
  end
  -- reshape/flatten keep the flat order
  check("reshape", run({ X }, { topi.reshape(X, { 4, -1 }) }, { xa })[1], { 4, 6 }, xf)
  check("flatten", run({ X }, { topi.nn.flatten(X) }, { xa })[1], { 2, 12 }, xf)
  check("expand_dims", run({ X }, { topi.expand_dims(X, 1, 2) }, { xa })[1], { 2, 1, 1, 3, 4 }, xf)
  local E = topi.expand_dims(X, 0)
  check("squeeze", run({ X }, { topi.squeeze(E, 0) }, { xa })[1], xs, xf)
  -- transpose (2, 0, 1)
  local T = topi.transpose(X, { 2, 0, 1 })
  want = {}
  for k = 0, 3 do for i = 0, 1 do for j = 0, 2 do want[#want + 1] = xf[(i * 3 + j) * 4 + k + 1] end end end
  check("transpose", run({ X }, { T }, { xa })[1], { 4, 2, 3 }, want)
  -- pad
  local P = topi.nn.pad(X, { 0, 2, 1 }, { 1, 0, 3 }, 7.5)
  want = {}
  for i = 0, 2 do for j = 0, 4 do for k = 0, 7 do
    local si, sj, sk = i, j - 2, k - 1
    want[#want + 1] = (si < 2 and sj >= 0 and sk >= 0 and sk < 4) and xf[(si * 3 + sj) * 4 + sk + 1] or 7.5
  end end end
  check("pad", run({ X }, { P }, { xa })[1], { 3, 5, 8 }, want)
end

do
  local xs = { 2, 6, 3, 2 }
  local xa, xf = rand_array(xs)
  local X = te.placeholder(xs, "float32", "X")
  local H = topi.layout_transform(X, "NCHW", "NHWC")
  local want = {}
  for n = 0, 1 do for h = 0, 2 do for w = 0, 1 do for c = 0, 5 do
    want[#want + 1] = xf[((n * 6 + c) * 3 + h) * 2 + w + 1]
  end end end end
  check("layout NCHW->NHWC", run({ X }, { H }, { xa })[1], { 2, 3, 2, 6 }, want)
  local B = topi.layout_transform(X, "NCHW", "NCHW3c")
  want = {}
  for n = 0, 1 do for co = 0, 1 do for h = 0, 2 do for w = 0, 1 do for ci = 0, 2 do
    want[#want + 1] = xf[((n * 6 + co * 3 + ci) * 3 + h) * 2 + w + 1]
  end end end end end
  check("layout NCHW->NCHW3c", run({ X }, { B }, { xa })[1], { 2, 2, 3, 2, 3 }, want)
  -- (a fresh placeholder each: schedules find argument tensors by op name)
  local Bp = te.placeholder({ 2, 2, 3, 2, 3 }, "float32", "Bp")
  local back = topi.layout_transform(Bp, "NCHW3c", "NCHW")
  check("layout NCHW3c->NCHW", run({ Bp }, { back }, { from_flat({ 2, 2, 3, 2, 3 }, want) })[1], xs, xf)
  local Hp = te.placeholder({ 2, 3, 2, 6 }, "float32", "Hp")
  local hwant = run({ X }, { H }, { xa })[1]
  local round = topi.layout_transform(Hp, "NHWC", "NCHW")
  check("layout NHWC->NCHW", run({ Hp }, { round }, { hwant })[1], xs, xf)
end

-- ---- conv and pool over 1 and 3 spatial dims ---------------------------------------------------

-- Row-major offset of idx (0-based) in shape.
local function offset(shape, idx)
  local o = 0
  for i = 1, #shape do o = o * shape[i] + idx[i] end
  return o
end
-- Every index of shape (0-based lists), row-major order.
local function each_index(shape, fn)
  local idx = {}
  for i = 1, #shape do idx[i] = 0 end
  local n = prod(shape)
  for _ = 1, n do
    fn(idx)
    for i = #shape, 1, -1 do
      idx[i] = idx[i] + 1
      if idx[i] < shape[i] then break end
      idx[i] = 0
    end
  end
end

-- Data and kernel entries (indices or extents) of a D-d conv in its layout: {n, c, sp...} and
-- {o, i, k...} channels first, {n, sp..., c} and {k..., i, o} channels last (cl).
local function conv_nd_order(cl, D, n, c, sp, o, i, k)
  local xv, wv = { n }, {}
  if cl then
    for j = 1, D do xv[#xv + 1] = sp[j]; wv[j] = k[j] end
    xv[#xv + 1] = c; wv[D + 1] = i; wv[D + 2] = o
  else
    xv[2] = c
    for j = 1, D do xv[2 + j] = sp[j] end
    wv[1], wv[2] = o, i
    for j = 1, D do wv[2 + j] = k[j] end
  end
  return xv, wv
end

-- conv over D spatial dims, channels first (kernel O I K...) or last (K... I O).
local function ref_conv_nd(x, xs, w, ws, a, cl)
  local D = #xs - 2
  local N, Cc = xs[1], cl and xs[D + 2] or xs[2]
  local O, CG = cl and ws[D + 2] or ws[1], cl and ws[D + 1] or ws[2]
  local K, inn, os = {}, {}, { N }
  for i = 1, D do
    K[i] = cl and ws[i] or ws[2 + i]
    inn[i] = cl and xs[1 + i] or xs[2 + i]
  end
  local OS = {}
  for i = 1, D do
    OS[i] = math.floor((inn[i] + a.padding[i] + a.padding[D + i] - ((K[i] - 1) * a.dilation[i] + 1)) / a.strides[i]) + 1
  end
  if cl then for i = 1, D do os[#os + 1] = OS[i] end; os[#os + 1] = O
  else os[#os + 1] = O; for i = 1, D do os[#os + 1] = OS[i] end end
  local out = {}
  each_index(os, function(oi)
    local o = cl and oi[D + 2] or oi[2]
    local gi = math.floor(o / (O / a.groups))
    local acc = 0
    each_index(K, function(ki)
      local pos, inside = {}, true
      for i = 1, D do
        local y = cl and oi[1 + i] or oi[2 + i]
        pos[i] = y * a.strides[i] + ki[i] * a.dilation[i] - a.padding[i]
        if pos[i] < 0 or pos[i] >= inn[i] then inside = false end
      end
      if inside then
        for rc = 0, CG - 1 do
          local ci = gi * CG + rc
          local xi, wi = conv_nd_order(cl, D, oi[1], ci, pos, o, rc, ki)
          acc = acc + x[offset(xs, xi) + 1] * w[offset(ws, wi) + 1]
        end
      end
    end)
    out[offset(os, oi) + 1] = acc
  end)
  return out, os
end

for trial = 1, 8 do
  local D = trial <= 6 and 3 or 1
  local cl = trial % 2 == 0
  local g = trial % 3 == 0 and 2 or 1
  local N, CG, OG = rnd(1, 2), rnd(1, 3), rnd(1, 3)
  local Cc, O = CG * g, OG * g
  local K, a = {}, { strides = {}, dilation = {}, padding = {}, groups = g, layout = nil }
  for i = 1, D do
    K[i] = trial == 1 and 1 or rnd(1, 3)
    a.strides[i] = rnd(1, 2)
    if math.random() < 0.3 then a.strides[i] = K[i] + 1 end   -- stride > kernel
    a.dilation[i] = rnd(1, 2)
    a.padding[i], a.padding[D + i] = rnd(0, 3), rnd(0, 3)
  end
  local inn = {}
  for i = 1, D do inn[i] = rnd((K[i] - 1) * a.dilation[i] + 1, 6) end
  local xs, ws = conv_nd_order(cl, D, N, Cc, inn, O, CG, K)
  a.layout = D == 3 and (cl and "NDHWC" or "NCDHW") or (cl and "NWC" or "NCW")
  local xa, xf = rand_array(xs)
  local wa, wf = rand_array(ws)
  local X, Wt = te.placeholder(xs, "float32", "X"), te.placeholder(ws, "float32", "W")
  local Y = D == 3 and topi.nn.conv3d(X, Wt, a) or topi.nn.conv1d(X, Wt, a)
  local want, os = ref_conv_nd(xf, xs, wf, ws, a, cl)
  check("conv" .. D .. "d " .. a.layout .. " #" .. trial, run({ X, Wt }, { Y }, { xa, wa })[1], os, want)
  assert(Y.op.tag == (g > 1 and "group_" or "") .. "conv" .. D .. "d_" .. a.layout:lower())
end

-- conv1d_transpose / conv3d_transpose: scatter every input element through the kernel
for trial = 1, 4 do
  local D = trial <= 3 and 3 or 1
  local g = trial == 2 and 2 or 1
  local N, Cc, OG = rnd(1, 2), rnd(1, 2) * g, rnd(1, 2)
  local O = OG * g
  local K, s, d, p, op, inn, OS = {}, {}, {}, {}, {}, {}, {}
  for i = 1, D do
    K[i], s[i], d[i] = rnd(1, 3), rnd(1, 3), trial == 3 and 2 or 1
    p[i], p[D + i] = rnd(0, K[i] - 1), rnd(0, K[i] - 1)
    op[i] = rnd(0, s[i] - 1)
    inn[i] = rnd(2, 4)
    OS[i] = (inn[i] - 1) * s[i] + (K[i] - 1) * d[i] + 1 - p[i] - p[D + i] + op[i]
  end
  local ok = true
  for i = 1, D do if OS[i] < 1 then ok = false end end
  if ok then
    local xs, ws, os = { N, Cc }, { Cc, OG }, { N, O }
    for i = 1, D do xs[2 + i], ws[2 + i], os[2 + i] = inn[i], K[i], OS[i] end
    local xa, xf = rand_array(xs)
    local wa, wf = rand_array(ws)
    local want = {}
    for i = 1, prod(os) do want[i] = 0 end
    local CG = Cc / g
    each_index(xs, function(xi)
      local gi = math.floor(xi[2] / CG)
      for og = 0, OG - 1 do
        each_index(K, function(ki)
          local oi, inside = { xi[1], gi * OG + og }, true
          for i = 1, D do
            oi[2 + i] = xi[2 + i] * s[i] + ki[i] * d[i] - p[i]
            if oi[2 + i] < 0 or oi[2 + i] >= OS[i] then inside = false end
          end
          if inside then
            local wi = { xi[2], og }
            for i = 1, D do wi[2 + i] = ki[i] end
            local o = offset(os, oi) + 1
            want[o] = want[o] + xf[offset(xs, xi) + 1] * wf[offset(ws, wi) + 1]
          end
        end)
      end
    end)
    local X, Wt = te.placeholder(xs, "float32", "X"), te.placeholder(ws, "float32", "W")
    local a = { strides = s, padding = p, dilation = d, groups = g, output_padding = op }
    local Y = D == 3 and topi.nn.conv3d_transpose(X, Wt, a) or topi.nn.conv1d_transpose(X, Wt, a)
    check("conv" .. D .. "d_transpose #" .. trial, run({ X, Wt }, { Y }, { xa, wa })[1], os, want)
  end
end

-- pool3d (and pool1d) against a naive window loop, channels first and last
local function ref_pool_nd(x, xs, a, cl)
  local D = #xs - 2
  local inn, os, o = {}, {}, {}
  for i = 1, D do inn[i] = cl and xs[1 + i] or xs[2 + i] end
  for i = 1, D do
    local kd = (a.kernel[i] - 1) * a.dilation[i] + 1
    local span = inn[i] + a.padding[i] + a.padding[D + i] - kd
    o[i] = (a.ceil_mode and math.ceil(span / a.strides[i]) or math.floor(span / a.strides[i])) + 1
    if a.ceil_mode and (o[i] - 1) * a.strides[i] >= inn[i] + a.padding[i] then o[i] = o[i] - 1 end
  end
  for i = 1, #xs do os[i] = xs[i] end
  for i = 1, D do os[cl and 1 + i or 2 + i] = o[i] end
  local out = {}
  each_index(os, function(oi)
    local mx, sum, cnt = -math.huge, 0, 0
    each_index(a.kernel, function(ki)
      local xi, inside, counted = {}, true, true
      for j = 1, #oi do xi[j] = oi[j] end
      for i = 1, D do
        local dim = cl and 1 + i or 2 + i
        local p = oi[dim] * a.strides[i] + ki[i] * a.dilation[i] - a.padding[i]
        xi[dim] = p
        if p < 0 or p >= inn[i] then inside = false end
        if p >= inn[i] + a.padding[D + i] then counted = false end
      end
      if inside then
        local v = x[offset(xs, xi) + 1]
        mx = math.max(mx, v); sum = sum + v
      end
      if a.count_include_pad then
        if counted then cnt = cnt + 1 end
      elseif inside then
        cnt = cnt + 1
      end
    end)
    out[offset(os, oi) + 1] = a.pool_type == "max" and mx or sum / math.max(cnt, 1)
  end)
  return out, os
end

for trial = 1, 8 do
  local D = trial <= 6 and 3 or 1
  local cl = trial % 2 == 0
  local a = { kernel = {}, strides = {}, dilation = {}, padding = {},
              pool_type = trial % 4 < 2 and "max" or "avg", ceil_mode = trial % 3 == 0,
              count_include_pad = trial % 5 < 2 }
  for i = 1, D do
    a.kernel[i] = rnd(1, 3)
    a.strides[i] = rnd(1, 3)
    a.dilation[i] = trial == 5 and 2 or 1
    a.padding[i], a.padding[D + i] = rnd(0, a.kernel[i] - 1), rnd(0, a.kernel[i] - 1)
  end
  local xs = { rnd(1, 2) }
  if not cl then xs[2] = rnd(1, 3) end
  for i = 1, D do xs[#xs + 1] = rnd((a.kernel[i] - 1) * a.dilation[i] + 1, 6) end
  if cl then xs[#xs + 1] = rnd(1, 3) end
  a.layout = D == 3 and (cl and "NDHWC" or "NCDHW") or (cl and "NWC" or "NCW")
  local xa, xf = rand_array(xs)
  local X = te.placeholder(xs, "float32", "X")
  local Y = D == 3 and topi.nn.pool3d(X, a) or topi.nn.pool1d(X, a)
  local want, os = ref_pool_nd(xf, xs, a, cl)
  check("pool" .. D .. "d " .. a.pool_type .. " " .. a.layout .. " #" .. trial, run({ X }, { Y }, { xa })[1], os, want)
end

do
  local xs = { 2, 3, 4, 3, 5 }
  local xa, xf = rand_array(xs)
  local X = te.placeholder(xs, "float32", "X")
  for _, pt in ipairs { "avg", "max" } do
    local Y = topi.nn.global_pool(X, pt)
    local want = global_pool_ref(xf, 6, 60, pt)
    check("global_pool3d " .. pt, run({ X }, { Y }, { xa })[1], { 2, 3, 1, 1, 1 }, want)
  end
end

-- ---- patterns and errors -----------------------------------------------------------------

assert(topi.pattern("relu") == "elemwise" and topi.pattern("add") == "broadcast")
assert(topi.pattern("transpose") == "injective" and topi.pattern("conv2d") == "out_elemwise_fusable")
assert(topi.pattern("softmax") == "opaque" and topi.pattern("nope") == nil)

local function expect_error(msg, fn)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error: " .. msg)
  err = tostring(err):gsub("^[^:]*:%d+: ", "")
  if err ~= msg then error(string.format("\n  got:      %s\n  expected: %s", err, msg), 2) end
end
do
  local X = te.placeholder({ 1, 3, 5, 5 }, "float32", "X")
  local W4 = te.placeholder({ 2, 4, 3, 3 }, "float32", "W")
  local W7 = te.placeholder({ 2, 3, 7, 7 }, "float32", "W")
  expect_error("conv2d: strides must be positive, got (0, 1) for data (1, 3, 5, 5) and kernel (2, 3, 7, 7)",
               function() topi.nn.conv2d(X, W7, { strides = { 0, 1 } }) end)
  expect_error("conv2d: kernel 7x7 (dilated 7x7) is larger than the padded input 5x5 (padding (0, 0, 0, 0)) for data (1, 3, 5, 5) and kernel (2, 3, 7, 7)",
               function() topi.nn.conv2d(X, W7, {}) end)
  expect_error("conv2d: channel mismatch: data has 3 channels (groups=1) but kernel expects 4 for data (1, 3, 5, 5) and kernel (2, 4, 3, 3)",
               function() topi.nn.conv2d(X, W4, {}) end)
  local X4 = te.placeholder({ 1, 4, 5, 5 }, "float32", "X")
  expect_error("conv2d: groups=3 does not divide 4 input channels for data (1, 4, 5, 5) and kernel (2, 4, 3, 3)",
               function() topi.nn.conv2d(X4, W4, { groups = 3 }) end)
end

print(string.format("test_topi: %d numeric checks passed", count))
