-- The auto-scheduler's hardware params from Lua (tunelua.auto_scheduler.HardwareParams and
-- hardware_params_of over core/ansor/hwparams.c): this host's defaults against /proc, an
-- explicit -mcpu, mali's table, a pocl device's values against its own device info, the
-- seed's positional constructor, overrides, and bad overrides.
local auto_scheduler = require "tunelua.auto_scheduler"
local opencl = require "tunelua.opencl"

local HP, of = auto_scheduler.HardwareParams, auto_scheduler.hardware_params_of

local function eq(a, b, what)
  if a ~= b then error(string.format("%s: expected %s, got %s", what, tostring(b), tostring(a)), 2) end
end

local function fails(want, f, ...)
  local ok, msg = pcall(f, ...)
  if ok then error("expected an error containing '" .. want .. "'", 2) end
  if not tostring(msg):find(want, 1, true) then
    error("expected an error containing '" .. want .. "', got: " .. tostring(msg), 2)
  end
end

local read = require("tests.lua.lib.util").read

-- this process's CPUs (the affinity mask, as Cpus_allowed_list shows it)
local list = assert(read("/proc/self/status"):match("Cpus_allowed_list:%s*([%d,%-]+)"))
local ncpu = 0
for part in list:gmatch("[^,]+") do
  local a, b = part:match("^(%d+)%-(%d+)$")
  ncpu = ncpu + (a and tonumber(b) - tonumber(a) + 1 or 1)
end
-- this CPU's vector bytes: AVX-512 64, AVX2 with FMA 32, else 16
local flags = " " .. assert(read("/proc/cpuinfo"):match("\nflags%s*:([^\n]*)")) .. " "
local function has(f) return flags:find(" " .. f .. " ", 1, true) ~= nil end
local host_vec = has("avx512f") and 64 or (has("avx2") and has("fma")) and 32 or 16

local hp = of("llvm")
eq(hp.num_cores, ncpu, "host num_cores")
eq(hp.vector_unit_bytes, host_vec, "host vector_unit_bytes")
eq(hp.cache_line_bytes, 64, "host cache_line_bytes")
for _, f in ipairs { "max_shared_memory_per_block", "max_local_memory_per_block",
                     "max_threads_per_block", "max_vthread_extent", "warp_size" } do
  eq(hp[f], 0, "host " .. f)
end
eq(hp.target, "llvm", "host target")
eq(HP{}.vector_unit_bytes, host_vec, "HardwareParams{} takes the host's defaults")

-- an explicit -mcpu decides the vector width, whatever this host has
eq(of("llvm -mcpu=skylake-avx512").vector_unit_bytes, 64, "skylake-avx512")
eq(of("llvm -mcpu=core-avx2").vector_unit_bytes, 32, "core-avx2")
eq(of("llvm -mcpu=core-avx2").num_cores, ncpu, "core-avx2 num_cores")

-- mali's fixed table (TVM's), with no device queried
local mali = of("opencl -device=mali")
local want = { num_cores = -1, vector_unit_bytes = 16, cache_line_bytes = 64,
               max_shared_memory_per_block = 32768, max_local_memory_per_block = 2147483647,
               max_threads_per_block = 256, max_vthread_extent = 1, warp_size = 1 }
for f, v in pairs(want) do eq(mali[f], v, "mali " .. f) end

-- the seed's positional form, and keyword overrides over a target's defaults
local seed = HP(-1, 16, 64, 32768, 2147483647, 256, 1, 1)
for f, v in pairs(want) do eq(seed[f], v, "positional " .. f) end
eq(seed.target, nil, "positional target")
local o = HP{ target = "opencl -device=mali", warp_size = 4, max_threads_per_block = 512,
              target_host = "llvm" }
eq(o.warp_size, 4, "override warp_size")
eq(o.max_threads_per_block, 512, "override max_threads_per_block")
eq(o.max_shared_memory_per_block, 32768, "kept max_shared_memory_per_block")
eq(o.target, "opencl -device=mali", "override target")
eq(o.target_host, "llvm", "override target_host")
eq(HP{ num_cores = 3 }.num_cores, 3, "override num_cores on the host's defaults")
assert(tostring(o):find("warp_size=4", 1, true), "tostring shows the fields")
assert(o:handle() ~= nil, "handle")

-- a pocl device: every queried field is the device's own answer
local pocl
for d = 0, opencl.count() - 1 do
  if opencl.device(d).platform:find("Portable", 1, true) then pocl = d; break end
end
if pocl then
  local info = opencl.device(pocl)
  local g = of("opencl", { device = pocl })
  eq(g.max_shared_memory_per_block, info.local_mem_bytes, "pocl shared memory")
  eq(g.max_threads_per_block, info.max_work_group_size, "pocl threads")
  eq(g.warp_size, info.subgroup_size, "pocl warp")
  eq(g.max_vthread_extent, math.max(1, math.floor(info.subgroup_size / 4)), "pocl vthread")
  eq(g.max_local_memory_per_block, 2147483647, "pocl local memory")
  local t = of("opencl", { device_info = info })
  eq(t.max_threads_per_block, info.max_work_group_size, "device_info table")
  eq(HP{ target = "opencl", device = pocl, warp_size = 8 }.warp_size, 8, "pocl override")
  eq(HP{ target = "opencl", device = pocl, warp_size = 8 }.max_threads_per_block,
     info.max_work_group_size, "pocl override keeps the rest")
else
  print("skip: no pocl device")
end

-- bad input names the field or the argument
fails("warp_size = -2 is out of range", HP, { warp_size = -2 })
fails("num_cores = 0 is out of range", HP, { num_cores = 0 })
fails("vector_unit_bytes = 0 is out of range", HP, -1, 0, 64, 1, 1, 1, 1, 1)
fails("max_threads_per_block = 4294967296 is out of range", HP, { max_threads_per_block = 2 ^ 32 })
fails("HardwareParams: unknown field 'wrap_size'", HP, { wrap_size = 2 })
fails("HardwareParams: cache_line_bytes must be an integer, got 1.5", HP, { cache_line_bytes = 1.5 })
fails("HardwareParams: warp_size must be an integer, got x", HP, { warp_size = "x" })
fails("hardware_params_of: device must be a non-negative integer, got -1", of, "opencl", { device = -1 })
fails("runs on the host; device applies to OpenCL targets", of, "llvm", { device = 0 })
fails("no OpenCL device 99", of, "opencl", { device = 99 })
fails("device info has no non-negative integer 'subgroup_size'", of, "opencl",
      { device_info = { max_work_group_size = 64, local_mem_bytes = 1 } })
fails("hardware_params_of: options must be a table", of, "llvm", 3)
fails("nosuch", of, "nosuch")
print("ok")
