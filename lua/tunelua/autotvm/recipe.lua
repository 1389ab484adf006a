--- tunelua.autotvm.recipe: tune_tasks, the helper of seed 000, with resume.
--
--   autotvm.tune_tasks(tasks, measure_option, {tuner = "xgb", n_trial = 1000,
--     early_stopping = nil, log_filename = "tuning.log", use_transfer_learning = true,
--     resume = true, seed = nil, quiet = false})
--
-- Tasks are tuned in reverse order (as the seed does), each with a fresh tuner named as in
-- the seed (tuner.NAMES: xgb, xgb_knob, ..., ga, random, gridsearch, droplet), trials
-- min(n_trial, #task.config_space), a progress bar "[Task  i/ n] " and every trial appended
-- to log_filename .. ".tmp". At the end the best record per workload goes to log_filename
-- (record.pick_best, replaced atomically) and then the tmp log is removed. Trials are fsync'd
-- per batch; a write error (a full disk) raises, naming the file, and ends the run with the
-- tmp log kept.
--
-- Resume: trials already in the tmp log (a run that was killed) or in log_filename are not
-- measured again. They are loaded, handed to the tuner as history (tuner:add_history: marked
-- visited, learned from), count toward n_trial, and the tmp log is kept and appended to.
-- resume = false removes an old tmp log first, as the seed does.
--
-- verify_top = K (default 0: off) guards against the winner's curse of noisy machines: a
-- config that measured fast once because the machine was quiet for a moment. After a task is
-- tuned, its K best configs are measured again in verify_rounds rounds (default 3; each round
-- measures all K, in a rotated order, so drift hits them alike), every measurement appended to
-- the tmp log like any trial. The final log then holds, for that task, the config with the
-- best median over the rounds, its record's costs being the rounds' means.
local tuner_mod = require "tunelua.autotvm.tuner"
local callback = require "tunelua.autotvm.callback"

local recipe = {}

local median = require("tunelua.stats").median

local function file_exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

local function load_records(path)
  if not file_exists(path) then return {} end
  local record = require "tunelua.autotvm.record"
  local r = record.load_from_file(path)
  local list = {}
  if type(r) == "function" then
    for a, b in r do list[#list + 1] = b and { a, b } or a end
  else
    for _, x in ipairs(r or {}) do list[#list + 1] = x end
  end
  for k, x in ipairs(list) do
    list[k] = { x[1] or x.inp, x[2] or x.res }
  end
  return list
end
recipe.load_records = load_records

--- verify_best(task, measure_option, records, k, rounds, log_path) -> {inp, res, index, cost,
--- first_index, first_cost, n} or nil. records: {inp, res} pairs of any tasks; the task's k best successful
--- configs (by their best record) are measured rounds times, each round all k in a rotated
--- order, every result appended to log_path. The config with the best median over its rounds
--- wins; res.costs are its rounds' mean costs. nil when no config measured successfully.
function recipe.verify_best(task, measure_option, records, k, rounds, log_path)
  local measure = require "tunelua.autotvm.measure"
  local record = require "tunelua.autotvm.record"
  local key = tuner_mod.workload_key(task)
  local best = {}
  for _, r in ipairs(records) do
    local inp, res = r[1], r[2]
    if inp and res and res.error_no == 0 and tuner_mod.workload_key(inp) == key then
      local idx = tuner_mod.config_index(inp.config)
      local c = record.mean_cost(res)
      if idx and (not best[idx] or c < best[idx]) then best[idx] = c end
    end
  end
  local order = {}
  for idx in pairs(best) do order[#order + 1] = idx end
  table.sort(order, function(a, b) return best[a] < best[b] or (best[a] == best[b] and a < b) end)
  local inputs = {}
  local space = tuner_mod.space_of(task)
  for i = 1, math.min(k, #order) do inputs[i] = measure.MeasureInput(task, space:get(order[i])) end
  if #inputs == 0 then return nil end
  local batch = measure.create_measure_batch(task, measure_option)
  local w = log_path and record.writer(log_path)
  local means = {}
  for round = 1, rounds do
    local rot = {}
    for i = 1, #inputs do rot[i] = inputs[(i + round - 2) % #inputs + 1] end
    local res = batch(rot)
    for i, r in ipairs(res) do
      if w then w.write(rot[i], r) end
      if w and i == #res then w.sync() end
      if r.error_no == 0 then
        local idx = tuner_mod.config_index(rot[i].config)
        means[idx] = means[idx] or {}
        table.insert(means[idx], record.mean_cost(r))
      end
    end
  end
  if w then w.close() end
  local win, win_med
  for _, inp in ipairs(inputs) do
    local idx = tuner_mod.config_index(inp.config)
    if means[idx] and #means[idx] > 0 then
      local m = median(means[idx])
      if not win_med or m < win_med then win, win_med = inp, m end
    end
  end
  if not win then return nil end
  local idx = tuner_mod.config_index(win.config)
  return { inp = win, res = measure.MeasureResult(means[idx], 0, 0, os.time()), index = idx,
           cost = win_med, first_index = order[1], first_cost = best[order[1]], n = #inputs }
end

--- tune_tasks(tasks, measure_option, opts) -> {per task: {name, trials, resumed, best_flops}}
function recipe.tune_tasks(tasks, measure_option, o)
  if type(tasks) ~= "table" then error("tune_tasks: expected a list of tasks", 2) end
  if type(measure_option) ~= "table" or not measure_option.builder then
    error("tune_tasks: measure_option must come from autotvm.measure_option", 2)
  end
  o = o or {}
  local name = o.tuner or "xgb"
  local found = false
  for _, n in ipairs(tuner_mod.NAMES) do found = found or n == name end
  if not found then
    error("tune_tasks: Invalid tuner: " .. tostring(name) .. " (expected one of " ..
      table.concat(tuner_mod.NAMES, ", ") .. ")", 2)
  end
  local n_trial = o.n_trial or 1000
  local log_filename = o.log_filename or "tuning.log"
  local use_tl = o.use_transfer_learning
  if use_tl == nil then use_tl = true end
  local tmp_log = log_filename .. ".tmp"
  if o.resume == false and file_exists(tmp_log) then os.remove(tmp_log) end

  -- everything measured before: the tmp log of a killed run and the final log
  local history = {}
  for _, path in ipairs({ tmp_log, log_filename }) do
    for _, r in ipairs(load_records(path)) do history[#history + 1] = r end
  end

  local summary, verified_by_key = {}, {}
  for i = 1, #tasks do
    local tsk = tasks[#tasks - i + 1]
    local prefix = string.format("[Task %2d/%2d] ", i, #tasks)
    local t = tuner_mod.by_name(name, tsk, { seed = o.seed and (o.seed + i) or nil })
    if use_tl and file_exists(tmp_log) then
      t:load_history(load_records(tmp_log))
    end
    -- this task's measured configs, once each
    local key = tuner_mod.workload_key(tsk)
    local seen, inps, ress = {}, {}, {}
    for _, r in ipairs(history) do
      local inp, res = r[1], r[2]
      if inp and res and tuner_mod.workload_key(inp) == key then
        local idx = tuner_mod.config_index(inp.config)
        if not seen[idx] and idx >= 0 and idx < t.space.range_len and t.space:is_valid(idx) then
          seen[idx] = true
          inps[#inps + 1] = { task = tsk, config = t.space:get(idx) }
          ress[#ress + 1] = res
        end
      end
    end
    if #inps > 0 then t:add_history(inps, ress) end
    local len = t.space.len
    local tsk_trial = math.min(n_trial, len)
    local remaining = math.max(0, tsk_trial - #inps)
    local bar = callback.progress_bar(tsk_trial, { prefix = prefix, out = o.out })
    bar.state.ct = #inps
    bar.state.best = t.best_flops or 0
    local cbs = { callback.log_to_file(tmp_log) }
    if not o.quiet then table.insert(cbs, 1, bar) end
    local res = { trials = 0 }
    if remaining > 0 then
      res = t:tune({ n_trial = remaining, early_stopping = o.early_stopping,
                     measure_option = measure_option, callbacks = cbs, prefix = prefix })
    elseif not o.quiet then
      bar:finish(t)
    end
    local verified
    if (tonumber(o.verify_top) or 0) > 0 then
      local recs = load_records(tmp_log)
      for _, r in ipairs(history) do recs[#recs + 1] = r end
      verified = recipe.verify_best(tsk, measure_option, recs, tonumber(o.verify_top),
                                    tonumber(o.verify_rounds) or 3, tmp_log)
      if verified then
        verified_by_key[key] = verified
        if not o.quiet then
          local out = o.out or io.stdout
          out:write(string.format("%sverified the best %d over %d rounds: config %d, median %.4g ms " ..
            "(%.2f GFLOPS)%s\n", prefix, verified.n,
            tonumber(o.verify_rounds) or 3, verified.index, verified.cost * 1e3,
            tsk.flop / verified.cost / 1e9, verified.index ~= verified.first_index and
            string.format("; before, config %d led with %.4g ms", verified.first_index,
              verified.first_cost * 1e3) or ""))
        end
      end
    end
    summary[#summary + 1] = { name = tsk.name, trials = res.trials, resumed = #inps,
                              best_flops = t.best_flops,
                              verified = verified and { index = verified.index, cost = verified.cost } }
  end

  local record = require "tunelua.autotvm.record"
  if file_exists(tmp_log) then
    -- the final log keeps what it had (tasks not re-tuned) plus this run's trials; it is
    -- replaced atomically, and the tmp log (this run's only copy) goes only once it is durable
    record.pick_best(file_exists(log_filename) and { log_filename, tmp_log } or { tmp_log }, log_filename)
    if next(verified_by_key) then
      -- a verified task's line is its verified winner
      local lines, done = {}, {}
      for _, r in ipairs(load_records(log_filename)) do
        local k = tuner_mod.workload_key(r[1])
        local v = verified_by_key[k]
        if not v then
          lines[#lines + 1] = record.encode(r[1], r[2])
        elseif not done[k] then
          lines[#lines + 1] = record.encode(v.inp, v.res)
          done[k] = true
        end
      end
      require("tunelua.file").write_all(log_filename, lines)
    end
    os.remove(tmp_log)
  end
  return summary
end

return recipe
