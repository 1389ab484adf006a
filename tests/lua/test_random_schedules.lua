-- Random legal schedules, checked against naive references.
--
-- Six operators (matmul, conv2d NCHW and NHWC with stride and padding,
-- depthwise conv2d, max pooling with padding, softmax), each under N random
-- schedules (default 50) drawn by a seeded generator: cache_write to a local
-- stage, cache_read of an input, compute_at of producers (padding, cache and
-- intermediate stages) at random legal loops of their consumers, inlining,
-- random splits (factor and nparts, divisible or not, one or two levels),
-- reorders, fuses, vectorize, unroll, parallel and unroll pragmas. Every
-- schedule is lowered, compiled (-O1) and run on random data; the output
-- must match a naive Lua reference (rel. error < 1e-5), and replaying the
-- schedule's step list must give the same lowered code.
--
--   TUNELUA_RANDOM_SEED=n  another seed (printed on failure with the steps)
--   TUNELUA_RANDOM_N=n     schedules per operator
local tl = require "tunelua"
local te = require "tunelua.te"
local schedule = require "tunelua.schedule"
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = tl.nd
local C = core.C

local create_schedule = te.create_schedule or schedule.create
local SEED = tonumber(os.getenv("TUNELUA_RANDOM_SEED") or "") or 20240607
local NSCHED = tonumber(os.getenv("TUNELUA_RANDOM_N") or "") or 50

-- ---- a reproducible generator (xorshift64*, independent of math.random) -------

local Rng = {}
Rng.__index = Rng
local function new_rng(seed)
  local st = ffi.new("uint64_t[1]", 0x9E3779B97F4A7C15ULL + seed * 0x100000001B3ULL)
  return setmetatable({ st = st }, Rng)
end
function Rng:next()   -- uniform in [0, 1)
  local x = self.st[0]
  x = bit.bxor(x, bit.rshift(x, 12))
  x = bit.bxor(x, bit.lshift(x, 25))
  x = bit.bxor(x, bit.rshift(x, 27))
  self.st[0] = x
  local r = x * 0x2545F4914F6CDD1DULL
  return tonumber(bit.rshift(r, 11)) / 9007199254740992
