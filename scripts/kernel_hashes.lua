--- Hash the generated source of every AutoTVM template's kernels: one line per (target, task,
--- config) with a hash of the C or OpenCL C text. A refactoring of templates, lowering or code
--- generation that must leave kernels byte-identical prints the same lines before and after:
---
---   tunelua scripts/kernel_hashes.lua > before.txt   # ... change ...
---   tunelua scripts/kernel_hashes.lua > after.txt && diff before.txt after.txt
---
--- The tasks are those of resnet-18 and mobilenet (batch 1, 224x224) on an AVX2 and an AVX-512
--- x86 target, on Mali and on arm_cpu (aarch64, convolutions); each task contributes its
--- fallback config and four configs spread over its space. tests/golden/kernel_hashes.txt holds the lines of the current code
--- (tests/e2e/test_kernel_hashes.sh compares; `--update` rewrites it).
local ffi = require "ffi"
local core = require "tunelua.core"
local autotvm = require "tunelua.autotvm"
local networks = require "networks"
local C, ctx = core.C, core.ctx

local function hash(s)   -- two independent 32-bit FNV-1a variants: collisions are not a concern
  local h1, h2 = 0x811c9dc5, 0x01000193
  for k = 1, #s do
    local b = s:byte(k)
    h1 = bit.tobit(bit.bxor(h1, b) * 16777619)
    h2 = bit.tobit(bit.bxor(h2 * 31, b) + k)
  end
  return bit.tohex(h1) .. bit.tohex(h2)
end

local function source(task, index, opencl)
  local l = task:lower(index)
  if not opencl then
    local measure = require "tunelua.autotvm.measure"
    return (measure.source_of(l, measure.target_of(task).toolchain))
  end
  local src = ffi.new("const char *[1]")
  core.check(C.tl_opencl_source(ctx, l.handle, src))
  return ffi.string(src[0])
end

local targets = {
  { "llvm -mcpu=core-avx2", "nn.conv2d,nn.dense" },
  { "llvm -mcpu=skylake-avx512", "nn.conv2d,nn.dense" },
  { "opencl -device=mali", "nn.conv2d,nn.dense" },
  { "llvm -device=arm_cpu -model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon", "nn.conv2d" },
}
local out = {}
for _, tg in ipairs(targets) do
  local target, ops = tg[1], tg[2]
  for _, net in ipairs({ "resnet-18", "mobilenet" }) do
    local mod, params = networks.get_network(net, { batch_size = 1 })
    local opl = {}
    for o in ops:gmatch("[^,]+") do opl[#opl + 1] = o end
    local tasks = autotvm.task.extract_from_program(mod, { target = target, params = params, ops = opl })
    for ti, t in ipairs(tasks) do
      local n = #t.config_space
      local seen = {}
      for _, idx in ipairs({ -1, 0, math.floor(n / 3), math.floor(2 * n / 3), n - 1 }) do
        if not seen[idx] then
          seen[idx] = true
          local ok, s = pcall(source, t, idx, target:match("^opencl") ~= nil)
          out[#out + 1] = string.format("%s | %s #%d %s | %d/%d | %s", target, net, ti, t.name, idx, n,
            ok and hash(s) or ("error: " .. tostring(s):gsub("\n.*", ""):gsub("^[^%s:]+%.lua:%d+: ", "")))
        end
      end
    end
  end
end
local text = table.concat(out, "\n") .. "\n"
if arg[1] == "--update" then
  local f = assert(io.open(arg[2] or "tests/golden/kernel_hashes.txt", "w"))
  assert(f:write(text))
  assert(f:close())
else
  io.write(text)
end
