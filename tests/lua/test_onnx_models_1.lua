-- ONNX models exported from PyTorch at test time, imported and run against PyTorch (logits,
-- rel. error < 1e-4); see tests/lua/lib/onnx_models.lua. Input sizes are the smallest that
-- keep the architecture (docs/onnx.md, "The PyTorch oracle"). This group: the ResNets and the
-- MobileNets, some at other opsets (Clip and Split as attributes, Slice as attributes); and
-- resnet18 through the passes and task extraction as the Lua networks go.
local models = require "tests.lua.lib.onnx_models"
local relay = require "tunelua.relay"

models.run_group("test_onnx_models_1", {
  "resnet18:64", "resnet50:64", "mobilenet_v2:64", "mobilenet_v3_small:64",
  "resnet18:64@17", "mobilenet_v2:64@9", "mobilenet_v3_small:64@11",
}, function(dir, info)
  -- layout conversion on the imported graph: NHWC convolutions, same logits
  models.check(dir, "resnet18", info.resnet18, {
    mod = function(mod) return relay.transform.ConvertLayout({ ["nn.conv2d"] = { "NHWC", "default" } })(mod) end,
    label = "(ConvertLayout NHWC)" })
  -- task extraction: AutoTVM (x86 templates) and the auto-scheduler
  local mod, params = relay.frontend.from_onnx(dir .. "/resnet18.onnx")
  local autotvm = require "tunelua.autotvm"
  local tasks = autotvm.task.extract_from_program(mod, { target = "llvm", params = params,
                                                          ops = { "nn.conv2d", "nn.dense" } })
  local convs, dense = 0, 0
  for _, t in ipairs(tasks) do
    if t.name:find("conv2d") then convs = convs + 1 elseif t.name:find("dense") then dense = dense + 1 end
  end
  print(string.format("resnet18: %d AutoTVM tasks (%d conv2d, %d dense)", #tasks, convs, dense))
  assert(convs >= 11 and dense >= 1, "resnet18: the AutoTVM tasks of its convolutions and its dense layer")
  local ast = require("tunelua.auto_scheduler").extract_tasks(mod, params, "llvm")
  print(string.format("resnet18: %d auto-scheduler tasks", #ast))
  assert(#ast >= 12, "resnet18: auto-scheduler tasks")
end)
