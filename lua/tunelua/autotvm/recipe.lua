--- tunelua.autotvm.recipe: tune_tasks, the helper of seed 000, with resume.
--
--   autotvm.tune_tasks(tasks, measure_option, {tuner = "xgb", n_trial = 1000,
--     early_stopping = nil, log_filename = "tuning.log", use_transfer_learning = true,
--     resume = true, seed = nil, quiet = false, verify_top = 0, baseline = false})
--
-- Tasks are tuned in reverse order (as the seed does), each with a fresh tuner named as in
-- the seed (tuner.NAMES: xgb, xgb_knob, ..., ga, random, gridsearch, droplet; "xgb-rank" is
-- xgb_rank) or made by a Lua constructor (recipe.tuner_factory), trials
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
--
-- baseline = true: never worse than untuned. Before a task is tuned, the config an untuned
-- build deploys (TopHub's, else the template's fallback: recipe.baseline_index) is measured
-- once with the same runner and logged like a trial (not counted in n_trial). The verification
-- rounds above then always include it (verify_top at least 1), and a tuned config replaces it
-- only when its median is strictly lower. The summary holds untuned_cost and tuned_cost per
-- task (medians of the same rounds). The baselines of all tasks are measured first. A task is
-- not tuned when its baseline ends in RUN_TIMEOUT (its other configs would mostly time out too,
-- each costing the whole run timeout), or, with skip_slower = F, when its baseline is F times
-- slower than another template's baseline for the same operator and arguments (winograd next
-- to spatial pack on a CPU OpenCL device). timeout_factor = F cuts each candidate's runs at F
-- times the baseline's time (at least 1 s, at most the runner's timeout): such a config cannot
-- win, and it ends as RUN_TIMEOUT instead of costing the whole timeout.
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

