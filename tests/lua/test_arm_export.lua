-- lib:export_library for arm_cpu and the device runtime (device/runtime.c, tunelua-run): resnet-18
-- at 32x32 built for "llvm -device=arm_cpu -mtriple=aarch64-linux-gnu" (the arm_cpu strategy's
-- fallback configs; a cross build: its host twin runs here) is exported as one .tlpack, run
-- under qemu-aarch64 with the static aarch64 tunelua-run, and matches the host twin's output.
-- The host build of the same network exported for x86_64 runs with the host tunelua-run. Bad
-- packs are refused with their reason: another machine's pack, a truncated pack, a wrong input.
-- (scripts/tune_arm.lua does the same at 224x224.)
local ffi = require "ffi"
local nd = require "tunelua.nd"
local file = require "tunelua.file"
local networks = require "networks"
local executor = require "tunelua.graph.executor"
local testing = require "tunelua.testing"

local QEMU = os.getenv("TUNELUA_QEMU_AARCH64") or "qemu-aarch64"
local SYSROOT = os.getenv("TUNELUA_AARCH64_SYSROOT") or "/usr/aarch64-linux-gnu"
local B = os.getenv("TUNELUA_BUILD_DIR") or "build"
local RUN_A64, RUN_HOST = B .. "/aarch64/tunelua-run", B .. "/tunelua-run"
assert(io.open(RUN_A64), RUN_A64 .. " not built (scripts/bootstrap installs gcc-aarch64-linux-gnu)")
local tmp = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-test-arm-export")

