-- networks/resnet_v1.lua: the Gluon model zoo's post-activation ResNet v1 (resnet18_v1,
-- resnet34_v1, resnet50_v1; specs/networks.md §6). Structure (counts in test_networks.lua),
-- Gluon's parameter names, no projection shortcut in stage 1 of the basic-block networks, and
-- the graph executor against the reference interpreter at a small input.
local networks = require "networks"
local relay = require "tunelua.relay"
local check = require "tests.lua.lib.executor_check"

-- names and order: data, then each layer's weight before its batch norm
do
  local mod = networks.get_network("resnet18_v1", { init_params = false })
  local p = mod.main.params
  local want = { "data", "resnetv10_conv0_weight", "resnetv10_batchnorm0_gamma",
                 "resnetv10_batchnorm0_beta", "resnetv10_batchnorm0_running_mean",
                 "resnetv10_batchnorm0_running_var", "resnetv10_stage1_conv0_weight" }
  for i, n in ipairs(want) do
    assert(p[i].name == n, string.format("param %d is %s, expected %s", i, p[i].name, n))
  end
  assert(p[#p].name == "resnetv10_dense0_bias" and p[#p - 1].name == "resnetv10_dense0_weight")
  local names = {}
  for _, v in ipairs(p) do names[v.name] = v end
  -- stage 1: two blocks of two convs, no downsample; stage 2's third conv is its downsample
  assert(names["resnetv10_stage1_conv3_weight"] and not names["resnetv10_stage1_conv4_weight"])
  local ds = names["resnetv10_stage2_conv2_weight"].type.shape
  assert(ds[1] == 128 and ds[2] == 64 and ds[3] == 1 and ds[4] == 1, "stage 2 downsample 1x1")
  -- every residual add is followed by relu (post-activation)
  local adds, relu_after = 0, 0
  relay.visit(mod.main.body, function(n)
    if n.kind == "call" and n.op == "nn.relu" and n.args[1].op == "add" then relu_after = relu_after + 1 end
    if n.kind == "call" and n.op == "add" then adds = adds + 1 end
  end)
  assert(adds == 8 and relu_after == 8, string.format("%d adds, %d followed by relu", adds, relu_after))
  -- resnet50_v1: bottleneck 1x1 convs carry biases (Gluon's default), the 3x3 none
  local m50 = networks.get_network("resnet50_v1", { init_params = false })
  local n50 = {}
  for _, v in ipairs(m50.main.params) do n50[v.name] = v end
  assert(n50["resnetv10_stage1_conv0_bias"] and n50["resnetv10_stage1_conv2_bias"])
  assert(not n50["resnetv10_stage1_conv1_bias"] and not n50["resnetv10_stage1_conv3_bias"])
  local ok, err = pcall(networks.get_network, "resnet18_v1", { layout = "NHWC" })
  assert(not ok and tostring(err):find("supports only the NCHW layout"), tostring(err))
end

-- compiled against the reference interpreter (random weights, random input)
check.report_network("resnet18_v1", "NCHW", 32)
check.report_network("resnet50_v1", "NCHW", 32)

print("test_resnet_v1: ok")
