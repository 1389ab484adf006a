--- Auto-tune a convolutional network for this machine's CPU (target `llvm`, x86 templates).
--
--   tunelua scripts/tune_relay_x86.lua                       -- resnet-18, measured locally
--   tunelua scripts/tune_relay_x86.lua --network mobilenet --tuner xgb_rank --n-trial 200
--   tunelua scripts/tune_relay_x86.lua --graph-tuner         -- then one config per conv for the
--                                                            whole network (autotvm.graph_tuner)
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
  -- the x86 tutorial's settings: random search over each task's whole space, no early
  -- stopping, number 1 x repeat 10 with the CPU cache flushed, 100 runs x 3 end-to-end
  tutorial = { tuner = "random", n_trial = math.huge, early_stopping = false, image_size = false,
               number = 1, runner_repeat = 10, cache_flush = true, bench_number = 100,
               ["repeat"] = 3 },
}, "scripts/tune_relay_x86.lua")
