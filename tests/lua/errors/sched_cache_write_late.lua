-- expect: tunelua: tests/lua/errors/sched_cache_write_late.lua:12: cache_write: stage 'C' has already been transformed (cache_write must come first)
-- cache_write must come before other steps on the stage
local te = require "tunelua.te"
local create_schedule = te.create_schedule or require("tunelua.schedule").create
local A = te.placeholder({16, 8}, "float32", "A")
local B = te.placeholder({8, 12}, "float32", "B")
local k = te.reduce_axis({0, 8}, "k")
local C = te.compute({16, 12}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
local s = create_schedule(C.op)
local i, j = C.op.axis[1], C.op.axis[2]
s[C]:split(i, {factor = 4})
s:cache_write(C, "local")
