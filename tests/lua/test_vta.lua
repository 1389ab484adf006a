-- tunelua.vta: get_env over the default vta_config.json and over a given text, the derived
-- parameters and target strings, errors naming the key, and the disassembler.
local vta = require "tunelua.vta"
local util = require "tests.lua.lib.util"

local function eq(got, want, what)
  assert(got == want, string.format("%s: got %s, want %s", what, tostring(got), tostring(want)))
end

local env = vta.get_env()
eq(vta.get_env(), env, "one env per file")
eq(env.TARGET, "sim", "TARGET")
eq(env.BATCH, 1, "BATCH")
eq(env.BLOCK_IN, 16, "BLOCK_IN")
eq(env.BLOCK_OUT, 16, "BLOCK_OUT")
eq(env.WGT_WIDTH, 8, "WGT_WIDTH")
eq(env.INP_ELEM_BITS, 128, "INP_ELEM_BITS")
eq(env.WGT_ELEM_BITS, 2048, "WGT_ELEM_BITS")
eq(env.ACC_ELEM_BITS, 512, "ACC_ELEM_BITS")
eq(env.LOG_OUT_BUFF_SIZE, 15, "LOG_OUT_BUFF_SIZE")
eq(env.UOP_BUFF_DEPTH, 8192, "UOP_BUFF_DEPTH")
eq(env.WGT_BUFF_DEPTH, 1024, "WGT_BUFF_DEPTH")
eq(env.inp_dtype, "int8", "inp_dtype")
eq(env.acc_dtype, "int32", "acc_dtype")
eq(env.out_dtype, "int8", "out_dtype")
eq(env.acc_scope, "local.acc_buffer", "acc_scope")
eq(env.BITSTREAM, "1x16_i8w8a32_15_15_18_17", "BITSTREAM")
eq(env.target, "ext_dev -device=vta -keys=vta,cpu -model=sim_1x16_i8w8a32_15_15_18_17", "target")
eq(env.target_host, "llvm", "target_host")
eq(env.CLOCK_MHZ, 100, "CLOCK_MHZ")

-- a pynq board with batch 2 from a file of our own
local dir = util.tmpdir("vta")
local path = dir .. "/vta_config.json"
local f = assert(io.open(path, "w"))
f:write([[{"TARGET":"pynq","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,
 "LOG_BATCH":1,"LOG_BLOCK":4,"LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":15,"LOG_WGT_BUFF_SIZE":18,
 "LOG_ACC_BUFF_SIZE":17,"CLOCK_MHZ":200}]])
f:close()
local pynq = vta.get_env { config = path }
eq(pynq.BATCH, 2, "pynq BATCH")
eq(pynq.MODEL, "pynq_2x16_i8w8a32_15_15_18_17", "pynq MODEL")
eq(pynq.target_host, "llvm -mtriple=armv7-none-linux-gnueabihf", "pynq target_host")
eq(pynq.INP_BUFF_DEPTH, 1024, "pynq INP_BUFF_DEPTH")
eq(pynq.CLOCK_MHZ, 200, "pynq CLOCK_MHZ")

-- errors name the file and the key
local function fails(opts, want)
  local ok, err = pcall(vta.get_env, opts)
  assert(not ok, "expected an error: " .. want)
  assert(err:find(want, 1, true), "error '" .. tostring(err) .. "' lacks '" .. want .. "'")
end
fails({ text = '{"TARGET":"sim"}', name = "t.json" }, "t.json: missing key HW_VER")
fails({ text = '{"TARGET":"sim","HW_VER":"1","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,'
        .. '"LOG_BATCH":0,"LOG_BLOCK":9,"LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":15,'
        .. '"LOG_WGT_BUFF_SIZE":18,"LOG_ACC_BUFF_SIZE":17}', name = "t.json" },
      "t.json: LOG_BLOCK: expected an integer in [1, 6]")
fails({ config = dir .. "/missing.json" }, "missing.json")

-- the disassembler: a LOAD of the input buffer that pushes to compute, then FINISH
local load = string.char(0x40 + 0x00, 0x01, 0, 0, 0, 0, 0, 0, 1, 0, 4, 0, 4, 0, 0, 0)
local finish = string.char(3) .. string.rep("\0", 15)
eq(env:disasm(load .. finish),
  "    0  LOAD   INP  sram 0 <- dram 0x0+[1 x 4, stride 4]  | push l2g\n    1  FINISH\n", "disasm")
local ok, err = pcall(env.disasm, env, finish .. string.char(7) .. string.rep("\0", 15))
assert(not ok and err:find("vta disasm: instruction 1: bad opcode 7", 1, true), tostring(err))

util.cleanup(dir)

