-- The C backend's prefetch of the next block (core/codegen/c.c, "the next block's
-- prefetch"): a parallel loop whose iterations read disjoint blocks of a buffer of 64 KiB
-- or more (a blocked conv's weights per chunk of output channels) prefetches the next
-- iteration's block from its innermost serial loop that reads the buffer (a loop that fuses R
-- iterations per block: each fetches its R-th of the next block). Checked here:
-- the generated C of a blocked conv with 295 KiB blocks prefetches (the guard against the
-- last iteration, the lines per host iteration) and still matches the reference conv on
-- random data; a conv with 18 KiB blocks, a kernel without a parallel loop, one whose
-- parallel iterations share their weights and one that reads each block once do not.
local tl = require "tunelua"
local te, topi = tl.te, tl.topi
local autotvm = require "tunelua.autotvm"

local util = require "tests.lua.lib.util"
local f32, block_data, block_kernel = util.f32, util.block_data, util.block_kernel


-- The fallback config of a blocked 3x3 conv (C -> O at H x H, padding 1): its C source,
-- checked against the reference conv.
local function conv_source(C, H, O)
  local task = autotvm.task.create("conv2d_NCHWc.x86", { { "TENSOR", { 1, C, H, H }, "float32" },
    { "TENSOR", { O, C, 3, 3 }, "float32" }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" },
    "llvm")
  assert(task:set_blocked(true), "a blocked form")
  local s, targs, shapes = task:instantiate(-1)
  local f = tl.build(s, targs, "c")
  local A = te.placeholder({ 1, C, H, H }, "float32", "A")
  local W = te.placeholder({ O, C, 3, 3 }, "float32", "W")
  local Out = topi.nn.conv2d(A, W, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
  local ref_f = tl.build(topi.default_schedule({ Out }, "cpu"), { A, W, Out }, "c")
  local a = tl.nd.random_uniform({ 1, C, H, H }, { seed = 21, low = -1, high = 1 })
  local w = tl.nd.random_uniform({ O, C, 3, 3 }, { seed = 22, low = -1, high = 1 })
  local ref = tl.nd.empty({ 1, O, H, H })
  ref_f(a, w, ref)
  local ib, ob = shapes[1][5], shapes[2][5]
  local ab, wb, out, want = tl.nd.empty(shapes[1]), tl.nd.empty(shapes[2]), tl.nd.empty(shapes[3]),
                            tl.nd.empty(shapes[3])
  block_data(a, 1, C, H, H, ib, ab)
  block_kernel(w, O, C, 3, 3, ob, wb)
  f(ab, wb, out)
  block_data(ref, 1, O, H, H, ob, want)
  tl.testing.assert_allclose(out, want, { rtol = 1e-4, atol = 1e-3 })
  return f:get_source(), ob
end

-- 256 -> 512 channels at 7x7 (as resnet's last stage: the parallel loop runs over chunks of
-- output channels), blocks of ob output channels: 256 * 9 * ob * 4 bytes per iteration
do
  local src, ob = conv_source(256, 7, 512)
  local block = 256 * 9 * ob * 4
  assert(block >= 64 * 1024, "the test's block should pass 64 KiB, got " .. block)
  assert(src:find("tlc_pf_next", 1, true), "a 7x7 256 -> 512 conv prefetches its next weight block")
  assert(src:find(string.format("tlc_pf_b + 1 < 16 ? (const char *)((uintptr_t)kernel + (uintptr_t)((tlc_pf_b + 1) * %d + tlc_pf_r * %d)) : NULL;", block, block), 1, true),
         "the next block is one block further (one iteration per block), none after the last")
  assert(src:find("__builtin_prefetch(tlc_pf_next + tlc_pf + 0, 0, 3);", 1, true), "a prefetch per line")
  assert(src:find("if (tlc_pf_next && tlc_pf < tlc_pf_end) {", 1, true), "no prefetch past the block")
  print(string.format("7x7 256 -> 512 (blocks of %d channels, %d KiB): prefetches, matches the reference",
                      ob, math.floor(block / 1024)))
end

-- 16 input channels: 16 * 9 * ob * 4 bytes, under 64 KiB
do
  local src, ob = conv_source(16, 14, 32)
  assert(16 * 9 * ob * 4 < 64 * 1024, "a small block")
  assert(not src:find("__builtin_prefetch", 1, true), "small weight blocks are not prefetched")
end

-- no parallel loop; a parallel loop whose iterations all read one vector (not disjoint blocks)
do
  local A = te.placeholder({ 64, 4096 }, "float32", "A")
  local B = te.placeholder({ 4096 }, "float32", "B")
  local Cc = te.compute({ 64, 4096 }, function(i, j) return A(i, j) * B(j) end, "C")
  local s = te.create_schedule(Cc.op)
  local f = tl.build(s, { A, B, Cc }, "c")
  assert(not f:get_source():find("__builtin_prefetch", 1, true), "no parallel loop: no prefetch")
  s = te.create_schedule(Cc.op)
  s[Cc]:parallel(Cc.op.axis[1])
  f = tl.build(s, { A, B, Cc }, "c")
  local src = f:get_source()
  assert(src:find("tlc_parallel", 1, true), "a parallel loop")
  -- A's rows are 16 KiB per iteration (under the threshold); B is shared by every iteration
  assert(not src:find("__builtin_prefetch", 1, true), "shared or small blocks: no prefetch")
  local a = tl.nd.random_uniform({ 64, 4096 }, { seed = 1 })
  local b = tl.nd.random_uniform({ 4096 }, { seed = 2 })
  local c = tl.nd.empty({ 64, 4096 })
  f(a, b, c)
  local pa, pb, pc = f32(a), f32(b), f32(c)
  for _, k in ipairs({ 0, 4095, 4096 * 63 + 17, 4096 * 64 - 1 }) do
    assert(math.abs(pc[k] - pa[k] * pb[k % 4096]) < 1e-6, "elementwise product at " .. k)
  end
end

-- rows of 64 KiB per parallel iteration, each read once per output of the row (reused): a
-- prefetch; the same rows read once (a plain row sum) are the hardware prefetcher's: none
do
  local A = te.placeholder({ 8, 16384 }, "float32", "A")
  local B = te.placeholder({ 4, 16384 }, "float32", "B")
  local k = te.reduce_axis({ 0, 16384 }, "k")
  local S = te.compute({ 8, 4 }, function(i, j) return te.sum(A(i, k) * B(j, k), k) end, "S")
  local s = te.create_schedule(S.op)
  s[S]:parallel(S.op.axis[1])
  local f = tl.build(s, { A, B, S }, "c")
  assert(f:get_source():find("tlc_pf_next", 1, true), "64 KiB rows read once per output: prefetched")
  local a = tl.nd.random_uniform({ 8, 16384 }, { seed = 3 })
  local b = tl.nd.random_uniform({ 4, 16384 }, { seed = 4 })
  local out = tl.nd.empty({ 8, 4 })
  f(a, b, out)
  local pa, pb, po = f32(a), f32(b), f32(out)
  for i = 0, 7 do
    for j = 0, 3 do
      local sum = 0
      for x = 0, 16383 do sum = sum + pa[i * 16384 + x] * pb[j * 16384 + x] end
      assert(math.abs(po[i * 4 + j] - sum) < 1e-4 * 16384, string.format("(%d, %d): %g against %g", i, j,
                                                                      po[i * 4 + j], sum))
    end
  end
  local k2 = te.reduce_axis({ 0, 16384 }, "k2")
  local R = te.compute({ 8 }, function(i) return te.sum(A(i, k2), k2) end, "R")
  local s2 = te.create_schedule(R.op)
  s2[R]:parallel(R.op.axis[1])
  assert(not tl.build(s2, { A, R }, "c"):get_source():find("__builtin_prefetch", 1, true),
         "rows read once: no prefetch")
end

-- a parallel loop that fuses rows into the blocks (floordiv of its variable): each of a block's
-- 4 iterations fetches its quarter of the next block
do
  local A = te.placeholder({ 8, 16384 }, "float32", "A")
  local B = te.placeholder({ 8, 16384 }, "float32", "B")
  local k = te.reduce_axis({ 0, 16384 }, "k")
  local O = te.compute({ 8, 4, 2 }, function(i, j, m) return te.sum(A(i, k) * B(j * 2 + m, k), k) end, "O")
  local s = te.create_schedule(O.op)
  local ax = O.op.axis
  local fused = s[O]:fuse(ax[1], ax[2])
  s[O]:parallel(fused)
  local f = tl.build(s, { A, B, O }, "c")
  local src = f:get_source()
  assert(src:find("% 4, tlc_pf_b = ", 1, true) and src:find("/ 4;", 1, true), "four iterations per block")
  assert(src:find("(tlc_pf_b + 1) * 65536 + tlc_pf_r * 16384)) : NULL;", 1, true),
         "an iteration's quarter of the next block: " .. (src:match("tlc_pf_next = [^\n]*") or "none"))
  local a = tl.nd.random_uniform({ 8, 16384 }, { seed = 5 })
  local b = tl.nd.random_uniform({ 8, 16384 }, { seed = 6 })
  local out = tl.nd.empty({ 8, 4, 2 })
  f(a, b, out)
  local pa, pb, po = f32(a), f32(b), f32(out)
  for _, ijm in ipairs({ { 0, 0, 0 }, { 3, 2, 1 }, { 7, 3, 1 } }) do
    local i, j, m = ijm[1], ijm[2], ijm[3]
    local sum = 0
    for x = 0, 16383 do sum = sum + pa[i * 16384 + x] * pb[(j * 2 + m) * 16384 + x] end
    local got = po[(i * 4 + j) * 2 + m]
    assert(math.abs(got - sum) < 1e-4 * 16384, string.format("(%d, %d, %d): %g against %g", i, j, m, got, sum))
  end
end

-- Only with 32 vector registers: the prefetch is compiled in under #if defined(__AVX512F__).
-- resnet's 512 -> 512 conv at 7x7 planned for AVX2 (a row of 7 one-vector accumulators on 16
-- ymm registers): compiled for haswell it holds no prefetch and reloads nothing from the stack
-- among its FMAs; with the guard dropped, GCC kept an accumulator on the stack around the
-- prefetch's branch (a load-FMA-store chain per reduction step: 2.5-2.9x slower); compiled for
-- skylake-avx512 the prefetch is there.
do
  local measure = require "tunelua.autotvm.measure"
  local dir = util.tmpdir("prefetch")
  local task = autotvm.task.create("conv2d_NCHWc.x86", { { "TENSOR", { 1, 512, 7, 7 }, "float32" },
    { "TENSOR", { 512, 512, 3, 3 }, "float32" }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" },
    "llvm -mcpu=core-avx2")
  assert(task:set_blocked(true), "a blocked form")
  local src = measure.source_of(task:lower(-1))
  local guarded = "#if defined%(__AVX512F__%)\n%s*if %(tlc_pf_next && tlc_pf < tlc_pf_end%) {"
  assert(src:find(guarded) and src:find("#if defined%(__AVX512F__%)\n%s*int64_t tlc_pf_r"),
         "the prefetch and its setup under #if defined(__AVX512F__)")
  assert(not util.asm(src, "haswell", dir, "avx2"):find("prefetcht0", 1, true), "haswell: no prefetch")
  local n = util.fma_spills(src, "haswell", dir, "avx2")
  assert(n == 0, "haswell: " .. n .. " vector reloads from the stack among FMAs")
  local forced = src:gsub("#if defined%(__AVX512F__%)\n(%s*int64_t tlc_pf_r.-)#endif\n", "%1")
                    :gsub("#if defined%(__AVX512F__%)\n(%s*if %(tlc_pf_next.-)#endif\n", "%1")
  assert(not forced:find("__AVX512F__", 1, true), "the guards dropped")
  assert(util.fma_spills(forced, "haswell", dir, "avx2_forced") > 0,
         "haswell with the prefetch compiled in: the spill the guard avoids")
  assert(util.asm(src, "skylake-avx512", dir, "avx512"):find("prefetcht0", 1, true), "skylake-avx512: the prefetch")
  util.cleanup(dir)
end

print("test_prefetch: ok")
