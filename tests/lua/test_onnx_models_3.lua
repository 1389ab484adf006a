-- ONNX models exported from PyTorch at test time against PyTorch (tests/lua/lib/onnx_models.lua):
-- densenet121 (batch norms that no convolution absorbs: SimplifyInference folds them) and
-- efficientnet_b0 (SiLU as Sigmoid * x, squeeze-and-excitation), both at 64x64.
local models = require "tests.lua.lib.onnx_models"
local relay = require "tunelua.relay"

models.run_group("test_onnx_models_3", { "densenet121:64", "efficientnet_b0:64" }, function(dir)
  -- batch-norm folding on the imported graph: no batch_norm call survives the passes
  local mod, params = relay.frontend.from_onnx(dir .. "/densenet121.onnx")
  local bn = 0
  relay.visit(mod.main.body, function(n) if n.kind == "call" and n.op == "nn.batch_norm" then bn = bn + 1 end end)
  local opt = relay.optimize(mod, { target = "llvm", params = params })
  local left = 0
  local function walk(e)
    relay.visit(e, function(n)
      if n.kind == "call" then
        if relay.is_function(n.op) then walk(n.op.body)
        elseif n.op == "nn.batch_norm" then left = left + 1 end
      end
    end)
  end
  walk(relay.main_of(opt, "test").body)
  print(string.format("densenet121: %d batch_norm calls imported, %d after relay.optimize", bn, left))
  assert(bn > 50 and left == 0, "densenet121: batch norms folded")
end)
