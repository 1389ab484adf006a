-- Benchmark: the auto-scheduler's search on resnet-18's conv2d tasks on an OpenCL device
-- (the accelerator machine's GPU through its OpenCL driver): scripts/bench/ansor_cpu.lua
-- with --target=opencl. The hardware params come from OpenCL device 0.
--
--   tunelua scripts/bench/ansor_gpu.lua [N=64] [P=2048] [--tasks=k]
local args = { "--target=opencl" }
for _, a in ipairs(arg) do args[#args + 1] = a end
arg = args
dofile((debug.getinfo(1, "S").source:sub(2):gsub("ansor_gpu%.lua$", "ansor_cpu.lua")))
