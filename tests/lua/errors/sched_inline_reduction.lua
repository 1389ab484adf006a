-- expect: tunelua: tests/lua/errors/sched_inline_reduction.lua:12: compute_inline: stage 'C' is a reduction
-- a reduction cannot be inlined
local te = require "tunelua.te"
local create_schedule = te.create_schedule or require("tunelua.schedule").create
local A = te.placeholder({16, 8}, "float32", "A")
local B = te.placeholder({8, 12}, "float32", "B")
local k = te.reduce_axis({0, 8}, "k")
local C = te.compute({16, 12}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
local D = te.compute({16, 12}, function(i, j) return C(i, j) + 1.0 end, "D")
local s = create_schedule(D.op)
local i, j = C.op.axis[1], C.op.axis[2]
s[C]:compute_inline()
