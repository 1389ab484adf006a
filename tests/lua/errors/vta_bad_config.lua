-- expect: tunelua: tests/lua/errors/vta_bad_config.lua:5: bad.json: LOG_ACC_WIDTH: expected 5 (the only width implemented)
local vta = require "tunelua.vta"

-- an accumulator of 16 bits: a width the simulator does not implement
vta.get_env { name = "bad.json", text = [[{"TARGET":"sim","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,
  "LOG_ACC_WIDTH":4,"LOG_BATCH":0,"LOG_BLOCK":4,"LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":15,
  "LOG_WGT_BUFF_SIZE":18,"LOG_ACC_BUFF_SIZE":17}]] }
