-- expect: tunelua: tests/lua/errors/autotvm_index_range.lua:7: task dense_nopack.x86: config index must be an integer in [-1, 144), got 144
local autotvm = require "tunelua.autotvm"

local args = { { "TENSOR", { 4, 32 }, "float32" }, { "TENSOR", { 24, 32 }, "float32" }, autotvm.record.null, "float32" }
local task = autotvm.task.create("dense_nopack.x86", args, "llvm")
-- the space has 3 * 8 * 6 = 144 configs
task:instantiate(144)
