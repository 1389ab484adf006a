-- ONNX models exported from PyTorch at test time against PyTorch (tests/lua/lib/onnx_models.lua):
-- vgg11_bn at 224x224, the only size its adaptive 7x7 average pool exports at (PyTorch's
-- exporter needs the feature map to be a multiple of 7); a 530 MB model, most of it the first
-- classifier layer.
require("tests.lua.lib.onnx_models").run_group("test_onnx_models_4", { "vgg11_bn:224" })
