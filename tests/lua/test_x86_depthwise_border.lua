-- The blocked depthwise kernel (depthwise_conv2d_NCHWc.x86 on NCHW[b]c data, as the graph
-- runs it) reads the unpadded input: the padding is a guarded load and the row, tile and
-- position loops are partitioned (pragma "loop_partition", core/te/partition.c), so the
-- guards stay on the border and the interior loads unguarded. Checked against the
-- reference depthwise conv on random data for every mobilenet depthwise layer (stride 1
-- and 2, the fallback config the network runs), shapes without padding, with odd and
-- tail widths and asymmetric padding, and random configs; the lowered IR must have no
-- padding stage, an unguarded interior and guards on the border.
local tl = require "tunelua"
local te, topi = tl.te, tl.topi
local autotvm = require "tunelua.autotvm"
local util = require "tests.lua.lib.util"
local f32, block_data = util.f32, util.block_data

local function block_kernel(src, C, K, b, dst)
  local s, d = f32(src), f32(dst)
  for c = 0, C - 1 do for k = 0, K * K - 1 do
    d[(math.floor(c / b) * K * K + k) * b + c % b] = s[c * K * K + k]
  end end
end

local ref_cache = {}
local function check(C, H, K, S, pad, configs, target)
  local P = type(pad) == "table" and pad or { pad, pad, pad, pad }
  local args = { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { C, 1, K, K }, "float32" }, { S, S }, P,
                 { 1, 1 }, "float32" }
  local task = autotvm.task.create("depthwise_conv2d_NCHWc.x86", args, target or "llvm")
  assert(task:set_blocked(true) == true, "expected a blocked depthwise form")
  local OH = math.floor((H + P[1] + P[3] - K) / S) + 1
  local OW = math.floor((H + P[2] + P[4] - K) / S) + 1
  local A = te.placeholder({ 1, C, H, H }, "float32", "A")
  local Wt = te.placeholder({ C, 1, K, K }, "float32", "W")
  local Out = topi.nn.depthwise_conv2d(A, Wt, { strides = S, padding = P, dilation = 1 })
  local ref_f = tl.build(topi.default_schedule({ Out }, "cpu"), { A, Wt, Out }, "c")
  local a = tl.nd.random_uniform({ 1, C, H, H }, { low = -1, high = 1, seed = 21 })
  local w = tl.nd.random_uniform({ C, 1, K, K }, { low = -1, high = 1, seed = 22 })
  local ref = tl.nd.empty({ 1, C, OH, OW })
  ref_f(a, w, ref)
  local what = string.format("depthwise C=%d H=%d K=%d S=%d pad={%s} target %s", C, H, K, S, table.concat(P, ","),
                             target or "llvm")
  for _, i in ipairs(configs or { -1 }) do
    local s, targs, shapes = task:instantiate(i)
    local b = shapes[1][5]
    local lowered = tl.lower(s, targs):text()
    assert(not lowered:find("data_pad", 1, true), what .. ": the kernel should read the input in place, no padded copy")
    local f = tl.build(s, targs, target or "c")
    local ab, wb, ob = tl.nd.empty(shapes[1]), tl.nd.empty(shapes[2]), tl.nd.empty(shapes[3])
    block_data(a, 1, C, H, H, b, ab)
    block_kernel(w, C, K, b, wb)
    f(ab, wb, ob)
    local want = tl.nd.empty(shapes[3])
    local wo = f32(want)
    local rr = f32(ref)
    for c = 0, C - 1 do for y = 0, OH - 1 do for x = 0, OW - 1 do
      wo[((math.floor(c / b) * OH + y) * OW + x) * b + c % b] = rr[(c * OH + y) * OW + x]
    end end end
    local ok, err = pcall(tl.testing.assert_allclose, ob, want, { rtol = 1e-4, atol = 1e-4 })
    assert(ok, what .. " config " .. i .. ": " .. tostring(err))
  end
  return task
end

-- mobilenet's depthwise layers (3x3, pad 1), stride 1 and 2
local mobilenet = { { 32, 112, 1 }, { 64, 112, 2 }, { 128, 56, 1 }, { 128, 56, 2 }, { 256, 28, 1 },
                    { 256, 28, 2 }, { 512, 14, 1 }, { 512, 14, 2 }, { 1024, 7, 1 } }
for _, L in ipairs(mobilenet) do check(L[1], L[2], 3, L[3], 1) end

