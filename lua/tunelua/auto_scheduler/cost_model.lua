--- tunelua.auto_scheduler.cost_model: the auto-scheduler's per-store features
--- (core/ansor/feature.c) and its cost models (core/tuner/ansor_model.c), TVM's XGBModel and
--- RandomModel.
--
--   local cm = require "tunelua.auto_scheduler.cost_model"
--   local feats = cm.features({lowered1, lowered2}, hw)   -- rows of each state's stores
--   local model = auto_scheduler.XGBModel{ seed = 1, num_warmup_sample = 100 }
--   model:update(feats, { 1.2e9, 0 })                     -- flop/s; 0 = failed measurement
--   local scores = model:predict(feats)                   -- higher is better; -inf: invalid
--   model:save(path); model:load(path)
--
-- A feature row has cm.num_features (164) floats, named by cm.feature_names (1-based list:
-- "float_addsub", "B0.bytes", ...); a state is the rows of its lowered function's stores.
-- cm.features(lowered | {lowered...}[, hw[, nthreads]]) extracts them (lowered: what
-- tunelua.build.lower returns, or a tl_lowered cdata; hw: a HardwareParams, for its cache
-- line; nil: 64 bytes) into a Features object: .n states, .nrows rows, .rows and .row_off
-- (cdata in the C layout) and :rows_of(i) (the i-th state's rows as Lua tables).
-- cm.features_from_rows({{row, row, ...}, ...}) makes one from Lua tables (each row 164
-- numbers). A model's update and predict take a Features object or such a Lua list.
--
-- XGBModel{seed, num_warmup_sample (100), nthread (1), max_rounds (10000), early_stopping (50),
-- adaptive_training (true)} scores a state as the sum of its rows' predictions, trained on
-- every update so far with the throughputs normalized by the largest; until more than
-- num_warmup_sample states have been given (and never, for RandomModel{seed}) it scores
-- uniformly at random in [0, 1). .handle is the engine's tl_ansor_model (freed by the GC), for
-- the search to call directly.
local ffi = require "ffi"
local core = require "tunelua.core"

local C, ctx = core.C, core.ctx
if not pcall(function() return ffi.C.free end) then ffi.cdef "void free(void *ptr);" end

local M = {}

M.num_features = C.tl_ansor_num_features()
M.feature_names = {}
for i = 0, M.num_features - 1 do M.feature_names[i + 1] = ffi.string(C.tl_ansor_feature_name(i)) end

local function fail(lvl)
  local m = core.errmsg()
  C.tl_clearerr(ctx)
  error(m, lvl + 1)
end

-- ---- features ------------------------------------------------------------------------------------

local Features = {}
Features.__index = Features
Features.__tostring = function(f)
  return string.format("Features(%d states, %d rows of %d)", f.n, f.nrows, M.num_features)
end
M.Features_mt = Features

local function features_of(rows_cdata, row_off, n, nrows)
  return setmetatable({ rows = rows_cdata, row_off = row_off, n = n, nrows = nrows }, Features)
end

--- The i-th state's rows (1-based) as a list of Lua tables of num_features numbers.
function Features:rows_of(i)
  if type(i) ~= "number" or i < 1 or i > self.n or i % 1 ~= 0 then
    error("Features:rows_of: state " .. tostring(i) .. " is not in 1.." .. self.n, 2)
  end
  local out = {}
  for r = self.row_off[i - 1], self.row_off[i] - 1 do
    local row = {}
    for k = 0, M.num_features - 1 do row[k + 1] = self.rows[r * M.num_features + k] end
    out[#out + 1] = row
  end
  return out
end

local function lowered_handle(l, lvl)
  if type(l) == "table" and l.handle ~= nil then return l.handle end
  if type(l) == "cdata" then return l end
  error("features: expected a lowered function (tunelua.build.lower's result), got " .. type(l), lvl + 1)
end

local function hw_handle(hw, lvl)
  if hw == nil then return nil end
  if type(hw) == "table" and type(hw.handle) == "function" then return hw:handle() end
  if type(hw) == "cdata" then return hw end
  error("features: hw must be a HardwareParams, got " .. type(hw), lvl + 1)
end

--- features(lowered | {lowered, ...}[, hw[, nthreads]]) -> Features
function M.features(ls, hw, nthreads)
  local list = ls
  if type(ls) ~= "table" or ls.handle ~= nil then list = { ls } end
  local n = #list
  local fs = ffi.new("tl_lowered *[?]", math.max(n, 1))
  local keep = {}
  for i, l in ipairs(list) do
    fs[i - 1] = lowered_handle(l, 2)
    keep[i] = l
  end
  if nthreads ~= nil and (type(nthreads) ~= "number" or nthreads % 1 ~= 0) then
    error("features: nthreads must be an integer, got " .. tostring(nthreads), 2)
  end
  local rows = ffi.new("float *[1]")
  local off = ffi.new("int[?]", n + 1)
  local total = C.tl_ansor_features_batch(ctx, fs, n, hw_handle(hw, 2), nthreads or 0, rows, off)
  if total < 0 then fail(2) end
  local r = rows[0] ~= nil and ffi.gc(rows[0], ffi.C.free) or nil
  return features_of(r, off, n, total)
end

--- features_from_rows({{row, ...}, ...}) -> Features (each row a list of num_features numbers)
function M.features_from_rows(states, lvl)
  lvl = lvl or 2
  if type(states) ~= "table" then
    error("features_from_rows: expected a list of states (lists of rows), got " .. type(states), lvl)
  end
  local n, total = #states, 0
  for i, s in ipairs(states) do
    if type(s) ~= "table" then error("features_from_rows: state " .. i .. " is not a list of rows", lvl) end
    total = total + #s
  end
  local rows = ffi.new("float[?]", math.max(total, 1) * M.num_features)
  local off = ffi.new("int[?]", n + 1)
  local at = 0
  for i, s in ipairs(states) do
    for j, row in ipairs(s) do
      if type(row) ~= "table" or #row ~= M.num_features then
        error(string.format("features_from_rows: state %d row %d: expected %d numbers, got %s", i, j,
                            M.num_features, type(row) == "table" and #row or type(row)), lvl)
      end
      for k = 1, M.num_features do
        local v = row[k]
        if type(v) ~= "number" then
          error(string.format("features_from_rows: state %d row %d feature %d (%s) is not a number",
                              i, j, k, M.feature_names[k]), lvl)
        end
        rows[at * M.num_features + k - 1] = v
      end
      at = at + 1
    end
    off[i] = at
  end
  return features_of(rows, off, n, total)
end

local function as_features(f, what, lvl)
  if getmetatable(f) == Features then return f end
  if type(f) == "table" then return M.features_from_rows(f, lvl + 1) end
  error(what .. ": expected Features or a list of states, got " .. type(f), lvl + 1)
end

-- ---- models -----------------------------------------------------------------------------------------

local Model = {}
Model.__index = Model
Model.__tostring = function(m)
  return string.format("%s(%d samples%s)", m.kind == 1 and "XGBModel" or "RandomModel",
                       C.tl_ansor_model_num_samples(m.handle),
                       C.tl_ansor_model_trained(m.handle) ~= 0 and
                       (", " .. C.tl_ansor_model_rounds(m.handle) .. " rounds") or "")
end
M.Model_mt = Model

local params = { num_warmup_sample = true, nthread = true, max_rounds = true, early_stopping = true,
                 adaptive_training = true }

local function new_model(kind, opts, name)
  opts = opts or {}
  if type(opts) ~= "table" then error(name .. ": options must be a table, got " .. type(opts), 3) end
  for k in pairs(opts) do
    if k ~= "seed" and not (kind == 1 and params[k]) then
      error(name .. ": unknown option '" .. tostring(k) .. "'", 3)
    end
  end
  local seed = opts.seed or 1
  if type(seed) ~= "number" or seed < 0 or seed % 1 ~= 0 then
    error(name .. ": seed must be a non-negative integer, got " .. tostring(seed), 3)
  end
  local h = C.tl_ansor_model_new(ctx, kind, seed)
  if h == nil then fail(3) end
  h = ffi.gc(h, C.tl_ansor_model_free)
  for k in pairs(params) do
    local v = opts[k]
    if v ~= nil then
      if type(v) == "boolean" then v = v and 1 or 0 end
      if type(v) ~= "number" then error(name .. ": " .. k .. " must be a number, got " .. type(v), 3) end
      if C.tl_ansor_model_set(ctx, h, k, v) ~= 0 then fail(3) end
    end
  end
  return setmetatable({ handle = h, kind = kind }, Model)
end

--- XGBModel{seed =, num_warmup_sample =, nthread =, max_rounds =, early_stopping =, adaptive_training =}
function M.XGBModel(opts) return new_model(1, opts, "XGBModel") end
--- RandomModel([{seed =}])
function M.RandomModel(opts) return new_model(0, opts, "RandomModel") end

--- model:update(features, throughputs): throughputs[i] in flop/s for state i (0: failed)
function Model:update(feats, throughputs)
  local f = as_features(feats, "update", 2)
  if type(throughputs) ~= "table" or #throughputs ~= f.n then
    error(string.format("update: expected %d throughputs (one per state), got %s", f.n,
                        type(throughputs) == "table" and #throughputs or type(throughputs)), 2)
  end
  local tp = ffi.new("double[?]", math.max(f.n, 1))
  for i = 1, f.n do
    if type(throughputs[i]) ~= "number" then
      error("update: throughput " .. i .. " is not a number", 2)
    end
    tp[i - 1] = throughputs[i]
  end
  if C.tl_ansor_model_update(ctx, self.handle, f.n, f.rows, f.row_off, tp) ~= 0 then fail(2) end
end

--- model:predict(features) -> {score, ...} (higher is better; -math.huge: no valid rows)
function Model:predict(feats)
  local f = as_features(feats, "predict", 2)
  local sc = ffi.new("double[?]", math.max(f.n, 1))
  if C.tl_ansor_model_predict(ctx, self.handle, f.n, f.rows, f.row_off, sc) ~= 0 then fail(2) end
  local out = {}
  for i = 1, f.n do out[i] = sc[i - 1] end
  return out
end

function Model:num_samples() return C.tl_ansor_model_num_samples(self.handle) end
function Model:trained() return C.tl_ansor_model_trained(self.handle) ~= 0 end

--- model:save(path): the trees (XGBoost UBJSON), written atomically
function Model:save(path)
  if type(path) ~= "string" then error("save: expected a file path, got " .. type(path), 2) end
  if C.tl_ansor_model_save(ctx, self.handle, path) ~= 0 then fail(2) end
end

--- model:load(path): trees saved by save; the model predicts with them at once
function Model:load(path)
  if type(path) ~= "string" then error("load: expected a file path, got " .. type(path), 2) end
  if C.tl_ansor_model_load(ctx, self.handle, path) ~= 0 then fail(2) end
end

return M
