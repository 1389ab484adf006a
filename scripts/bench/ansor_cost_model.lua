-- Benchmark: the auto-scheduler's feature extraction and cost model on the host CPU, against
-- AutoTVM's (itervar and curve features, the template tuner's XGBoost model) on the same
-- inputs in the same run. States are N random tilings of resnet-18's 64x56x56 3x3 conv2d
-- (an Ansor-like CPU sketch: cache write, multi-level tiles, pad per tile, parallel outer
-- loop, vectorized inner loop, auto-unroll), lowered once.
--
--   tunelua scripts/bench/ansor_cost_model.lua [N=2048] [repeats=9]
--
-- Tables (medians of the repeats):
--   features   ms per state, single calls (one thread): per-store rows vs itervar and curve;
--              and the batch of N on 1 and 2 threads
--   model      fit time for 64/256/512 states (throughput: a synthetic function of the
--              tiling, the model only has to rank), predict time for N states with
--              nthread 1 and 2, vs the template tuner's XGBoost (itervar rows, reg loss)
--              predicting N rows
local ffi = require "ffi"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local tl = require "tunelua"
local core = require "tunelua.core"
local stats = require "tunelua.stats"
local cm = require "tunelua.auto_scheduler.cost_model"
local auto_scheduler = require "tunelua.auto_scheduler"

local C, ctx = core.C, core.ctx
local N = tonumber(arg and arg[1]) or 2048
local REPEATS = tonumber(arg and arg[2]) or 9
local NF = cm.num_features

local x = te.placeholder({1, 64, 56, 56}, "float32", "X")
local w = te.placeholder({64, 64, 3, 3}, "float32", "W")
local y = topi.nn.conv2d(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })

