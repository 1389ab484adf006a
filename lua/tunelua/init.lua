--- tunelua: the top-level module.
--
--   local tl = require "tunelua"
--   local a = tl.nd.array({{1, 2}, {3, 4}})
--
-- Submodules load on first use: tl.nd, tl.testing, tl.te, tl.autotvm, tl.onnx, ...
local core = require "tunelua.core"

local tl = {
  core = core,
  version = require("ffi").string(core.C.tl_version()),
}

local submodules = {
  nd = "tunelua.nd",
  testing = "tunelua.testing",
  te = "tunelua.te",
  target = "tunelua.target",
  topi = "tunelua.topi",
  relay = "tunelua.relay",
  autotvm = "tunelua.autotvm",
  auto_scheduler = "tunelua.auto_scheduler",
  graph_executor = "tunelua.graph.executor",
  rpc = "tunelua.rpc",
  repl = "tunelua.repl",
  cli = "tunelua.cli",
  onnx = "tunelua.onnx",
}

-- Functions that live in a submodule, loaded on first use:
-- tl.lower(s, {A, B, C}) and tl.build(s, {A, B, C}, "llvm") (tunelua.build);
-- tl.opencl(id) and tl.cpu(id), devices for tl.nd arrays (tunelua.nd).
local functions = {
  lower = { "tunelua.build", "lower" },
  build = { "tunelua.build", "build" },
  opencl = { "tunelua.nd", "opencl" },      -- tl.nd.array(x, tl.opencl(0))
  cpu = { "tunelua.nd", "cpu" },
}

core.lazy(tl, submodules, functions)

--- Number of cores of this machine.
function tl.num_cores() return core.C.tl_num_cores() end

--- Threads used by generated parallel loops.
function tl.set_num_threads(n) core.C.tl_set_num_threads(n) end

--- Restrict this process (its threads and the processes it starts from now on) to the CPUs
--- of a list such as "2,3" or "0-3"; raises an error naming the list when it is malformed or
--- refused. Benchmarks use it to time peers on the CPUs TUNELUA_MEASURE_CPUS gives the
--- measurement children.
function tl.pin_cpus(list)
  local ffi = require "ffi"
  local err = ffi.new("char[256]")
  if core.C.tl_pin_cpus(tostring(list), err, 256) ~= 0 then error(ffi.string(err), 2) end
end

return tl
