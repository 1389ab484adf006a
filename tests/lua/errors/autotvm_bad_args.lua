-- expect: tunelua: tests/lua/errors/autotvm_bad_args.lua:5: autotvm.task.create(conv2d_NCHWc.x86): data and kernel must be 4-D (NCHW, OIHW), got 3-D and 4-D
local autotvm = require "tunelua.autotvm"

-- conv2d needs 4-D data and kernel
autotvm.task.create("conv2d_NCHWc.x86", { { "TENSOR", { 3, 8, 8 }, "float32" }, { "TENSOR", { 4, 3, 3, 3 }, "float32" },
  { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }, "llvm")
