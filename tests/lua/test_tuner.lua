-- test_tuner.lua: the tuners' index behaviour (specs/algorithms.md A2-A5) over a hand-made
-- space, the tune loop with a stand-in measurement, the progress line, and the XGBoost
-- tuner over a real task with a synthetic cost (no compiling: fast).
local tuner = require "tunelua.autotvm.tuner"
local callback = require "tunelua.autotvm.callback"

-- ---- a hand-made space: dims {4, 3, 5} (60 points), index % 7 == 3 invalid ----------------
local function fake_task(dims, invalid)
  local range = 1
  for _, d in ipairs(dims) do range = range * d end
  local cs = { dims = dims, range_length = range }
  function cs:is_valid(i) return not invalid(i) end
  function cs:point2knob(i)
    local k = {}
    for j, d in ipairs(dims) do k[j] = i % d; i = (i - i % d) / d end
    return k
  end
  function cs:knob2point(k)
    local p, m = 0, 1
    for j, d in ipairs(dims) do p = p + k[j] * m; m = m * d end
    return p
  end
  local n = 0
  for i = 0, range - 1 do if not invalid(i) then n = n + 1 end end
  cs.len = n
  return { name = "fake", args = {}, flop = 1e9, config_space = cs }
end

local function inv7(i) return i % 7 == 3 end
local task = fake_task({ 4, 3, 5 }, inv7)
assert(task.config_space.len == 60 - 9)

