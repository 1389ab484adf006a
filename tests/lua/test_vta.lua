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
  "    0  LOAD   INP  sram 0 <- dram 0x0+[1 x 4, stride 4]  | push l2g\n    1  FINISH \n", "disasm")
local ok, err = pcall(env.disasm, env, finish .. string.char(7) .. string.rep("\0", 15))
assert(not ok and err:find("vta disasm: instruction 1: bad opcode 7", 1, true), tostring(err))

util.cleanup(dir)
print("ok")
