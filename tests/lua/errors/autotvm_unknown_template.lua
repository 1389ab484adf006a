-- expect: tunelua: tests/lua/errors/autotvm_unknown_template.lua:5: autotvm: unknown template 'conv2d_nchw.x86' (known .x86: conv2d_NCHWc.x86, depthwise_conv2d_NCHWc.x86, dense_pack.x86, dense_nopack.x86, conv2d_NCHWc_winograd.x86)
local autotvm = require "tunelua.autotvm"

-- a template name that no registry knows lists the known ones
autotvm.task.create("conv2d_nchw.x86", { { "TENSOR", { 1, 3, 8, 8 }, "float32" } }, "llvm")