-- GridSearch: ascending valid indices, each once
do
  local g = tuner.GridSearchTuner(task)
  local got = {}
  while g:has_next() do
    for _, c in ipairs(g:next_batch(4)) do got[#got + 1] = c.index end
  end
  local want = {}
  for i = 0, 59 do if not inv7(i) then want[#want + 1] = i end end
  assert(#got == #want, #got)
  for k = 1, #want do assert(got[k] == want[k], k) end
  -- a range: [10, 20]
  local g2 = tuner.GridSearchTuner(task, { range_idx = { 10, 20 } })
  local b = g2:next_batch(100)
  assert(#b == 9 and b[1].index == 11 and b[#b].index == 20, #b)   -- 10, 17 invalid
  assert(not g2:has_next())
end

-- Random: distinct valid indices covering the space, reproducible by seed
do
  local r = tuner.RandomTuner(task, { seed = 5 })
  local seen, n = {}, 0
  while r:has_next() do
    for _, c in ipairs(r:next_batch(7)) do
      assert(not seen[c.index] and not inv7(c.index) and c.index >= 0 and c.index < 60)
      seen[c.index] = true
      n = n + 1
    end
  end
  assert(n == 51, n)
  local a = tuner.RandomTuner(task, { seed = 9 }):next_batch(5)
  local b = tuner.RandomTuner(task, { seed = 9 }):next_batch(5)
  for k = 1, 5 do assert(a[k].index == b[k].index) end
end

-- a stand-in measurement: cost = 1 + distance of the knobs from (2, 1, 3); errors on index 5
local function fake_measure(t, fail)
  return function(inputs)
    local out = {}
    for k, inp in ipairs(inputs) do
      local kk = t.config_space:point2knob(inp.config.index)
      local d = math.abs(kk[1] - 2) + math.abs(kk[2] - 1) + math.abs(kk[3] - 3)
      if fail and fail(inp.config.index) then
        out[k] = { costs = { 1e9 }, error_no = 2, all_cost = 0, timestamp = 0,
                   error_msg = "cc: error: bad config " .. inp.config.index .. "\nmore" }
      else
        out[k] = { costs = { 1 + d, 1 + d }, error_no = 0, all_cost = 0, timestamp = 0 }
      end
    end
    return out
  end
end
local mo = { builder = { n_parallel = 4 }, runner = {} }
local best_index = 2 + 1 * 4 + 3 * 12

-- GA: genes cycle; each generation is valid, and (our fix) never repeats a measured config
do
  local ga = tuner.GATuner(task, { pop_size = 10, elite_num = 2, seed = 3 })
  assert(#ga.genes == 10)
  local measured = {}
  local res = ga:tune({ n_trial = 51, measure_option = mo, measure_batch = fake_measure(task),
    callbacks = { function(_, inputs)
      for _, inp in ipairs(inputs) do
        assert(not measured[inp.config.index], "GA repeated " .. inp.config.index)
        assert(not inv7(inp.config.index))
        measured[inp.config.index] = true
      end
    end } })
  assert(res.trials == 51, res.trials)
  assert(ga.best_flops == 1e9, ga.best_flops)     -- the optimum (cost 1) was found
  assert(not ga:has_next())
end

-- the loop: early stopping, failure summary, best tracking
do
  local r = tuner.GridSearchTuner(task)
  local err_buf, stderr = {}, io.stderr
  io.stderr = { write = function(_, s) err_buf[#err_buf + 1] = s end }
  local ok, res = pcall(r.tune, r, { n_trial = 100, early_stopping = 8, measure_option = mo,
                       measure_batch = fake_measure(task, function(i) return i == 5 end),
                       prefix = "[Task  2/ 5] " })
  io.stderr = stderr
  assert(ok, res)
  -- the failure summary names the task as the progress bar does
  local summary = table.concat(err_buf)
  assert(summary:match("^%[Task  2/ 5%] tune [^\n]*: 1 of 24 trials failed\n  COMPILE_HOST x1: cc: error: bad config 5\n$"),
    summary)
  -- in grid order the best before a plateau of 8 is index 18 = (2,1,1) (cost 3) at
  -- position 15 of the valid list (3, 10, 17 invalid); the loop stops after the batch that
  -- reaches best_iter + early_stopping = 23 trials, i.e. at 24
  assert(r.best_config.index == 18 and r.best_iter == 15, r.best_config.index)
  assert(res.trials == 24, res.trials)
  assert(r.best_flops == 1e9 / 3)
  assert(res.n_errors == 1 and res.errors[2].count == 1)
  assert(res.errors[2].first == "cc: error: bad config 5", res.errors[2].first)
end

-- any Lua object with next_batch/update/has_next (and .task) is a tuner
do
  local obj = { task = task, n = 0, updates = 0, best_flops = 0 }
  function obj:has_next() return self.n < 6 end
  function obj:next_batch(k)
    local out = {}
    for _ = 1, k do
      if self.n < 6 then out[#out + 1] = { index = self.n * 2 }; self.n = self.n + 1 end
    end
    return out
  end
  function obj:update(inputs) self.updates = self.updates + #inputs end
  local res = tuner.Tuner.tune(obj, { n_trial = 10, measure_option = mo,
                                      measure_batch = fake_measure(task) })
  assert(res.trials == 6 and obj.updates == 6)
end

-- the progress line, TVM's format exactly
do
  local buf = {}
  local out = { write = function(_, s) buf[#buf + 1] = s end, flush = function() end }
  local bar = callback.progress_bar(1000, { prefix = "[Task  1/17] ", out = out, tty = true })
  bar.state.ct = 990
  local t = { flop = 25.30e9 }
  local fake_tuner = { task = t, best_flops = 39.12e9 }
  bar(fake_tuner, { { task = t }, { task = t } },
      { { error_no = 0, costs = { 1 } }, { error_no = 4, costs = { 1e9 } } })
  local line = buf[#buf]
  assert(line:match("^\r%[Task  1/17%]  Current/Best:   25%.30/  39%.12 GFLOPS | Progress: %(992/1000%) | %d+%.%d%d s$"),
    line)
  bar:finish(fake_tuner)
  assert(buf[#buf]:match(" s Done%.\n$"), buf[#buf])
  -- not a terminal (a table, a file, a pipe): one plain line per batch, no carriage return
  buf = {}
  local plain = callback.progress_bar(4, { prefix = "[Task  1/17] ", out = out })
  plain(fake_tuner, { { task = t } }, { { error_no = 0, costs = { 1 } } })
  plain(fake_tuner, { { task = t } }, { { error_no = 0, costs = { 1 } } })
  local text = table.concat(buf)
  assert(not text:find("\r", 1, true), text)
  local _, n = text:gsub("\n", "")
  assert(n == 2 and text:match("Progress: %(1/4%) | %d+%.%d%d s\n%[Task  1/17%]  Current/Best"), text)
end

-- names
do
  assert(#tuner.NAMES == 16)
  local ok, err = pcall(tuner.by_name, "xgboost", task)
  assert(not ok and err:match("Invalid tuner: xgboost"), err)
end

-- submodular pick: diversity first among equal scores
do
  local pick = tuner.submodular_pick({ 0, 0, 0 }, { { 1, 1 }, { 1, 2 }, { 2, 2 } }, 2, 1)
  assert(pick[1] == 1 and pick[2] == 3, table.concat(pick, ","))
end

-- ---- XGBTuner on a real task (dense, 42 configs), synthetic cost: no compiling ---------------
local autotvm = require "tunelua.autotvm"
local dense = autotvm.task.create("dense_nopack.x86",
  { { "TENSOR", { 1, 64 }, "float32" }, { "TENSOR", { 32, 64 }, "float32" }, "None", "float32" }, "llvm")
assert(#dense.config_space == 42)
local sp = tuner.space_of(dense)
-- the synthetic optimum: the config whose knob digits are (0, 3, 4)
local opt = sp:knob2point({ 0, 3, 4 })
local function dense_measure(inputs)
  local out = {}
  for k, inp in ipairs(inputs) do
    local d = sp:point2knob(inp.config.index)
    local c = 1e-6 * (1 + math.abs(d[2] - 3) + math.abs(d[3] - 4))
    out[k] = { costs = { c }, error_no = 0, all_cost = 0, timestamp = 0 }
  end
  return out
end

for _, spec in ipairs({ { "reg", "knob" }, { "rank", "itervar" }, { "rank-binary", "curve" } }) do
  local x = tuner.XGBTuner(dense, { loss_type = spec[1], feature_type = spec[2], plan_size = 8,
                                     seed = 11, num_threads = 2 })
  local res = x:tune({ n_trial = 30, measure_option = { builder = { n_parallel = 4 } },
                       measure_batch = dense_measure })
  assert(res.trials == 30)
  assert(x.train_ct >= 1, "model never trained")
  assert(x.best_config.index == opt, spec[1] .. "/" .. spec[2] .. ": best " .. x.best_config.index)
  -- the trained model ranks the optimum above the worst config
  local worst = sp:knob2point({ 0, 0, 0 })
  local p = x:predict({ opt, worst })
  assert(p[1] > p[2], spec[2] .. ": " .. p[1] .. " vs " .. p[2])
end

-- transfer learning: history of the same task trains a base model that plans the first batch
do
  local hist = {}
  for i = 0, 41 do
    local inp = { task = dense, config = { index = i } }
    hist[#hist + 1] = { inp = inp, res = dense_measure({ inp })[1] }
  end
  local x = tuner.XGBTuner(dense, { feature_type = "knob", plan_size = 8, seed = 2 })
  assert(x:load_history(hist) == false)           -- fewer than 500 records: ignored
  assert(x:load_history(hist, 20) == true)
  assert(#x.trials > 0 and x.trials[1] == opt, x.trials[1])
  local b = x:next_batch(1)
  assert(b[1].index == opt)
end

-- errors name the input
do
  local ok, err = pcall(tuner.XGBTuner, dense, { loss_type = "hinge" })
  assert(not ok and err:match('loss_type must be "reg", "rank" or "rank%-binary", got hinge'), err)
  ok, err = pcall(tuner.XGBTuner, dense, { diversity_filter_ratio = 0.5 })
  assert(not ok and err:match("diversity_filter_ratio must be a number >= 1"), err)
  local x = tuner.XGBTuner(dense, { feature_type = "knob", plan_size = 8, diversity_filter_ratio = 2 })
  local res = x:tune({ n_trial = 20, measure_option = { builder = { n_parallel = 4 } },
                       measure_batch = dense_measure })
  assert(res.trials == 20 and x.train_ct >= 1)
end

-- a Lua-template task (no C handle): the index tuners and GA walk its ConfigSpace
do
  local te = require "tunelua.te"
  autotvm.task.register("test_tuner_mm.lua", function(cfg, N, L, M)
    local A = te.placeholder({ N, L }, "float32", "A")
    local B = te.placeholder({ L, M }, "float32", "B")
    local k = te.reduce_axis({ 0, L }, "k")
    local Cm = te.compute({ N, M }, function(i, j) return te.sum(A[{ i, k }] * B[{ k, j }], k) end, "C")
    local s = te.create_schedule(Cm.op)
    cfg:define_split("tile_y", N, { num_outputs = 2 })
    cfg:define_knob("vec", { true, false })
    local yo, yi = cfg.tile_y:apply(s, Cm, Cm.op.axis[1])
    return s, { A, B, Cm }
  end)
  local lt = autotvm.task.create("test_tuner_mm.lua", { 16, 8, 8 }, "llvm")
  assert(#lt.config_space == 10)
  local function m(inputs)
    local out = {}
    for k, inp in ipairs(inputs) do
      out[k] = { costs = { 1 + inp.config.index }, error_no = 0, all_cost = 0, timestamp = 0 }
    end
    return out
  end
  for _, name in ipairs({ "random", "gridsearch", "ga", "droplet" }) do
    local tn = tuner.by_name(name, lt, { seed = 4 })
    local r = tn:tune({ n_trial = 10, measure_option = mo, measure_batch = m })
    assert(r.trials == 10 and tn.best_config.index == 0, name .. " " .. r.trials)
  end
end

-- tunelua.stats.median (tune_tasks' verification and the benchmarks use it)
do
  local median = require("tunelua.stats").median
  local t = { 3, 1, 2 }
  assert(median(t) == 2 and t[1] == 3, "median of an odd list, input untouched")
  assert(median({ 4, 1, 3, 2 }) == 2.5)
  assert(median({}) == nil)
end

print("test_tuner: ok")
