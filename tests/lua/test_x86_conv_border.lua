-- The blocked direct conv (conv2d_NCHWc.x86 on NCHW[x]c data, as the graph runs it) reads the
-- unpadded input: the padding is a guarded load and the row, tile and position loops are
-- partitioned (pragma "loop_partition", core/te/partition.c), so the guards stay on the border
-- and the interior runs the unguarded register-tiled FMA loop. Checked against topi's conv2d
-- on random data (two blocks of output channels, the first and the last, against the reference)
-- for every padded conv shape of resnet-18 and a selection of resnet-50, vgg-16 and
-- inception_v3's (3x3 stride 1 and 2, 7x7 stride 2 on 3 channels read as NCHW, 5x5, 1x7, 7x1,
-- 1x3, 3x1, odd sizes and tail tiles), asymmetric padding, and random configs, for AVX-512 and
-- AVX2 plans; the lowered IR must have no padding stage, an unguarded interior and guards on
-- the border. TUNELUA_TEST_ALL_CONV_SHAPES=1: every padded conv shape of the four networks.
local tl = require "tunelua"
local te, topi = tl.te, tl.topi
local autotvm = require "tunelua.autotvm"
local util = require "tests.lua.lib.util"
local f32, block_data, block_kernel = util.f32, util.block_data, util.block_kernel


local function check(C, H, O, KH, KW, S, pad, configs, target)
  target = target or "llvm -mcpu=skylake-avx512"
  local P = type(pad) == "table" and pad or { pad, pad, pad, pad }
  local args = { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { O, C, KH, KW }, "float32" }, { S, S }, P,
                 { 1, 1 }, "NCHW", "NCHW", "float32" }
  local task = autotvm.task.create("conv2d_NCHWc.x86", args, target)
  assert(task:set_blocked(true) == true, "expected a blocked conv form")
  local OH = math.floor((H + P[1] + P[3] - KH) / S) + 1
  local OW = math.floor((H + P[2] + P[4] - KW) / S) + 1
  local what = string.format("conv C=%d H=%d O=%d K=%dx%d S=%d pad={%s} target %s", C, H, O, KH, KW, S,
                             table.concat(P, ","), target)
  local a = tl.nd.random_uniform({ 1, C, H, H }, { low = -1, high = 1, seed = 31 })
  local w = tl.nd.random_uniform({ O, C, KH, KW }, { low = -1, high = 1, seed = 32 })
  local refs = {}
  for _, i in ipairs(configs or { -1 }) do
    local s, targs, shapes = task:instantiate(i)
    local ob = shapes[2][5]
    local lowered = tl.lower(s, targs):text()
    if target:find("avx2", 1, true) then
      -- 16 registers: the tile leaves none for the border pieces, the padded copy stays
      assert(lowered:find("data_pad", 1, true), what .. ": expected the padded copy on 16 registers")
    else
      assert(not lowered:find("data_pad", 1, true), what .. ": the kernel should read the input in place, no padded copy")
    end
    -- the reference for the first and the last block of ob output channels
    if not refs[ob] then
      local nb = O > ob and 2 or 1
      local ws = tl.nd.empty({ nb * ob, C, KH, KW })
      local src, dst, n = f32(w), f32(ws), C * KH * KW
      for j = 0, nb * ob - 1 do
        local o = j < ob and j or O - 2 * ob + j
        for k = 0, n - 1 do dst[j * n + k] = src[o * n + k] end
      end
      local A = te.placeholder({ 1, C, H, H }, "float32", "A")
      local Wt = te.placeholder({ nb * ob, C, KH, KW }, "float32", "W")
      local Out = topi.nn.conv2d(A, Wt, { strides = S, padding = P, dilation = 1 })
      local ref_f = tl.build(topi.default_schedule({ Out }, "cpu"), { A, Wt, Out }, "c")
      local ref = tl.nd.empty({ 1, nb * ob, OH, OW })
      ref_f(a, ws, ref)
      refs[ob] = { ref, nb }
    end
    local f = tl.build(s, targs, "c")
    local ab = tl.nd.empty(shapes[1])
    if #shapes[1] == 5 then block_data(a, 1, C, H, H, shapes[1][5], ab) else ab = a end
    local wb, out = tl.nd.empty(shapes[2]), tl.nd.empty(shapes[3])
    block_kernel(w, O, C, KH, KW, ob, wb)
    f(ab, wb, out)
    local ref, nb = refs[ob][1], refs[ob][2]
    local got, want = tl.nd.empty({ 1, nb * ob, OH, OW }), nil
    local go, oo = f32(got), f32(out)
    for j = 0, nb * ob - 1 do
      local o = j < ob and j or O - 2 * ob + j
      for y = 0, OH - 1 do for x = 0, OW - 1 do
        go[(j * OH + y) * OW + x] = oo[((math.floor(o / ob) * OH + y) * OW + x) * ob + o % ob]
      end end
    end
    want = ref
    local ok, err = pcall(tl.testing.assert_allclose, got, want, { rtol = 1e-4, atol = 1e-3 })
    assert(ok, what .. " config " .. i .. ": " .. tostring(err))
  end
  return task
