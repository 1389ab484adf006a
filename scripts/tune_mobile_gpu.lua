--- Auto-tune a convolutional network for a mobile GPU (target `opencl -device=mali`).
--
--   tunelua scripts/tune_mobile_gpu.lua                      -- resnet-18, local OpenCL device
--   tunelua scripts/tune_mobile_gpu.lua --network mobilenet --tuner ga --n-trial 200
--   tunelua scripts/tune_mobile_gpu.lua --tracker 127.0.0.1:9190 --key rk3399
--   tunelua scripts/tune_mobile_gpu.lua --tutorial          -- the tutorial's settings
--
-- Extract the network's conv2d tasks, tune each (every trial appended to the
-- log), compile the network with the best records, measure its latency.
-- Re-run with the same log to resume. docs/tutorials/tune_mobile_gpu.md
-- tells the story; tunelua.flow holds the steps.
--
-- Each task's untuned config is measured as its baseline and kept unless a tuned
-- config beats it when both are measured again; the run ends with the untuned and
-- the tuned network timed in turns, and the speedup.
-- The defaults are sized for `make run` on a 2-core machine with pocl (OpenCL on
-- the CPU): 32x32 images, 20 trials per task, 2 runs per measurement, 30 end-to-end
-- repeats of each network, and winograd left untuned where its untuned config is 3x
-- slower than spatial pack's on the same convolution (on pocl: always). --tutorial
-- restores the tutorial's settings (224x224, n_trial 1000, early_stopping 450,
-- number 10, timeout 5, repeat 30).
require("tunelua.flow").main(arg, {
  target = "opencl -device=mali",
  key = "rk3399",
  ops = "nn.conv2d",
  image_size = 32,
  n_trial = 20,
  early_stopping = 20,
  number = 2,
  timeout = 3,
  ["repeat"] = 30,
  skip_slower = 3,
}, "scripts/tune_mobile_gpu.lua")
