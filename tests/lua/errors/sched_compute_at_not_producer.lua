-- expect: tunelua: tests/lua/errors/sched_compute_at_not_producer.lua:10: compute_at: stage 'B' is not a producer of 'D'
-- compute_at needs a consumer of the stage as target
local te = require "tunelua.te"
local create_schedule = te.create_schedule or require("tunelua.schedule").create
local A = te.placeholder({8, 8}, "float32", "A")
local B = te.compute({8, 8}, function(i, j) return A(i, j) + 1.0 end, "B")
local C = te.compute({8, 8}, function(i, j) return B(i, j) * 2.0 end, "C")
local D = te.compute({8, 8}, function(i, j) return A(i, j) * 3.0 end, "D")
local s = create_schedule({C.op, D.op})
s[B]:compute_at(s[D], D.op.axis[1])