-- conv2d_packed.vta: TVM's space (the tutorial's 480-config example), entities, a run
local task = vta.task(env, { { "TENSOR", { 1, 16, 14, 14, 1, 16 }, "int8" },
  { "TENSOR", { 32, 16, 3, 3, 16, 16 }, "int8" }, { 2, 2 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW1n16c", "int32" })
eq(task:len(), 480, "tutorial space size")
eq(task:flop(), 2 * 7 * 7 * 512 * 9 * 256, "flop")
local e = task:entity(77)
eq(e[2][1], "tile_h", "entity knob")
eq(task:index_of(e), 77, "index_of(entity)")
local small = vta.task(env, { { "TENSOR", { 1, 2, 8, 8, 1, 16 }, "int8" },
  { "TENSOR", { 2, 2, 3, 3, 16, 16 }, "int8" }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW1n16c", "int32" })
local idx = small:index_of { { "tile_b", "sp", { -1, 1 } }, { "tile_h", "sp", { -1, 4 } },
  { "tile_w", "sp", { -1, 8 } }, { "tile_ci", "sp", { -1, 1 } }, { "tile_co", "sp", { -1, 1 } },
  { "oc_nthread", "ot", 2 }, { "h_nthread", "ot", 1 } }
local st = small:run(idx, { seed = 3 })
assert(st.cycles > 0 and st.gops > 0 and st.gemm_busy > 0 and st.gemm_busy <= 1, "stats")
eq(st.macs, 8 * 8 * 32 * 32 * 9, "macs")
eq(st.gemm_counter, 8 * 8 * 2 * 2 * 9, "gemm_counter: one per 16x16 block product")
local text = small:disasm(idx)
assert(text:find("GEMM   uop", 1, true) and text:find("| pop l2g", 1, true), text)
-- a config whose tile does not fit: the input window of 8 rows x 2 channels with two threads
local ok, why = task:check(task:index_of { { "tile_b", "sp", { -1, 1 } }, { "tile_h", "sp", { -1, 7 } },
  { "tile_w", "sp", { -1, 7 } }, { "tile_ci", "sp", { -1, 16 } }, { "tile_co", "sp", { -1, 32 } },
  { "oc_nthread", "ot", 2 }, { "h_nthread", "ot", 2 } })
assert(not ok and why:find("more than the 2048 of the accumulator buffer", 1, true), tostring(why))

-- TopHub's VTA log: every conv2d_packed.vta record maps onto our space
local map = vta.tophub_map("data/tophub/vta_v0.10.log")
eq(map.lines, 120, "tophub lines")
eq(map.records, 106, "tophub records")
eq(map.by_template["conv2d_packed.vta"], 86, "conv2d_packed records")
eq(map.accepted, 86, "accepted")
eq(map.same_index, 75, "records whose index is ours too")
eq(map.fits, 86, "records that fit the SRAMs")
-- the smallest TopHub record of each configuration runs and matches the reference
local best = {}
for _, en in ipairs(map.entries) do
  local m = en.task.env.MODEL
  if not best[m] or en.task:flop() < best[m].task:flop() then best[m] = en end
end
for m, en in pairs(best) do
  local s = en.task:run(en.index)
  assert(s.gops > 1, m .. ": " .. s.gops)
end
-- the AutoTVM template: its tensor expression, built for the CPU, computes what the simulator
-- computes from the same config's VTA stream, on the same random data
do
  local tl = require "tunelua"
  local autotvm = require "tunelua.autotvm"
  local nd = require "tunelua.nd"
  local ffi = require "ffi"
  local args = { { "TENSOR", { 1, 2, 9, 7, 1, 16 }, "int8" }, { "TENSOR", { 3, 2, 3, 3, 16, 16 }, "int8" },
    { 2, 2 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW1n16c", "int32" }
  local atask = autotvm.task.create("conv2d_packed.vta", args, env.target)
  local vt = vta.task(env, args)
  eq(#atask.config_space, vt:len(), "one space")
  eq(atask.flop, vt:flop(), "one flop count")
  local data = nd.random_uniform({ 1, 2, 9, 7, 1, 16 }, { dtype = "int8", low = -128, high = 128, seed = 1 })
  local kern = nd.random_uniform({ 3, 2, 3, 3, 16, 16 }, { dtype = "int8", low = -128, high = 128, seed = 2 })
  local checked = 0
  for _, idx in ipairs { 0, 77, 150, vt:len() - 1 } do
    if vt:check(idx) then
      local s, targs = atask:instantiate(idx)
      local f = tl.build(s, targs, "c")
      local cpu, sim = nd.empty({ 1, 3, 5, 4, 1, 16 }, "int8"), nd.empty({ 1, 3, 5, 4, 1, 16 }, "int8")
      f(data, kern, cpu)
      vt:run_data(idx, data, kern, sim)
      local a, b = ffi.cast("int8_t *", cpu:data_ptr()), ffi.cast("int8_t *", sim:data_ptr())
      local nz = 0
      for i = 0, 3 * 5 * 4 * 16 - 1 do
        assert(a[i] == b[i], string.format("config %d: element %d: cpu %d, vta-sim %d", idx, i, a[i], b[i]))
        if a[i] ~= 0 then nz = nz + 1 end
      end
      assert(nz > 100, "a non-trivial output")
      checked = checked + 1
    end
  end
  assert(checked >= 3, "configs compared: " .. checked)
  local ok2, err2 = pcall(vt.run_data, vt, 0, kern, kern, data)
  assert(not ok2 and err2:find("data must be int8 of 2016 bytes", 1, true), tostring(err2))
end
print("ok")