end
function Rng:int(lo, hi) return lo + math.floor(self:next() * (hi - lo + 1)) end
function Rng:chance(p) return self:next() < p end
function Rng:pick(list) return list[self:int(1, #list)] end

-- ---- operators and references -------------------------------------------------------

local function idx4(shape, a, b, c, d)   -- 0-based row-major offset
  return ((a * shape[2] + b) * shape[3] + c) * shape[4] + d
end

local function flat(arr) return arr:flat() end

local ops = {}

ops[#ops + 1] = function()
  local M, N, K = 13, 17, 10
  local A = te.placeholder({M, K}, "float32", "mm_A")
  local B = te.placeholder({K, N}, "float32", "mm_B")
  local k = te.reduce_axis({0, K}, "k")
  local Cc = te.compute({M, N}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "mm_C")
  return { name = "matmul", out = Cc, inputs = { A, B }, ref = function(a, b)
    local out = {}
    for i = 0, M - 1 do
      for j = 0, N - 1 do
        local acc = 0
        for z = 0, K - 1 do acc = acc + a[i * K + z + 1] * b[z * N + j + 1] end
        out[i * N + j + 1] = acc
      end
    end
    return out
  end }
end

local function padded(X, shape, pad, value, name, layout)
  local ps = {}
  for d = 1, 4 do ps[d] = shape[d] end
  local hd, wd = layout == "NHWC" and 2 or 3, layout == "NHWC" and 3 or 4
  ps[hd], ps[wd] = shape[hd] + 2 * pad, shape[wd] + 2 * pad
  return te.compute(ps, function(a, b, c, d)
    local ax = { a, b, c, d }
    local h, w = ax[hd], ax[wd]
    local inside = te.all(te.ge(h, pad), te.lt(h, shape[hd] + pad), te.ge(w, pad), te.lt(w, shape[wd] + pad))
    local src = { a, b, c, d }
    src[hd], src[wd] = h - pad, w - pad
    return te.if_then_else(inside, X(src[1], src[2], src[3], src[4]), value)
  end, name)
end

ops[#ops + 1] = function()   -- conv2d NCHW, stride 2, pad 1
  local N, CI, H, W, CO, KS, S, P = 1, 3, 9, 10, 4, 3, 2, 1
  local OH, OW = math.floor((H + 2 * P - KS) / S) + 1, math.floor((W + 2 * P - KS) / S) + 1
  local X = te.placeholder({N, CI, H, W}, "float32", "c1_X")
  local Wt = te.placeholder({CO, CI, KS, KS}, "float32", "c1_W")
  local Pd = padded(X, { N, CI, H, W }, P, 0.0, "c1_pad", "NCHW")
  local rc = te.reduce_axis({0, CI}, "rc")
  local ry = te.reduce_axis({0, KS}, "ry")
  local rx = te.reduce_axis({0, KS}, "rx")
  local Y = te.compute({N, CO, OH, OW}, function(n, f, y, x)
    return te.sum(Pd(n, rc, y * S + ry, x * S + rx) * Wt(f, rc, ry, rx), { rc, ry, rx })
  end, "c1_conv")
  return { name = "conv2d_nchw", out = Y, inputs = { X, Wt }, ref = function(x, w)
    local out = {}
    for f = 0, CO - 1 do
      for y = 0, OH - 1 do
        for xx = 0, OW - 1 do
          local acc = 0
          for c = 0, CI - 1 do
            for a = 0, KS - 1 do
              for b = 0, KS - 1 do
                local h, v = y * S + a - P, xx * S + b - P
                if h >= 0 and h < H and v >= 0 and v < W then
                  acc = acc + x[idx4({ N, CI, H, W }, 0, c, h, v) + 1] * w[idx4({ CO, CI, KS, KS }, f, c, a, b) + 1]
                end
              end
            end
          end
          out[idx4({ N, CO, OH, OW }, 0, f, y, xx) + 1] = acc
        end
      end
    end
    return out
  end }
end

ops[#ops + 1] = function()   -- conv2d NHWC (HWIO weights), stride 2, pad 1
  local N, H, W, CI, CO, KS, S, P = 1, 10, 9, 3, 4, 3, 2, 1
  local OH, OW = math.floor((H + 2 * P - KS) / S) + 1, math.floor((W + 2 * P - KS) / S) + 1
  local X = te.placeholder({N, H, W, CI}, "float32", "c2_X")
  local Wt = te.placeholder({KS, KS, CI, CO}, "float32", "c2_W")
  local Pd = padded(X, { N, H, W, CI }, P, 0.0, "c2_pad", "NHWC")
  local ry = te.reduce_axis({0, KS}, "ry")
  local rx = te.reduce_axis({0, KS}, "rx")
  local rc = te.reduce_axis({0, CI}, "rc")
  local Y = te.compute({N, OH, OW, CO}, function(n, y, x, f)
    return te.sum(Pd(n, y * S + ry, x * S + rx, rc) * Wt(ry, rx, rc, f), { ry, rx, rc })
  end, "c2_conv")
  return { name = "conv2d_nhwc", out = Y, inputs = { X, Wt }, ref = function(x, w)
    local out = {}
    for y = 0, OH - 1 do
      for xx = 0, OW - 1 do
        for f = 0, CO - 1 do
          local acc = 0
          for a = 0, KS - 1 do
            for b = 0, KS - 1 do
              for c = 0, CI - 1 do
                local h, v = y * S + a - P, xx * S + b - P
                if h >= 0 and h < H and v >= 0 and v < W then
                  acc = acc + x[idx4({ N, H, W, CI }, 0, h, v, c) + 1] * w[idx4({ KS, KS, CI, CO }, a, b, c, f) + 1]
                end
              end
            end
          end
          out[idx4({ N, OH, OW, CO }, 0, y, xx, f) + 1] = acc
        end
      end
    end
    return out
  end }
end

ops[#ops + 1] = function()   -- depthwise conv2d NCHW, stride 1, pad 1
  local N, CH, H, W, KS, P = 1, 4, 9, 8, 3, 1
  local X = te.placeholder({N, CH, H, W}, "float32", "dw_X")
  local Wt = te.placeholder({CH, 1, KS, KS}, "float32", "dw_W")
  local Pd = padded(X, { N, CH, H, W }, P, 0.0, "dw_pad", "NCHW")
  local ry = te.reduce_axis({0, KS}, "ry")
  local rx = te.reduce_axis({0, KS}, "rx")
  local Y = te.compute({N, CH, H, W}, function(n, c, y, x)
    return te.sum(Pd(n, c, y + ry, x + rx) * Wt(c, 0, ry, rx), { ry, rx })
  end, "dw_conv")
  return { name = "depthwise_conv2d", out = Y, inputs = { X, Wt }, ref = function(x, w)
    local out = {}
    for c = 0, CH - 1 do
      for y = 0, H - 1 do
        for xx = 0, W - 1 do
          local acc = 0
          for a = 0, KS - 1 do
            for b = 0, KS - 1 do
              local h, v = y + a - P, xx + b - P
              if h >= 0 and h < H and v >= 0 and v < W then
                acc = acc + x[idx4({ N, CH, H, W }, 0, c, h, v) + 1] * w[idx4({ CH, 1, KS, KS }, c, 0, a, b) + 1]
              end
            end
          end
          out[idx4({ N, CH, H, W }, 0, c, y, xx) + 1] = acc
        end
      end
    end
    return out
  end }
end

ops[#ops + 1] = function()   -- max pool 3x3, stride 2, pad 1
  local N, CH, H, W, KS, S, P = 1, 3, 9, 10, 3, 2, 1
  local OH, OW = math.floor((H + 2 * P - KS) / S) + 1, math.floor((W + 2 * P - KS) / S) + 1
  local X = te.placeholder({N, CH, H, W}, "float32", "mp_X")
  local Pd = padded(X, { N, CH, H, W }, P, te.min_value("float32"), "mp_pad", "NCHW")
  local ry = te.reduce_axis({0, KS}, "ry")
  local rx = te.reduce_axis({0, KS}, "rx")
  local Y = te.compute({N, CH, OH, OW}, function(n, c, y, x)
    return te.max(Pd(n, c, y * S + ry, x * S + rx), { ry, rx })
  end, "mp_pool")
  return { name = "max_pool2d", out = Y, inputs = { X }, ref = function(x)
    local out = {}
    for c = 0, CH - 1 do
      for y = 0, OH - 1 do
        for xx = 0, OW - 1 do
          local m = -math.huge
          for a = 0, KS - 1 do
            for b = 0, KS - 1 do
              local h, v = y * S + a - P, xx * S + b - P
              if h >= 0 and h < H and v >= 0 and v < W then m = math.max(m, x[idx4({ N, CH, H, W }, 0, c, h, v) + 1]) end
            end
          end
          out[idx4({ N, CH, OH, OW }, 0, c, y, xx) + 1] = m
        end
      end
    end
    return out
  end }
end

ops[#ops + 1] = function()   -- softmax over the last axis, in four stages
  local M, N = 6, 13
  local X = te.placeholder({M, N}, "float32", "sm_X")
  local j1 = te.reduce_axis({0, N}, "j1")
  local mx = te.compute({M}, function(i) return te.max(X(i, j1), { j1 }) end, "sm_max")
  local ex = te.compute({M, N}, function(i, j) return te.exp(X(i, j) - mx(i)) end, "sm_exp")
  local j2 = te.reduce_axis({0, N}, "j2")
  local sm = te.compute({M}, function(i) return te.sum(ex(i, j2), { j2 }) end, "sm_sum")
  local Y = te.compute({M, N}, function(i, j) return ex(i, j) / sm(i) end, "sm_out")
  return { name = "softmax", out = Y, inputs = { X }, lo = -2, hi = 2, ref = function(x)
    local out = {}
    for i = 0, M - 1 do
      local m = -math.huge
      for j = 0, N - 1 do m = math.max(m, x[i * N + j + 1]) end
      local sum = 0
      for j = 0, N - 1 do sum = sum + math.exp(x[i * N + j + 1] - m) end
      for j = 0, N - 1 do out[i * N + j + 1] = math.exp(x[i * N + j + 1] - m) / sum end
    end
    return out
  end }
end

-- ---- the random schedule generator ------------------------------------------------------

local stats = {}
local function count(what) stats[what] = (stats[what] or 0) + 1 end

-- The DAG of the schedule, read through the C API (stage i = op i).
local function stage_info(s)
  local h = s.handle
  local dag = C.tl_sched_dag(h)
  local n = C.tl_sched_num_stages(h)
  local info = {}
  for i = 0, n - 1 do
    info[i] = { name = ffi.string(C.tl_sched_stage_name(h, i)),
                placeholder = C.tl_sched_stage_op_kind(h, i) == C.TL_DAG_PLACEHOLDER,
                reduce = C.tl_dag_op_nreduce(dag, i) > 0, consumers = {} }
  end
  for j = 0, n - 1 do
    for q = 0, C.tl_dag_op_ninputs(dag, j) - 1 do
      local p = C.tl_dag_tensor_op(dag, C.tl_dag_op_input(dag, j, q))
      local c = info[p].consumers
      c[#c + 1] = j
    end
  end
  return info, n
end

-- Position where stage r's attachment chain meets stage q, or nil.
local function meets(s, r, q)
  local h = s.handle
  local as, ai = ffi.new("int[1]"), ffi.new("int[1]")
  while true do
    local kind = C.tl_sched_stage_compute_at(h, r, as, ai)
    if kind ~= C.TL_CA_ITER then return nil end
    if as[0] == q then return ai[0] end
    r = as[0]
  end
end

local function effective_consumers(s, info, p, out)
  out = out or {}
  for _, c in ipairs(info[p].consumers) do
    if C.tl_sched_stage_compute_at(s.handle, c, nil, nil) == C.TL_CA_INLINED then
      effective_consumers(s, info, c, out)
    else
      out[#out + 1] = c
    end
  end
  return out
end

local function iter_kind(s, id, pos) return C.tl_sched_iter_kind(s.handle, id, pos) end

-- Splits, reorder, fuse and annotations on one stage.
local function transform(s, rng, name)
  local st = s:stage(name)
  local h = s.handle
  local id = C.tl_sched_stage_find(h, name)
  for _, ax in ipairs(st.iters) do
    local ext = ax.extent
    if ext > 1 and rng:chance(0.55) then
      local f
      if rng:chance(0.5) then    -- a divisor
        local divs = {}
        for d = 1, ext do if ext % d == 0 then divs[#divs + 1] = d end end
        f = rng:pick(divs)
      else
        f = rng:int(1, ext + 2)
      end
      if ext % f ~= 0 then count("split, non-divisible") end
      if rng:chance(0.2) and ext > 3 then
        st:split_n(ax, { rng:int(1, 3), rng:int(1, 4) })
        count("split, two levels")
      elseif rng:chance(0.25) then
        st:split(ax, { nparts = f })
        count("split, nparts")
      else
        st:split(ax, { factor = f })
        count("split, factor")
      end
    end
  end
  local iters = st.iters
  if #iters > 1 and rng:chance(0.6) then
    for i = #iters, 2, -1 do
      local j = rng:int(1, i)
      iters[i], iters[j] = iters[j], iters[i]
    end
    st:reorder(iters)
    count("reorder")
  end
  iters = st.iters
  if #iters > 2 and rng:chance(0.35) then
    local p = rng:int(0, #iters - 2)
    if iter_kind(s, id, p) == 0 and iter_kind(s, id, p + 1) == 0 then
      st:fuse(iters[p + 1], iters[p + 2])
      count("fuse")
    end
  end
  iters = st.iters
  local n = #iters
  local used = {}
  if iter_kind(s, id, 0) == 0 and rng:chance(0.3) then
    st:parallel(iters[1])
    used[1] = true
    count("parallel")
  end
  if n > 1 and not used[n] and iter_kind(s, id, n - 1) == 0 and iters[n].extent <= 64 and rng:chance(0.4) then
    st:vectorize(iters[n])
    used[n] = true
    count("vectorize")
  end
  local u = rng:int(1, n)
  if not used[u] and iters[u].extent <= 8 and rng:chance(0.3) then
    st:unroll(iters[u])
    count("unroll")
  end
  if rng:chance(0.1) then
    st:pragma(iters[1], "auto_unroll_max_step", rng:pick({ 4, 16, 64 }))
    count("pragma")
  end
end

local function random_schedule(spec, rng)
  local s = create_schedule(spec.out.op)
  local out_name = spec.out.op.name
  local info = stage_info(s)
  -- stage-adding steps first
  local out_id = C.tl_sched_stage_find(s.handle, out_name)
  if info[out_id].reduce and rng:chance(0.35) then
    s:cache_write(spec.out, "local")
    count("cache_write")
  end
  if rng:chance(0.25) then
    local inp = rng:pick(spec.inputs)
    info = stage_info(s)
    local id = C.tl_sched_stage_find(s.handle, inp.op.name)
    local readers = {}
    for _, c in ipairs(info[id].consumers) do readers[#readers + 1] = info[c].name end
    s:cache_read(inp, rng:pick({ "local", "shared", "global" }), readers)
    count("cache_read")
  end
  local n
  info, n = stage_info(s)
  -- consumers before producers
  for id = n - 1, 0, -1 do
    local si = info[id]
    if not si.placeholder then
      local name = si.name
      local inlined = false
      if name ~= out_name then
        local r = rng:next()
        if not si.reduce and r < 0.3 then
          s:stage(name):compute_inline()
          inlined = true
          count("compute_inline")
        elseif r < 0.85 then
          -- a consumer Q and a loop level under which every reader is
          local E = effective_consumers(s, info, id)
          local cands = {}
          for _, q in ipairs(E) do
            local lmax = C.tl_sched_num_iters(s.handle, q) - 1
            for _, r2 in ipairs(E) do
              if r2 ~= q then
                local p = meets(s, r2, q)
                if not p then lmax = -1 else lmax = math.min(lmax, p) end
              end
            end
            if lmax >= 0 then cands[#cands + 1] = { q = q, lmax = lmax } end
          end
          if #cands > 0 then
            local c = rng:pick(cands)
            local qst = s:stage(info[c.q].name)
            s:stage(name):compute_at(qst, qst.iters[rng:int(0, c.lmax) + 1])
            count("compute_at")
          end
        end
      end
      if not inlined then transform(s, rng, name) end
    end
  end
  return s
end

-- ---- the run ------------------------------------------------------------------------------

local t0 = os.clock()
local total, compiles = 0, 0
for oi, mk in ipairs(ops) do
  local spec = mk()
  local rng = new_rng(SEED * 31 + oi)
  local arrays, flats = {}, {}
  for k, inp in ipairs(spec.inputs) do
    arrays[k] = nd.random_uniform(inp.shape, { low = spec.lo or 0.25, high = spec.hi or 1.25, seed = SEED + 97 * oi + k })
    flats[k] = flat(arrays[k])
  end
  local ref = spec.ref(unpack(flats))
  local args = {}
  for k, inp in ipairs(spec.inputs) do args[k] = inp end
  args[#args + 1] = spec.out
  local shape = spec.out.shape
  local expect = nd.empty(shape, "float64")
  for i = 1, #ref do C.tl_array_set(expect, i - 1, ref[i]) end
  for trial = 1, NSCHED do
    local s = random_schedule(spec, rng)
    local steps = s:steps()
    local ok, err = pcall(function()
      local lowered = tostring(tl.lower(s, args))
      local replay = s:fresh():apply_steps(steps)
      assert(tostring(tl.lower(replay, args)) == lowered, "the replayed steps lower differently")
      local f = tl.build(s, args, "llvm", { cflags = "-O1" })
      compiles = compiles + 1
      local out = nd.empty(shape)
      local call = {}
      for k = 1, #arrays do call[k] = arrays[k] end
      call[#call + 1] = out
      f(unpack(call))
      tl.testing.assert_allclose(out, expect, { rtol = 1e-5, atol = 1e-7 })
    end)
    if not ok then
      error(string.format("%s, schedule %d (seed %d): %s\nsteps: %s\n%s", spec.name, trial, SEED,
                          tostring(err), steps, tostring(s)), 0)
    end
    total = total + 1
  end
end

local names = {}
for k in pairs(stats) do names[#names + 1] = k end
table.sort(names)
local parts = {}
for _, k in ipairs(names) do parts[#parts + 1] = string.format("%s %d", k, stats[k]) end
print(string.format("test_random_schedules: %d schedules of %d operators, %d compiled, %.1f s cpu (seed %d)",
                    total, #ops, compiles, os.clock() - t0, SEED))
print("  " .. table.concat(parts, ", "))
-- every kind of step showed up often enough to matter
for _, k in ipairs({ "cache_write", "cache_read", "compute_at", "compute_inline", "split, non-divisible",
                     "split, nparts", "split, two levels", "reorder", "fuse", "vectorize", "unroll", "parallel" }) do
  assert((stats[k] or 0) >= math.min(10, NSCHED), "too few random steps of kind " .. k)
end
