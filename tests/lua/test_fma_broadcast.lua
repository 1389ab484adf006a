-- The object code of a matmul micro-kernel (the schedule of scripts/bench/matmul.lua: 8x32
-- register tiles, A elements broadcast into FMAs with 32-lane rows of packed B) compiled for
-- AVX2 and AVX-512: no broadcast register is stored to the stack. A float32x32 broadcast
-- built as a value of its own was broadcast, stored in pieces and reloaded once per use;
-- the C backend prints vectors no wider than a register (both widths under #if) and a
-- broadcast beside a vector as its scalar, so that the compiler broadcasts into a register.
-- The scan is checked first on that old idiom, which it must flag. The bench's AVX2 tile (4x16)
-- compiled for haswell also reloads no vector from the stack among its FMAs (8x32 reloads 93).
local tl = require "tunelua"
local te = tl.te
local measure = require "tunelua.autotvm.measure"

local util = require "tests.lua.lib.util"
local dir = util.tmpdir("fma-broadcast")

local sh = util.sh

local function write(path, text)
  local f = assert(io.open(path, "w"))
  assert(f:write(text))
  assert(f:close())
end

-- Disassemble `src` compiled with -march=`march`; returns the listing.
local function objdump(src, march)
  local c, o = dir .. "/k_" .. march .. ".c", dir .. "/k_" .. march .. ".o"
  write(c, src)
  local out, ok = sh(string.format("cc -std=gnu11 -O3 -fPIC -march=%s -c -o '%s' '%s'", march, o, c))
  assert(ok, "cc -march=" .. march .. " failed:\n" .. out)
  local asm, ok2 = sh(string.format("objdump -d --no-show-raw-insn '%s'", o))
  assert(ok2, "objdump failed:\n" .. asm)
  return asm
end

-- Stores of a register whose last writer was a vbroadcastss to a stack slot; counts of FMAs
-- and broadcasts. A register stays "broadcast" until another instruction writes it.
local function scan(asm)
  local bcast, spills, nfma, nbcast = {}, 0, 0, 0
  for line in asm:gmatch("[^\n]+") do
    local insn, ops = line:match("^%s*%x+:%s+(%S+)%s*(.*)$")
    if insn then
      local dst = ops:match("(%%[xyz]mm%d+)$")
      if insn:match("^vfn?m[as][du][db]") then nfma = nfma + 1 end
      if insn == "vbroadcastss" and dst then
        nbcast = nbcast + 1
        bcast[dst] = true
      elseif insn:match("^vmov") and ops:match("^(%%[xyz]mm%d+),.*%(%%[re][sb]p%)$") then
        local srcreg = ops:match("^(%%[xyz]mm%d+)")
        if bcast[srcreg] then spills = spills + 1 end
      elseif dst then
        bcast[dst] = nil
      end
    end
  end
  return spills, nfma, nbcast
end

-- the scan flags the old idiom: a float32x32 broadcast value of its own, used in an FMA
local old = [[
typedef float float32x32 __attribute__((vector_size(128)));
typedef float32x32 u32x __attribute__((aligned(4)));
static inline float32x32 bcast(float x) { float32x32 z = {0}; return x - z; }
void k(const float *restrict a, const float *restrict b, float *restrict c) {
  float32x32 acc[8] = {{0}};
  for (int k = 0; k < 256; k++)
    for (int i = 0; i < 8; i++) acc[i] = acc[i] + bcast(a[i * 256 + k]) * *(const u32x *)(b + k * 32);
  for (int i = 0; i < 8; i++) *(u32x *)(c + i * 32) = acc[i];
}
]]
local spills = scan(objdump(old, "haswell"))
assert(spills > 0, "the scan does not see the stack spills of a float32x32 broadcast value")

-- the matmul kernel as scripts/bench/matmul.lua schedules it
local M, N, K, bm, bn, kf = 256, 256, 256, 8, 32, 4
local A = te.placeholder({M, K}, "float32", "A")
local B = te.placeholder({K, N}, "float32", "B")
local packedB = te.compute({N / bn, K, bn}, function(x, y, z) return B(y, x * bn + z) end, "packedB")
local k = te.reduce_axis({0, K}, "k")
local Cm = te.compute({M, N}, function(i, j)
  return te.sum(A(i, k) * packedB(te.floordiv(j, bn), k, te.floormod(j, bn)), {k})
end, "C")
local s = te.create_schedule(Cm.op)
local CC = s:cache_write(Cm, "local")
local xo, yo = s[Cm]:tile(Cm.op.axis[1], Cm.op.axis[2], bm, bn)
s[CC]:compute_at(s[Cm], yo)
local ko, ki = s[CC]:split(s[CC].op.reduce_axis[1], {factor = kf})
s[CC]:reorder(ko, ki, s[CC].op.axis[1], s[CC].op.axis[2])
s[CC]:unroll(ki)
s[CC]:unroll(s[CC].op.axis[1])
s[CC]:vectorize(s[CC].op.axis[2])
s[packedB]:vectorize(s[packedB].op.axis[3])
local src = measure.source_of(tl.lower(s, {A, B, Cm}))

-- vectors no wider than a register: 32 lanes printed as 2 x 16 (AVX-512) or 4 x 8 (otherwise)
assert(not src:find("float32x32", 1, true), "a float32x32 vector in the generated source")
local wide_at = src:find("#if defined(__AVX512F__)", 1, true)
assert(wide_at and src:find("float32x16", wide_at, true) and src:find("float32x8", wide_at, true),
       "expected float32x16 pieces under #if defined(__AVX512F__) and float32x8 pieces otherwise")

for _, march in ipairs({"haswell", "skylake-avx512"}) do
  local sp, nfma, nbcast = scan(objdump(src, march))
  assert(nfma > 0 and nbcast > 0, string.format("-march=%s: expected FMAs with broadcast operands, "
                                                .. "found %d FMAs, %d broadcasts", march, nfma, nbcast))
  assert(sp == 0, string.format("-march=%s: %d stores of a broadcast register to the stack", march, sp))
end

-- the AVX2 tile of scripts/bench/matmul.lua (bm = 16 registers / 4 = 4 rows, bn = two 8-lane
-- vectors): its 8 accumulators, 2 B vectors and the broadcast fit 16 ymm, so the FMA loop
-- reloads nothing from the stack (8x32 kept 32 ymm accumulators there)
do
  local bm4, bn16 = 4, 16
  local A2 = te.placeholder({M, K}, "float32", "A")
  local B2 = te.placeholder({K, N}, "float32", "B")
  local pB = te.compute({N / bn16, K, bn16}, function(x, y, z) return B2(y, x * bn16 + z) end, "packedB")
  local k2 = te.reduce_axis({0, K}, "k")
  local C2 = te.compute({M, N}, function(i, j)
    return te.sum(A2(i, k2) * pB(te.floordiv(j, bn16), k2, te.floormod(j, bn16)), {k2})
  end, "C")
  local s2 = te.create_schedule(C2.op)
  local CC2 = s2:cache_write(C2, "local")
  local xo2, yo2 = s2[C2]:tile(C2.op.axis[1], C2.op.axis[2], bm4, bn16)
  s2[CC2]:compute_at(s2[C2], yo2)
  local ko2, ki2 = s2[CC2]:split(s2[CC2].op.reduce_axis[1], {factor = kf})
  s2[CC2]:reorder(ko2, ki2, s2[CC2].op.axis[1], s2[CC2].op.axis[2])
  s2[CC2]:unroll(ki2)
  s2[CC2]:unroll(s2[CC2].op.axis[1])
  s2[CC2]:vectorize(s2[CC2].op.axis[2])
  local asm = objdump(measure.source_of(tl.lower(s2, {A2, B2, C2})), "haswell")
  local sp, nfma = scan(asm)
  assert(nfma > 0 and sp == 0, string.format("4x16 on haswell: %d FMAs, %d broadcast spills", nfma, sp))
  -- vector reloads from the stack in the blocks (between labels) that hold FMAs
  local reloads, blk, fma = 0, 0, false
  for line in (asm .. "\nend:\n"):gmatch("[^\n]+") do
    if line:match("^%x+ <.*>:") or line:match("^%s*%x+:%s+j%a+") then
      if fma then reloads = reloads + blk end
      blk, fma = 0, false
    else
      local insn, ops = line:match("^%s*%x+:%s+(%S+)%s*(.*)$")
      if insn and insn:match("^v") and ops:match("%(%%r[sb]p%)") and ops:match("%%ymm%d+$") then blk = blk + 1 end
      if insn and insn:match("^vfn?m[as][du][db]") then fma = true end
    end
  end
  assert(reloads == 0, string.format("4x16 on haswell: %d vector reloads from the stack among FMAs", reloads))
end

util.cleanup(dir)
print("test_fma_broadcast: ok")
