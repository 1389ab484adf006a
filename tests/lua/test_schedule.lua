-- tunelua.schedule and tunelua.build: the TE-style schedule API, the step
-- lists it records, axis identity across steps, error messages, replay,
-- tl.lower / tl.build and the numbers of a few built kernels.
local tl = require "tunelua"
local te = require "tunelua.te"
local schedule = require "tunelua.schedule"
local nd = tl.nd
local testing = tl.testing

local create_schedule = te.create_schedule or schedule.create

local function expect_error(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching: " .. pattern)
  -- the message is raised at the caller's line of this file
  assert(err:find("test_schedule.lua:%d+: ") , "error without the caller's position: " .. err)
  local msg = err:gsub("^.-test_schedule.lua:%d+: ", "")
  if msg ~= pattern then error(string.format("wrong error\n  got:      %s\n  expected: %s", msg, pattern), 2) end
end

local function names(st)
  local out = {}
  for _, ax in ipairs(st.iters) do out[#out + 1] = ax.name .. "(" .. ax.extent .. ")" end
  return table.concat(out, " ")
end

-- ---- matmul: the stage API and the steps it records -------------------------------

local M, N, K = 19, 14, 11
local A = te.placeholder({M, K}, "float32", "A")
local B = te.placeholder({K, N}, "float32", "B")
local k = te.reduce_axis({0, K}, "k")
local Cm = te.compute({M, N}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
local i, j = Cm.op.axis[1], Cm.op.axis[2]

do
  local s = create_schedule(Cm.op)
  assert(schedule.is_schedule(s))
  assert(table.concat(s:stage_names(), " ") == "A B C")
  local st = s[Cm]
  assert(schedule.is_stage(st) and st.name == "C")
  assert(s[Cm.op].name == "C" and s:stage("C").name == "C")
  assert(names(st) == "i(19) j(14) k(11)")
  local io, ii = s[Cm]:split(i, {factor = 4})
  assert(io.name == "i.outer" and ii.name == "i.inner" and io.extent == 5 and ii.extent == 4)
  local jo, ji = s[Cm]:split(j, {nparts = 3})
  assert(jo.extent == 3 and ji.extent == 5)
  -- reorder of a subset: k and ii trade places, the others stay
  s[Cm]:reorder(k, ii)
  assert(names(st) == "i.outer(5) k(11) j.outer(3) j.inner(5) i.inner(4)")
  s[Cm]:vectorize(ji)
  s[Cm]:parallel(io)
  s[Cm]:unroll(ii)
  s[Cm]:pragma(io, "auto_unroll_max_step", 8)
  assert(s:steps() == '[["SP", 2, 0, 19, [4], 1], ["SP", 2, 2, 14, [3], 0], ["RE", 2, [0, 4, 2, 3, 1]], '
         .. '["AN", 2, 3, 2], ["AN", 2, 0, 3], ["AN", 2, 4, 1], ["PR", 2, 0, "auto_unroll_max_step$8"]]')
  -- the axis objects of split-away iterators are refused; the op axes too
  expect_error("split: iterator 'i' of stage 'C' is no longer a loop (it was split or fused)",
               function() s[Cm]:split(i, {factor = 2}) end)
  expect_error("bind: cannot bind reduction iterator 'k' of stage 'C' to threadIdx.y",
               function() s[Cm]:bind(k, "threadIdx.y") end)
  expect_error("bind: unknown thread tag 'warp.x' (expected blockIdx.x/y/z, threadIdx.x/y/z or vthread)",
               function() s[Cm]:bind(jo, "warp.x") end)
  expect_error("fuse: iterators 1 and 3 of stage 'C' are not consecutive ('k', 'j.inner')",
               function() s[Cm]:fuse(k, ji) end)
  expect_error("split: give exactly one of {factor = f} or {nparts = n}",
               function() s[Cm]:split(jo, {}) end)
  expect_error("split: lengths of iterator 'j.outer' of stage 'C' must be positive, got 0",
               function() s[Cm]:split(jo, {factor = 0}) end)
  expect_error("compute_inline: stage 'C' is a reduction", function() s[Cm]:compute_inline() end)
  expect_error("schedule: no stage 'nope' in this schedule", function() s:stage("nope") end)
  expect_error("compute_at: stage 'A' is a placeholder", function() s[A]:compute_at(s[Cm], io) end)
  -- fuse returns the fused axis; the print shows the table
  local f = s[Cm]:fuse(jo, ji)
  assert(f.name == "j.outer.j.inner.fused" and f.extent == 15)
  assert(tostring(s):find("2 C: root, output\n      0 i.outer %(5%) parallel pragma auto_unroll_max_step%$8\n"))
  -- replay on a fresh schedule gives the same state
  local r = s:fresh():apply_steps(s:steps())
  assert(tostring(r) == tostring(s))
  assert(r:hash() == s:hash())
  local c = s:copy()
  c[Cm]:unroll(c[Cm].iters[3])
  assert(c:hash() ~= s:hash() and tostring(r) == tostring(s))
  -- all or nothing
  local before = s:steps()
  expect_error("steps[1]: split: stage 'C' has no iterator 7 (it has 4: i.outer, k, j.outer.j.inner.fused, i.inner)",
               function() s:apply_steps('[["CR", 2], ["SP", 2, 7, 0, [2], 1]]') end)
  expect_error("steps: invalid JSON at line 1, column 9: end of file expected near ']'",
               function() s:apply_steps('[["CR"]]]') end)
  assert(s:steps() == before)
end

-- ---- tile, cache_write, compute_at, numbers --------------------------------------------

local a = nd.random_uniform({M, K}, {seed = 11})
local b = nd.random_uniform({K, N}, {seed = 12})
local ref = nd.empty({M, N}, "float64")
for x = 1, M do
  for y = 1, N do
    local acc = 0
    for z = 1, K do acc = acc + a:get(x, z) * b:get(z, y) end
    ref:set(x, y, acc)
  end
end

local function check_matmul(s, args)
  local f = tl.build(s, args or {A, B, Cm}, "llvm", {cflags = "-O1"})
  local c = nd.empty({M, N})
  f(a, b, c)
  testing.assert_allclose(c, ref, {rtol = 1e-5})
  return f
end

do
  local s = create_schedule(Cm.op)
  local CL = s:cache_write(Cm, "local")
  assert(schedule.is_tensor(CL) and CL.name == "C.local" and CL.shape[1] == M and CL.dtype == "float32")
  assert(table.concat(s:stage_names(), " ") == "A B C.local C")
  local xo, yo, xi, yi = s[Cm]:tile(i, j, 4, 8)
  s[CL]:compute_at(s[Cm], yo)
  -- the reduce axis k is found in C.local (the cache stage took the reduction)
  local ci, cj = CL.op.axis[1], CL.op.axis[2]
  assert(ci.name == "i.c" and s[CL].op.reduce_axis[1].name == "k")
  s[CL]:reorder(k, ci, cj)
  s[CL]:vectorize(cj)
  s[Cm]:parallel(xo)
  expect_error("split: stage 'C' has no axis 'k'", function() s[Cm]:split(k, {factor = 2}) end)
  assert(s:steps() == '[["CHW", 2, "local"], ["SP", 3, 0, 19, [4], 1], ["SP", 3, 2, 14, [8], 1], '
         .. '["RE", 3, [0, 2, 1, 3]], ["CA", 2, 3, 1], ["RE", 2, [2, 0, 1]], ["AN", 2, 2, 2], ["AN", 3, 0, 3]]')
  local text = tostring(tl.lower(s, {A, B, Cm}))
  assert(text:find("allocate C.local%[float32 %* 32%]"), text)
  local f = check_matmul(s)
  assert(f:get_source():find("default_function"))
  assert(type(f.compile_seconds) == "number" and type(f.lower_seconds) == "number")
  local t = f:time_evaluator({number = 3, ["repeat"] = 2})(a, b, nd.empty({M, N}))
  assert(#t == 2 and t.mean > 0 and t.results[2] == t[2])
  t = f:time_evaluator({number = 2, repeats = 1, min_repeat_ms = 1})(a, b, nd.empty({M, N}))
  assert(#t == 1 and t.mean > 0)
  expect_error("call: default_function takes 3 arrays, got 2", function() f(a, b) end)
end

do -- cache_read + storage_align + rfactor, each checked numerically
  local s = create_schedule(Cm.op)
  local AA = s:cache_read(A, "local", {Cm})
  local io, ii = s[Cm]:split(i, {nparts = 3})
  s[AA]:compute_at(s[Cm], io)
  s[AA]:storage_align(AA.op.axis[1], 4, 1)
  check_matmul(s)
  s = create_schedule(Cm.op)
  local ko, ki = s[Cm]:split(k, {factor = 4})
  local CF = s:rfactor(Cm, ki)
  assert(CF.name == "C.rf" and CF.ndim == 3 and CF.shape[1] == 4)
  s[CF]:parallel(CF.op.axis[1])
  check_matmul(s)
  -- rfactor of a factor axis in the middle
  s = create_schedule(Cm.op)
  ko, ki = s[Cm]:split(k, {factor = 3})
  CF = s:rfactor(Cm, ko, 1)
  assert(CF.shape[2] == 4)
  check_matmul(s)
end

-- ---- a two-stage pipeline: inline, compute_at, bound inference --------------------------

do
  local H, W = 13, 11
  local X = te.placeholder({H, W}, "float32", "X")
  local P = te.compute({H + 2, W + 2}, function(y, x)
    return te.if_then_else(te.all(te.ge(y, 1), te.lt(y, H + 1), te.ge(x, 1), te.lt(x, W + 1)),
                           X(y - 1, x - 1) * 2.0, 0.0)
  end, "P")
  local Y = te.compute({H, W}, function(y, x) return P(y, x) + P(y + 1, x + 1) + P(y + 2, x + 2) end, "Y")
  local xa = nd.random_uniform({H, W}, {seed = 5})
  local yref = nd.empty({H, W}, "float64")
  local function pv(y, x)   -- 0-based padded value
    if y >= 1 and y < H + 1 and x >= 1 and x < W + 1 then return xa:get(y, x) * 2 end
    return 0
  end
  for y = 0, H - 1 do
    for x = 0, W - 1 do yref:set(y + 1, x + 1, pv(y, x) + pv(y + 1, x + 1) + pv(y + 2, x + 2)) end
  end
  local function check(s)
    local f = tl.build(s, {X, Y}, "c", {cflags = "-O1"})
    local out = nd.empty({H, W})
    f(xa, out)
    testing.assert_allclose(out, yref, {rtol = 1e-5})
  end
  local s = create_schedule(Y.op)
  check(s)
  s[P]:compute_inline()
  check(s)
  s = create_schedule(Y.op)
  local yo, xo, yi, xi = s[Y]:tile(Y.op.axis[1], Y.op.axis[2], 4, 3)
  s[P]:compute_at(s[Y], xo)
  local text = tostring(tl.lower(s, {X, Y}))
  assert(text:find("allocate P.global%[float32 %* 30%]"), text)   -- (4+2) x (3+2)
  check(s)
  s[P]:compute_at(s[Y], yo)
  check(s)
  expect_error("compute_inline: stage 'Y' is an output", function() s[Y]:compute_inline() end)
  expect_error("lower: placeholder 'X' is not among the arguments", function() tl.lower(s, {Y}) end)
end

-- ---- two outputs: an intermediate that is also an argument ------------------------------

do
  local X = te.placeholder({10, 6}, "float32", "X2")
  local P = te.compute({10, 6}, function(y, x) return X(y, x) * 3.0 end, "P2")
  local Q = te.compute({10, 6}, function(y, x) return P(y, x) + X(y, x) end, "Q2")
  local s = create_schedule({P.op, Q.op})
  assert(table.concat(s:stage_names(), " ") == "X2 P2 Q2")
  expect_error("compute_inline: stage 'P2' is an output", function() s[P]:compute_inline() end)
  local yo, yi = s[Q]:split(Q.op.axis[1], {factor = 4})
  s[P]:compute_at(s[Q], yo)          -- P2 is computed tile by tile, straight into its argument
  local text = tostring(tl.lower(s, {X, P, Q}))
  assert(not text:find("allocate"), text)
  local f = tl.build(s, {X, P, Q}, "c", {cflags = "-O1"})
  local x = nd.random_uniform({10, 6}, {seed = 3})
  local p, q = nd.empty({10, 6}), nd.empty({10, 6})
  f(x, p, q)
  local pref, qref = nd.empty({10, 6}, "float64"), nd.empty({10, 6}, "float64")
  for r = 1, 10 do
    for c = 1, 6 do
      pref:set(r, c, x:get(r, c) * 3)
      qref:set(r, c, x:get(r, c) * 4)
    end
  end
  testing.assert_allclose(p, pref, {rtol = 1e-6})
  testing.assert_allclose(q, qref, {rtol = 1e-6})
end

-- ---- targets -------------------------------------------------------------------------------

do
  local build = require "tunelua.build"
  local t = build.parse_target("llvm -mcpu=skylake-avx512 -mtriple=x86_64-linux-gnu -device=arm_cpu")
  assert(t.kind == "llvm" and t.mcpu == "skylake-avx512" and t.device == "arm_cpu")
  assert(t.mtriple == "x86_64-linux-gnu" and t.options.mcpu == "skylake-avx512")
  assert(build.parse_target("c").kind == "c")
  local s = create_schedule(Cm.op)
  expect_error("build: unknown target 'cuda' (expected \"c\", \"ext_dev\", \"llvm\" or \"opencl\", with options)",
               function() tl.build(s, {A, B, Cm}, "cuda") end)
  expect_error("build: target option 'mcpu' should look like -key=value",
               function() tl.build(s, {A, B, Cm}, "llvm mcpu") end)
  local l = tl.lower(s, {A, B, Cm}, {name = "mm"})
  assert(tostring(l):find("^func mm%(A: float32%[19, 11%], B: float32%[11, 14%], C: float32%[19, 14%]%)\n"))
  expect_error("lower: the function name must be a C identifier, got 1x", function() tl.lower(s, {A, B, Cm}, "1x") end)
  -- GPU annotations lower (the C backend does not take them)
  local bx, tx = s[Cm]:split(s[Cm]:fuse(i, j), {factor = 32})
  s[Cm]:bind(bx, "blockIdx.x")
  s[Cm]:bind(tx, {thread_tag = "threadIdx.x"})
  assert(tostring(tl.lower(s, {A, B, Cm})):find("launch_thread threadIdx.x %(i.j.fused.inner, 0, 32%)"))
end

print("test_schedule: ok")