local function divisors(n)
  local d = {}
  for i = 1, n do if n % i == 0 then d[#d + 1] = i end end
  return d
end
local seed = 7
local function pick(t)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return t[1 + seed % #t]
end
local D64, D56 = divisors(64), divisors(56)

-- a sketch with its tile sizes filled: ff into [f1, f2], yy into [y1, y2], xx into [x1], rc into [r]
local function state()
  local f2 = pick(D64)
  local f1 = pick(divisors(math.floor(64 / f2)))
  local y2 = pick(D56)
  local y1 = pick(divisors(math.floor(56 / y2)))
  local x1 = pick({ 1, 2, 4, 7, 8, 14 })
  local r = pick({ 1, 2, 4, 8, 16, 32 })
  local unroll = pick({ 0, 16, 64, 512 })
  local steps = string.format(
    '[["CHW", 3, "local"], ["SP", 4, 1, 64, [%d, %d], 1], ["SP", 4, 4, 56, [%d, %d], 1],'
    .. ' ["SP", 4, 7, 56, [%d], 1], ["RE", 4, [0, 1, 4, 7, 2, 5, 8, 3, 6]],'
    .. ' ["FU", 4, [0, 1, 2, 3]], ["AN", 4, 0, 3], ["CA", 3, 4, 0],'
    .. ' ["SP", 3, 4, 64, [%d], 1], ["RE", 3, [4, 5, 6, 7, 0, 1, 2, 3]],'
    .. ' ["CA", 1, 3, 0], ["AN", 3, 7, 2], ["PR", 3, 0, "auto_unroll_max_step$%d"]]',
    f1, f2, y1, y2, x1, r, unroll)
  local s = te.create_schedule(y.op):apply_steps(steps)
  -- a synthetic throughput: prefers wide vectors, a mid-sized register tile and deep rc tiles
  local tile = f2 * x1
  local tp = (1 + math.min(f2, 16)) * (tile >= 16 and tile <= 128 and 4 or 1) * (1 + math.log(r)) * 1e9
  return s, tp
end

io.write(string.format("lowering %d random tilings of conv2d 1x64x56x56 k3 ...\n", N))
local ls, tps = {}, {}
local t0 = C.tl_now()
for i = 1, N do
  local s, tp = state()
  ls[i] = tl.lower(s, { x, w, y })
  tps[i] = tp
end
io.write(string.format("  %.3f ms per state to lower\n\n", (C.tl_now() - t0) / N * 1e3))

local function median_time(fn)
  local ts = {}
  for r = 1, REPEATS do
    local a = C.tl_now()
    fn()
    ts[r] = C.tl_now() - a
  end
  return stats.median(ts)
end
-- medians of several functions timed in turn within each repeat (on a shared machine the
-- peers see the same load)
local function median_times(fns)
  local ts = {}
  for k = 1, #fns do ts[k] = {} end
  for r = 1, REPEATS do
    for k, fn in ipairs(fns) do
      local a = C.tl_now()
      fn()
      ts[k][r] = C.tl_now() - a
    end
  end
  local out = {}
  for k = 1, #fns do out[k] = stats.median(ts[k]) end
  return out
end

-- ---- features --------------------------------------------------------------------------------------------
local M = math.min(N, 256)
local rows = ffi.new("float *[1]")
local buf = ffi.new("float[?]", 65536)
local nout = ffi.new("int[1]")
local function atvm(kind)
  return function()
    for i = 1, M do
      assert(C.tl_tune_lowered_features(ctx, ls[i].handle, kind, buf, 65536, nout) == 0, core.errmsg())
    end
  end
end
local tf = median_times {
  function()
    for i = 1, M do
      local n = C.tl_ansor_features(ctx, ls[i].handle, nil, rows)
      assert(n >= 0, core.errmsg())
      ffi.C.free(rows[0])
    end
  end,
  atvm(0), atvm(2),
  function() cm.features(ls, nil, 1) end,
  function() cm.features(ls, nil, 2) end,
}
local t_ansor, t_iter, t_curve, t_b1, t_b2 = tf[1] / M, tf[2] / M, tf[3] / M, tf[4], tf[5]
local feats = cm.features(ls, nil, 2)
print(string.format("features of one state (median of %d, %d states, 1 thread)", REPEATS, M))
print(string.format("  %-34s %10s %10s", "", "ms/state", "vs ansor"))
print(string.format("  %-34s %10.4f %10s", "ansor per-store (" .. string.format("%.1f", feats.nrows / N)
                    .. " rows of 164)", t_ansor * 1e3, "1.00"))
print(string.format("  %-34s %10.4f %10.2f", "autotvm itervar", t_iter * 1e3, t_iter / t_ansor))
print(string.format("  %-34s %10.4f %10.2f", "autotvm curve", t_curve * 1e3, t_curve / t_ansor))
print(string.format("batch of %d states: 1 thread %.1f ms, 2 threads %.1f ms (x%.2f)\n", N, t_b1 * 1e3,
                    t_b2 * 1e3, t_b1 / t_b2))

-- ---- model ---------------------------------------------------------------------------------------------------
local function subset(f, a, b)   -- states a..b of f as a Features object
  local n = b - a + 1
  local r0 = f.row_off[a - 1]
  local off = ffi.new("int[?]", n + 1)
  for i = 0, n do off[i] = f.row_off[a - 1 + i] - r0 end
  local rows_ = ffi.new("float[?]", math.max(1, off[n] * NF))
  ffi.copy(rows_, f.rows + r0 * NF, off[n] * NF * 4)
  return setmetatable({ rows = rows_, row_off = off, n = n, nrows = off[n] }, cm.Features_mt)
end
print("model (median of " .. REPEATS .. ")")
print(string.format("  %-46s %10s", "", "ms"))
for _, ns in ipairs { 64, 256, 512 } do
  if ns <= N then
    local tp = {}
    for i = 1, ns do tp[i] = tps[i] end
    local sub = subset(feats, 1, ns)
    local t = median_time(function()
      local m = auto_scheduler.XGBModel { seed = 1, num_warmup_sample = 0 }
      m:update(sub, tp)
    end)
    print(string.format("  %-46s %10.1f", "xgb pack-sum fit, " .. ns .. " states", t * 1e3))
  end
end
local ntrain = math.min(512, N)
local tp = {}
for i = 1, ntrain do tp[i] = tps[i] end
local spearman_of
do
  local function ranks(v)
    local idx = {}
    for i = 1, #v do idx[i] = i end
    table.sort(idx, function(p, q) return v[p] < v[q] end)
    local r = {}
    for pos, i in ipairs(idx) do r[i] = pos end
    return r
  end
  spearman_of = function(a, b)
    local ra, rb = ranks(a), ranks(b)
    local n, d = #a, 0
    for i = 1, n do d = d + (ra[i] - rb[i]) ^ 2 end
    return 1 - 6 * d / (n * (n * n - 1))
  end
end
local preds = {}
local models = {}
for _, nt in ipairs { 1, 2 } do
  models[nt] = auto_scheduler.XGBModel { seed = 1, num_warmup_sample = 0, nthread = nt }
  models[nt]:update(subset(feats, 1, ntrain), tp)
end
-- peer: the template tuner's model on itervar rows (padded to the longest)
local width = 0
for i = 1, N do
  assert(C.tl_tune_lowered_features(ctx, ls[i].handle, 0, buf, 65536, nout) == 0)
  width = math.max(width, nout[0])
end
local X = ffi.new("float[?]", N * width)
for i = 1, N do
  C.tl_tune_lowered_features(ctx, ls[i].handle, 0, X + (i - 1) * width, width, nout)
end
local mp = ffi.new("tl_tune_model *[1]")
assert(C.tl_tune_model_new(ctx, nil, 0, 0, 1, 1, mp) == 0, core.errmsg())
local tm = ffi.gc(mp[0], C.tl_tune_model_free)
local ys = ffi.new("double[?]", ntrain)
for i = 1, ntrain do ys[i - 1] = tps[i] end
assert(C.tl_tune_model_fit_matrix(ctx, tm, X, ntrain, width, ys, 64) == 0, core.errmsg())
local out = ffi.new("double[?]", N)
local tp3 = median_times {
  function() preds[1] = models[1]:predict(feats) end,
  function() preds[2] = models[2]:predict(feats) end,
  function() assert(C.tl_tune_model_predict_matrix(ctx, tm, X, N, width, out) == 0, core.errmsg()) end,
}
for nt = 1, 2 do
  print(string.format("  %-46s %10.2f", "xgb pack-sum predict " .. N .. " states, nthread " .. nt, tp3[nt] * 1e3))
end
print(string.format("  %-46s %10.2f", "peer: autotvm xgb predict " .. N .. " rows (" .. width .. " itervar)",
                    tp3[3] * 1e3))
-- how well each ranks the states it was not trained on
if N > ntrain then
  local a, b, c = {}, {}, {}
  for i = ntrain + 1, N do
    a[#a + 1], b[#b + 1], c[#c + 1] = preds[1][i], tps[i], out[i - 1]
  end
  print(string.format("held-out Spearman vs the synthetic throughput: pack-sum %.3f, autotvm %.3f",
                      spearman_of(a, b), spearman_of(c, b)))
end
