-- expect: tunelua: tests/lua/errors/sched_split_stale_axis.lua:12: split: iterator 'i' of stage 'C' is no longer a loop (it was split or fused)
-- an axis that was split away is no longer a loop
local te = require "tunelua.te"
local create_schedule = te.create_schedule or require("tunelua.schedule").create
local A = te.placeholder({16, 8}, "float32", "A")
local B = te.placeholder({8, 12}, "float32", "B")
local k = te.reduce_axis({0, 8}, "k")
local C = te.compute({16, 12}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
local s = create_schedule(C.op)
local i, j = C.op.axis[1], C.op.axis[2]
s[C]:split(i, {factor = 4})
s[C]:split(i, {factor = 2})
