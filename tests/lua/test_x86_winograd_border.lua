-- conv2d_NCHWc_winograd.x86 reads the unpadded blocked input (targets/x86/winograd.c): on 32
-- vector registers the padding is inlined into the input transform's tile loads (guarded) and
-- the tile rows and columns are partitioned (pragma "loop_partition", core/te/partition.c), so
-- interior tiles load unguarded and only border tiles keep guards; no padded copy. On 16
-- registers the padded copy stays (the border pieces would spill).
--   * numerics: F(2x2), F(4x4) and F(6x6) on random data against topi's conv2d, for odd sizes,
--     tail tiles, asymmetric padding, rows of tiles topi pads to a multiple of 8, and 3x3
--     stride-1 shapes of resnet, vgg-16 and inception_v3 (output channels cut to keep the
--     reference cheap; the border structure depends on C, H and the padding only); tolerance
--     as test_winograd_x86.lua: eps32 * 9C * kappa(m) * max|x| * max|w|;
--   * the lowered IR: no data_pad, guarded loads on the border, an interior tile piece whose
--     loads carry no guard; on AVX2 the padded copy.
local tl = require "tunelua"
local te, topi = tl.te, tl.topi
local autotvm = require "tunelua.autotvm"
local winograd = require "tunelua.graph.winograd_x86"
local util = require "tests.lua.lib.util"
local f32, block_data = util.f32, util.block_data

local TEMPLATE = "conv2d_NCHWc_winograd.x86"
local AVX512 = "llvm -mcpu=skylake-avx512"
local KAPPA = { [2] = 16, [4] = 64, [6] = 256 }
local EPS32 = 1.2e-7
local TILE_DIGIT = { [4] = 0, [2] = 1, [6] = 2 }   -- the knob's values [4, 2, 6]
local function numel(sh) local n = 1; for _, d in ipairs(sh) do n = n * d end; return n end
local function max_abs(a)
  local p, m = f32(a), 0
  for i = 0, numel(a:shape()) - 1 do m = math.max(m, math.abs(p[i])) end
  return m
end

local function task_of(C, H, O, P, target)
  local args = { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { O, C, 3, 3 }, "float32" }, { 1, 1 }, P,
                 { 1, 1 }, "NCHW", "NCHW", "float32" }
  local task = autotvm.task.create(TEMPLATE, args, target)
  assert(task:set_blocked(true) == true, "the winograd task has a blocked form")
  return task
end

-- the fallback config with tile size m
local function config(task, m)
  local sp = task.config_space
  local digits = sp:point2knob(sp:knob2point(sp:fallback_digits()))
  for k, kb in ipairs(sp:knobs()) do if kb.name == "tile_size" then digits[k] = TILE_DIGIT[m] end end
  return sp:knob2point(digits)
end

local function check(C, H, O, pad, tiles)
  local P = type(pad) == "table" and pad or { pad, pad, pad, pad }
  local task = task_of(C, H, O, P, AVX512)
  local OH, OW = H + P[1] + P[3] - 2, H + P[2] + P[4] - 2
  local A = te.placeholder({ 1, C, H, H }, "float32", "A")
  local Wt = te.placeholder({ O, C, 3, 3 }, "float32", "W")
  local Out = topi.nn.conv2d(A, Wt, { strides = 1, padding = P, dilation = 1 })
  local ref_f = tl.build(topi.default_schedule({ Out }, "cpu"), { A, Wt, Out }, "c")
  local a = tl.nd.random_uniform({ 1, C, H, H }, { low = -1, high = 1, seed = C + H })
  local w = tl.nd.random_uniform({ O, C, 3, 3 }, { low = -1, high = 1, seed = O + 7 })
  local ref = tl.nd.empty({ 1, O, OH, OW })
  ref_f(a, w, ref)
  local tol = EPS32 * 9 * C * max_abs(a) * max_abs(w)
  local padded = P[1] + P[2] + P[3] + P[4] > 0
  for _, m in ipairs(tiles) do
    local what = string.format("C=%d H=%d O=%d pad={%s} F(%d)", C, H, O, table.concat(P, ","), m)
    local idx = config(task, m)
    assert(winograd.tile_size(task, idx) == m, what .. ": the config runs tile " .. m)
    local s, targs, shapes = task:instantiate(idx)
    local text = tl.lower(s, targs):text()
    assert(not text:find("data_pad", 1, true), what .. ": the input transform should read the input in place")
    if padded then
      assert(text:find("if_then_else", 1, true), what .. ": the border tiles keep their guards")
    end
    s, targs, shapes = task:instantiate(idx)
    local f = tl.build(s, targs, AVX512)
    local ib, ob = shapes[1][5], shapes[3][5]
    local ab = tl.nd.empty(shapes[1])
    block_data(a, 1, C, H, H, ib, ab)
    local out = tl.nd.empty(shapes[3])
    f(ab, winograd.weight(w, m, ob), out)
    local want = tl.nd.empty(shapes[3])
    block_data(ref, 1, O, OH, OW, ob, want)
    local po, pw, err = f32(out), f32(want), 0
    for i = 0, numel(shapes[3]) - 1 do err = math.max(err, math.abs(po[i] - pw[i])) end
    assert(err <= tol * KAPPA[m], string.format("%s: max error %g > %g", what, err, tol * KAPPA[m]))
  end
end

-- odd sizes and tail tiles (9, 13, 11 rows: F(4), F(6) tiles run past the edge), asymmetric
-- padding, no padding (nothing to inline)
check(16, 9, 32, 1, { 2, 4, 6 })
check(8, 13, 16, 1, { 2, 4, 6 })
check(16, 11, 16, { 1, 0, 0, 1 }, { 2, 4, 6 })
check(16, 10, 16, { 0, 1, 1, 0 }, { 4 })
check(8, 12, 16, 0, { 4 })
-- resnet's 3x3 stride-1 layers (56, 28, 14, 7), vgg-16's 112 and 14 (512 channels), inception's
-- 35 and 147 (rows of 37 and 74 tiles, padded to 40 and 80)
check(64, 56, 32, 1, { 4, 6 })
check(128, 28, 32, 1, { 2, 4 })
check(256, 14, 32, 1, { 2, 6 })
check(512, 7, 32, 1, { 2 })
check(32, 112, 32, 1, { 4 })
check(512, 14, 32, 1, { 2 })
check(64, 35, 32, 1, { 2, 4, 6 })
check(32, 147, 32, 1, { 2, 4 })

-- the lowered IR of 64 channels at 56x56, F(4x4): interior tiles load without a guard
do
  local task = task_of(64, 56, 64, { 1, 1, 1, 1 }, AVX512)
  local s, targs = task:instantiate(config(task, 4))
  local text = tl.lower(s, targs):text()
  local guarded, plain = 0, 0
  for line in text:gmatch("[^\n]+") do
    if line:find("data_pack_rows%[") and line:find("data%[") then
      if line:find("if_then_else", 1, true) then guarded = guarded + 1 else plain = plain + 1 end
    end
  end
  assert(plain >= 1, "an interior piece of the input transform loads unguarded:\n" .. text)
  assert(guarded >= 1, "border pieces of the input transform keep guards")
  assert(not text:find("data_pad", 1, true), "no padded copy")
  -- 16 registers: the padded copy stays
  task = task_of(64, 56, 64, { 1, 1, 1, 1 }, "llvm -mcpu=core-avx2")
  s, targs = task:instantiate(config(task, 4))
  text = tl.lower(s, targs):text()
  assert(text:find("data_pad", 1, true), "AVX2 (16 registers): expected the padded copy")
end

print("test_x86_winograd_border: ok")