--- verify_best(task, measure_option, records, k, rounds, log_path[, first]) -> {inp, res, index,
--- cost, first_index, first_cost, n, medians} or nil. records: {inp, res} pairs of any tasks; the
--- task's k best successful configs (by their best record) are measured rounds times, each round
--- all k in a rotated order, every result appended to log_path. The config with the best median
--- over its rounds wins; res.costs are its rounds' mean costs; medians maps each measured index
--- to its median. first: an index measured as well (the baseline) that wins every tie, since
--- another config must be strictly faster to replace it. nil when no config measured successfully.
function recipe.verify_best(task, measure_option, records, k, rounds, log_path, first)
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
  if first then inputs[1] = measure.MeasureInput(task, space:get(first)) end
  for i = 1, #order do
    if #inputs >= k + (first and 1 or 0) then break end
    if order[i] ~= first then inputs[#inputs + 1] = measure.MeasureInput(task, space:get(order[i])) end
  end
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
  local win, win_med, medians = nil, nil, {}
  for _, inp in ipairs(inputs) do
    local idx = tuner_mod.config_index(inp.config)
    if means[idx] and #means[idx] > 0 then
      local m = median(means[idx])
      medians[idx] = m
      if not win_med or m < win_med then win, win_med = inp, m end
    end
  end
  if not win then return nil end
  local idx = tuner_mod.config_index(win.config)
  return { inp = win, res = measure.MeasureResult(means[idx], 0, 0, os.time()), index = idx,
           cost = win_med, first_index = order[1], first_cost = best[order[1]], n = #inputs,
           medians = medians }
end

--- baseline_index(task) -> the config index an untuned build deploys for task and where it
--- comes from: TopHub's config for the workload ("tophub"), else the template's fallback config
--- ("fallback", its knobs as an index of the space: the same schedule as index -1).
function recipe.baseline_index(task)
  local idx = require("tunelua.autotvm.dispatch").apply_history_best({}):query_task(task)
  if idx >= 0 then return idx, "tophub" end
  local cs = task.config_space
  return cs:knob2point(cs:fallback_digits()), "fallback"
end

-- The baseline's record for task: found in history (a resumed run) or measured once now with
-- the trials' runner and appended to log_path and history. -> {index, source, res}
local function measure_baseline(task, measure_option, history, log_path)
  local measure = require "tunelua.autotvm.measure"
  local record = require "tunelua.autotvm.record"
  local idx, source = recipe.baseline_index(task)
  local key = tuner_mod.workload_key(task)
  for _, r in ipairs(history) do
    local inp, res = r[1], r[2]
    if inp and res and tuner_mod.workload_key(inp) == key and tuner_mod.config_index(inp.config) == idx then
      return { index = idx, source = source, res = res }
    end
  end
  local inp = measure.MeasureInput(task, tuner_mod.space_of(task):get(idx))
  local res = measure.create_measure_batch(task, measure_option)({ inp })[1]
  local w = record.writer(log_path)
  w.write(inp, res)
  w.sync()
  w.close()
  history[#history + 1] = { inp, res }
  return { index = idx, source = source, res = res }
end

local function record_mod() return require "tunelua.autotvm.record" end
local json = require "tunelua.json"

local function ms(s) return string.format("%.4g ms", s * 1e3) end

--- tuner_name(name) -> the tuner.NAMES spelling of a tuner name, or nil: case and '-' for '_'
--- do not matter ("xgb-rank", "XGB_Rank" are xgb_rank).
function recipe.tuner_name(name)
  if type(name) ~= "string" then return nil end
  local n = name:lower():gsub("-", "_")
  for _, k in ipairs(tuner_mod.NAMES) do if k == n then return k end end
  return nil
end

-- A Lua tuner made usable by the loop: the task, its space and the base methods it lacks
-- (tune, add_history, load_history, has_next, update), as own fields.
local function adapt(t, task, lvl)
  if type(t) ~= "table" or type(t.next_batch) ~= "function" then
    error("tune_tasks: a Lua tuner must be a table with next_batch(n) (and update(inputs, " ..
          "results)), got " .. type(t), lvl + 1)
  end
  t.task = t.task or task
  t.space = t.space or tuner_mod.space_of(task)
  t.best_flops = t.best_flops or 0
  for _, m in ipairs({ "tune", "add_history", "load_history", "has_next", "update" }) do
    if t[m] == nil then t[m] = tuner_mod.Tuner[m] end
  end
  return t
end

--- tuner_factory(tuner, ntasks) -> function(task, opts) -> a tuner for task. tuner is a name of
--- tuner.NAMES (recipe.tuner_name's spellings), a constructor function(task, opts) -> Lua tuner,
--- a class table with .new(task, opts), or (for one task) a Lua tuner object itself. A Lua
--- tuner needs next_batch(n) -> configs or indices, and may have update(inputs, results); what
--- it lacks comes from tuner.Tuner. Resume and pick_best work for every kind alike.
function recipe.tuner_factory(spec, ntasks, lvl)
  lvl = (lvl or 1) + 1
  spec = spec or "xgb"
  if type(spec) == "string" then
    local name = recipe.tuner_name(spec)
    if not name then
      error("tune_tasks: Invalid tuner: " .. spec .. " (expected one of " ..
        table.concat(tuner_mod.NAMES, ", ") .. ", or a Lua tuner)", lvl)
    end
    return function(task, opts) return tuner_mod.by_name(name, task, opts) end
  elseif type(spec) == "function" then
    return function(task, opts) return adapt(spec(task, opts), task, 3) end
  elseif type(spec) == "table" and type(spec.new) == "function" then
    return function(task, opts) return adapt(spec.new(task, opts), task, 3) end
  elseif type(spec) == "table" and type(spec.next_batch) == "function" then
    if ntasks ~= 1 then
      error("tune_tasks: one tuner object cannot tune " .. ntasks .. " tasks; pass its constructor " ..
            "(a function(task, opts) or a table with .new)", lvl)
    end
    return function(task) return adapt(spec, task, 3) end
  end
  error("tune_tasks: Invalid tuner: a " .. type(spec) .. " (expected a name such as \"xgb\", a " ..
        "constructor function(task, opts), a table with .new, or a tuner object)", lvl)
end

--- tune_tasks(tasks, measure_option, opts) -> {per task: {name, trials, resumed, best_flops}}
function recipe.tune_tasks(tasks, measure_option, o)
  if type(tasks) ~= "table" then error("tune_tasks: expected a list of tasks", 2) end
  if type(measure_option) ~= "table" or not measure_option.builder then
    error("tune_tasks: measure_option must come from autotvm.measure_option", 2)
  end
  o = o or {}
  local make_tuner = recipe.tuner_factory(o.tuner, #tasks, 2)
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

  -- the baselines first: whether a task is worth tuning depends on its siblings' as well
  local bases = {}
  if o.baseline then
    for i = 1, #tasks do
      bases[i] = measure_baseline(tasks[#tasks - i + 1], measure_option, history, tmp_log)
    end
  end
  local skip_slower = tonumber(o.skip_slower)
  local RUN_TIMEOUT = require("tunelua.autotvm.measure").MeasureErrorNo.RUN_TIMEOUT
  -- why task i is not tuned, or nil: its baseline timed out, or it is skip_slower times slower
  -- than the baseline of another template for the same operator and arguments
  local function skip_reason(i)
    local b, tsk = bases[i], tasks[#tasks - i + 1]
    if not b then return nil end
    if b.res.error_no == RUN_TIMEOUT then
      return string.format("the untuned %s config timed out on the device (RUN_TIMEOUT)", b.source),
             "untuned config timed out"
    end
    if not skip_slower or b.res.error_no ~= 0 then return nil end
    local cost, args = record_mod().mean_cost(b.res), json.dumps(tsk.args)
    for j, bj in ipairs(bases) do
      local tj = tasks[#tasks - j + 1]
      if j ~= i and bj.res.error_no == 0 and tj.name ~= tsk.name and json.dumps(tj.args) == args then
        local cj = record_mod().mean_cost(bj.res)
        if cost > skip_slower * cj then
          return string.format("its untuned config (%s) is %.1fx slower than %s's (%s) on the same " ..
            "workload", ms(cost), cost / cj, tj.name, ms(cj)),
            string.format("untuned %.1fx slower than %s", cost / cj, tj.name)
        end
      end
    end
    return nil
  end

  local summary, verified_by_key = {}, {}
  for i = 1, #tasks do
    local tsk = tasks[#tasks - i + 1]
    local prefix = string.format("[Task %2d/%2d] ", i, #tasks)
    local out = o.out or io.stdout
    local t = make_tuner(tsk, { seed = o.seed and (o.seed + i) or nil })
    local base = bases[i]
    local why_skip, why_short = skip_reason(i)
    local skip = why_skip ~= nil
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
    -- the baseline is measured beside the trials, not instead of one
    local nbase = (base and seen[base.index]) and 1 or 0
    local remaining = math.max(0, tsk_trial - #inps + nbase)
    if skip then
      -- the untuned config does not finish on the device: its other configs would mostly time
      -- out as well, each costing the whole run timeout
      remaining = 0
      if not o.quiet then
        out:write(string.format("%s%s: not tuned: %s\n", prefix, tostring(tsk.name), why_skip))
      end
    end
    local bar = callback.progress_bar(tsk_trial, { prefix = prefix, out = o.out })
    bar.state.ct = #inps - nbase
    bar.state.best = t.best_flops or 0
    local cbs = { callback.log_to_file(tmp_log) }
    if not o.quiet then table.insert(cbs, 1, bar) end
    local res = { trials = 0 }
    if remaining > 0 then
      -- a candidate far slower than the baseline cannot win: its runs are cut at timeout_factor
      -- times the baseline's time (never above the runner's own timeout, never under 1 s)
      local runner, saved = measure_option.runner, nil
      local factor = tonumber(o.timeout_factor)
      if factor and base and base.res.error_no == 0 and type(runner.timeout) == "number" then
        local runs = (tonumber(runner.number) or 1) * (tonumber(runner["repeat"]) or 3) + 2
        local cut = math.max(1, factor * record_mod().mean_cost(base.res) * runs)
        if cut < runner.timeout then saved, runner.timeout = runner.timeout, cut end
      end
      res = t:tune({ n_trial = remaining, early_stopping = o.early_stopping,
                     measure_option = measure_option, callbacks = cbs, prefix = prefix })
      if saved then runner.timeout = saved end
    elseif not o.quiet and not skip then
      bar:finish(t)
    end
    local verified
    local verify_top = tonumber(o.verify_top) or 0
    -- with a baseline, the final pick is always re-measured against it
    local base_ok = base and base.res.error_no == 0
    if base_ok then verify_top = math.max(verify_top, 1) end
    if verify_top > 0 and not skip then
      local recs = load_records(tmp_log)
      for _, r in ipairs(history) do recs[#recs + 1] = r end
      verified = recipe.verify_best(tsk, measure_option, recs, verify_top,
                                    tonumber(o.verify_rounds) or 3, tmp_log, base_ok and base.index or nil)
      if verified then
        verified_by_key[key] = verified
        if not o.quiet then
          out:write(string.format("%sverified the best %d over %d rounds: config %d, median %.4g ms " ..
            "(%.2f GFLOPS)%s\n", prefix, verified.n,
            tonumber(o.verify_rounds) or 3, verified.index, verified.cost * 1e3,
            tsk.flop / verified.cost / 1e9, verified.index ~= verified.first_index and
            string.format("; before, config %d led with %.4g ms", verified.first_index,
              verified.first_cost * 1e3) or ""))
        end
      end
    end
    local entry = { name = tsk.name, trials = res.trials, resumed = #inps,
                    best_flops = t.best_flops, skipped = why_short,
                    verified = verified and { index = verified.index, cost = verified.cost } }
    if base then
      -- untuned vs tuned, both from the verification rounds (the same runs, the same conditions)
      local bcost = verified and verified.medians[base.index]
      entry.baseline = { index = base.index, source = base.source, error_no = base.res.error_no,
                         cost = bcost }
      if bcost then
        entry.untuned_cost, entry.tuned_cost = bcost, verified.cost
        if not o.quiet then
          if verified.index == base.index then
            out:write(string.format("%suntuned %s: no tuned config beat it; keeping the untuned config\n",
              prefix, ms(bcost)))
          else
            out:write(string.format("%suntuned %s, tuned %s (config %d): %.2fx\n", prefix, ms(bcost),
              ms(verified.cost), verified.index, bcost / verified.cost))
          end
        end
      end
    end
    summary[#summary + 1] = entry
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