-- no padding; odd and tail widths; asymmetric padding; 5x5; random configs (tile widths
-- that leave a tail, channel blocks of 8 and 16)
check(16, 9, 3, 1, 0)
check(32, 13, 3, 2, 1)
check(16, 15, 3, 1, 1)
check(16, 11, 3, 2, { 0, 0, 1, 1 })
check(16, 12, 5, 1, 2)
local task = check(32, 17, 3, 1, 1)
math.randomseed(5)
local cfgs = {}
for k = 1, 5 do cfgs[k] = math.random(0, #task.config_space - 1) end
check(32, 17, 3, 1, 1, cfgs)
check(32, 18, 3, 2, 1, cfgs)
-- stride 2 in tiles of two output rows (even row counts): random configs, 5x5, a padded
-- bottom row, rows cut into chunks (one channel block: the chunk edges' guards unswitched)
check(32, 20, 3, 2, 1, cfgs)
check(16, 16, 5, 2, 2)
check(16, 13, 3, 2, { 0, 0, 1, 1 })
check(16, 32, 3, 2, 1)
check(16, 64, 3, 2, 1)
-- AVX2's 8-lane vectors and 16 registers (this machine runs AVX2 code)
check(64, 28, 3, 1, 1, nil, "llvm -mcpu=core-avx2")
check(64, 28, 3, 2, 1, nil, "llvm -mcpu=core-avx2")

-- a stride-2 layer computes two output rows per tile on 32 registers (AVX-512): the
-- accumulation runs over both rows (oh, unrolled) inside the tile loop
do
  local args = { { "TENSOR", { 1, 128, 56, 56 }, "float32" }, { "TENSOR", { 128, 1, 3, 3 }, "float32" }, { 2, 2 },
                 { 1, 1, 1, 1 }, { 1, 1 }, "float32" }
  local task2 = autotvm.task.create("depthwise_conv2d_NCHWc.x86", args, "llvm -mcpu=skylake-avx512")
  task2:set_blocked(true)
  local s, targs = task2:instantiate(-1)
  local text = tl.lower(s, targs):text()
  assert(text:find("unrolled (oh.c, 0, 2)", 1, true), "expected a two-row accumulation tile:\n" .. text)
end

-- the lowered IR of a stride-1 layer: an interior loop over the tiles (starting past the
-- left border) whose loads are unguarded, and the guards kept on the border
do
  local args = { { "TENSOR", { 1, 128, 56, 56 }, "float32" }, { "TENSOR", { 128, 1, 3, 3 }, "float32" }, { 1, 1 },
                 { 1, 1, 1, 1 }, { 1, 1 }, "float32" }
  local task2 = autotvm.task.create("depthwise_conv2d_NCHWc.x86", args, "llvm")
  task2:set_blocked(true)
  local s, targs = task2:instantiate(-1)
  local text = tl.lower(s, targs):text()
  assert(text:find("if_then_else", 1, true), "the border iterations keep their guards")
  local unguarded = 0
  for line in text:gmatch("[^\n]+") do
    if line:find("data%[") and not line:find("if_then_else", 1, true) then unguarded = unguarded + 1 end
  end
  assert(unguarded > 0, "the interior should load the input without guards:\n" .. text)
  assert(text:find("for %(oh%.inner, 1,") or text:find("for %(ow%.outer, 1,"),
         "expected a partitioned interior loop starting at 1:\n" .. text)
end

-- the blocked kernels keep their accumulators in registers (kw and the tile's positions
-- unrolled): no vector reloaded from the stack in a block of FMAs, planned for AVX2 and
-- compiled for haswell, planned for AVX-512 and compiled for skylake-avx512
do
  local measure = require "tunelua.autotvm.measure"
  local dir = util.tmpdir("dw-border")
  local function spills(src, march, name) return util.fma_spills(src, march, dir, name) end
  for _, m in ipairs({ { "llvm -mcpu=core-avx2", "haswell" }, { "llvm -mcpu=skylake-avx512", "skylake-avx512" } }) do
    for _, L in ipairs({ { 32, 112, 1 }, { 64, 112, 2 }, { 128, 56, 2 }, { 256, 28, 2 }, { 512, 14, 1 } }) do
      local args = { { "TENSOR", { 1, L[1], L[2], L[2] }, "float32" }, { "TENSOR", { L[1], 1, 3, 3 }, "float32" },
                     { L[3], L[3] }, { 1, 1, 1, 1 }, { 1, 1 }, "float32" }
      local t = autotvm.task.create("depthwise_conv2d_NCHWc.x86", args, m[1])
      assert(t:set_blocked(true))
      local n = spills(measure.source_of(t:lower(-1)), m[2], "dw" .. L[1])
      assert(n == 0, string.format("blocked depthwise %d,%d,s%d on '%s': %d vector reloads from the stack among FMAs",
                                   L[1], L[2], L[3], m[1], n))
    end
  end
  util.cleanup(dir)
end

print("test_x86_depthwise_border: ok")
