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
-- (record.pick_best) and the tmp log is removed.
--
-- Resume: trials already in the tmp log (a run that was killed) or in log_filename are not
-- measured again. They are loaded, handed to the tuner as history (tuner:add_history: marked
-- visited, learned from), count toward n_trial, and the tmp log is kept and appended to.
-- resume = false removes an old tmp log first, as the seed does.
local tuner_mod = require "tunelua.autotvm.tuner"
local callback = require "tunelua.autotvm.callback"

local recipe = {}

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

  local summary = {}
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
    summary[#summary + 1] = { name = tsk.name, trials = res.trials, resumed = #inps,
                              best_flops = t.best_flops }
  end

  local record = require "tunelua.autotvm.record"
  if file_exists(tmp_log) then
    -- the final log keeps what it had (tasks not re-tuned) plus this run's trials
    local merged = tmp_log .. ".all"
    local out = assert(io.open(merged, "w"))
    for _, path in ipairs({ log_filename, tmp_log }) do
      local f = io.open(path, "r")
      if f then
        local text = f:read("*a")
        out:write(text)
        if #text > 0 and text:sub(-1) ~= "\n" then out:write("\n") end
        f:close()
      end
    end
    out:close()
    record.pick_best(merged, log_filename)
    os.remove(merged)
    os.remove(tmp_log)
  end
  return summary
end

return recipe
