-- tunelua.target: target strings parsed once (tl_target_parse), read through the FFI.
local target = require "tunelua.target"

local function eq(a, b, what)
  if a ~= b then error(string.format("%s: got %s, expected %s", what, tostring(a), tostring(b)), 2) end
end

local function expect_error(needle, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error containing: " .. needle)
  assert(tostring(err):find(needle, 1, true), "wrong error: " .. tostring(err) .. "\n expected: " .. needle)
end

-- families, lanes, classes
local t = target.parse("llvm -mcpu=skylake-avx512")
eq(t.family, "x86", "family"); eq(t.kind, "llvm", "kind"); eq(t.lanes, 16, "avx512 lanes")
eq(t.mcpu, "skylake-avx512", "mcpu"); eq(t.schedules, "cpu", "schedules"); eq(t.backend, "c", "backend")
eq(t.tophub.package, "llvm", "tophub package"); eq(t.tophub.version, "v0.04", "tophub version")
eq(#t.keys, 1, "keys"); eq(t.keys[1], "cpu", "key")
eq(target.parse("llvm -mcpu=skylake-avx512"), t, "cached per string")
eq(target.parse(t), t, "a parsed target parses to itself")
eq(target.parse({ str = "llvm -mcpu=skylake-avx512" }), t, "a table with str")
eq(target.parse("llvm -mcpu=core-avx2").lanes, 8, "avx2 lanes")
eq(target.parse("llvm -mcpu=core-avx2").registers, 16, "avx2 registers")
eq(t.registers, 32, "avx512 registers")

-- a plain target takes the host CPU's vectors (its /proc/cpuinfo flags, read here)
local function cpu_flags()
  local f = io.open("/proc/cpuinfo")
  local set = {}
  if f then
    for line in f:lines() do
      local fl = line:match("^flags%s*:(.*)")
      if fl then for w in fl:gmatch("%S+") do set[w] = true end break end
    end
    f:close()
  end
  return set
end
local host = cpu_flags()
local host_lanes = host.avx512f and 16 or (host.avx2 and host.fma) and 8 or 4
eq(target.parse("llvm").lanes, host_lanes, "llvm lanes: the host's")
eq(target.parse("c").lanes, host_lanes, "c lanes: the host's")
eq(target.parse("llvm").registers, host_lanes == 16 and 32 or 16, "llvm registers: the host's")
eq(target.parse("c").family, "x86", "c family")

local m = target.parse("opencl -device=mali -model=rk3399")
eq(m.family, "mali", "mali family"); eq(m.device, "mali", "device"); eq(m.model, "rk3399", "model")
eq(m.backend, "opencl", "mali backend"); eq(m.schedules, "opencl", "mali schedules")
eq(table.concat(m.keys, ","), "mali,opencl,gpu", "mali keys")
eq(m.fallback_untuned, true, "mali fallback")
eq(#m.strategy, 4, "mali strategy rows"); eq(m.strategy[2].when, "3x3s1", "winograd condition")
eq(target.parse("opencl").family, "opencl", "generic opencl")
eq(#target.parse("opencl").strategy, 0, "generic opencl has no templates")
eq(target.device_id(target.parse("opencl -device_id=1")), 1, "device_id")
eq(target.device_id(target.parse("opencl")), 0, "default device")
eq(target.parse("llvm -device=arm_cpu -keys=arm_cpu,cpu").family, "arm_cpu", "arm family")
eq(table.concat(target.parse("llvm -keys=a,b -device=d").keys, ","), "a,b,d", "-keys then -device")

-- what a target builds with and where its kernels run
local C = require("tunelua.core").C
eq(t.toolchain ~= nil, true, "x86 toolchain"); eq(t.cc, nil, "x86 compiler: the default")
eq(t.cflags, "-O3 -march=skylake-avx512", "x86 flags of -mcpu");
eq(target.parse("llvm").cflags, "-O3 -march=native", "x86 flags of the host"); eq(t.cross_prefix, "", "x86 cross prefix")
eq(t.device_type, C.TL_DEV_CPU, "x86 device type"); eq(t.on_device, false, "x86 runs on the host")
eq(m.toolchain, nil, "mali has no C toolchain"); eq(m.device_type, C.TL_DEV_OPENCL, "mali device type")
eq(m.on_device, true, "mali runs on a device")
local cu = target.record("cuda -arch=sm_80")
eq(cu.backend, nil, "cuda: no backend"); eq(cu.on_device, true, "cuda: a device")
eq(target.record("foo").on_device, false, "an unknown record kind: host")

-- errors name the input
expect_error("unknown target option '-foo' in target 'llvm -foo=1'", target.parse, "llvm -foo=1")
expect_error("unknown target 'cuda' (expected \"c\", \"ext_dev\", \"llvm\" or \"opencl\", with options)", target.parse, "cuda")
expect_error("target option 'mcpu' should look like -key=value", target.parse, "llvm mcpu")
expect_error("unknown target ''", target.parse, "")
expect_error("got nil", target.parse, nil)
local r, msg = target.try_parse("opencl -model")
assert(r == nil or r.options.model == true, msg)

-- a log's target: any kind and option
local info = target.info("cuda -arch=sm_80")
eq(table.concat(info.keys, ","), "cuda,gpu", "cuda keys"); eq(info.model, "unknown", "no model")
eq(target.record("cuda -arch=sm_80").family, nil, "no family")
-- TopHub's VTA records (-keys=cpu) are the vta family's, measured by its backend
local v = target.record("ext_dev -device=vta -keys=cpu -model=pynq_1x16_i8w8a32_15_15_18_17")
eq(v.family, "vta", "vta family"); eq(v.backend, "vta", "vta backend"); eq(v.on_device, true, "on device")
eq(target.parse("ext_dev -device=vta -model=sim_1x16_i8w8a32_15_15_18_17").keys[1], "vta", "vta keys")
eq(target.info("llvm -device=arm_cpu -target=aarch64-linux-gnu").options.mtriple, "aarch64-linux-gnu",
   "-target is -mtriple")

-- template facts asked of the registry
local f = target.template_flags("conv2d_NCHWc.x86")
assert(f.prepacked_weight and f.fallback_deploys)
f = target.template_flags("dense.mali")
assert(not f.prepacked_weight and not f.fallback_deploys)

-- the executor's and extraction's entry takes the same objects
local strategy = require "tunelua.graph.strategy"
eq(strategy.parse_target("opencl -device=mali -model=rk3399"), m, "strategy.parse_target")
expect_error("strategy: unknown target option '-bogus'", strategy.parse_target, "opencl -bogus=1")

-- kernels of a target this CPU cannot run: builds and measurements here refuse it, parsing and
-- tasks (logs, RPC) take it; TUNELUA_HOST_CPU_FLAGS stands for the CPU's flags (a test hook)
do
  local ffi = require "ffi"
  ffi.cdef [[int setenv(const char *, const char *, int); int unsetenv(const char *);]]
  local tl = require "tunelua"
  local te, autotvm = tl.te, require "tunelua.autotvm"
  eq(target.parse("llvm"):check_host(), true, "the host runs its own kernels")
  local spr = host.avx512f and host.avx512bw and host.avx512_vnni and host.avx512_bf16 and
              host.avx512_fp16 and host.amx_tile
  local ok, why = target.parse("llvm -mcpu=sapphirerapids"):check_host()
  eq(ok == true, spr == true, "sapphirerapids kernels run here as /proc/cpuinfo says")
  if not ok then assert(why:find("target 'llvm -mcpu=sapphirerapids' needs ", 1, true), why) end

  ffi.C.setenv("TUNELUA_HOST_CPU_FLAGS", "fpu sse sse2 sse4_2 avx fma avx2", 1)
  local skx = "llvm -mcpu=skylake-avx512"
  local ok2, why2 = target.parse(skx):check_host()
  eq(ok2, nil, "skylake-avx512 on an AVX2 host")
  assert(why2:find("^target 'llvm %-mcpu=skylake%-avx512' needs AVX%-512, which this CPU %(.+%) lacks: " ..
                   "kernels built for it cannot run here$"), why2)
  eq(target.parse("llvm -mcpu=core-avx2"):check_host(), true, "core-avx2 on an AVX2 host")
  eq(target.parse("opencl -device=mali"):check_host(), true, "OpenCL kernels are not host code")

  local A = te.placeholder({ 16 }, "float32", "A")
  local B = te.compute({ 16 }, function(i) return A(i) * 2 end, "B")
  local s = te.create_schedule(B.op)
  expect_error("build: target 'llvm -mcpu=skylake-avx512' needs AVX-512, which this CPU (",
               tl.build, s, { A, B }, skx)
  tl.build(s, { A, B }, "llvm -mcpu=core-avx2")      -- a target the host runs builds

  local relay = require "tunelua.relay"
  local executor = require "tunelua.graph.executor"
  local x = relay.var("x", { shape = { 1, 8 } })
  local mod = relay.Module(relay.Function({ x }, relay.nn.relu(x)))
  -- the network builds (and could be exported to that machine); it does not run here
  local lib = executor.build(mod, { target = skx, quiet = true })
  expect_error("GraphModule: target 'llvm -mcpu=skylake-avx512' needs AVX-512", executor.GraphModule, lib)

  -- a task for it is made and built (an RPC runner would run it elsewhere); the local runner refuses
  local args = { { "TENSOR", { 1, 64 }, "float32" }, { "TENSOR", { 32, 64 }, "float32" }, nil, "float32" }
  local task = autotvm.task.create("dense_pack.x86", args, skx)
  local measure = autotvm.measure
  local inputs = { measure.MeasureInput(task, 0) }
  local brs = measure.LocalBuilder({ n_parallel = 1 }):build(inputs)
  eq(brs[1].error_no, 0, "built for a CPU the host lacks: " .. tostring(brs[1].error_msg))
  expect_error("LocalRunner: target 'llvm -mcpu=skylake-avx512' needs AVX-512", function()
    return measure.LocalRunner({ number = 1, ["repeat"] = 1 }):run(inputs, brs)
  end)
  -- the build's directory under TMPDIR goes with it (the runner refused it, so nothing else
  -- removes it)
  local dir = brs[1].dir
  measure.cleanup(brs)
  eq(require("tunelua.file").exists(dir), false, "the refused build's directory is removed")
  ffi.C.unsetenv("TUNELUA_HOST_CPU_FLAGS")
  eq(target.parse("llvm -mcpu=core-avx2"):check_host(), true, "the hook unset")
end

print("test_target: ok")

