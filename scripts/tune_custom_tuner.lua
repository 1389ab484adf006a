--- Tune a network with a tuner written in Lua, in this script.
--
--   tunelua scripts/tune_custom_tuner.lua                       -- resnet-18 at 32x32, this CPU
--   tunelua scripts/tune_custom_tuner.lua --network mobilenet --n-trial 30
--
-- A tuner is any table with next_batch(n) -> config indices (or configs) and, optionally,
-- update(inputs, results) to learn from what was measured. The flow (tunelua.flow) and
-- autotvm.tune_tasks take a constructor function(task, opts) -> tuner and build one per task;
-- they give it everything else: the measuring loop, the log, resume (configs already in the
-- log are handed to update() and not measured again), the untuned baseline and pick_best.
-- What the tuner lacks (tune, add_history, has_next) comes from tunelua.autotvm.tuner.Tuner.
--
-- The tuner here walks the config space: a few random configs first, then single-knob steps
-- (one digit up or down) around the fastest config so far.
local tuner = require "tunelua.autotvm.tuner"
local record = require "tunelua.autotvm.record"

local Walk = {}
Walk.__index = Walk

--- Walk.new(task, {seed}) -> a tuner for task
function Walk.new(task, opts)
  local self = setmetatable({}, Walk)
  self.space = tuner.space_of(task)     -- sizes, digits, validity of task's configs
  self.seed = (opts and opts.seed) or 7
  self.visited = {}                     -- index -> true (resumed configs are marked too)
  self.best, self.best_cost = nil, math.huge
  self.queue = {}
  return self
end

local function rand(self, n)             -- a small LCG: the script's runs repeat
  self.seed = (self.seed * 1103515245 + 12345) % 2147483648
  return self.seed % n
end

-- the unvisited valid neighbours of the best config: one knob one step away
function Walk:neighbours()
  local out = {}
  local digits = self.space:point2knob(self.best)
  for k, dim in ipairs(self.space.dims) do
    for _, d in ipairs({ -1, 1 }) do
      local v = digits[k] + d
      if v >= 0 and v < dim then
        local nd = {}
        for j, x in ipairs(digits) do nd[j] = x end
        nd[k] = v
        local i = self.space:knob2point(nd)
        if not self.visited[i] and self.space:is_valid(i) then out[#out + 1] = i end
      end
    end
  end
  return out
end

function Walk:next_batch(n)
  local batch = {}
  if self.best and #self.queue == 0 then self.queue = self:neighbours() end
  while #batch < n do
    local i = table.remove(self.queue)
    if i == nil then
      -- no neighbour left (or nothing measured yet): a random valid unvisited config
      for _ = 1, 100 do
        local r = rand(self, self.space.range_len)
        if not self.visited[r] and self.space:is_valid(r) then i = r break end
      end
      if i == nil then break end
    end
    if not self.visited[i] then
      self.visited[i] = true
      batch[#batch + 1] = i
    end
  end
  return batch
end

function Walk:update(inputs, results)
  for k, res in ipairs(results) do
    local i = tuner.config_index(inputs[k].config)
    self.visited[i] = true
    if res.error_no == 0 then
      local c = record.mean_cost(res)
      if c < self.best_cost then
        self.best, self.best_cost = i, c
        self.queue = {}                 -- walk on from the new best
      end
    end
  end
end

require("tunelua.flow").main(arg, {
  target = "llvm",
  key = "local",
  tuner = Walk.new,
  image_size = 32,
  n_trial = 12,
  early_stopping = 12,
  number = 2,
  timeout = 5,
  ["repeat"] = 10,
}, "scripts/tune_custom_tuner.lua")
