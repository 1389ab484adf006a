-- The fallback configs of the x86 templates keep their accumulators in vector registers: the
-- fallback kernels of resnet-18 and mobilenet layer shapes, planned for an AVX2 target (8-float
-- rows on 16 ymm registers) and compiled for haswell, and planned for AVX-512 (16-float rows on
-- 32 zmm) and compiled for skylake-avx512, reload no vector register from the stack in their
-- FMA loops, in the task's NCHW form and in its blocked form (inception's 17-wide rows by two
-- vectors run in tiles of 9 + 8). Rows of 16 floats, or 28 accumulators, on 16 ymm spilled
-- dozens per kernel.
-- The scan is checked first on a kernel with more accumulators than registers.
local autotvm = require "tunelua.autotvm"
local measure = require "tunelua.autotvm.measure"

local util = require "tests.lua.lib.util"
local dir = util.tmpdir("register-budget")

-- vector registers reloaded from the stack in FMA blocks (tests/lua/lib/util.lua)
local function spills(src, march, name) return util.fma_spills(src, march, dir, name) end

-- the scan sees spills: 24 accumulators of 8 floats on 16 ymm registers, reloaded by moves or
-- as FMA operands
local over = [[
typedef float f8 __attribute__((vector_size(32)));
typedef f8 u8 __attribute__((aligned(4)));
void k(const float *restrict a, const float *restrict b, float *restrict c) {
  f8 acc[24] = {{0}};
#pragma GCC unroll 1
  for (int k = 0; k < 256; k++) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) acc[i] += a[i * 256 + k] * *(const u8 *)(b + k * 8);
  }
#pragma GCC unroll 24
  for (int i = 0; i < 24; i++) *(u8 *)(c + i * 8) = acc[i];
}
]]
assert(spills(over, "haswell", "over") > 0, "the scan does not see the spills of 24 ymm accumulators")

local function conv(C, H, O, K, S, P)
  return { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { O, C, K, K }, "float32" }, { S, S },
           { P, P, P, P }, { 1, 1 }, "NCHW", "NCHW", "float32" }
end
local cases = {
  { "conv2d_NCHWc.x86", conv(64, 56, 64, 3, 1, 1), "3x3 56" },
  { "conv2d_NCHWc.x86", conv(512, 7, 512, 3, 1, 1), "3x3 7" },
  { "conv2d_NCHWc.x86", conv(128, 28, 256, 1, 1, 0), "1x1 28" },
  -- 7 wide on 32 registers: paired tiles, 7 positions by four vectors (28 accumulators, three
  -- kernel vectors, the broadcast; the fourth kernel vector read at each use)
  { "conv2d_NCHWc.x86", conv(512, 7, 1024, 1, 1, 0), "1x1 7" },
  -- the 3-channel stem: on AVX-512 its blocked form's border partitions (the first and last
  -- kw taps of the left columns, 3-step loops over the input channels with 26 of the 28
  -- accumulators) keep two accumulators on the stack (12 reloads); its interior, the loops
  -- with the most FMAs, keeps all 28 in registers (97% of the FMA peak on the development
  -- machine, docs/performance.md)
  { "conv2d_NCHWc.x86", conv(3, 224, 64, 7, 2, 3), "7x7 s2", borders_zmm = true },
  -- 17 wide on 32 registers: two vectors, tiles of 9 + 8
  { "conv2d_NCHWc.x86", conv(192, 17, 192, 1, 1, 0), "1x1 17", zmm_only = true },
  { "conv2d_NCHWc.x86", conv(288, 35, 384, 3, 2, 0), "3x3 s2 17", zmm_only = true },
  { "depthwise_conv2d_NCHWc.x86", { { "TENSOR", { 1, 32, 112, 112 }, "float32" },
    { "TENSOR", { 32, 1, 3, 3 }, "float32" }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "float32" }, "dw 112" },
  -- Winograd (blocked form only): the GEMM's register rows and the input transform reading its
  -- border through guards (F(4x4) at 56, F(2x2) at 14)
  { "conv2d_NCHWc_winograd.x86", conv(64, 56, 64, 3, 1, 1), "winograd 56", blocked_only = true },
  { "conv2d_NCHWc_winograd.x86", conv(256, 14, 256, 3, 1, 1), "winograd 14", blocked_only = true },
  -- the 7x7 outputs (F(2x2), rows of 4 tiles) on 16 registers: two vectors by 4 rows
  { "conv2d_NCHWc_winograd.x86", conv(512, 7, 512, 3, 1, 1), "winograd 7", blocked_only = true },
}
local machines = { { "llvm -mcpu=core-avx2", "haswell" }, { "llvm -mcpu=skylake-avx512", "skylake-avx512" } }
for _, m in ipairs(machines) do
  for i, c in ipairs(cases) do
    if c.zmm_only and m[2] ~= "skylake-avx512" then goto next_case end
    -- the task's NCHW form and the blocked one a graph runs (NCHW[x]c data, no packing)
    for _, blocked in ipairs(c.blocked_only and { true } or { false, true }) do
      local task = autotvm.task.create(c[1], c[2], m[1])
      if blocked then task:set_blocked(true) end
      local n, widest = spills(measure.source_of(task:lower(-1)), m[2], "k" .. i)
      if c.borders_zmm and blocked and m[2] == "skylake-avx512" then n = widest end
      assert(n == 0, string.format("%s %s%s on '%s' (-march=%s): %d vector reloads from the stack among FMAs",
                                   c[1], c[3], blocked and " (blocked)" or "", m[1], m[2], n))
    end
    ::next_case::
  end
