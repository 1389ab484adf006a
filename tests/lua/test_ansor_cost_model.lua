-- The auto-scheduler's features and cost models from Lua (tunelua.auto_scheduler.cost_model):
-- rows of lowered matmul schedules (one per store, the vectorize and parallel slots of the
-- schedules that annotate), an XGBModel learning a known function of the rows (rank
-- correlation on held-out states), warm-up, the RandomModel, save and load, and bad input.
local tl = require "tunelua"
local te = require "tunelua.te"
local auto_scheduler = require "tunelua.auto_scheduler"
local cm = require "tunelua.auto_scheduler.cost_model"
local util = require "tests.lua.lib.util"

local function raises(want, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error containing: " .. want)
  assert(tostring(err):find(want, 1, true), "error was: " .. tostring(err) .. "\nexpected: " .. want)
end

local NF = cm.num_features
assert(NF == 164 and #cm.feature_names == 164)
assert(cm.feature_names[1] == "float_mad" and cm.feature_names[164] == "auto_unroll_max_step")
local slot = {}
for i, n in ipairs(cm.feature_names) do
  assert(not slot[n], "duplicate feature name " .. n)
  slot[n] = i
end

-- ---- features of lowered matmuls ---------------------------------------------------------------
local N = 64
local A = te.placeholder({N, N}, "float32", "A")
local B = te.placeholder({N, N}, "float32", "B")
local k = te.reduce_axis({0, N}, "k")
local Cm = te.compute({N, N}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")

local function variant(vec, par)
  local s = te.create_schedule(Cm.op)
  local function id(name)
    for i, n in ipairs(s:stage_names()) do if n == name then return i - 1 end end
    error("no stage " .. name)
  end
  local c = id("C")
  s:step_split(c, 1, { vec }, 1)            -- i, j.0, j.1, k
  s:step_reorder(c, { 0, 1, 3, 2 })         -- i, j.0, k, j.1
  s:step_annotate(c, 3, 2)                  -- vectorize j.1
  if par then s:step_annotate(c, 0, 3) end  -- parallel i
  return tl.lower(s, { A, B, Cm })
end

local hw = auto_scheduler.HardwareParams { target = "llvm", cache_line_bytes = 64 }
local ls = { variant(4, false), variant(8, true), variant(16, true) }
local f = cm.features(ls, hw)
assert(f.n == 3 and f.nrows == 6, tostring(f))
for s = 1, 3 do
  local rows = f:rows_of(s)
  assert(#rows == 2, "init and update: " .. #rows)   -- C = 0, C += A * B
  for _, row in ipairs(rows) do
    for i = 1, NF do assert(row[i] == row[i] and row[i] >= 0, cm.feature_names[i]) end
  end
  local upd = rows[2]
  local vec = ({ 4, 8, 16 })[s]
  assert(math.abs(upd[slot["vec_len"]] - math.log(1 + vec) / math.log(2)) < 1e-5)
  assert(upd[slot["vec_pos.inner_spatial"]] == 1)
  assert(upd[slot["parallel_pos.none"]] == (s == 1 and 1 or 0))
  assert(math.abs(upd[slot["float_mul"]] - math.log(1 + N * N * N) / math.log(2)) < 1e-4)
end
-- a single lowered function, and the batch with one thread, give the same rows
local one = cm.features(ls[2])
local f1 = cm.features(ls, nil, 1)
for r = 0, 1 do
  for i = 0, NF - 1 do assert(one.rows[r * NF + i] == f1.rows[(2 + r) * NF + i]) end
end

-- ---- the model learns a pack-sum of a known row function -----------------------------------------
local rng = 12345
local function rand()   -- a small LCG, the same states every run
  rng = (rng * 1103515245 + 12345) % 2147483648
  return rng / 2147483648
end
local function states(n)
  local st, tp = {}, {}
  for s = 1, n do
    local rows, v = {}, 0
    for r = 1, 1 + math.floor(rand() * 3) do
      local row = {}
      for i = 1, NF do row[i] = rand() * 4 end
      v = v + 2 * row[4] + (row[21] > 2 and 3 or 0) + row[62] * row[63] / 4
      rows[r] = row
    end
    st[s], tp[s] = rows, v * 1e9
  end
  return st, tp
end
local train, ttp = states(240)
local test, etp = states(120)

local function spearman(a, b)
  local function ranks(v)
    local idx = {}
    for i = 1, #v do idx[i] = i end
    table.sort(idx, function(x, y) return v[x] < v[y] end)
    local r = {}
    for pos, i in ipairs(idx) do r[i] = pos end
    return r
  end
  local ra, rb = ranks(a), ranks(b)
  local n, d = #a, 0
  for i = 1, n do d = d + (ra[i] - rb[i]) ^ 2 end
  return 1 - 6 * d / (n * (n * n - 1))
end

local model = auto_scheduler.XGBModel { seed = 3, num_warmup_sample = 100 }
assert(model.handle ~= nil)
local head, headtp = {}, {}
for i = 1, 64 do head[i], headtp[i] = train[i], ttp[i] end
model:update(head, headtp)
assert(not model:trained(), "64 states are within the warm-up")
for _, v in ipairs(model:predict(test)) do assert(v >= 0 and v < 1) end
local tail, tailtp = {}, {}
for i = 65, #train do tail[#tail + 1], tailtp[#tailtp + 1] = train[i], ttp[i] end
model:update(cm.features_from_rows(tail), tailtp)
assert(model:trained() and model:num_samples() == 240, tostring(model))
local sc = model:predict(test)
local rho = spearman(sc, etp)
print(string.format("XGBModel: held-out Spearman %.3f (%s)", rho, tostring(model)))
assert(rho > 0.8, "rank correlation " .. rho)

local rm = auto_scheduler.RandomModel()
rm:update(train, ttp)
local rs = rm:predict(test)
assert(#rs == #test and math.abs(spearman(rs, etp)) < 0.3)

-- a state without rows scores -inf
local s2 = model:predict({ {}, test[1] })
assert(s2[1] == -math.huge and s2[2] > -math.huge)

-- save and load
local dir = util.tmpdir("ansor-cost-model")
local path = dir .. "/model.ubj"
model:save(path)
local m2 = auto_scheduler.XGBModel { seed = 9 }
m2:load(path)
local sc2 = m2:predict(test)
for i = 1, #sc do assert(math.abs(sc[i] - sc2[i]) < 1e-5) end
util.cleanup(dir)

-- ---- bad input ---------------------------------------------------------------------------------------------
raises("XGBModel: unknown option 'depth'", auto_scheduler.XGBModel, { depth = 3 })
raises("RandomModel: unknown option 'nthread'", auto_scheduler.RandomModel, { nthread = 2 })
raises("seed must be a non-negative integer", auto_scheduler.XGBModel, { seed = -1 })
raises("num_warmup_sample = 0.5 is not an integer", auto_scheduler.XGBModel, { num_warmup_sample = 0.5 })
raises("update: expected 2 throughputs (one per state), got 1", function() model:update({ test[1], test[2] }, { 1 }) end)
raises("throughput[0] = -1", function() model:update({ test[1] }, { -1 }) end)
raises("state 1 row 1: expected 164 numbers, got 3", function() model:predict({ { { 1, 2, 3 } } }) end)
raises("features: expected a lowered function", cm.features, { 42 })
raises("Features:rows_of: state 4 is not in 1..3", function() f:rows_of(4) end)
raises("the model has no trees yet (a random model)", function() rm:save(dir .. "/x") end)
print("ok")
