--- tunelua.autotvm: template-based tuning (TVM's AutoTVM, in Lua over libtunelua).
--
--   local autotvm = require "tunelua.autotvm"
--   local task = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm")
--   local tuner = autotvm.tuner.XGBTuner(task, {loss_type = "rank"})
--   tuner:tune({n_trial = 64, measure_option = autotvm.measure_option({
--     builder = autotvm.LocalBuilder(), runner = autotvm.LocalRunner({number = 5})}),
--     callbacks = {autotvm.callback.progress_bar(64), autotvm.callback.log_to_file("t.log")}})
--
-- Submodules load on first use:
--   task      tasks, config spaces, the template registry   (autotvm/task.lua, space.lua)
--   record    the JSON-lines log: encode, decode, load_from_file, pick_best
--   tophub    pre-tuned fallback logs
--   tuner     RandomTuner, GridSearchTuner, GATuner, XGBTuner, Tuner base
--   callback  progress_bar, log_to_file
--   measure   MeasureInput/MeasureResult, LocalBuilder, LocalRunner, measure_option
--   recipe    tune_tasks (seed 000's helper), resume
--   graph_tuner  DPTuner: one config per conv for the whole network (kernels + layout transforms)
local autotvm = {}

local submodules = {
  task = "tunelua.autotvm.task",
  space = "tunelua.autotvm.space",
  record = "tunelua.autotvm.record",
  tophub = "tunelua.autotvm.tophub",
  dispatch = "tunelua.autotvm.dispatch",
  tuner = "tunelua.autotvm.tuner",
  callback = "tunelua.autotvm.callback",
  measure = "tunelua.autotvm.measure",
  recipe = "tunelua.autotvm.recipe",
  graph_tuner = "tunelua.autotvm.graph_tuner",
}

-- Names re-exported at the top level: name -> {module, field}.
local functions = {
  LocalBuilder = { "tunelua.autotvm.measure", "LocalBuilder" },
  LocalRunner = { "tunelua.autotvm.measure", "LocalRunner" },
  RPCRunner = { "tunelua.autotvm.measure", "RPCRunner" },
  measure_option = { "tunelua.autotvm.measure", "measure_option" },
  apply_history_best = { "tunelua.autotvm.dispatch", "apply_history_best" },
  tune_tasks = { "tunelua.autotvm.recipe", "tune_tasks" },
}

require("tunelua.core").lazy(autotvm, submodules, functions)

return autotvm
