-- expect: tunelua: tests/lua/errors/sched_bind_reduce.lua:12: bind: cannot bind reduction iterator 'k' of stage 'C' to threadIdx.y
-- a reduction iterator cannot be bound to a thread axis other than threadIdx.x (a
-- cross-thread reduction)
local te = require "tunelua.te"
local create_schedule = te.create_schedule or require("tunelua.schedule").create
local A = te.placeholder({16, 8}, "float32", "A")
local B = te.placeholder({8, 12}, "float32", "B")
local k = te.reduce_axis({0, 8}, "k")
local C = te.compute({16, 12}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
local s = create_schedule(C.op)
local i, j = C.op.axis[1], C.op.axis[2]
s[C]:bind(k, "threadIdx.y")
