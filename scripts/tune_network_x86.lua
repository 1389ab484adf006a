--- Auto-schedule a whole network for this machine's CPU (target `llvm`): seed 003's flow on the
--- host (seed 001's CPU sibling), with the auto-scheduler's task scheduler.
--
--   tunelua scripts/tune_network_x86.lua                         -- mobilenet NHWC, a short run
--   tunelua scripts/tune_network_x86.lua --network resnet-18 --n-trial 2000 --log r18.json
--   tunelua scripts/tune_network_x86.lua --resume                -- continue from the log
--
-- Prints the task table per round and "Mean inference time (std dev): X ms (Y ms)" at the end.
-- docs/tutorials/tune_network_x86.md tells the story; docs/auto_scheduler.md the details.
require("tunelua.auto_scheduler.flow").main(arg, { target = "llvm" }, "scripts/tune_network_x86.lua")
