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
eq(target.parse("c").lanes, 8, "c lanes")
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
eq(t.cflags, "-O3 -march=native", "x86 flags"); eq(t.cross_prefix, "", "x86 cross prefix")
eq(t.device_type, C.TL_DEV_CPU, "x86 device type"); eq(t.on_device, false, "x86 runs on the host")
eq(m.toolchain, nil, "mali has no C toolchain"); eq(m.device_type, C.TL_DEV_OPENCL, "mali device type")
eq(m.on_device, true, "mali runs on a device")
local cu = target.record("cuda -arch=sm_80")
eq(cu.backend, nil, "cuda: no backend"); eq(cu.on_device, true, "cuda: a device")
eq(target.record("foo").on_device, false, "an unknown record kind: host")

-- errors name the input
expect_error("unknown target option '-foo' in target 'llvm -foo=1'", target.parse, "llvm -foo=1")
expect_error("unknown target 'cuda' (expected \"c\", \"llvm\" or \"opencl\", with options)", target.parse, "cuda")
expect_error("target option 'mcpu' should look like -key=value", target.parse, "llvm mcpu")
expect_error("unknown target ''", target.parse, "")
expect_error("got nil", target.parse, nil)
local r, msg = target.try_parse("opencl -model")
assert(r == nil or r.options.model == true, msg)

-- a log's target: any kind and option
local info = target.info("cuda -arch=sm_80")
eq(table.concat(info.keys, ","), "cuda,gpu", "cuda keys"); eq(info.model, "unknown", "no model")
eq(target.record("ext_dev -device=vta -keys=cpu").family, nil, "no family")
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
print("test_target: ok")