end

-- The 1x1 conv's FMA loop (28 accumulators, 14 positions of a row) addresses its inputs as one
-- base with constant offsets: no stack access and no indexed broadcast among its FMAs. With
-- int32 loop variables GCC kept each unrolled position's input index in its own register,
-- sign-extended, and reloaded some from the stack (512 -> 512 at 14x14 on skylake-avx512: 7
-- stack accesses and 13 indexed broadcasts among the loop's 28 FMAs); the C backend declares
-- loop variables int64_t.
-- the innermost loop (a label to the first jump back to it; of those with the most FMAs, the
-- shortest) with the most FMAs: its FMAs, those with a memory operand, stack accesses and
-- indexed broadcasts
local function fma_block_stats(asm)
  local lines = {}
  for line in asm:gmatch("[^\n]+") do lines[#lines + 1] = line end
  local best = { fmas = 0, stack = 0, indexed = 0, memfma = 0, n = 0 }
  for i, line in ipairs(lines) do
    local label = line:match("^([%.%w_]+):")
    if label then
      local cur = { fmas = 0, stack = 0, indexed = 0, memfma = 0, n = 0 }
      for k = i + 1, #lines do
        local l = lines[k]
        local target = l:match("^%s*j%a+%s+([%.%w_]+)%s*$")
        if target == label then
          if cur.fmas > best.fmas or (cur.fmas == best.fmas and cur.n < best.n) then best = cur end
          break
        end
        cur.n = cur.n + 1
        if l:match("^%s*vfn?m[as][du][db]") then
          cur.fmas = cur.fmas + 1
          if l:match("%(") then cur.memfma = cur.memfma + 1 end
        end
        if l:match("%(%%r[sb]p") then cur.stack = cur.stack + 1 end
        if l:match("^%s*vbroadcastss%s+%-?%d*%(%%%w+,%%%w+") then cur.indexed = cur.indexed + 1 end
      end
    end
  end
  return best
end
for _, c in ipairs({ { 512, 14, 512 }, { 128, 56, 128 }, { 256, 28, 256 }, { 1024, 7, 1024 } }) do
  local task = autotvm.task.create("conv2d_NCHWc.x86", conv(c[1], c[2], c[3], 1, 1, 0), "llvm -mcpu=skylake-avx512")
  task:set_blocked(true)
  local st = fma_block_stats(util.asm(measure.source_of(task:lower(-1)), "skylake-avx512", dir, "pw" .. c[1]))
  local what = string.format("1x1 %d -> %d at %dx%d (blocked, skylake-avx512)", c[1], c[3], c[2], c[2])
  assert(st.fmas >= 14, what .. ": expected an FMA loop, got " .. st.fmas .. " FMAs in the widest block")
  assert(st.stack == 0 and st.indexed == 0,
         string.format("%s: %d stack accesses and %d indexed broadcasts among %d FMAs", what, st.stack, st.indexed,
                       st.fmas))
  -- 7 wide: the paired tile's loop, 28 FMAs, of which the fourth vector's 7 read the kernel
  if c[2] == 7 then
    assert(st.fmas == 28 and st.memfma == 7,
           string.format("%s: expected 28 FMAs, 7 with a kernel operand in memory, got %d and %d", what, st.fmas,
                         st.memfma))
  end
end

util.cleanup(dir)
print("test_x86_register_budget: ok")
