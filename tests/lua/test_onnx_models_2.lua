-- ONNX models exported from PyTorch at test time against PyTorch (tests/lua/lib/onnx_models.lua):
-- the Inception family and the shuffles. googlenet at 64x64, inception_v3 at 75x75 (its
-- minimum), shufflenet_v2 at 64x64 and at opsets 9 and 11 (Slice and Split as attributes,
-- its channel split computed from Shape/Gather/Div and folded at import).
require("tests.lua.lib.onnx_models").run_group("test_onnx_models_2", {
  "googlenet:64", "inception_v3:75", "shufflenet_v2_x1_0:64", "shufflenet_v2_x1_0:64@9",
  "shufflenet_v2_x1_0:64@11", "squeezenet1_1:64", "squeezenet1_1:64@7",
})