end

local ALL = os.getenv("TUNELUA_TEST_ALL_CONV_SHAPES") == "1"

-- resnet-18 (resnet-50's padded shapes are among these): C, H, O, KH, KW, stride, pad
local shapes = {
  { 3, 224, 64, 7, 7, 2, 3 }, { 64, 56, 64, 3, 3, 1, 1 }, { 64, 56, 128, 3, 3, 2, 1 }, { 128, 28, 128, 3, 3, 1, 1 },
  { 128, 28, 256, 3, 3, 2, 1 }, { 256, 14, 256, 3, 3, 1, 1 }, { 256, 14, 512, 3, 3, 2, 1 }, { 512, 7, 512, 3, 3, 1, 1 },
  -- vgg-16's first and narrowest, inception_v3's 147 and 35 rows, 5x5, 1x7 / 7x1 on 17, 1x3 / 3x1 on 8
  { 3, 224, 64, 3, 3, 1, 1 }, { 512, 14, 512, 3, 3, 1, 1 }, { 32, 147, 64, 3, 3, 1, 1 }, { 48, 35, 64, 5, 5, 1, 2 },
  { 64, 35, 96, 3, 3, 1, 1 }, { 128, 17, 128, 1, 7, 1, { 0, 3, 0, 3 } }, { 160, 17, 192, 7, 1, 1, { 3, 0, 3, 0 } },
  { 384, 8, 384, 1, 3, 1, { 0, 1, 0, 1 } }, { 384, 8, 384, 3, 1, 1, { 1, 0, 1, 0 } }, { 448, 8, 384, 3, 3, 1, 1 },
}
if ALL then
  local more = {
    { 64, 224, 64, 3, 3, 1, 1 }, { 64, 112, 128, 3, 3, 1, 1 }, { 128, 112, 128, 3, 3, 1, 1 },
    { 128, 56, 256, 3, 3, 1, 1 }, { 256, 56, 256, 3, 3, 1, 1 }, { 256, 28, 512, 3, 3, 1, 1 },
    { 512, 28, 512, 3, 3, 1, 1 }, { 96, 35, 96, 3, 3, 1, 1 }, { 128, 17, 192, 7, 1, 1, { 3, 0, 3, 0 } },
    { 128, 17, 128, 7, 1, 1, { 3, 0, 3, 0 } }, { 128, 17, 192, 1, 7, 1, { 0, 3, 0, 3 } },
    { 160, 17, 160, 1, 7, 1, { 0, 3, 0, 3 } }, { 160, 17, 160, 7, 1, 1, { 3, 0, 3, 0 } },
    { 160, 17, 192, 1, 7, 1, { 0, 3, 0, 3 } }, { 192, 17, 192, 1, 7, 1, { 0, 3, 0, 3 } },
    { 192, 17, 192, 7, 1, 1, { 3, 0, 3, 0 } },
  }
  for _, L in ipairs(more) do shapes[#shapes + 1] = L end
end
for _, L in ipairs(shapes) do check(L[1], L[2], L[3], L[4], L[5], L[6], L[7]) end

-- asymmetric padding; odd widths with tail tiles, stride 2 on odd sizes; random configs
-- (tile widths that leave a tail, unroll_kw on and off, channel blocks of 8 to 64)
check(32, 11, 32, 3, 3, 2, { 0, 0, 1, 1 })
check(16, 13, 32, 3, 3, 1, { 2, 1, 0, 1 })
check(32, 15, 64, 3, 3, 2, 1)
local task = check(32, 19, 64, 3, 3, 1, 1)
math.randomseed(7)
local cfgs = {}
for k = 1, ALL and 12 or 4 do cfgs[k] = math.random(0, #task.config_space - 1) end
check(32, 19, 64, 3, 3, 1, 1, cfgs)
check(64, 28, 64, 3, 3, 2, 1, cfgs)
-- AVX2's 8-lane vectors and 16 registers
check(64, 56, 64, 3, 3, 1, 1, nil, "llvm -mcpu=core-avx2")
check(128, 17, 128, 1, 7, 1, { 0, 3, 0, 3 }, nil, "llvm -mcpu=core-avx2")

-- the lowered IR of a stride-1 layer (2 chunks of output channels by 4 chunks of 14 rows):
-- row and tile loops partitioned (the interior starting at 1), every load unguarded, the taps
-- that read only padding dropped, and the first and last rows of a chunk unswitched on
-- whether the chunk is at the image's edge
do
  local args = { { "TENSOR", { 1, 64, 56, 56 }, "float32" }, { "TENSOR", { 64, 64, 3, 3 }, "float32" }, { 1, 1 },
                 { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
  local t = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm -mcpu=skylake-avx512")
  assert(t:set_blocked(true))
  local s, targs = t:instantiate(-1)
  local text = tl.lower(s, targs):text()
  assert(not text:find("if_then_else", 1, true), "no load should keep a guard:\n" .. text)
  assert(text:find("if (floormod(n.oc_chunk.oh.outer.fused, 4) >= 1)", 1, true) and
         text:find("if (floormod(n.oc_chunk.oh.outer.fused, 4) < 3)", 1, true),
         "expected the chunk's first and last rows unswitched on the image's edge:\n" .. text)
  assert(text:find("for %(oh%.inner, 1, 12%)"), "expected a partitioned interior row loop:\n" .. text)
  assert(text:find("for %(ow%.outer, 1, 2%)"), "expected a partitioned interior tile loop:\n" .. text)
  -- the reductions of the interior tiles of the interior rows: kh, kw whole
  assert(text:find("for %(kh%.%d+, 0, 3%) {%s+for %(kw%.%d+, 0, 3%)"), "expected a whole 3x3 interior:\n" .. text)
end

-- the border pieces keep the tile in registers (the interior loop is checked by
-- test_x86_register_budget): no vector reloaded from the stack among FMAs, skylake-avx512
do
  local measure = require "tunelua.autotvm.measure"
  local dir = util.tmpdir("conv-border")
  local function spills(src) return util.fma_spills(src, "skylake-avx512", dir, "k") end
  for _, L in ipairs({ { 64, 56, 128, 3, 3, 2, 1 }, { 32, 147, 64, 3, 3, 1, 1 }, { 48, 35, 64, 5, 5, 1, 2 },
                       { 128, 17, 128, 1, 7, 1, { 0, 3, 0, 3 } }, { 160, 17, 192, 7, 1, 1, { 3, 0, 3, 0 } } }) do
    local P = type(L[7]) == "table" and L[7] or { L[7], L[7], L[7], L[7] }
    local args = { { "TENSOR", { 1, L[1], L[2], L[2] }, "float32" }, { "TENSOR", { L[3], L[1], L[4], L[5] }, "float32" },
                   { L[6], L[6] }, P, { 1, 1 }, "NCHW", "NCHW", "float32" }
    local t = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm -mcpu=skylake-avx512")
    assert(t:set_blocked(true))
    local n = spills(measure.source_of(t:lower(-1)))
    assert(n == 0, string.format("blocked conv %dx%d %dx%d: %d vector reloads from the stack among FMAs", L[1], L[2],
                                 L[4], L[5], n))
  end
  util.cleanup(dir)
end

print("test_x86_conv_border: ok")
