-- compute_at across stages (core/te/schedule.c, core/te/lower.c): a stage may be computed at
-- a loop of a stage two or more steps downstream, as the x86 Winograd kernel's input
-- transform is computed at its output's parallel loop (tile_order 3). The lowering bounds
-- the attached stage's region from its readers inside the attach loop:
--   * A -> B -> C -> D (a 1-D stencil twice, then a scale): B computed at D's outer loop, C
--     at D's inner loop; the result against the same DAG's default schedule, and B's buffer
--     only as large as one outer iteration needs;
--   * B computed at D while its reader C runs at root: a clear error naming both stages;
--   * a stage that is not upstream of the target is still refused.
local tl = require "tunelua"
local te = tl.te

local N, T = 64, 8

local function dag()
  local A = te.placeholder({ N + 4 }, "float32", "A")
  local B = te.compute({ N + 2 }, function(i) return A(i) + A(i + 1) + A(i + 2) end, "B")
  local C = te.compute({ N }, function(i) return B(i) * 0.5 + B(i + 2) end, "C")
  local D = te.compute({ N }, function(i) return C(i) * 3.0 end, "D")
  return A, B, C, D
end

local a = tl.nd.random_uniform({ N + 4 }, { seed = 7 })
local function run(s, A, D)
  local f = tl.build(s, { A, D }, "c")
  local d = tl.nd.empty({ N })
  f(a, d)
  return d:flat()
end

local A, B, C, D = dag()
local want = run(te.create_schedule({ D.op }), A, D)

-- B at D's outer loop (two stages away), C at D's inner loop
do
  local s = te.create_schedule({ D.op })
  local o, i = s[D]:split(D.op.axis[1], T)
  s[B]:compute_at(s[D], o)
  s[C]:compute_at(s[D], i)
  local ir = tostring(tl.lower(s, { A, D }))
  -- one outer iteration reads B at i .. i + T + 1: T + 2 elements
  assert(ir:find("B%.global%[float32 %* " .. (T + 2) .. "%]") or ir:find("B%[float32 %* " .. (T + 2) .. "%]"),
         "B's buffer covers one outer iteration (" .. (T + 2) .. " floats):\n" .. ir)
  local got = run(s, A, D)
  for k = 1, N do
    assert(math.abs(got[k] - want[k]) <= 1e-5 * math.max(1, math.abs(want[k])),
           string.format("D[%d] = %g, want %g", k - 1, got[k], want[k]))
  end
end

-- B at D while C, its reader, runs at root: refused by the lowering, naming the stages
do
  local s = te.create_schedule({ D.op })
  local o = s[D]:split(D.op.axis[1], T)
  s[B]:compute_at(s[D], o)
  local ok, err = pcall(tl.lower, s, { A, D })
  assert(not ok, "B computed at D with its reader C at root must not lower")
  assert(tostring(err):find("stage 'B' is computed at 'D", 1, true) and tostring(err):find("'C' reads it outside", 1, true),
         "the error names the attached stage and its reader: " .. tostring(err))
end

-- a stage that is not upstream of the target is refused by the schedule
do
  local A2 = te.placeholder({ N }, "float32", "A")
  local X = te.compute({ N }, function(i) return A2(i) + 1.0 end, "X")
  local Y = te.compute({ N }, function(i) return A2(i) * 2.0 end, "Y")
  local s = te.create_schedule({ X.op, Y.op })
  local ok, err = pcall(function() s[X]:compute_at(s[Y], Y.op.axis[1]) end)
  assert(not ok and tostring(err):find("stage 'X' is not a producer of 'Y'", 1, true),
         "X is not upstream of Y: " .. tostring(err))
end

print("test_compute_at_chain: ok")
