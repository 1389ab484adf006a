-- Benchmark: the auto-scheduler's search on resnet-18's conv2d layers (NHWC) and a 1024^3
-- matmul on OpenCL device 0 (on the accelerator machine: the GPU through its OpenCL driver):
-- scripts/bench/ansor_cpu.lua with --target=opencl (hardware params from the device), against
-- cuDNN fp32 with TF32 off (scripts/device/torch_conv.py) in the same run. On the accelerator
-- machine, as scripts/device/bench_h200.sh runs opencl_gpu.lua:
--
--   sh scripts/device/run_h200.sh scripts/bench/ansor_gpu.lua 64 --model=xgb
--   tunelua scripts/bench/ansor_gpu.lua [N=64] [--population=2048] [--model=xgb|random] [--layers=...]
--
-- Where the GPU search's cross-thread reduction applies (7x7 outputs, a batch-1 dense; the
-- table is followed by whether each workload's best state is one):
--
--   TUNELUA_PYTHON=python3 sh scripts/device/run_h200.sh scripts/bench/ansor_gpu.lua 64 \
--       --model=xgb --layers=9,10,11 --no-matmul --dense=1x512x1000
local args = { "--target=opencl" }
for _, a in ipairs(arg) do args[#args + 1] = a end
arg = args
dofile((debug.getinfo(1, "S").source:sub(2):gsub("ansor_gpu%.lua$", "ansor_cpu.lua")))
