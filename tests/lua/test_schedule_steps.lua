-- The step table from Lua: every step kind of the library (core/te/steps.h)
-- has its generated method s:step_<verb>, with the fields of its row; a
-- schedule built from raw steps of every kind records them, serializes them
-- as the auto-scheduler does and replays them to the same state.
local tl = require "tunelua"
local te = require "tunelua.te"
local schedule = require "tunelua.schedule"

local kinds = schedule.step_kinds
assert(#kinds == 14, "expected the 14 step kinds of the auto-scheduler, got " .. #kinds)
local seen = {}
for k, d in ipairs(kinds) do
  assert(d.kind == k - 1)
  assert(not seen[d.name] and not seen[d.verb], "duplicate step " .. d.name)
  seen[d.name], seen[d.verb] = true, true
  assert(#d.types == #d.fields and d.fields[1] == "stage_id", d.name)
  assert(type(schedule.Schedule.__index({}, "step_" .. d.verb)) == "function",
         "no method step_" .. d.verb .. " for " .. d.name)
end

local function expect_error(msg, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error: " .. msg)
  assert(err:find("test_schedule_steps.lua:%d+: "), "error without the caller's position: " .. err)
  local got = err:gsub("^.-test_schedule_steps.lua:%d+: ", "")
  if got ~= msg then error(string.format("wrong error\n  got:      %s\n  expected: %s", got, msg), 2) end
end

-- P = A * 2 (inlined into C), C = P x B, D = C + 1
local A = te.placeholder({16, 8}, "float32", "A")
local B = te.placeholder({8, 12}, "float32", "B")
local P = te.compute({16, 8}, function(i, k) return A(i, k) * 2 end, "P")
local k = te.reduce_axis({0, 8}, "k")
local Cm = te.compute({16, 12}, function(i, j) return te.sum(P(i, k) * B(k, j), k) end, "C")
local D = te.compute({16, 12}, function(i, j) return Cm(i, j) + 1 end, "D")

local s = te.create_schedule(D.op)
local function id(name)
  for i, n in ipairs(s:stage_names()) do if n == name then return i - 1 end end
  error("no stage " .. name)
end
assert(s:step_cache_write(id("C"), "local") == id("C.local"))
assert(s:step("CHR", id("B"), "shared", {id("C.local")}) == id("B.shared"))
assert(s:step_rfactor(id("C.local"), 2, 0) == id("C.local.rf"))
assert(s:step_split(id("D"), 0, {4}, 1) == nil)
s:step_follow_split(id("C"), 0, 3, 1)
s:step_follow_fused_split(id("D"), 2, {3}, 0, true)
s:step_reorder(id("C"), {0, 2, 1})
s:step_fuse(id("D"), {0, 1})
s:step_annotate(id("D"), 0, 3)
s:step_pragma(id("D"), 0, "auto_unroll_max_step$16")
s:step_storage_align(id("B.shared"), 0, 8, 1)
s:step_compute_at(id("B.shared"), id("C.local.rf"), 0)
s:step_compute_inline(id("P"))
s:step_compute_root(id("P"))
s:step_compute_inline(id("P"))
local want = '[["CHW", 3, "local"], ["CHR", 2, "shared", [3]], ["RF", 4, 2, 0], '
  .. '["SP", 7, 0, 16, [4], 1], ["FSP", 6, 0, 3, 1], ["FFSP", 7, 2, [3], 0, 1], ["RE", 6, [0, 2, 1]], '
  .. '["FU", 7, [0, 1]], ["AN", 7, 0, 3], ["PR", 7, 0, "auto_unroll_max_step$16"], ["SA", 3, 0, 8, 1], '
  .. '["CA", 3, 4, 0], ["CI", 1], ["CR", 1], ["CI", 1]]'
assert(s:steps() == want, s:steps())
local kinds_used = {}
for name in s:steps():gmatch('%["(%u+)"') do kinds_used[name] = true end
for _, d in ipairs(kinds) do assert(kinds_used[d.name], "the test misses step " .. d.name) end

-- replay: the same steps, the same state, the same hash
local r = s:fresh():apply_steps(want)
assert(r:steps() == want)
assert(tostring(r) == tostring(s) and r:hash() == s:hash())
-- and the state lowers
assert(tostring(tl.lower(r, {A, B, D})):find("C.local.rf"))

-- the fields are checked against the row
expect_error("split: expected 4 fields (stage_id, iter_id, lengths, inner_to_outer), got 3",
             function() s:step_split(id("D"), 0, {4}) end)
expect_error("split: lengths should be a list of integers, got 4",
             function() s:step_split(id("D"), 0, 4, 1) end)
expect_error("split: lengths[2] should be an integer, got 1.5",
             function() s:step_split(id("D"), 0, {2, 1.5}, 1) end)
expect_error("pragma: pragma_type should be a string, got nil",
             function() s:step_pragma(id("D"), 0, nil) end)
expect_error("compute_at: target_iter_id should be an integer, got 'x'",
             function() s:step_compute_at(id("B.shared"), id("C.local.rf"), "x") end)
expect_error("step: unknown step kind 'XX'", function() s:step("XX", 1) end)
expect_error("split: stage 'A' is a placeholder", function() s:step_split(0, 0, {4}, 1) end)
assert(s:steps() == want)
print("schedule steps: " .. #kinds .. " step kinds, each with its method, round trip ok")
