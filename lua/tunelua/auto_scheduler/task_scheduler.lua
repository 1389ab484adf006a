--- tunelua.auto_scheduler.task_scheduler: one trial budget shared by the search tasks of a
--- network (TVM's auto_scheduler.TaskScheduler; algorithms B10).
--
--   local auto_scheduler = require "tunelua.auto_scheduler"
--   local tasks, weights = auto_scheduler.extract_tasks(mod, params, target)
--   local tuner = auto_scheduler.TaskScheduler(tasks, weights, {load_log_file = "net.json"})
--   tuner:tune(auto_scheduler.TuningOptions{num_measure_trials = 200,
--              measure_callbacks = {auto_scheduler.RecordToFile("net.json")}}, policies)
--
-- The objective is the weighted sum of the tasks' best latencies (objective_func(costs) may
-- replace it). Each round gives one task num_measures_per_round trials (at most
-- num_measure_trials / #tasks). "gradient" (the default) first tunes every task once (a
-- warm-up; tasks restored from a log are skipped; with min_task_trials = m, every task,
-- restored or not, gets rounds, a round each per pass over the tasks, until it holds m
-- trials), then picks the task whose next round is
-- expected to lower the objective most: with t its rounds so far, h its best cost after each
-- round and w its weight,
--   backward = (h[t] - h[t - window]) / window           (0 while t <= window, or while
--                                                          h[t - window] is not a valid cost)
--   forward  = min(best - best / t, beta * flop / max_group_speed) - best
--   grad     = w * (alpha * backward + (1 - alpha) * forward)
-- (similarity groups are tasks with the same .tag and FLOP magnitude; tasks without a tag
-- form none) and the smallest grad wins (a random alive task when all are equal).
-- "round-robin" tunes the alive tasks in turn.
--
-- Failed rounds: a round whose results hold no valid trial (every build or run failed or
-- timed out) is a failed round. A task is retried after one: while it has no valid schedule
-- at all its gradient is -infinity (the estimated latency has no value until it has one),
-- but it waits until the other alive tasks had a round each since its failure (a transient
-- failure, e.g. a busy device, gets time to pass; the budget keeps flowing to the others);
-- a task with a valid schedule and a failed last round waits likewise, then takes its
-- gradient as usual (the failed round repeats its best cost in h). After max_failed_rounds
-- (K, default 3) consecutive failed rounds the task is dead. A task restored from a log
-- with no valid record starts at min(its restored rounds, K - 1) failed rounds, so a resumed
-- run tries it at least once more. print_table lists the tasks with failed rounds and the
-- dead ones below the table.
--
-- A task dies after K consecutive failed rounds, when a round measures nothing (the policy
-- has no new state) or when it has not improved for per_task_early_stopping trials; the run
-- stops at the budget, when every task is dead, or (early_stopping) when the objective has
-- not improved for that many trials and every task has a valid schedule.
--
-- Per task, a search policy runs the rounds: an object with
--   policy:continue_search_one_round(n) -> list of results {steps = JSON text, costs = {s...},
--                                          error_no, all_cost, timestamp}
-- (it proposes, measures and learns from n new states) and optionally
--   policy:restore(recs)   -- the task's records of load_log_file: measured, warm-start
-- tune's second argument is the list of policies, one per task, or the options of the
-- auto-scheduler's own (tunelua.auto_scheduler.sketch_rounds over SketchPolicy, the
-- default). Every result is appended to each RecordToFile(path) of measure_callbacks as one
-- record line, synced, before the next round starts, so a killed run loses at most the round
-- in flight, and load_log_file restores the best costs, the trial counts (the budget counts
-- the restored trials) and the policies.
--
-- Callbacks (opts.callbacks, default {PrintTableInfo()}): objects with pre_tune(tuner,
-- task_idx) and/or post_tune(tuner, task_idx); PrintTableInfo prints seed 003's table before
-- each round, LogEstimatedLatency(path) appends elapsed time, estimated latency and trials to
-- a TSV file. opts.verbose (1) prints a progress line after each round.
local file = require "tunelua.file"
local records = require "tunelua.auto_scheduler.records"

local M = {}

local INF_COST = 1e10

-- ---- callbacks ----------------------------------------------------------------------------

local function fmt_lat(c) return c < 1e9 and string.format("%.3f", c * 1e3) or "-" end

