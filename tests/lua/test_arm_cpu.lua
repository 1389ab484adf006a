-- The arm_cpu family (targets/arm_cpu): TVM's knobs, every TopHub arm_cpu_v0.08.log record
-- of our templates mapped to a config of ours, the strategy, the -mtriple toolchains and
-- their errors, and random configs of each template cross compiled for aarch64 and run
-- under qemu-aarch64 (tunelua-kernel-run) against a host reference.
local autotvm = require "tunelua.autotvm"
local te = require "tunelua.te"
local tl = require "tunelua"
local nd = tl.nd
local core = require "tunelua.core"
local testing = require "tunelua.testing"
local record = require "tunelua.autotvm.record"
local measure = require "tunelua.autotvm.measure"
local target = require "tunelua.target"
local file = require "tunelua.file"
local util = require "tests.lua.lib.util"
local ffi = core.ffi

local TARGET = "llvm -device=arm_cpu -mtriple=aarch64-linux-gnu -mattr=+neon"
local function T(shape) return { "TENSOR", shape, "float32" } end
local function conv_args(d, k, st, pad) return { T(d), T(k), { st, st }, { pad, pad, pad, pad }, { 1, 1 }, "float32" } end
local names_of = util.knob_names

-- ---- spaces: TVM's knobs ----------------------------------------------------------------------
local knob_names = {
  ["conv2d_nchw_spatial_pack.arm_cpu"] = "tile_co,tile_oh,tile_ow,reorder_0,ann_reduce,ann_spatial",
  ["conv2d_nchw_winograd.arm_cpu"] = "tile_p,tile_k,tile_c,ann_reduce,ann_spatial",
  ["depthwise_conv2d_nchw.arm_cpu"] = "tile_c,tile_h,tile_w,ann",
  ["depthwise_conv2d_nchw_spatial_pack.arm_cpu"] = "tile_co,tile_oh,tile_ow,reorder_0,reorder_1,ann_reduce,ann_spatial",
}
do
  local t = autotvm.task.create("conv2d_nchw_spatial_pack.arm_cpu", conv_args({ 1, 64, 56, 56 }, { 64, 64, 3, 3 }, 1, 1), TARGET)
  assert(names_of(t) == knob_names[t.name], names_of(t))
  -- tile_co 7 x tile_oh 8 x tile_ow 8 (factor pairs of 64, 56, 56) x reorder 2 x 4 x 20 (try_unroll_vec: at most one vec)
  assert(#t.config_space == 7 * 8 * 8 * 2 * 4 * 20, #t.config_space)
  local tw = autotvm.task.create("conv2d_nchw_winograd.arm_cpu", conv_args({ 1, 64, 56, 56 }, { 64, 64, 3, 3 }, 1, 1), TARGET)
  assert(names_of(tw) == knob_names[tw.name], names_of(tw))
  -- P = 14 * 14 = 196: inner factors <= 16 of 196 (1 2 4 7 14), of 64 (1 2 4 8 16) twice; 2 x 8
  assert(#tw.config_space == 5 * 5 * 5 * 2 * 8, #tw.config_space)
  local ok, err = pcall(autotvm.task.create, "conv2d_nchw_winograd.arm_cpu", conv_args({ 1, 8, 8, 8 }, { 8, 8, 3, 3 }, 2, 1), TARGET)
  assert(not ok and tostring(err):find("stride 1", 1, true), tostring(err))
  local td = autotvm.task.create("depthwise_conv2d_nchw_spatial_pack.arm_cpu", conv_args({ 1, 32, 16, 16 }, { 32, 1, 3, 3 }, 1, 1), TARGET)
  assert(names_of(td) == knob_names[td.name], names_of(td))
  assert(#td.config_space == 6 * 5 * 5 * 2 * 3 * 4 * 20, #td.config_space)
end

-- ---- every TopHub arm_cpu record of our templates maps to a config (same index) ------------------
do
  local dir = require("tunelua.autotvm.tophub").dir()
  local path = dir and (dir .. "/arm_cpu_v0.08.log")
  local fh = path and io.open(path)
  assert(fh, "TopHub arm_cpu_v0.08.log not found")
  fh:close()
  local recs = record.load_from_file(path)
  local tasks, n, same, other, inst = {}, 0, 0, 0, 0
  for _, r in ipairs(recs) do
    if knob_names[r.inp.task_name] then
      local key = r.inp.task_name .. record.workload_key(r.inp.workload)
      tasks[key] = tasks[key] or autotvm.task.create(r.inp.task_name, r.inp.args, r.inp.target)
      local t = tasks[key]
      local idx, why = t.config_space:index_of(r.inp.config.entity)
      assert(idx, why)
      n = n + 1
      if idx == r.inp.config.index then same = same + 1 end
      if n % 97 == 1 then t:instantiate(idx); inst = inst + 1 end
    else
      other = other + 1
    end
  end
  print(string.format("arm_cpu_v0.08.log: %d records, %d of our templates mapped (%d with TVM's index), " ..
    "%d of templates we lack (conv2d_transpose_nchw.arm_cpu), %d instantiated", #recs, n, same, other, inst))
  assert(#recs == 1164 and n == 1156 and other == 8, n)
  -- two vtacpu records carry a pynq record's index with a tile_co of 32 for 64 channels
  assert(same == 1154, same)
end

-- ---- strategy: resnet-18 on arm_cpu extracts 12 spatial pack + 4 winograd convs ------------------
do
  local extract = require "tunelua.graph.extract"
  local mod, params = require("networks").get_network("resnet-18", { image_size = 224 })
  local tasks = extract.autotvm(mod, { target = TARGET, params = params, ops = { "nn.conv2d" } })
  local count = {}
  for _, t in ipairs(tasks) do count[t.name] = (count[t.name] or 0) + 1 end
  assert(#tasks == 16 and count["conv2d_nchw_spatial_pack.arm_cpu"] == 12 and
         count["conv2d_nchw_winograd.arm_cpu"] == 4, #tasks)
end

-- ---- targets: toolchains per -mtriple, errors ------------------------------------------------
do
  local t = target.parse("llvm -device=arm_cpu -model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon")
  assert(t.cross_prefix == "aarch64-linux-gnu-" and t.cflags == "-O3 -march=armv8-a" and t.lanes == 4, t.cflags)
  assert(target.parse("llvm -device=arm_cpu").cross_prefix == "aarch64-linux-gnu-")
  assert(target.parse("llvm -device=arm_cpu -model=bcm2837 -mtriple=armv7l-linux-gnueabihf -mattr=+neon").cross_prefix
         == "arm-linux-gnueabihf-")
  local ok, err = pcall(target.parse, "llvm -device=arm_cpu -mtriple=riscv64-linux-gnu")
  assert(not ok and tostring(err):find("unknown -mtriple 'riscv64-linux-gnu' in target", 1, true) and
         tostring(err):find("aarch64-linux-gnu", 1, true), tostring(err))
  -- records keep any triple (logs of other machines are read, not built)
  assert(target.record("llvm -device=arm_cpu -mtriple=riscv64-linux-gnu").family == "arm_cpu")
  -- a build for an ARM triple does not run here
  local A = te.placeholder({ 16 }, "float32", "A")
  local B = te.compute({ 16 }, function(i) return A(i) * 2 end, "B")
  local s = te.create_schedule(B.op)
  ok, err = pcall(tl.build, s, { A, B }, TARGET)
  assert(not ok and tostring(err):find("builds kernels for aarch64-linux-gnu", 1, true), tostring(err))
end

-- The missing cross compiler names its Debian package (armv7: gcc-arm-linux-gnueabihf, which
-- the bootstrap does not install; where it is installed, the build succeeds).
local has_armhf = os.execute("command -v arm-linux-gnueabihf-gcc > /dev/null 2>&1")
has_armhf = has_armhf == 0 or has_armhf == true
do
  local t = autotvm.task.create("depthwise_conv2d_nchw.arm_cpu", conv_args({ 1, 8, 8, 8 }, { 8, 1, 3, 3 }, 1, 1),
                                "llvm -device=arm_cpu -model=bcm2837 -mtriple=armv7l-linux-gnueabihf -mattr=+neon")
  local br = measure.LocalBuilder({ n_parallel = 1, timeout = 60 }):build({ measure.MeasureInput(t, -1) })
  if has_armhf then
    assert(br[1].error_no == 0, br[1].error_msg)
  else
    assert(br[1].error_no ~= 0 and br[1].error_msg:find("arm-linux-gnueabihf-gcc", 1, true) and
           br[1].error_msg:find("gcc-arm-linux-gnueabihf", 1, true), br[1].error_msg)
  end
  measure.cleanup(br)
end
-- the same for the Android triple, whose compiler (the NDK's clang) nothing here installs
local has_ndk = os.execute("command -v aarch64-linux-android24-clang > /dev/null 2>&1")
has_ndk = has_ndk == 0 or has_ndk == true
do
  local t = autotvm.task.create("depthwise_conv2d_nchw.arm_cpu", conv_args({ 1, 8, 8, 8 }, { 8, 1, 3, 3 }, 1, 1),
                                "llvm -device=arm_cpu -model=kirin970 -mtriple=arm64-linux-android -mattr=+neon")
  local br = measure.LocalBuilder({ n_parallel = 1, timeout = 60 }):build({ measure.MeasureInput(t, -1) })
  if has_ndk then
    assert(br[1].error_no == 0, br[1].error_msg)
  else
    assert(br[1].error_no ~= 0 and br[1].error_msg:find("aarch64-linux-android24-clang", 1, true) and
           br[1].error_msg:find("the Android NDK", 1, true), br[1].error_msg)
  end
  measure.cleanup(br)
end

-- ---- random configs under qemu-aarch64 --------------------------------------------------------
local QEMU = os.getenv("TUNELUA_QEMU_AARCH64") or "qemu-aarch64"
local SYSROOT = os.getenv("TUNELUA_AARCH64_SYSROOT") or "/usr/aarch64-linux-gnu"
local RUNNER = os.getenv("TUNELUA_BUILD_DIR") and (os.getenv("TUNELUA_BUILD_DIR") .. "/aarch64/tunelua-kernel-run")
               or "build/aarch64/tunelua-kernel-run"
assert(io.open(RUNNER), RUNNER .. " not built (scripts/bootstrap installs gcc-aarch64-linux-gnu)")
local dir = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tl-arm")

local function write_raw(path, a)
  local f = assert(io.open(path, "wb"))
  f:write(ffi.string(a:data_ptr(), a:numel() * 4))
  f:close()
end
local function read_raw(path, a)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  assert(#s == a:numel() * 4, path .. ": " .. #s .. " bytes")
  ffi.copy(a:data_ptr(), s, #s)
end
local function shape_str(s)
  local p = {}
  for i, v in ipairs(s) do p[i] = tostring(v) end
  return table.concat(p, "x")
end

local rand_index = util.lcg(4242)

-- n random configs (and the fallback) built for aarch64 in one batch, each run under qemu.
local total = 0
-- A template whose constant weight is deployed transformed (the spatial pack's packed kernel,
-- winograd's G g G^T) takes it that way: the weight goes through the template's own deploy
-- function (as the graph executor does), the reference stays the plain operator's.
local executor = require "tunelua.graph.executor"
local deployed = 0
local function check_task(t, args, ref_op, ref_shapes, ref_attrs, n)
  local inputs, expect, oshape = util.reference(ref_op, ref_shapes, ref_attrs, 11)
  local specs = {}
  for i, s in ipairs(ref_shapes) do
    local p = string.format("%s/in%d.bin", dir, i)
    local v, sh = inputs[i], s
    local dsh = i == 2 and executor.deployed_shape(t.name, args, 2)
    if dsh then
      v, sh = executor.deploy_input(t.name, args, 2, v), dsh
      deployed = deployed + 1
    end
    write_raw(p, v)
    specs[i] = string.format("in:%s:float32:%s", p, shape_str(sh))
  end
  local mi = { measure.MeasureInput(t, -1) }
  for _ = 1, n do mi[#mi + 1] = measure.MeasureInput(t, rand_index(#t.config_space)) end
  local br = measure.LocalBuilder({ n_parallel = 2, timeout = 120 }):build(mi)
  local ran = 0
  for i, b in ipairs(br) do
    if b.error_no ~= 0 then
      assert(i > 1 and b.error_msg:find("unrolling", 1, true), t.name .. ": " .. tostring(b.error_msg))
    else
      local out = string.format("%s/out.bin", dir)
      os.remove(out)
      local cmd = string.format("%s -L %s %s %s %s %s out:%s:float32:%s 2>&1", QEMU, SYSROOT, RUNNER, b.so_path,
                                b.fname, table.concat(specs, " "), out, shape_str(oshape))
      local p = io.popen(cmd .. "; echo \"__rc=$?\"")
      local said = p:read("*a")
      p:close()
      assert(said:match("__rc=0%s*$"), "qemu run failed: " .. cmd .. "\n" .. said)
      local got = nd.empty(oshape, "float32")
      read_raw(out, got)
      testing.assert_allclose(got, expect, { rtol = 1e-3, atol = 1e-3,
        err_msg = t.name .. " config " .. tostring(t.config_space:get(mi[i].config.index or -1)) })
      ran = ran + 1
    end
  end
  measure.cleanup(br)
  assert(ran >= 2, t.name .. ": only " .. ran .. " configs ran")
  total = total + ran
end

local c1 = { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } }
local function check(name, args, ref_op, ref_attrs)
  check_task(autotvm.task.create(name, args, TARGET), args, ref_op, { args[1][2], args[2][2] }, ref_attrs, 2)
end
check("conv2d_nchw_spatial_pack.arm_cpu", conv_args({ 1, 8, 8, 8 }, { 16, 8, 3, 3 }, 1, 1), "conv2d", c1)
check("conv2d_nchw_spatial_pack.arm_cpu", conv_args({ 1, 4, 9, 9 }, { 12, 4, 3, 3 }, 2, 0), "conv2d",
      { strides = { 2, 2 }, padding = { 0, 0, 0, 0 }, dilation = { 1, 1 } })
check("conv2d_nchw_winograd.arm_cpu", conv_args({ 1, 8, 10, 10 }, { 16, 8, 3, 3 }, 1, 1), "conv2d", c1)
check("depthwise_conv2d_nchw.arm_cpu", conv_args({ 1, 8, 9, 9 }, { 8, 1, 3, 3 }, 1, 1), "depthwise_conv2d", c1)
check("depthwise_conv2d_nchw_spatial_pack.arm_cpu", conv_args({ 1, 8, 9, 9 }, { 8, 1, 3, 3 }, 2, 1),
      "depthwise_conv2d", { strides = { 2, 2 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } })
assert(deployed == 3, "the spatial pack and winograd weights are deployed transformed, got " .. deployed)
file.remove(dir)
print(string.format("test_arm_cpu: %d configs ran under qemu-aarch64", total))
print("test_arm_cpu: ok")
