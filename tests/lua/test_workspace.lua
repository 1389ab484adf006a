-- Intermediate buffers of generated CPU kernels come from the calling thread's workspace
-- (core/base/workspace.c), and the compiler still keeps a tile's accumulators in registers.
-- The kernel: a matmul whose output tile (32x256 floats, 32 KiB: too large for the stack) is
-- a global cache-write buffer at the parallel loop, accumulated 4x16 at a time over k.
--  1. The source takes the buffer from tl_workspace_alloc and frees it with tl_workspace_pop.
--  2. In its object code (AVX2 and AVX-512) the blocks that hold FMAs store nothing: the
--     accumulators stay in registers through the k loop. The same check flags the kernel
--     when the free hands the buffer's pointer to an outside function (the pointer escapes
--     and the accumulators go back to memory on every k step: 0.20 -> 0.67 ms for a 1x1
--     conv of 14x14x512 on an AVX-512 host).
--  3. Built and run here on random data, it matches a naive matmul, and the calling
--     thread's workspace then holds the buffer's bytes.
local ffi = require "ffi"
local tl = require "tunelua"
local te = tl.te
local measure = require "tunelua.autotvm.measure"
local util = require "tests.lua.lib.util"

local dir = util.tmpdir("workspace")
local M, N, K = 64, 256, 128

local A = te.placeholder({M, K}, "float32", "A")
local B = te.placeholder({K, N}, "float32", "B")
local k = te.reduce_axis({0, K}, "k")
local Cm = te.compute({M, N}, function(i, j) return te.sum(A(i, k) * B(k, j), {k}) end, "C")
local s = te.create_schedule(Cm.op)
local CC = s:cache_write(Cm, "global")
local rio, rii = s[Cm]:split(Cm.op.axis[1], {factor = 32})
s[Cm]:parallel(rio)
s[CC]:compute_at(s[Cm], rio)
local ci, cj = s[CC].op.axis[1], s[CC].op.axis[2]
local cio, cii = s[CC]:split(ci, {factor = 4})
local cjo, cji = s[CC]:split(cj, {factor = 16})
s[CC]:reorder(cio, cjo, s[CC].op.reduce_axis[1], cii, cji)
s[CC]:unroll(cii)
s[CC]:vectorize(cji)

local src = measure.source_of(tl.lower(s, {A, B, Cm}))

-- 1. the workspace, not the heap, for the tile
assert(src:find("tlc_alloc((size_t)8192, sizeof(float))", 1, true),
       "expected the 32x256 tile allocated through tlc_alloc:\n" .. src)
assert(src:find("tl_workspace_alloc(", 1, true) and src:find("tl_workspace_pop()", 1, true),
       "expected tlc_alloc/tlc_free to use tl_workspace_alloc and tl_workspace_pop")

-- 2. stores in the blocks of the assembly (from a label or a jump to the next) that hold FMAs
local function fma_block_stores(text, march, name)
  local asm = util.asm(text, march, dir, name)
  local n, stores, fma, nfma = 0, 0, false, 0
  for line in (asm .. "\n.Lend:\n"):gmatch("[^\n]+") do
    if line:match("^[%.%w_]+:") or line:match("^%s*j%a+%s") then
      if fma then n = n + stores end
      stores, fma = 0, false
    else
      if line:match("^%s*vmov%a+%s+%%[xyz]mm%d+,%s*%-?%d*%(") then stores = stores + 1 end
      if line:match("^%s*vfn?m[as][du][db]") then fma, nfma = true, nfma + 1 end
    end
  end
  return n, nfma
end

-- the free of an escaping pointer: what the kernels must not do
local escaping = src:gsub("extern void tl_workspace_pop%(void%) __attribute__%(%(weak%)%);",
                          "extern void tl_workspace_pop(void) __attribute__((weak));\n"
                          .. "extern void tl_release_ptr(void *p);", 1)
escaping = escaping:gsub("if %(tl_workspace_alloc && tl_workspace_pop%) tl_workspace_pop%(%);",
                         "if (tl_workspace_alloc && tl_workspace_pop) tl_release_ptr(*(void **)p);", 1)
assert(escaping ~= src and escaping:find("tl_release_ptr(*(void **)p)", 1, true),
       "the escaping variant was not made: the prelude's free changed")
for _, march in ipairs({"haswell", "skylake-avx512"}) do
  local bad, bad_fma = fma_block_stores(escaping, march, "escaping_" .. march)
  assert(bad_fma > 0 and bad > 0, string.format("-march=%s: the check sees no stores among the FMAs of the "
                                                .. "escaping variant (%d FMAs): it cannot fail", march, bad_fma))
  local n, nfma = fma_block_stores(src, march, "kernel_" .. march)
  assert(nfma > 0, "-march=" .. march .. ": no FMAs in the kernel")
  assert(n == 0, string.format("-march=%s: %d vector stores among the FMAs: the accumulators went to memory "
                               .. "(the escaping variant: %d)", march, n, bad))
end

-- 3. numerics, and the workspace that served them
local f = tl.build(s, {A, B, Cm}, "llvm")
local a = tl.nd.random_uniform({M, K}, {low = -1, high = 1, seed = 3})
local b = tl.nd.random_uniform({K, N}, {low = -1, high = 1, seed = 4})
local c = tl.nd.zeros({M, N})
f(a, b, c)
local pa, pb, pc = util.f32(a), util.f32(b), util.f32(c)
local worst = 0
for i = 0, M - 1 do
  for j = 0, N - 1 do
    local acc = 0
    for kk = 0, K - 1 do acc = acc + pa[i * K + kk] * pb[kk * N + j] end
    worst = math.max(worst, math.abs(acc - pc[i * N + j]))
  end
end
assert(worst < 1e-3, "the kernel's result differs from the naive matmul by " .. worst)
tl.set_num_threads(1)          -- the tile's buffer then comes from this thread's workspace
f(a, b, c)
assert(tonumber(ffi.C.tl_workspace_held()) >= 32 * 256 * 4,
       "the calling thread's workspace holds " .. tonumber(ffi.C.tl_workspace_held()) .. " bytes")

util.cleanup(dir)
print("test_workspace: ok")