--- PrintTableInfo(): the task table before each round (seed 003's format)
function M.PrintTableInfo(out)
  local cb = { out = out }
  function cb.pre_tune(_, tuner, task_idx) tuner:print_table(task_idx, cb.out) end
  return cb
end

--- LogEstimatedLatency(path): appends "ElapsedTime(s)\t%.0f\tEstimatedLatency(ms)\t%s\tTrials\t%d"
--- after each round
function M.LogEstimatedLatency(path)
  if type(path) ~= "string" or path == "" then error("LogEstimatedLatency: expected a file name", 2) end
  local cb = {}
  function cb.post_tune(_, tuner)
    local lat = tuner:estimated_latency()
    file.append_lines(path, { string.format("ElapsedTime(s)\t%.0f\tEstimatedLatency(ms)\t%s\tTrials\t%d",
      tuner:elapsed(), lat and string.format("%.3f", lat * 1e3) or "-", tuner.ct) })
  end
  return cb
end

-- ---- the scheduler ----------------------------------------------------------------------

local TaskScheduler = {}
TaskScheduler.__index = TaskScheduler
M.TaskScheduler_mt = TaskScheduler

local function check_num(name, v, lo)
  if type(v) ~= "number" or v ~= v or v < lo then
    error(string.format("TaskScheduler: %s must be a number >= %s, got %s", name, tostring(lo), tostring(v)), 3)
  end
end

--- TaskScheduler(tasks, task_weights, {strategy = "gradient" | "round-robin",
---   load_log_file = path, alpha = 0.2, beta = 2, backward_window_size = 3,
---   objective_func = fn(costs) -> number, callbacks = {...}, seed = n, verbose = 1,
---   max_failed_rounds = 3})
function M.TaskScheduler(tasks, task_weights, opts)
  opts = opts or {}
  if type(tasks) ~= "table" or #tasks == 0 then error("TaskScheduler: expected a non-empty list of tasks", 2) end
  for i, t in ipairs(tasks) do
    if type(t) ~= "table" or type(t.workload_key) ~= "string" then
      error(string.format("TaskScheduler: task %d has no workload_key (expected a SearchTask)", i - 1), 2)
    end
  end
  if type(opts) ~= "table" then error("TaskScheduler: options must be a table", 2) end
  local known = { strategy = 1, load_log_file = 1, alpha = 1, beta = 1, backward_window_size = 1,
                  objective_func = 1, callbacks = 1, seed = 1, verbose = 1, max_failed_rounds = 1 }
  for k in pairs(opts) do
    if not known[k] then error("TaskScheduler: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local weights = {}
  for i = 1, #tasks do
    local w = task_weights and task_weights[i] or 1
    if type(w) ~= "number" or w < 0 then
      error(string.format("TaskScheduler: the weight of task %d must be a non-negative number", i - 1), 2)
    end
    weights[i] = w
  end
  local strategy = opts.strategy or "gradient"
  if strategy ~= "gradient" and strategy ~= "round-robin" then
    error("TaskScheduler: strategy must be \"gradient\" or \"round-robin\", got " .. tostring(strategy), 2)
  end
  local alpha, beta, window = opts.alpha or 0.2, opts.beta or 2, opts.backward_window_size or 3
  check_num("alpha", alpha, 0)
  check_num("beta", beta, 0)
  check_num("backward_window_size", window, 1)
  if opts.seed ~= nil then check_num("seed", opts.seed, 0) end
  local max_failed = opts.max_failed_rounds or 3
  if type(max_failed) ~= "number" or max_failed < 1 or max_failed % 1 ~= 0 then
    error("TaskScheduler: max_failed_rounds must be an integer >= 1, got " .. tostring(max_failed), 2)
  end
  if opts.load_log_file ~= nil and type(opts.load_log_file) ~= "string" then
    error("TaskScheduler: load_log_file must be a file name", 2)
  end
  if opts.objective_func ~= nil and type(opts.objective_func) ~= "function" then
    error("TaskScheduler: objective_func must be a function(costs) -> number", 2)
  end
  local self = setmetatable({
    tasks = tasks, task_weights = weights, strategy = strategy, alpha = alpha, beta = beta,
    backward_window_size = window, load_log_file = opts.load_log_file,
    objective_func = opts.objective_func, callbacks = opts.callbacks or { M.PrintTableInfo() },
    verbose = opts.verbose or 1, rng_state = (opts.seed or 1) % 2147483646 + 1,
    best_costs = {}, task_cts = {}, task_best_cts = {}, task_trials = {}, task_costs_history = {},
    flop_cts = {}, dead_tasks = {}, ct = 0, best_ct = 0, best_score = math.huge, rounds = 0,
    restored = {}, max_failed_rounds = max_failed, failed_rounds = {}, retry_after = {},
  }, TaskScheduler)
  -- similarity groups: same tag and FLOP magnitude (log base 1.618)
  local groups, by_tag = {}, {}
  for i, t in ipairs(tasks) do
    self.best_costs[i], self.task_cts[i], self.task_best_cts[i], self.task_trials[i] = INF_COST, 0, 0, 0
    self.task_costs_history[i] = {}
    self.failed_rounds[i], self.retry_after[i] = 0, 0
    self.flop_cts[i] = tonumber(t.flop) or 0
    if t.tag and t.tag ~= "" then
      local tag = t.tag .. "_" .. math.floor(math.log(self.flop_cts[i] + 1) / math.log(1.618))
      if not by_tag[tag] then by_tag[tag] = {}; groups[#groups + 1] = by_tag[tag] end
      local g = by_tag[tag]
      g[#g + 1] = i
      self.group_of = self.group_of or {}
      self.group_of[i] = g
    end
  end
  self.groups = groups
  self.group_of = self.group_of or {}
  return self
end

-- A deterministic random integer in [1, n] (Park and Miller's generator, exact in doubles,
-- seeded by opts.seed).
function TaskScheduler:random(n)
  self.rng_state = (self.rng_state * 16807) % 2147483647
  return 1 + math.floor(self.rng_state / 2147483647 * n)
end

--- tuner:objective([costs]) -> the weighted sum of the best costs (or objective_func's value)
function TaskScheduler:objective(costs)
  costs = costs or self.best_costs
  if self.objective_func then return self.objective_func(costs) end
  local s = 0
  for i, c in ipairs(costs) do s = s + self.task_weights[i] * c end
  return s
end

--- tuner:estimated_latency() -> seconds, or nil while a task has no valid schedule
function TaskScheduler:estimated_latency()
  for _, c in ipairs(self.best_costs) do if c >= 1e9 then return nil end end
  return self:objective()
end

function TaskScheduler:elapsed() return self.tune_start and (os.time() - self.tune_start) or 0 end

--- tuner:print_table(next_id[, out]): seed 003's table
function TaskScheduler:print_table(next_id, out)
  out = out or io.stdout
  local bar = string.rep("-", 70)
  local lines = { bar, string.rep("-", 30) .. "  [ Task Scheduler ]", bar,
                  "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |", string.rep("-", 49) }
  for i = 1, #self.tasks do
    local c = self.best_costs[i]
    local speed = c < 1e9 and string.format("%.2f", self.flop_cts[i] / c / 1e9) or "-"
    lines[#lines + 1] = string.format("| %4s | %12s | %14s | %6s |", tostring(i - 1), fmt_lat(c), speed,
                                      tostring(self.task_trials[i]))
  end
  lines[#lines + 1] = string.rep("-", 49)
  -- tasks with failed rounds (no valid trial) and the dead ones
  for i = 1, #self.tasks do
    local f, why = self.failed_rounds[i], self.dead_tasks[i]
    if why then
      lines[#lines + 1] = string.format("Task %d: done (%s)", i - 1, why)
    elseif f > 0 then
      lines[#lines + 1] = string.format("Task %d: no valid trial in its last %d round%s (retried; done after %d)",
                                        i - 1, f, f == 1 and "" or "s", self.max_failed_rounds)
    end
  end
  local lat = self:estimated_latency()
  lines[#lines + 1] = string.format("Estimated total latency: %s ms\tTrials: %d\tUsed time : %.0f s\tNext ID: %d\t",
    lat and string.format("%.3f", lat * 1e3) or "-", self.ct, self:elapsed(), next_id and (next_id - 1) or -1)
  out:write(table.concat(lines, "\n"), "\n")
  out:flush()
end

-- ---- restoring from a log ------------------------------------------------------------------

-- The records of load_log_file, per task (by workload identity and target kind): best costs,
-- trial counts and rounds restored, and each policy's restore(recs) called.
function TaskScheduler:restore(per_round, policies)
  local path = self.load_log_file
  if not path then return end
  local f = io.open(path, "r")
  if not f then return end   -- nothing logged yet: a fresh run
  f:close()
  local target = require "tunelua.target"
  local idx = {}
  for i, t in ipairs(self.tasks) do
    idx[records.match_key(t.workload_key) .. "\0" .. target.record(t.target or "").kind] = i
  end
  local per_task = {}
  for _, r in ipairs(records.load(path)) do
    local i = idx[records.match_key(r.workload_key) .. "\0" .. target.record(r.target).kind]
    if i then
      per_task[i] = per_task[i] or {}
      table.insert(per_task[i], r)
    end
  end
  local n = 0
  for i, recs in pairs(per_task) do
    for _, r in ipairs(recs) do
      if r.cost < self.best_costs[i] then self.best_costs[i] = r.cost end
    end
    self.task_trials[i] = #recs
    self.task_cts[i] = math.ceil(#recs / per_round)
    self.task_best_cts[i] = self.task_cts[i]
    self.task_costs_history[i][1] = self.best_costs[i]
    if self.best_costs[i] >= INF_COST then
      self.failed_rounds[i] = math.min(self.task_cts[i], self.max_failed_rounds - 1)
    end
    self.ct = self.ct + #recs
    self.restored[i] = true
    n = n + #recs
    local p = policies[i]
    if p and p.restore then p:restore(recs) end
  end
  self.best_score = self:objective()
  self.best_ct = self.ct
  if n > 0 and self.verbose >= 1 then
    local nt = 0
    for _ in pairs(per_task) do nt = nt + 1 end
    print(string.format("Resumed from %s: %d measured states of %d task%s.", path, n, nt, nt == 1 and "" or "s"))
  end
end

-- ---- rounds -------------------------------------------------------------------------------

local function writers_of(opts)
  local ws = {}
  for _, cb in ipairs(opts.measure_callbacks or {}) do
    if type(cb) == "table" and cb.kind == "record_to_file" and type(cb.path) == "string" then
      ws[#ws + 1] = { path = cb.path }
    elseif type(cb) == "function" then
      ws[#ws + 1] = { fn = cb }
    else
      error("tune: a measure callback must be RecordToFile(path) or a function(task, result)", 3)
    end
  end
  return ws
end

function TaskScheduler:tune_task(i, cap)
  for _, cb in ipairs(self.callbacks) do if cb.pre_tune then cb:pre_tune(self, i) end end
  local task = self.tasks[i]
  -- a full round (at most cap trials), or what is left of the budget
  local n = math.min(cap or self.per_round, self.per_round, math.max(self.num_measure_trials - self.ct, 1))
  local results = self.policies[i]:continue_search_one_round(n)
  -- every result is logged (and synced) before anything else happens
  local lines, nerr = {}, 0
  for _, r in ipairs(results) do
    if (r.error_no or 0) ~= 0 then nerr = nerr + 1 end
    lines[#lines + 1] = records.encode({ workload_key = task.workload_key, target = task.target,
      hardware_params = task.hardware_params, steps = r.steps, costs = r.costs, error_no = r.error_no,
      all_cost = r.all_cost, timestamp = r.timestamp, layout_rewrite = r.layout_rewrite })
  end
  for _, w in ipairs(self.writers) do
    if w.path then
      if #lines > 0 then file.append_lines(w.path, lines) end
    else
      for _, r in ipairs(results) do w.fn(task, r) end
    end
  end
  self.rounds = self.rounds + 1
  self.task_cts[i] = self.task_cts[i] + 1
  self.task_trials[i] = self.task_trials[i] + #results
  local nvalid = 0
  for _, r in ipairs(results) do
    local c = ((r.error_no or 0) == 0 and r.costs and #r.costs > 0) and records.mean(r.costs) or math.huge
    if c < INF_COST then nvalid = nvalid + 1 end
    if c < self.best_costs[i] then
      self.best_costs[i] = c
      self.task_best_cts[i] = self.task_cts[i]
    end
  end
  -- a failed round: retried once the other alive tasks had a round each, dead after K in a row
  if #results > 0 and nvalid == 0 then
    self.failed_rounds[i] = self.failed_rounds[i] + 1
    self.retry_after[i] = self.rounds + math.max(0, #self.tasks - self:num_dead() - 1)
  else
    self.failed_rounds[i], self.retry_after[i] = 0, 0
  end
  local why
  if #results == 0 then
    why = "no new state to measure"
  elseif self.failed_rounds[i] >= self.max_failed_rounds then
    why = string.format("no valid trial in %d rounds in a row", self.failed_rounds[i])
  elseif (self.task_cts[i] - self.task_best_cts[i]) * self.per_round > self.per_task_early_stopping then
    why = string.format("no improvement in %d trials", (self.task_cts[i] - self.task_best_cts[i]) * self.per_round)
  end
  if why then self.dead_tasks[i] = why end
  local h = self.task_costs_history[i]
  h[#h + 1] = self.best_costs[i]
  self.ct = self.ct + #results
  local score = self:objective()
  if score < self.best_score then self.best_score, self.best_ct = score, self.ct end
  if self.verbose >= 1 then
    local c = self.best_costs[i]
    print(string.format("[round %d] task %d %s: %d measured, %d failed; best %s ms%s; trials %d/%d; %.0f s%s",
      self.rounds, i - 1, task.desc and task.desc[1] or "", #results, nerr, fmt_lat(c),
      c < 1e9 and string.format(" (%.2f GFLOPS)", self.flop_cts[i] / c / 1e9) or "",
      self.ct, self.num_measure_trials, self:elapsed(), why and ("; task done: " .. why) or
      (self.failed_rounds[i] > 0 and string.format("; no valid trial (%d of %d failed rounds in a row; retried later)",
                                                   self.failed_rounds[i], self.max_failed_rounds) or "")))
    io.stdout:flush()
  end
  for _, cb in ipairs(self.callbacks) do if cb.post_tune then cb:post_tune(self, i) end end
end

-- The gradient of the objective with respect to task i's next round (B10).
function TaskScheduler:gradient(i)
  local best = self.best_costs[i]
  local chain
  if self.objective_func then
    local costs = {}
    for k, c in ipairs(self.best_costs) do costs[k] = c end
    costs[i] = best - 1e-4
    chain = (self:objective() - self:objective(costs)) / 1e-4
  else
    chain = self.task_weights[i]
  end
  -- no valid schedule yet: first in line (its share of the objective is unknown)
  if best >= INF_COST then return -math.huge end
  local t, h, win = self.task_cts[i], self.task_costs_history[i], self.backward_window_size
  local backward = 0
  if t - 1 - win >= 0 and t - 1 < #h and h[t - win] < INF_COST then backward = (h[t] - h[t - win]) / win end
  local g1 = best - best / math.max(t, 1)
  local g2 = self.beta * 1e30
  local grp = self.group_of[i]
  if grp and #grp > 1 then
    local maxspeed = 0
    for _, j in ipairs(grp) do
      maxspeed = math.max(maxspeed, self.flop_cts[j] / self.best_costs[j])
    end
    if maxspeed > 0 then g2 = self.beta * self.flop_cts[i] / maxspeed end
  end
  local forward = math.min(g1, g2) - best
  return chain * (self.alpha * backward + (1 - self.alpha) * forward)
end

-- Leave the similarity group when far behind its best member (B10 _adjust_similarity_group).
function TaskScheduler:adjust_group(i)
  local grp = self.group_of[i]
  if not grp or #grp <= 1 then return end
  local maxflops, maxcts = 0, 0
  for _, j in ipairs(grp) do
    maxflops = math.max(maxflops, self.flop_cts[j] / self.best_costs[j])
    if j ~= i then maxcts = math.max(maxcts, self.task_cts[j]) end
  end
  if self.flop_cts[i] / self.best_costs[i] < maxflops / self.beta and self.task_cts[i] > 5 + maxcts then
    for k, j in ipairs(grp) do if j == i then table.remove(grp, k) break end end
    self.group_of[i] = nil
  end
end

function TaskScheduler:num_dead()
  local n = 0
  for _ in pairs(self.dead_tasks) do n = n + 1 end
  return n
end

local function pick_next(self, last)
  local n = #self.tasks
  if self.strategy == "round-robin" then
    for k = 1, n do
      local i = (last + k - 1) % n + 1
      if not self.dead_tasks[i] then return i end
    end
    return nil
  end
  -- the candidates: alive tasks not waiting after a failed round (when every alive task
  -- waits, the one whose wait ends first)
  local cand, waiting = {}, nil
  for i = 1, n do
    if not self.dead_tasks[i] then
      if self.failed_rounds[i] > 0 and self.rounds < self.retry_after[i] then
        if not waiting or self.retry_after[i] < self.retry_after[waiting] then waiting = i end
      else
        cand[#cand + 1] = i
      end
    end
  end
  if #cand == 0 then return waiting end
  local gmin, gmax, best = math.huge, -math.huge, nil
  for _, i in ipairs(cand) do
    local g = self:gradient(i)
    if g < gmin or not best then gmin, best = g, i end
    if g > gmax then gmax = g end
  end
  if gmax == gmin then return cand[self:random(#cand)] end
  return best
end

--- tuner:tune(TuningOptions{num_measure_trials, num_measures_per_round = 64, early_stopping,
---            builder, runner, measure_callbacks}[, policies | {program_cost_model = "xgb" |
---            "random", seed = 1, params = {...}}[, {per_task_early_stopping = n,
---            min_task_trials = n}]]) -> tuner
function TaskScheduler:tune(opts, policies, extra)
  extra = extra or {}
  if type(opts) ~= "table" then error("tune: expected TuningOptions", 2) end
  local n = #self.tasks
  local budget = opts.num_measure_trials or 0
  if type(budget) ~= "number" or budget < 0 or budget % 1 ~= 0 then
    error("tune: num_measure_trials must be a non-negative integer", 2)
  end
  local per_round = math.min(opts.num_measures_per_round or 64, math.floor(budget / n))
  if per_round <= 0 then
    error(string.format("tune: num_measure_trials (%d) must be at least the number of tasks (%d): " ..
      "each round gives one task num_measure_trials / tasks trials", budget, n), 2)
  end
  if policies == nil or (type(policies) == "table" and policies[1] == nil) then
    -- the auto-scheduler's sketch policies, options {program_cost_model = "xgb" | "random",
    -- seed, params} (tunelua.auto_scheduler.sketch_rounds)
    policies = require("tunelua.auto_scheduler.sketch_rounds").policies(self.tasks, opts, policies)
  end
  if type(policies) ~= "table" or #policies ~= n then
    error(string.format("tune: expected one search policy per task (%d), got %s", n,
      type(policies) == "table" and tostring(#policies) or type(policies)), 2)
  end
  for i, p in ipairs(policies) do
    if type(p) ~= "table" or type(p.continue_search_one_round) ~= "function" then
      error(string.format("tune: policy %d has no continue_search_one_round(n)", i - 1), 2)
    end
  end
  self.policies, self.per_round, self.num_measure_trials = policies, per_round, budget
  self.writers = writers_of(opts)
  local early = opts.early_stopping or 1e20
  self.per_task_early_stopping = extra.per_task_early_stopping or early
  self.tune_start = self.tune_start or os.time()
  self:restore(per_round, policies)

  -- warm-up: one round of every task not restored from the log; with min_task_trials, rounds
  -- of every task (restored or not) until it has that many trials
  local now = require("tunelua.core").C.tl_now
  local deadline = opts.max_seconds and now() + opts.max_seconds
  local want = extra.min_task_trials
  if want ~= nil and (type(want) ~= "number" or want < 0 or want % 1 ~= 0) then
    error("tune: min_task_trials must be a non-negative integer", 2)
  end
  local function spent() return self.ct >= budget or (deadline and now() >= deadline) end
  if want then
    -- in passes over the tasks, one round each per pass, so that a budget or a time limit
    -- too small for the whole top-up still reaches every task
    local moved = true
    while moved and not spent() do
      moved = false
      for i = 1, n do
        if spent() then break end
        if not self.dead_tasks[i] and self.task_trials[i] < want then
          local before = self.task_trials[i]
          self:tune_task(i, want - before)
          if self.task_trials[i] > before then moved = true end
        end
      end
    end
  else
    for i = 1, n do
      if spent() then break end
      if not self.restored[i] and not self.dead_tasks[i] then self:tune_task(i) end
    end
  end
  local last = 0
  local function out_of_time()
    if not deadline or now() < deadline then return false end
    if self.verbose >= 1 then
      print(string.format("Stop: max_seconds (%g s) reached after %d trials.", opts.max_seconds, self.ct))
    end
    return true
  end
  while self.ct < budget and self:num_dead() < n and not out_of_time() do
    local i = pick_next(self, last)
    if not i then break end
    self:tune_task(i)
    self:adjust_group(i)
    last = i
    if self.ct - self.best_ct >= early then
      local all_valid = true
      for _, c in ipairs(self.best_costs) do if c >= 1e9 then all_valid = false end end
      if all_valid then
        if self.verbose >= 1 then print("Stop early: the estimated latency has not improved in " .. early .. " trials.") end
        break
      end
    end
  end
  for _, cb in ipairs(self.callbacks) do if cb.pre_tune then cb:pre_tune(self, nil) end end
  return self
end

return M
