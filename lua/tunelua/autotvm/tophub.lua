--- tunelua.autotvm.tophub: pre-tuned AutoTVM logs (formats §5).
--
--   local tophub = require "tunelua.autotvm.tophub"
--   tophub.dir()                           -- where the logs are read from
--   tophub.file_for("llvm -mcpu=skylake-avx512")   -- .../llvm_v0.04.log
--   local ctx = tophub.context("llvm")     -- a dispatch context over that file
--
-- Location: $TUNELUA_TOPHUB_DIR, else the source tree's data/tophub, else
-- ../shared/data/tophub next to the source tree. TOPHUB_LOCATION=NONE
-- disables TopHub. Nothing is downloaded. One file per target: the first
-- known package among the target's -device (through the alias table), its
-- keys, then its kind (formats §5.3).
local file = require "tunelua.file"
local record = require "tunelua.autotvm.record"
local targets = require "tunelua.target"

local tophub = {}

-- The packages of our device families (each family names its own, targets/<family>/target.c)
-- and the published packages of devices without a family here.
tophub.PACKAGE_VERSION = targets.tophub_packages()
for name, v in pairs({ cuda = "v0.10", rocm = "v0.05", intel_graphics = "v0.02", vta = "v0.10",
                       amd_apu = "v0.01", adreno = "v0.01" }) do
  tophub.PACKAGE_VERSION[name] = v
end
tophub.ALIAS = { vtacpu = "vta", webgpu = "opencl", vulkan = "opencl", nvptx = "cuda" }

--- tophub.dir() -> the directory holding the TopHub logs, or nil
function tophub.dir()
  local env = os.getenv("TUNELUA_TOPHUB_DIR")
  if env and env ~= "" then return env end
  local root = file.source_root()
  local cands = {}
  if root then
    cands[#cands + 1] = root .. "/data/tophub"
    cands[#cands + 1] = root .. "/../shared/data/tophub"
  end
  cands[#cands + 1] = "data/tophub"
  cands[#cands + 1] = "../shared/data/tophub"
  for _, d in ipairs(cands) do
    if file.exists(d .. "/llvm_" .. tophub.PACKAGE_VERSION.llvm .. ".log") then return d end
  end
  return nil
end

function tophub.enabled() return os.getenv("TOPHUB_LOCATION") ~= "NONE" end

--- tophub.candidates(target) -> package names to try, in order
function tophub.candidates(target)
  local info = targets.info(target)
  local out = {}
  local function add(n) if n then out[#out + 1] = tophub.ALIAS[n] or n end end
  add(info.device)
  for _, k in ipairs(info.keys) do add(k) end
  add(info.kind)
  return out
end

--- tophub.file_for(target) -> path of the log used for target, or nil
function tophub.file_for(target)
  if not tophub.enabled() then return nil end
  local dir = tophub.dir()
  if not dir then return nil end
  for _, name in ipairs(tophub.candidates(target)) do
    local v = tophub.PACKAGE_VERSION[name]
    if v then
      local path = dir .. "/" .. name .. "_" .. v .. ".log"
      if file.exists(path) then return path end
    end
  end
  return nil
end

local cache = {}

--- tophub.load(target) -> list of records of the chosen file (cached), or {}
function tophub.load(target)
  local path = tophub.file_for(target)
  if not path then return {}, nil end
  if not cache[path] then cache[path] = record.load_from_file(path) end
  return cache[path], path
end

--- tophub.context(target, {extra_files}) -> a dispatch context (apply_history_best)
function tophub.context(target, extra_files)
  local recs = {}
  for _, r in ipairs((tophub.load(target))) do recs[#recs + 1] = r end
  for _, f in ipairs(extra_files or {}) do
    for _, r in ipairs(record.load_from_file(f)) do recs[#recs + 1] = r end
  end
  local ctx = require("tunelua.autotvm.dispatch").apply_history_best(recs, { tophub = false })
  return ctx
end

return tophub
