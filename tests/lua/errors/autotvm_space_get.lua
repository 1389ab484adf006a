-- expect: tunelua: tests/lua/errors/autotvm_space_get.lua:6: space:get: index must be an integer in [-1, 144), got 1.5
local autotvm = require "tunelua.autotvm"

local args = { { "TENSOR", { 4, 32 }, "float32" }, { "TENSOR", { 24, 32 }, "float32" }, autotvm.record.null, "float32" }
local task = autotvm.task.create("dense_nopack.x86", args, "llvm")
print(task.config_space:get(1.5))
