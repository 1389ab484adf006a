-- An x86 target's -mcpu/-mattr drive the C compiler's flags: a network built for
-- "llvm -mcpu=core-avx2" is AVX2 code whatever the host (no zmm register, no EVEX-only
-- instruction in its object code; its conv FMAs on ymm), one built for
-- "llvm -mcpu=skylake-avx512" uses zmm; a plain "llvm" keeps the host's -march=native.
-- The AVX2 network runs here (where the host has AVX2) and matches the reference interpreter.
local tl = require "tunelua"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local target = require "tunelua.target"
local reference = require "networks.reference"

local util = require "tests.lua.lib.util"
local dir = util.tmpdir("x86-march")
local sh = util.sh

-- the flags of each target
local function flags(s) return target.parse(s).cflags end
assert(flags("llvm") == "-O3 -march=native", flags("llvm"))
assert(flags("llvm -mcpu=core-avx2") == "-O3 -march=core-avx2", flags("llvm -mcpu=core-avx2"))
assert(flags("llvm -mcpu=skylake-avx512") == "-O3 -march=skylake-avx512")
assert(flags("llvm -mattr=+avx2,+fma") == "-O3 -march=haswell", flags("llvm -mattr=+avx2,+fma"))
assert(flags("llvm -mcpu=core-avx2 -mattr=+avx512f"):find("-march=skylake-avx512", 1, true))
assert(flags("llvm -mcpu=znver4"):find("-mavx512f", 1, true))
assert(target.parse("llvm -mcpu=core-avx2").lanes == 8)

-- conv 3x3 + relu, then a 1x1 conv, then dense: the x86 templates and a default schedule
local function network()
  local d = relay.var("data", { shape = { 1, 16, 12, 12 } })
  local w1 = relay.var("w1", { shape = { 32, 16, 3, 3 } })
  local w2 = relay.var("w2", { shape = { 32, 32, 1, 1 } })
  local y = relay.nn.relu(relay.nn.conv2d(d, w1, { padding = { 1, 1, 1, 1 }, channels = 32, kernel_size = { 3, 3 } }))
  y = relay.nn.conv2d(y, w2, { channels = 32, kernel_size = { 1, 1 } })
  return relay.Module(relay.Function({ d, w1, w2 }, y))
end
local params = { w1 = tl.nd.random_uniform({ 32, 16, 3, 3 }, { seed = 2 }),
                 w2 = tl.nd.random_uniform({ 32, 32, 1, 1 }, { seed = 3 }) }

-- the object code of the network built for tgt: counts of zmm uses, ymm FMAs and all FMAs
local function objcode(tgt, name)
  local lib = executor.build(network(), { target = tgt, params = params, tophub = false, quiet = true })
  local pack = dir .. "/" .. name .. ".tlpack"
  lib:export_library(pack)
  -- the shared object is the pack's member lib0.so: cut it out by its ELF header
  local bytes = assert(io.open(pack, "rb")):read("*a")
  local at = assert(bytes:find("\127ELF", 1, true), "no ELF object in " .. pack)
  local so = dir .. "/" .. name .. ".so"
  local f = assert(io.open(so, "wb"))
  assert(f:write(bytes:sub(at)))
  assert(f:close())
  local asm, ok = sh(string.format("objdump -d --no-show-raw-insn '%s'", so))
  assert(ok, "objdump failed:\n" .. asm)
  local zmm, yfma, fma = 0, 0, 0
  for line in asm:gmatch("[^\n]+") do
    if line:find("%zmm", 1, true) then zmm = zmm + 1 end
    if line:match("^%s*%x+:%s+vfn?m[as][du][db]") then
      fma = fma + 1
      if line:find("%ymm", 1, true) then yfma = yfma + 1 end
    end
  end
  return lib, zmm, yfma, fma
end

local lib2, zmm2, yfma2, fma2 = objcode("llvm -mcpu=core-avx2", "avx2")
assert(fma2 > 0, "the AVX2 network has no FMA")
assert(zmm2 == 0, string.format("the AVX2 network's object code uses zmm registers (%d lines)", zmm2))
assert(yfma2 > 0, "the AVX2 network's FMAs are not on ymm registers")
local _, zmm5 = objcode("llvm -mcpu=skylake-avx512", "avx512")
assert(zmm5 > 0, "the AVX-512 network's object code uses no zmm register")

-- run the AVX2 build where the host can, against the reference interpreter
if target.parse("llvm -mcpu=core-avx2"):check_host() then
  local a = tl.nd.random_uniform({ 1, 16, 12, 12 }, { seed = 1 })
  local m = executor.GraphModule(lib2)
  m:set_input("data", a)
  m:run()
  local ref = reference.run(network(), params, { data = a })
  if type(ref) == "table" and not tl.nd.is_array(ref) then ref = ref[1] end
  reference.assert_close(m:get_output(0), ref, { rtol = 1e-4 })
end

util.cleanup(dir)
print("ok")
