-- The main job until the full tuning flow (scripts/tune_mobile_gpu.lua) lands:
-- declare a conv2d + relu and a matmul as tensor expressions, schedule them by
-- hand, show the lowered loop nest, compile through the C backend, check the
-- numbers against a naive reference on random data and time the kernels.
local tl = require "tunelua"
local te, topi, nd = tl.te, tl.topi, tl.nd

print(string.format("tunelua %s on %d cores", tl.version, tl.num_cores()))

-- conv2d (NCHW, 3x3, pad 1) + relu, fused into one kernel by inlining the relu input
local N, C, H, W, K = 1, 32, 28, 28, 32
local data = te.placeholder({N, C, H, W}, "float32", "data")
local kernel = te.placeholder({K, C, 3, 3}, "float32", "kernel")
local conv = topi.nn.conv2d(data, kernel, {strides = {1, 1}, padding = {1, 1}, dilation = {1, 1}})
local out = topi.nn.relu(conv)
local s = te.create_schedule(out.op)
local n, k, h, w = out.op.axis[1], out.op.axis[2], out.op.axis[3], out.op.axis[4]
local wo, wi = s[out]:split(w, {factor = 4})
s[out]:vectorize(wi)
s[out]:parallel(k)
s[conv]:compute_at(s[out], wo)
print("\n-- lowered conv2d + relu --")
print(tl.lower(s, {data, kernel, out}))
local f = tl.build(s, {data, kernel, out}, "c")

local a = nd.random_uniform({N, C, H, W}, {seed = 1, low = -1, high = 1})
local b = nd.random_uniform({K, C, 3, 3}, {seed = 2, low = -1, high = 1})
local o = nd.empty({N, K, H, W})
f(a, b, o)

-- naive reference in Lua
local A, B = a:flat(), b:flat()
local ref = {}
for kk = 0, K - 1 do
  for y = 0, H - 1 do
    for x = 0, W - 1 do
      local acc = 0
      for c = 0, C - 1 do
        for dy = 0, 2 do
          for dx = 0, 2 do
            local yy, xx = y + dy - 1, x + dx - 1
            if yy >= 0 and yy < H and xx >= 0 and xx < W then
              acc = acc + A[((c * H) + yy) * W + xx + 1] * B[((kk * C + c) * 3 + dy) * 3 + dx + 1]
            end
          end
        end
      end
      ref[#ref + 1] = acc > 0 and acc or 0
    end
  end
end
tl.testing.assert_allclose(o:flat(), ref, {rtol = 1e-4, atol = 1e-4})
local t = f:time_evaluator({number = 10, repeats = 5, min_repeat_ms = 50})(a, b, o)
local flop = 2 * N * K * H * W * C * 9
print(string.format("conv2d+relu: matches the naive reference; %.3f ms, %.1f GFLOPS (mean of 5 repeats)",
                    t.mean * 1e3, flop / t.mean / 1e9))

print("\n-- matmul 1024^3 against OpenBLAS --")
arg = {}
local host = require("tunelua.core").optional_require("tunelua.host")
dofile(((host and host.root) or ".") .. "/scripts/bench/matmul.lua")
