--- Auto-tune a convolutional network for a mobile GPU (target `opencl -device=mali`).
--
--   tunelua scripts/tune_mobile_gpu.lua                      -- resnet-18, local OpenCL device
--   tunelua scripts/tune_mobile_gpu.lua --network mobilenet --tuner ga --n-trial 200
--   tunelua scripts/tune_mobile_gpu.lua --tracker 127.0.0.1:9190 --key rk3399
--   tunelua scripts/tune_mobile_gpu.lua --tutorial          -- n_trial 1000, early_stopping 450
--
-- Extract the network's conv2d tasks, tune each (every trial appended to the
-- log), compile the network with the best records, measure its latency.
-- Re-run with the same log to resume. docs/tutorials/tune_mobile_gpu.md
-- tells the story; tunelua.flow holds the steps.
require("tunelua.flow").main(arg, {
  target = "opencl -device=mali",
  key = "rk3399",
  ops = "nn.conv2d",
}, "scripts/tune_mobile_gpu.lua")
