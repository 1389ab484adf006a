-- The random CPU schedules of tests/lua/test_random_schedules.lua (matmul,
-- conv2d NCHW/NHWC, depthwise conv2d, pooling, softmax under random splits,
-- fuses, reorders, caches, compute_at, inlining, vectorize, unroll and
-- parallel), built for OpenCL instead of the C backend and run on the
-- OpenCL device: a wide check of the OpenCL C expression and statement
-- printer (floordiv/floormod, guards, vector types of 2..16 lanes and their
-- lane-by-lane fallbacks, private arrays, several kernels joined by global
-- temporaries). Without thread binding each root stage is a one-work-item
-- kernel. TUNELUA_RANDOM_N (default 2 here) schedules per operator.
local tl = require "tunelua"
local ocl = require "tunelua.opencl"
local nd = tl.nd

if not ocl.available() then
  print("SKIP test_opencl_random: no OpenCL device (install pocl-opencl-icd; see docs/opencl.md)")
  return
end

local build = require "tunelua.build"
local real_build = build.build
local nbuilt = 0

-- tl.build(s, args, "llvm", ...) -> an OpenCL function behind a host-array interface
local function opencl_build(s, args, target, opts)
  local f = real_build(s, args, "opencl", { name = opts and opts.name })
  nbuilt = nbuilt + 1
  local w = { nargs = f.nargs, f = f }
  return setmetatable(w, { __call = function(_, ...)
    local host, dev = { ... }, {}
    for i, a in ipairs(host) do dev[i] = a:copyto("opencl:0") end
    f(unpack(dev))
    for i, a in ipairs(host) do dev[i]:copyto(a) end
  end })
end

local real_getenv = os.getenv
os.getenv = function(k)
  if k == "TUNELUA_RANDOM_N" then return real_getenv(k) or "2" end
  return real_getenv(k)
end
tl.build = opencl_build
local ok, err = pcall(dofile, "tests/lua/test_random_schedules.lua")
tl.build = nil
os.getenv = real_getenv
if not ok then
  -- with few schedules a step kind may be rare: only that check may fail
  assert(tostring(err):find("too few random steps of kind"), err)
end
assert(nbuilt >= 10, "too few OpenCL builds: " .. nbuilt)
print(string.format("test_opencl_random: %d random schedules built and checked on OpenCL", nbuilt))
