--- tunelua.autotvm.tuner: the template tuners (TVM's autotvm.tuner) and the tuning loop.
--
--   local tuner = require "tunelua.autotvm.tuner"
--   local t = tuner.XGBTuner(task, {loss_type = "rank", feature_type = "knob"})
--   t:tune({n_trial = 64, early_stopping = 32, measure_option = option,
--           callbacks = {callback.progress_bar(64), callback.log_to_file("t.log")}})
--
-- Tuners: RandomTuner, GridSearchTuner (index tuners, specs/algorithms.md A3), GATuner
-- ({pop_size = 100, elite_num = 3, mutation_prob = 0.1}, A4), XGBTuner ({loss_type = "reg" |
-- "rank" | "rank-binary", feature_type = "itervar" | "knob" | "curve", plan_size (64; 32 or
-- 16 on spaces under 1024 configs), num_threads, optimizer = "sa", diversity_filter_ratio,
-- seed}, A5/A6) and DropletTuner (A8). Every tuner is an object with next_batch(n) ->
-- configs, update(inputs, results) and has_next(); `Tuner.tune(obj, opts)` runs the loop of
-- A2 on any Lua object with those three methods (and `task`), so a user's own tuner needs no
-- base class.
--
-- The space is read through task.config_space: a ConfigSpace (tunelua.autotvm.space), or a
-- stand-in table with len, range_length, dims, is_valid(i), point2knob(i), knob2point(k)
-- -- the tests use that to drive the tuners over small hand-made spaces. The XGBoost model
-- and the annealer are C (core/tuner).
local ffi = require "ffi"
local core = require "tunelua.core"

local C, ctx, check = core.C, core.ctx, core.check

local tuner = {}

-- ---- random numbers: a private stream per tuner (Park-Miller; exact in doubles) -----------

local Rng = {}
Rng.__index = Rng
local function new_rng(seed)
  seed = math.floor(tonumber(seed) or os.time()) % 2147483646 + 1
  return setmetatable({ s = seed }, Rng)
end
function Rng:uniform()                 -- [0, 1)
  self.s = (self.s * 16807) % 2147483647
  return (self.s - 1) / 2147483646
end
function Rng:below(n)                  -- integer in [0, n)
  return math.floor(self:uniform() * n)
end
tuner.new_rng = new_rng

-- ---- the space the tuners walk: sizes and digits of task.config_space ---------------------

local Space = {}
Space.__index = Space

local function space_of(task)
  if type(task) ~= "table" then
    error("tuner: expected a task (from autotvm.task.create or extraction), got " .. type(task), 3)
  end
  local cs = task.config_space
  if cs == nil or cs.point2knob == nil or cs.knob2point == nil then
    error("tuner: task has no config_space with point2knob/knob2point", 3)
  end
  local sp = setmetatable({ task = task, cs = cs }, Space)
  if type(cs) == "table" and cs.dims then
    sp.dims = cs.dims
    sp.len = cs.len or #cs
    sp.range_len = cs.range_length or cs.range_len
  else
    sp.dims = {}
    for k, kb in ipairs(cs:knobs()) do sp.dims[k] = kb.dim end
    sp.len = #cs
    sp.range_len = cs:range_length()
  end
  sp.nknobs = #sp.dims
  sp.valid_fn = cs.is_valid ~= nil and "is_valid" or cs.is_index_valid ~= nil and "is_index_valid" or nil
  return sp
end
tuner.space_of = space_of

function Space:is_valid(i)
  if i < 0 or i >= self.range_len then return false end
  if not self.valid_fn then return true end
  return self.cs[self.valid_fn](self.cs, i) and true or false
end

function Space:point2knob(i) return self.cs:point2knob(i) end
function Space:knob2point(k) return self.cs:knob2point(k) end

-- The config object for index i (what MeasureInput carries).
function Space:get(i)
  if self.cs.get ~= nil then return self.cs:get(i) end
  return { index = i }
end

-- A uniformly random valid index not in exclude (set index -> true), or nil when none.
function Space:rand_index(rng, exclude)
  exclude = exclude or {}
  for _ = 1, 1000 do
    local i = rng:below(self.range_len)
    if not exclude[i] and self:is_valid(i) then return i end
  end
  -- dense fallback: scan from a random start
  local start = rng:below(self.range_len)
  for k = 0, self.range_len - 1 do
    local i = (start + k) % self.range_len
    if not exclude[i] and self:is_valid(i) then return i end
  end
  return nil
end

-- n distinct valid indices (fewer when the space is smaller).
function Space:sample_ints(rng, n)
  local seen, out = {}, {}
  n = math.min(n, self.len)
  while #out < n do
    local i = self:rand_index(rng, seen)
    if not i then break end
    seen[i] = true
    out[#out + 1] = i
  end
  return out
end

local function config_index(c)
  if type(c) == "number" then return c end
  if type(c) == "table" or type(c) == "cdata" or type(c) == "userdata" then
    local ok, i = pcall(function() return c.index end)
    if ok and i then return tonumber(i) end
  end
  error("tuner: a config must be an index or have .index, got " .. type(c), 3)
end
tuner.config_index = config_index

local function mean(t)
  local s = 0
  for _, v in ipairs(t) do s = s + v end
  return #t > 0 and s / #t or 0
end

local function result_flops(task, res)
  if res.error_no ~= 0 or not res.costs or #res.costs == 0 then return 0 end
  local m = mean(res.costs)
  if m <= 0 then return 0 end
  return (task.flop or 0) / m
end
tuner.result_flops = result_flops

-- ---- the Tuner base and its loop (A2) -----------------------------------------------------

local Tuner = {}
Tuner.__index = Tuner
tuner.Tuner = Tuner

local function new_tuner(cls, task, o)
  local self = setmetatable({}, cls)
  self.task = task
  self.space = space_of(task)
  self.rng = new_rng(o and o.seed)
  self.best_flops = 0
  self.best_config = nil
  self.best_measure_pair = nil
  self.best_iter = 0
  self.flops = 0        -- the last successful trial's throughput
  return self
end

function Tuner:has_next() return true end
function Tuner:next_batch(_) error("tuner: next_batch is not implemented", 2) end
function Tuner:update(_, _) end
function Tuner:load_history(_) end

-- Takes the best of measured (inputs, results) when it beats the best so far.
local function take_best(self, inputs, results)
  for k, res in ipairs(results) do
    local f = result_flops(self.task, res)
    if f > self.best_flops then
      self.best_flops, self.best_config = f, inputs[k].config
      self.best_measure_pair = { inputs[k], res }
    end
  end
end

-- Mark already measured configs (a resumed log) as visited and let the tuner learn from
-- them. The base version feeds them to update() and takes the best.
function Tuner:add_history(inputs, results)
  if #inputs == 0 then return end
  if self.visited then
    for _, inp in ipairs(inputs) do self.visited[config_index(inp.config)] = true end
  end
  self:update(inputs, results)
  take_best(self, inputs, results)
end

local ERR_NAMES = { [0] = "NO_ERROR", "INSTANTIATION_ERROR", "COMPILE_HOST", "COMPILE_DEVICE",
  "RUNTIME_DEVICE", "WRONG_ANSWER", "BUILD_TIMEOUT", "RUN_TIMEOUT", "UNKNOWN_ERROR" }

local function first_line(s)
  s = tostring(s or "")
  local l = s:match("^[^\n]*") or s
  if #l > 200 then l = l:sub(1, 197) .. "..." end
  return l
end

--- tune(tuner, {n_trial, early_stopping, measure_option, callbacks, si_prefix, prefix}).
-- Works on any object with next_batch/update/has_next and .task. prefix (e.g. "[Task  3/12] ")
-- starts the failure summary's line, as it does the progress bar's. Returns a summary table
-- {trials, errors = {[error_no] = {count, first}}, best_flops, best_config}.
function Tuner.tune(self, o)
  if type(o) ~= "table" then error("tune: expected an option table {n_trial, measure_option, ...}", 2) end
  local task = self.task
  if type(task) ~= "table" then error("tune: the tuner has no .task", 2) end
  local n_trial = tonumber(o.n_trial)
  if not n_trial or n_trial < 0 then error("tune: n_trial must be a number >= 0", 2) end
  local early_stopping = tonumber(o.early_stopping) or 1e9
  local mo = o.measure_option
  if type(mo) ~= "table" or not mo.builder then
    error("tune: measure_option must come from autotvm.measure_option", 2)
  end
  local callbacks = o.callbacks or {}
  local measure = require "tunelua.autotvm.measure"
  local measure_batch = o.measure_batch or measure.create_measure_batch(task, mo)
  local n_parallel = tonumber(mo.builder.n_parallel) or 1
  if n_parallel < 1 then n_parallel = 1 end
  self.best_flops = self.best_flops or 0
  self.best_iter = 0
  local i, error_ct = 0, 0
  local errors, nerr = {}, 0
  while i < n_trial and self:has_next() do
    local configs = self:next_batch(math.min(n_parallel, n_trial - i))
    if #configs == 0 then break end
    local inputs = {}
    for k, c in ipairs(configs) do
      if type(c) == "number" then c = self.space and self.space:get(c) or { index = c } end
      inputs[k] = measure.MeasureInput(task, c)
    end
    local results = measure_batch(inputs)
    for k, res in ipairs(results) do
      local flops = result_flops(task, res)
      if res.error_no == 0 then
        error_ct = 0
        self.flops = flops
      else
        error_ct = error_ct + 1
        nerr = nerr + 1
        local e = errors[res.error_no]
        if not e then
          e = { count = 0, first = first_line(res.error_msg) }
          errors[res.error_no] = e
        end
        e.count = e.count + 1
      end
      if flops > self.best_flops then
        self.best_flops, self.best_config, self.best_iter = flops, inputs[k].config, i + k - 1
        self.best_measure_pair = { inputs[k], res }
      end
    end
    i = i + #results
    self:update(inputs, results)
    for _, cb in ipairs(callbacks) do cb(self, inputs, results) end
    if i >= self.best_iter + early_stopping then break end
  end
  for _, cb in ipairs(callbacks) do
    if type(cb) == "table" and cb.finish then cb:finish(self) end
  end
  if nerr > 0 then
    local parts = {}
    for no = 0, 16 do
      local e = errors[no]
      if e then
        parts[#parts + 1] = string.format("  %s x%d: %s", ERR_NAMES[no] or ("ERROR_" .. no),
          e.count, e.first)
      end
    end
    io.stderr:write(string.format("%stune %s: %d of %d trials failed%s\n%s\n",
      o.prefix and tostring(o.prefix) or "", tostring(task.name), nerr, i, nerr == i and " (all of them)" or "",
      table.concat(parts, "\n")))
  end
  return { trials = i, errors = errors, n_errors = nerr, best_flops = self.best_flops,
           best_config = self.best_config }
end

-- ---- index tuners (A3) ---------------------------------------------------------------------

local function count_valid(sp, b, e)
  if b == 0 and e == sp.range_len - 1 then return sp.len end
  local n = 0
  for i = b, e do if sp:is_valid(i) then n = n + 1 end end
  return n
end

local function index_tuner(cls, task, o)
  o = o or {}
  local self = new_tuner(cls, task, o)
  local r = o.range_idx
  self.begin_idx = r and r[1] or 0
  self.end_idx = r and r[2] or self.space.range_len - 1
  self.visited, self.nvisited = {}, 0
  self.visited_max = count_valid(self.space, self.begin_idx, self.end_idx)
  return self
end

local function visit(self, i)
  if not self.visited[i] then
    self.visited[i] = true
    self.nvisited = self.nvisited + 1
  end
end

-- A tuner class whose methods default to base's.
local function subclass(base)
  local cls = setmetatable({}, { __index = base })
  cls.__index = cls
  return cls
end

-- The base of GridSearchTuner and RandomTuner: each valid index of [begin_idx, end_idx] once.
local IndexTuner = subclass(Tuner)
function IndexTuner:has_next() return self.nvisited < self.visited_max end
function IndexTuner:add_history(inputs, results)
  for _, inp in ipairs(inputs) do visit(self, config_index(inp.config)) end
  take_best(self, inputs, results)
end

local GridSearchTuner = subclass(IndexTuner)
tuner.GridSearchTuner_class = GridSearchTuner

function tuner.GridSearchTuner(task, o)
  local self = index_tuner(GridSearchTuner, task, o)
  self.counter = self.begin_idx
  return self
end
function GridSearchTuner:next_batch(n)
  local out = {}
  while #out < n and self:has_next() do
    while self.counter <= self.end_idx and
      (self.visited[self.counter] or not self.space:is_valid(self.counter)) do
      self.counter = self.counter + 1
    end
    if self.counter > self.end_idx then break end
    visit(self, self.counter)
    out[#out + 1] = self.space:get(self.counter)
    self.counter = self.counter + 1
  end
  return out
end

local RandomTuner = subclass(IndexTuner)

function tuner.RandomTuner(task, o) return index_tuner(RandomTuner, task, o) end
function RandomTuner:next_batch(n)
  local out = {}
  local sp = self.space
  local b, e = self.begin_idx, self.end_idx
  while #out < n and self:has_next() do
    local idx
    for _ = 1, 1000 do
      local i = b + self.rng:below(e - b + 1)
      if not self.visited[i] and sp:is_valid(i) then idx = i break end
    end
    if not idx then   -- nearly exhausted: scan
      local start = self.rng:below(e - b + 1)
      for k = 0, e - b do
        local i = b + (start + k) % (e - b + 1)
        if not self.visited[i] and sp:is_valid(i) then idx = i break end
      end
    end
    if not idx then break end
    visit(self, idx)
    out[#out + 1] = sp:get(idx)
  end
  return out
end

-- ---- GATuner (A4) ----------------------------------------------------------------------------

local GATuner = subclass(Tuner)

function tuner.GATuner(task, o)
  o = o or {}
  local self = new_tuner(GATuner, task, o)
  local sp = self.space
  self.pop_size = math.min(tonumber(o.pop_size) or 100, sp.len)
  self.elite_num = tonumber(o.elite_num) or 3
  self.mutation_prob = tonumber(o.mutation_prob) or 0.1
  if self.elite_num > self.pop_size then
    error("GATuner: elite_num (" .. self.elite_num .. ") must be <= pop_size (" ..
      self.pop_size .. ")", 2)
  end
  self.visited, self.nvisited = {}, 0
  self.genes, self.scores, self.elites, self.elite_scores = {}, {}, {}, {}
  self.trial_pt = 0
  for _, i in ipairs(sp:sample_ints(self.rng, self.pop_size)) do
    self.visited[i] = true
    self.nvisited = self.nvisited + 1
    self.genes[#self.genes + 1] = sp:point2knob(i)
  end
  return self
end

function GATuner:has_next()
  return self.trial_pt < #self.genes or self.nvisited < self.space.len
end

-- Unlike TVM (which wraps around the population and measures genes twice when the batch
-- does not divide pop_size), a batch ends at the end of a generation.
function GATuner:next_batch(n)
  local out = {}
  for _ = 1, n do
    if self.trial_pt >= #self.genes then break end
    local g = self.genes[self.trial_pt + 1]
    self.trial_pt = self.trial_pt + 1
    out[#out + 1] = self.space:get(self.space:knob2point(g))
  end
  return out
end

local function pick_weighted(rng, p, exclude)
  local total = 0
  for i, w in ipairs(p) do if i ~= exclude then total = total + w end end
  local r = rng:uniform() * total
  local last
  for i, w in ipairs(p) do
    if i ~= exclude then
      last = i
      r = r - w
      if r < 0 then return i end
    end
  end
  return last
end

function GATuner:update(inputs, results)
  local sp = self.space
  local _ = inputs
  for _, res in ipairs(results) do
    self.scores[#self.scores + 1] = result_flops(self.task, res)
  end
  if #self.scores < #self.genes or self.nvisited >= sp.len then return end
  local next_genes = {}
  if sp.len - self.nvisited <= self.pop_size then
    for i = 0, sp.range_len - 1 do
      if not self.visited[i] and sp:is_valid(i) then
        next_genes[#next_genes + 1] = sp:point2knob(i)
        self.visited[i] = true
        self.nvisited = self.nvisited + 1
      end
    end
  else
    local G, S = {}, {}
    for i, g in ipairs(self.genes) do G[#G + 1] = g; S[#S + 1] = self.scores[i] end
    for i, g in ipairs(self.elites) do G[#G + 1] = g; S[#S + 1] = self.elite_scores[i] end
    -- new elites: the top elite_num
    local order = {}
    for i = 1, #S do order[i] = i end
    table.sort(order, function(a, b) return S[a] > S[b] end)
    self.elites, self.elite_scores = {}, {}
    for k = 1, math.min(self.elite_num, #order) do
      self.elites[k] = G[order[k]]
      self.elite_scores[k] = S[order[k]]
    end
    local maxs = 0
    for i = 1, #S do S[i] = S[i] + 1e-8; if S[i] > maxs then maxs = S[i] end end
    local p = {}
    for i = 1, #S do p[i] = S[i] / maxs end
    local dims = sp.dims
    local attempts = 0
    while #next_genes < self.pop_size and attempts < 50 * self.pop_size do
      attempts = attempts + 1
      local p1 = pick_weighted(self.rng, p)
      local p2 = #G > 1 and pick_weighted(self.rng, p, p1) or p1
      local point = self.rng:below(#dims)
      local child = {}
      for j = 1, #dims do
        child[j] = (j - 1 < point) and G[p1][j] or G[p2][j]
        if self.rng:uniform() < self.mutation_prob then child[j] = self.rng:below(dims[j]) end
      end
      local idx = sp:knob2point(child)
      -- unlike TVM, a child that was already measured is rejected: it would only repeat a trial
      if sp:is_valid(idx) and not self.visited[idx] then
        next_genes[#next_genes + 1] = child
        self.visited[idx] = true
        self.nvisited = self.nvisited + 1
      end
    end
    -- crossover kept producing measured configs: fill with fresh random ones
    while #next_genes < self.pop_size and self.nvisited < sp.len do
      local idx = sp:rand_index(self.rng, self.visited)
      if not idx then break end
      next_genes[#next_genes + 1] = sp:point2knob(idx)
      self.visited[idx] = true
      self.nvisited = self.nvisited + 1
    end
  end
  self.genes = next_genes
  self.trial_pt = 0
  self.scores = {}
end

function GATuner:add_history(inputs, results)
  for _, inp in ipairs(inputs) do visit(self, config_index(inp.config)) end
  -- the best measured configs become the first elites
  local order = {}
  for k = 1, #results do order[k] = k end
  local fl = {}
  for k, res in ipairs(results) do fl[k] = result_flops(self.task, res) end
  table.sort(order, function(a, b) return fl[a] > fl[b] end)
  for k = 1, math.min(self.elite_num, #order) do
    if fl[order[k]] > 0 then
      self.elites[#self.elites + 1] = self.space:point2knob(config_index(inputs[order[k]].config))
      self.elite_scores[#self.elite_scores + 1] = fl[order[k]]
    end
  end
  if fl[order[1]] and fl[order[1]] > self.best_flops then
    self.best_flops = fl[order[1]]
    self.best_config = inputs[order[1]].config
    self.best_measure_pair = { inputs[order[1]], results[order[1]] }
  end
end

-- ---- XGBTuner (A5, A6) --------------------------------------------------------------------

local FEATURE = { itervar = 0, knob = 1, curve = 2 }
local LOSS = { reg = 0, rank = 1, ["rank-binary"] = 2 }

local XGBTuner = subclass(Tuner)

function tuner.XGBTuner(task, o)
  o = o or {}
  local self = new_tuner(XGBTuner, task, o)
  local ft = o.feature_type or "itervar"
  local lt = o.loss_type or "reg"
  if FEATURE[ft] == nil then
    error("XGBTuner: feature_type must be \"itervar\", \"knob\" or \"curve\", got " .. tostring(ft), 2)
  end
  if LOSS[lt] == nil then
    error("XGBTuner: loss_type must be \"reg\", \"rank\" or \"rank-binary\", got " .. tostring(lt), 2)
  end
  if (o.optimizer or "sa") ~= "sa" then
    error("XGBTuner: optimizer must be \"sa\", got " .. tostring(o.optimizer), 2)
  end
  local ratio = o.diversity_filter_ratio
  if ratio ~= nil and (type(ratio) ~= "number" or ratio < 1) then
    error("XGBTuner: diversity_filter_ratio must be a number >= 1, got " .. tostring(ratio), 2)
  end
  if task.handle == nil then
    error("XGBTuner: task has no handle (a task from autotvm.task.create or extraction)", 2)
  end
  self.feature_type, self.loss_type = ft, lt
  -- plan_size: trials per model plan, and the random trials before the first fit. TVM's 64
  -- suits spaces of 10^4 configs and more; on a small space 64 random trials are a large
  -- share of a short budget and the model plans long on little data. The default is the
  -- largest power of two <= 1/16 of the space, between 16 and 64 (docs/autotvm.md, "Search
  -- efficiency"): 64 from 1024 configs up.
  local ps = 64
  while ps > 16 and ps * 16 > self.space.len do ps = ps / 2 end
  self.plan_size = tonumber(o.plan_size) or ps
  self.num_threads = tonumber(o.num_threads) or C.tl_num_cores()
  self.diversity_filter_ratio = ratio
  local seed = self.rng:below(2147483647) + 1
  local pm = ffi.new("tl_tune_model*[1]")
  check(C.tl_tune_model_new(ctx, task.handle, FEATURE[ft], LOSS[lt], self.num_threads, seed, pm))
  self.model = ffi.gc(pm[0], C.tl_tune_model_free)
  local psa = ffi.new("tl_tune_sa*[1]")
  local sa = o.sa or {}
  local temp = sa.temp or { 1, 0 }
  if type(temp) == "number" then temp = { temp, temp } end
  check(C.tl_tune_sa_new(ctx, task.handle, sa.n_iter or 500, temp[1], temp[2],
    sa.persistent == false and 0 or 1, sa.parallel_size or 128, sa.early_stop or 50, seed + 1, psa))
  self.sa = ffi.gc(psa[0], C.tl_tune_sa_free)
  self.trials, self.trial_pt = {}, 0
  self.visited, self.nvisited = {}, 0
  self.xs, self.ys = {}, {}
  self.flops_max, self.train_ct = 0, 0
  return self
end

function XGBTuner:has_next() return self.nvisited < self.space.len end

function XGBTuner:next_batch(n)
  local out = {}
  local sp = self.space
  local eps_tail = math.floor(0.05 * self.plan_size)
  while #out < n and self:has_next() do
    while self.trial_pt < #self.trials and
      (self.visited[self.trials[self.trial_pt + 1]] or not sp:is_valid(self.trials[self.trial_pt + 1])) do
      self.trial_pt = self.trial_pt + 1
    end
    local idx
    if self.trial_pt >= #self.trials - eps_tail then
      idx = sp:rand_index(self.rng, self.visited)
    else
      idx = self.trials[self.trial_pt + 1]
      self.trial_pt = self.trial_pt + 1
    end
    if not idx then break end
    visit(self, idx)
    out[#out + 1] = sp:get(idx)
  end
  return out
end

local function i64_array(list)
  local a = ffi.new("int64_t[?]", math.max(#list, 1))
  for k, v in ipairs(list) do a[k - 1] = v end
  return a
end

-- Model predictions for indices (a Lua list of numbers).
function XGBTuner:predict(list)
  local out = ffi.new("double[?]", math.max(#list, 1))
  check(C.tl_tune_model_predict(ctx, self.model, i64_array(list), #list, out))
  local r = {}
  for k = 1, #list do r[k] = out[k - 1] end
  return r
end

local function find_maximums(self, num)
  local ex = {}
  for i in pairs(self.visited) do ex[#ex + 1] = i end
  local out = ffi.new("int64_t[?]", math.max(num, 1))
  local nout = ffi.new("int[1]")
  check(C.tl_tune_sa_find_maximums(ctx, self.sa, self.model, num, i64_array(ex), #ex, out, nout))
  local r = {}
  for k = 1, nout[0] do r[k] = tonumber(out[k - 1]) end
  return r
end

-- Greedy diversity pick (TVM's submodular_pick): each step takes the candidate maximising
-- score + knob_weight * (number of knobs whose value is new to the chosen set). TVM passes
-- all-zero scores; we pass the model's scores scaled to [0, 1], so diversity breaks ties
-- among similarly good configs instead of ignoring the model.
local function submodular_pick(scores, knobs, n_pick, knob_weight)
  local n_knob = #knobs[1]
  local sets = {}
  for j = 1, n_knob do sets[j] = {} end
  local remain = {}
  for i = 1, #knobs do remain[i] = i end
  local ret = {}
  for _ = 1, math.min(n_pick, #knobs) do
    local best_k, best_s = nil, -math.huge
    for k, x in ipairs(remain) do
      local s = scores[x]
      for j = 1, n_knob do
        if not sets[j][knobs[x][j]] then s = s + knob_weight end
      end
      if s > best_s then best_s, best_k = s, k end
    end
    local x = table.remove(remain, best_k)
    ret[#ret + 1] = x
    for j = 1, n_knob do sets[j][knobs[x][j]] = true end
  end
  return ret
end
tuner.submodular_pick = submodular_pick

function XGBTuner:update(inputs, results)
  for k, inp in ipairs(inputs) do
    local idx = config_index(inp.config)
    local f = result_flops(self.task, results[k])
    self.xs[#self.xs + 1] = idx
    self.ys[#self.ys + 1] = f
    if f > self.flops_max then self.flops_max = f end
    visit(self, idx)
  end
  if #self.xs >= self.plan_size * (self.train_ct + 1) and self.flops_max > 1e-6 then
    -- a model failure (e.g. an XGBoost error) must not end the tuning run: warn, keep the
    -- old plan (or random picks), and try again after the next plan's worth of trials
    local ok, err = pcall(self.replan, self)
    if not ok then
      io.stderr:write("XGBTuner: model update failed, exploring randomly: " .. tostring(err) .. "\n")
    end
    self.train_ct = self.train_ct + 1
  end
end

function XGBTuner:replan()
  do
    local n = #self.xs
    local ys = ffi.new("double[?]", n)
    for k = 1, n do ys[k - 1] = self.ys[k] end
    check(C.tl_tune_model_fit(ctx, self.model, i64_array(self.xs), ys, n, self.plan_size))
    local ratio = self.diversity_filter_ratio
    if ratio then
      local cand = find_maximums(self, math.floor(self.plan_size * ratio))
      if #cand > 0 then
        local sc = self:predict(cand)
        local lo, hi = math.huge, -math.huge
        for _, s in ipairs(sc) do lo = math.min(lo, s); hi = math.max(hi, s) end
        for k = 1, #sc do sc[k] = hi > lo and (sc[k] - lo) / (hi - lo) or 0 end
        local knobs = {}
        for k, c in ipairs(cand) do knobs[k] = self.space:point2knob(c) end
        local pick = submodular_pick(sc, knobs, self.plan_size, 1)
        local trials = {}
        for k, p in ipairs(pick) do trials[k] = cand[p] end
        self.trials = trials
      else
        self.trials = {}
      end
    else
      self.trials = find_maximums(self, self.plan_size)
    end
    self.trial_pt = 0
  end
end

function XGBTuner:add_history(inputs, results)
  -- measured configs become training data: one fit on all of them, then the usual rhythm
  -- (a retrain per plan_size new trials)
  self:update(inputs, results)
  self.train_ct = math.max(self.train_ct, math.floor(#self.xs / self.plan_size))
  take_best(self, inputs, results)
end

local function ser(v)
  if type(v) == "table" then
    local p = {}
    for k = 1, #v do p[k] = ser(v[k]) end
    return "[" .. table.concat(p, ",") .. "]"
  end
  return tostring(v)
end

-- "name|[args]" of a task, or of a record's input (decoded records carry task_name/args).
local function workload_key(t)
  if t.task then t = t.task end
  return tostring(t.name or t.task_name) .. "|" .. ser(t.args)
end
tuner.workload_key = workload_key

--- load_history(records[, min_seed_records = 500]): transfer learning from a log of the same
-- template (records: a list or iterator of {inp, res} / {inp = , res = }). The history trains
-- a base model; features of other workloads are computed on their own tasks.
function XGBTuner:load_history(records, min_seed_records)
  min_seed_records = min_seed_records or 500
  local list = {}
  if type(records) == "function" then
    for a, b in records do list[#list + 1] = b and { a, b } or a end
  else
    list = records or {}
  end
  local same = 0
  for _, r in ipairs(list) do
    local inp = r[1] or r.inp
    if inp and (inp.task and inp.task.name or inp.task_name) == self.task.name then same = same + 1 end
  end
  if same < min_seed_records then return false end
  local groups, n = {}, 0
  local own = workload_key(self.task)
  for _, r in ipairs(list) do
    local inp, res = r[1] or r.inp, r[2] or r.res
    local tname = inp and (inp.task and inp.task.name or inp.task_name)
    if inp and res and tname == self.task.name then
      local key = workload_key(inp)
      local g = groups[key]
      if not g then
        local t = inp.task
        if key == own then t = self.task end
        if not t or t.handle == nil then
          local ok, tk = pcall(function()
            return require("tunelua.autotvm.task").create(tname, inp.args, inp.target or self.task.target)
          end)
          t = ok and tk or nil
        end
        g = { task = t, xs = {}, ys = {} }
        groups[key] = g
      end
      if g.task then
        g.xs[#g.xs + 1] = config_index(inp.config)
        g.ys[#g.ys + 1] = result_flops(g.task, res)
        n = n + 1
      end
    end
  end
  if n < min_seed_records then return false end
  -- feature rows per workload, on that workload's task
  local rows, ys, width = {}, {}, 1
  local ft = FEATURE[self.feature_type]
  local cap = 4096
  for _, g in pairs(groups) do
    local t = g.task
    if t and t.handle ~= nil then
      local m = #g.xs
      local buf = ffi.new("float[?]", m * cap)
      local ncols = ffi.new("int[1]")
      check(C.tl_tune_task_features(ctx, t.handle, ft, i64_array(g.xs), m, self.num_threads, buf,
        cap, ncols, nil))
      width = math.max(width, ncols[0])
      for k = 1, m do
        rows[#rows + 1] = { buf = buf, off = (k - 1) * cap }
        ys[#ys + 1] = g.ys[k]
      end
    end
  end
  if #rows < min_seed_records then return false end
  local x = ffi.new("float[?]", #rows * width)
  for k, r in ipairs(rows) do
    ffi.copy(x + (k - 1) * width, r.buf + r.off, width * 4)
  end
  local y = ffi.new("double[?]", #ys)
  for k = 1, #ys do y[k - 1] = ys[k] end
  check(C.tl_tune_model_fit_log_matrix(ctx, self.model, x, #rows, width, y, self.plan_size))
  if #self.trials == 0 then
    self.trials = find_maximums(self, self.plan_size)
    self.trial_pt = 0
  end
  return true
end

-- ---- DropletTuner (A8) -------------------------------------------------------------------------

local DropletTuner = subclass(Tuner)

function tuner.DropletTuner(task, o)
  o = o or {}
  local self = new_tuner(DropletTuner, task, o)
  local sp = self.space
  self.visited, self.nvisited = {}, 0
  self.pvalue = o.pvalue or 0.05
  self.step = 1
  local start = o.start_position or {}
  local k = {}
  for j = 1, sp.nknobs do k[j] = start[j] or 0 end
  local c = sp:knob2point(k)
  if not sp:is_valid(c) then c = sp:rand_index(self.rng, {}) end
  self.center = c
  self.center_costs = nil
  self.queue = { c }
  self.round = {}
  return self
end

function DropletTuner:has_next() return self.nvisited < self.space.len end

-- Neighbours of the centre at +-step along every sign pattern (capped), valid and unvisited.
function DropletTuner:neighbours()
  local sp = self.space
  local base = sp:point2knob(self.center)
  local out, seen = {}, {}
  local K = sp.nknobs
  local patterns = math.min(3 ^ K, 4096)
  for p = 1, patterns - 1 do
    local k, q = {}, p
    for j = 1, K do
      local d = q % 3
      q = (q - d) / 3
      k[j] = base[j] + (d == 1 and self.step or d == 2 and -self.step or 0)
    end
    local ok = true
    for j = 1, K do if k[j] < 0 or k[j] >= sp.dims[j] then ok = false break end end
    if ok then
      local i = sp:knob2point(k)
      if not seen[i] and not self.visited[i] and sp:is_valid(i) then
        seen[i] = true
        out[#out + 1] = i
      end
    end
  end
  return out
end

function DropletTuner:next_batch(n)
  local out = {}
  while #out < n and self:has_next() do
    if #self.queue == 0 then
      self.queue = self:neighbours()
      if #self.queue == 0 then
        self.step = self.step + 1
        if self.step > 8 then   -- stuck: restart from a random config
          self.step = 1
          local r = self.space:rand_index(self.rng, self.visited)
          if not r then break end
          self.queue = { r }
        end
      end
    end
    local i = table.remove(self.queue, 1)
    if i and not self.visited[i] then
      self.visited[i] = true
      self.nvisited = self.nvisited + 1
      out[#out + 1] = self.space:get(i)
    end
  end
  return out
end

-- Welch's t statistic: is a faster than b? (one-sided, approximate p <= 0.05 for t >= 1.7)
local function faster(a, b)
  if not b then return true end
  if #a < 2 or #b < 2 then return mean(a) < mean(b) end
  local ma, mb = mean(a), mean(b)
  local va, vb = 0, 0
  for _, x in ipairs(a) do va = va + (x - ma) ^ 2 end
  for _, x in ipairs(b) do vb = vb + (x - mb) ^ 2 end
  va, vb = va / (#a - 1), vb / (#b - 1)
  local se = math.sqrt(va / #a + vb / #b)
  if se == 0 then return ma < mb end
  return (mb - ma) / se >= 1.7
end

function DropletTuner:update(inputs, results)
  local moved = false
  for k, res in ipairs(results) do
    if res.error_no == 0 and res.costs and #res.costs > 0 then
      local i = config_index(inputs[k].config)
      if i == self.center and not self.center_costs then
        self.center_costs = res.costs
      elseif faster(res.costs, self.center_costs) then
        self.center, self.center_costs = i, res.costs
        moved = true
      end
    end
  end
  if moved then
    self.step = 1
    self.queue = {}
  end
end

-- ---- construction by name (seed 000's tune_tasks) --------------------------------------------

local NAMES = {
  xgb = { "xgb", "reg" }, xgb_knob = { "xgb", "reg", "knob" },
  xgb_itervar = { "xgb", "reg", "itervar" }, xgb_curve = { "xgb", "reg", "curve" },
  xgb_rank = { "xgb", "rank" }, xgb_rank_knob = { "xgb", "rank", "knob" },
  xgb_rank_itervar = { "xgb", "rank", "itervar" }, xgb_rank_curve = { "xgb", "rank", "curve" },
  xgb_rank_binary = { "xgb", "rank-binary" },
  xgb_rank_binary_knob = { "xgb", "rank-binary", "knob" },
  xgb_rank_binary_itervar = { "xgb", "rank-binary", "itervar" },
  xgb_rank_binary_curve = { "xgb", "rank-binary", "curve" },
  ga = { "ga" }, random = { "random" }, gridsearch = { "gridsearch" }, droplet = { "droplet" },
}
tuner.NAMES = {}
for k in pairs(NAMES) do tuner.NAMES[#tuner.NAMES + 1] = k end
table.sort(tuner.NAMES)

--- by_name(name, task[, extra options]) -> tuner, as seed 000's tune_tasks builds them.
function tuner.by_name(name, task, o)
  local d = NAMES[name]
  if not d then
    error("Invalid tuner: " .. tostring(name) .. " (expected one of " ..
      table.concat(tuner.NAMES, ", ") .. ")", 2)
  end
  o = o or {}
  local function with(t)
    for k, v in pairs(o) do if t[k] == nil then t[k] = v end end
    return t
  end
  if d[1] == "xgb" then
    return tuner.XGBTuner(task, with({ loss_type = d[2], feature_type = d[3] }))
  elseif d[1] == "ga" then
    return tuner.GATuner(task, with({ pop_size = 50 }))
  elseif d[1] == "random" then
    return tuner.RandomTuner(task, with({}))
  elseif d[1] == "gridsearch" then
    return tuner.GridSearchTuner(task, with({}))
  else
    return tuner.DropletTuner(task, with({}))
  end
end

return tuner
