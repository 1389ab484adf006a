--- Auto-tune a convolutional network for this machine's CPU (target `llvm`, x86 templates).
--
--   tunelua scripts/tune_relay_x86.lua                       -- resnet-18, measured locally
--   tunelua scripts/tune_relay_x86.lua --network mobilenet --tuner xgb_rank --n-trial 200
--
-- The same flow as scripts/tune_mobile_gpu.lua (tunelua.flow) with the x86
-- templates: conv2d_NCHWc.x86, depthwise_conv2d_NCHWc.x86, dense_pack.x86 /
-- dense_nopack.x86. docs/tutorials/tune_relay_x86.md tells the story.
require("tunelua.flow").main(arg, {
  target = "llvm",
  key = "local",
  ops = "nn.conv2d,nn.dense",
  number = 4,
  ["repeat"] = 10,
}, "scripts/tune_relay_x86.lua")
