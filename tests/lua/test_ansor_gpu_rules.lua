-- The auto-scheduler's GPU rules on NVIDIA-like hardware params (no device needed): what the
-- sketches and the annotation produce for resnet-18's 56x56 and 7x7 convs (core/ansor/sketch.c,
-- annotate.c; docs/auto_scheduler.md). Numerical checks of such states on pocl are in
-- test_ansor_states.lua; here the structure of the generated OpenCL:
--   - split-K sketches ("RF" step, two kernels) and a cross-thread reduction sketch exist for
--     the 7x7x512 conv, not for 56x56x64;
--   - every state's block fits the register checks: threads x (accumulators + 32) <= 65536 and
--     accumulators + 32 <= 255 per thread;
--   - cooperative fetches use vector lengths 1, 2 and 4 (vload4/vstore4 appear);
--   - the register tile's loops are unrolled (no loop over the private array without
--     "#pragma unroll" in front of it).
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"

local hw = auto_scheduler.HardwareParams(-1, 16, 64, 49152, 2147483647, 1024, 8, 32)
local function conv_task(c, h, o)
  local x = te.placeholder({ 1, h, h, c }, "float32", "data")
  local w = te.placeholder({ 3, 3, c, o }, "float32", "kernel")
  local y = topi.nn.conv2d_nhwc(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
  return auto_scheduler.SearchTask{ compute_dag = y, target = "opencl", hardware_params = hw }
end

local function has_rf(st) return st:steps():find('"RF"', 1, true) ~= nil end

local function check_state(name, st, seen)
  local src = st:source("opencl")
  for wg in src:gmatch("reqd_work_group_size%((%d+), 1, 1%)") do
    local threads = tonumber(wg)
    assert(threads <= 1024, name .. ": " .. threads .. " threads")
    -- the accumulators of this kernel: its private arrays
    local body = src:match("reqd_work_group_size%(" .. wg .. ", 1, 1%)%)(.-)\n}\n")
    local acc = 0
    for n in (body or ""):gmatch("\n%s+float [%w_]+%[(%d+)%];") do acc = acc + tonumber(n) end
    assert(threads * (acc + 32) <= 65536 and acc + 32 <= 255,
           string.format("%s: %d threads x (%d accumulators + 32): over 65536 or 255 per thread\n%s", name, threads, acc, st:steps()))
  end
  for v in st:steps():gmatch('%["SP", %d+, 0, %d+, %[(%d)%], 1%], %["AN", %d+, 1, 2%]') do seen["vec" .. v] = true end
  if src:find("vload4", 1, true) or src:find("vstore4", 1, true) then seen.float4 = true end
  -- a loop whose body indexes a private array with the loop's own var is unrolled
  for pragma, var, ext in src:gmatch("([^\n]*)\n%s*for %(int ([%w_]+) = 0; [%w_]+ < (%d+);") do
    local _ = ext
    if var:find("_c_%d") and not pragma:find("#pragma unroll", 1, true) and tonumber(ext) <= 16 then
      -- register-tile loops (x_c_3, ff_c_4 ...) of small extent are unrolled
      local inner = src:match("for %(int " .. var .. " = 0;.-\n(.-)\n")
      if inner and not inner:find("for %(") then
        error(name .. ": register-tile loop '" .. var .. "' is not unrolled\n" .. src)
      end
    end
  end
end

local big = conv_task(64, 56, 64)
local small = conv_task(512, 7, 512)
local nb, ns = #big:sketches(), #small:sketches()
local rf_sketches, xred_sketches = 0, 0
local function has_xred(sk) return tostring(sk):find("reduce threadIdx.x", 1, true) ~= nil end
for _, sk in ipairs(small:sketches()) do
  rf_sketches = rf_sketches + (has_rf(sk) and 1 or 0)
  xred_sketches = xred_sketches + (has_xred(sk) and 1 or 0)
end
for _, sk in ipairs(big:sketches()) do
  assert(not has_rf(sk) and not has_xred(sk), "56x56x64: no split-K or cross-thread sketch expected")
end
assert(rf_sketches == 2 and xred_sketches == 1 and ns == nb + 3,
       string.format("7x7x512: %d sketches, %d split-K, %d cross-thread", ns, rf_sketches, xred_sketches))

local seen = {}
local n_rf = 0
for _, t in ipairs({ { "56x56x64", big }, { "7x7x512", small } }) do
  local states = auto_scheduler.SketchPolicy(t[2], { seed = 3 }):sample(24)
  assert(#states == 24, t[1] .. ": sampled " .. #states)
  for i, st in ipairs(states) do
    check_state(t[1] .. " state " .. i, st, seen)
    if has_rf(st) then
      n_rf = n_rf + 1
      local src = st:source("opencl")
      assert(src:find("2 kernels", 1, true), t[1] .. ": a split-K state is two kernels")
    end
  end
end
assert(n_rf > 0, "no split-K state sampled")
assert(seen.vec1 and seen.vec2 and seen.vec4 and seen.float4, "cooperative fetch vector lengths 1, 2, 4 and float4 code")
print(string.format("test_ansor_gpu_rules: %d + %d sketches, 48 states fit the register file, %d split-K states",
                    nb, ns, n_rf))