local function sh(cmd)   -- (ok, output): ok when the command exits 0
  local p = io.popen(cmd .. " 2>&1; echo \"__rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("__rc=(%d+)%s*$"))
  return rc == 0, (out:gsub("__rc=%d+%s*$", ""))
end
local function write_raw(path, a)
  local f = assert(io.open(path, "wb"))
  f:write(ffi.string(a:data_ptr(), a:nbytes()))
  f:close()
end
local function read_raw(path, a)
  local s = assert(io.open(path, "rb")):read("*a")
  assert(#s == a:nbytes(), path .. ": " .. #s .. " bytes, expected " .. a:nbytes())
  ffi.copy(a:data_ptr(), s, #s)
  return a
end

local TARGET = "llvm -device=arm_cpu -model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon"
local mod, params, ishape = networks.get_network("resnet-18", { image_size = 32, num_classes = 10 })
local lib = executor.build(mod, { target = TARGET, params = params, quiet = true })
assert(lib.cross, "an aarch64 build on this host is a cross build")
local pack = tmp .. "/resnet18.tlpack"
lib:export_library(pack)

-- the host twin's output for a random image
local m = executor.GraphModule(lib)
local x = nd.random_uniform(ishape, { seed = 5, low = -1, high = 1 })
m:set_input("data", x)
m:run()
local want = m:get_output(0)
write_raw(tmp .. "/x.bin", x)

local ok, out = sh(string.format("%s -L %s %s %s %s -o %s/y.bin -r 1", QEMU, SYSROOT, RUN_A64, pack,
                                 tmp .. "/x.bin", tmp))
assert(ok, "tunelua-run under qemu: " .. out)
assert(out:find("target: " .. TARGET, 1, true) and out:find("\nclass %d+: ") and out:find("time: "), out)
local got = read_raw(tmp .. "/y.bin", nd.empty(want:shape(), "float32"))
testing.assert_allclose(got, want, { rtol = 1e-4, atol = 1e-5, err_msg = "resnet-18 on aarch64 vs the host" })

-- bad input: another machine's pack, a truncated pack, an input of the wrong size
ok, out = sh(string.format("%s %s %s/x.bin -r 0", RUN_HOST, pack, tmp))
assert(not ok and out:find("holds code for aarch64 (target '" .. TARGET .. "'), but this runtime runs on x86_64", 1, true), out)
local bytes = assert(io.open(pack, "rb")):read("*a")
local cut = tmp .. "/cut.tlpack"
local f = assert(io.open(cut, "wb"))
f:write(bytes:sub(1, #bytes - 1000))
f:close()
ok, out = sh(string.format("%s -L %s %s %s %s/x.bin -r 0", QEMU, SYSROOT, RUN_A64, cut, tmp))
assert(not ok and out:find("cut.tlpack' is truncated or damaged", 1, true), out)
ok, out = sh(string.format("%s -L %s %s %s %s -r 0", QEMU, SYSROOT, RUN_A64, pack, pack))
assert(not ok and out:find("takes " .. x:nbytes(), 1, true), out)
ok, out = sh(string.format("%s -L %s %s %s/nope.tlpack %s/x.bin", QEMU, SYSROOT, RUN_A64, tmp, tmp))
assert(not ok and out:find("cannot open", 1, true), out)

-- the x86_64 build of a small network (conv + bias + relu, max_pool, dense) runs with the host
-- tunelua-run
local relay = require "tunelua.relay"
local function var(n, shape) return relay.var(n, { shape = shape, dtype = "float32" }) end
local sx, w1, b1 = var("data", { 1, 4, 8, 8 }), var("w1", { 8, 4, 3, 3 }), var("b1", { 8 })
local wf, bf = var("wf", { 10, 8 * 4 * 4 }), var("bf", { 10 })
local y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(sx, w1, { padding = { 1, 1 }, channels = 8,
                                                                 kernel_size = { 3, 3 } }), b1))
y = relay.nn.max_pool2d(y, { pool_size = { 2, 2 }, strides = { 2, 2 } })
y = relay.nn.bias_add(relay.nn.dense(relay.nn.batch_flatten(y), wf, { units = 10 }), bf)
local sparams = {
  w1 = nd.random_uniform({ 8, 4, 3, 3 }, { seed = 1, low = -1, high = 1 }),
  b1 = nd.random_uniform({ 8 }, { seed = 2 }),
  wf = nd.random_uniform({ 10, 128 }, { seed = 4, low = -0.2, high = 0.2 }),
  bf = nd.random_uniform({ 10 }, { seed = 5 }),
}
local hlib = executor.build(relay.Module(relay.Function({ sx, w1, b1, wf, bf }, y)),
                            { target = "llvm", params = sparams, quiet = true })
local hpack = hlib:export_library(tmp .. "/host.tlpack")
local hm = executor.GraphModule(hlib)
local sxv = nd.random_uniform({ 1, 4, 8, 8 }, { seed = 9, low = -1, high = 1 })
write_raw(tmp .. "/sx.bin", sxv)
hm:set_input("data", sxv)
hm:run()
ok, out = sh(string.format("%s %s %s/sx.bin -o %s/hy.bin -r 1", RUN_HOST, hpack, tmp, tmp))
assert(ok and out:find("target: llvm", 1, true), out)
testing.assert_allclose(read_raw(tmp .. "/hy.bin", nd.empty({ 1, 10 }, "float32")), hm:get_output(0),
                        { rtol = 1e-5, atol = 1e-6 })
-- damaged packs are refused with their reason, never a crash
local hbytes = assert(io.open(hpack, "rb")):read("*a")
local function refused(name, content, want_text)
  local fh = assert(io.open(tmp .. "/" .. name, "wb"))
  fh:write(content)
  fh:close()
  local okr, o2 = sh(string.format("%s %s/%s %s/sx.bin -r 0", RUN_HOST, tmp, name, tmp))
  assert(not okr and o2:find(want_text, 1, true) and not o2:find("Segmentation", 1, true), name .. ": " .. o2)
end
refused("junk.tlpack", string.rep("junk", 100), "is not a tunelua pack")
refused("graph.tlpack", (hbytes:gsub('"tunelua%-graph"', '"tunelua-grapX"')), "graph.json: not a tunelua graph")
refused("arena.tlpack", (hbytes:gsub('"arena": *%d+', function(m) return (m:gsub("%d", "0")) end, 1)),
        "lies outside the arena")
refused("kernel.tlpack", (hbytes:gsub('("name": *")tlg_', '%1xlg_', 1)), "the pack's library has no kernel 'xlg_")
file.remove(tmp)
print("test_arm_export: ok")
