-- The default OpenCL schedules of channel-last (NHWC) groups (core/topi/schedule_gpu.c: the
-- anchor and its consumer tiled per work-item, channels a vector): small graphs whose shapes
-- take each tile size (16, 8, 4, 2 and 1 channels; 4, 7, 2, 1 columns; strides, padding, odd
-- channel counts, depthwise, pools, a convolution without consumer) and mobilenet in NHWC
-- at 32x32; the GPU shapes (channel-vector tiles of windowed convolutions, column tiles
-- otherwise) on small graphs, mobilenet and resnet-18 at 32x32 and every convolution of both
-- networks at 224x224; all run on the OpenCL device and checked against the reference
-- interpreter (fp32 rel. error < 1e-4) on random data. Prints SKIP and passes without an
-- OpenCL device.
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local relay = require "tunelua.relay"
local ex = require "tests.lua.lib.executor_check"
local executor = require "tunelua.graph.executor"
local reference = require "networks.reference"
local networks = require "networks"
local walk = require "tunelua.graph.walk"

local C = core.C
local TARGET = "opencl -device=mali"

if C.tl_opencl_device_count() == 0 then
  print("SKIP test_opencl_nhwc: no OpenCL device (install pocl-opencl-icd; see docs/opencl.md)")
  return
end
local t_start = C.tl_now()

local function var(name, shape) return relay.var(name, { shape = shape, dtype = "float32" }) end
local seed = 10
local function rand(shape, lo, hi)
  seed = seed + 1
  return nd.random_uniform(shape, { seed = seed, low = lo or -1, high = hi or 1 })
end

-- one NHWC graph: x [1, H, W, CI] -> body(x, w vars) ; checked; returns the lib
local function check(what, xshape, weights, body, want_vector)
  local x = var("data", xshape)
  local vars, params = { x }, {}
  local ws = {}
  for _, w in ipairs(weights) do
    local v = var(w[1], w[2])
    vars[#vars + 1], ws[w[1]] = v, v
    params[w[1]] = rand(w[2], w[3], w[4])
  end
  local mod = relay.Module(relay.Function(vars, body(x, ws)))
  local lib = ex.check_graph(mod, params, { data = rand(xshape, 0, 1) }, { target = TARGET }, what)
  local vec = 0
  for _, k in ipairs(lib.kernels) do
    if k.ocl_source and k.ocl_source:find("vstore%d+%(") then vec = vec + 1 end
  end
  if want_vector then
    local pat = "vstore" .. want_vector .. "%("
    local found = false
    for _, k in ipairs(lib.kernels) do found = found or (k.ocl_source or ""):find(pat) ~= nil end
    assert(found, what .. ": expected a tile of " .. want_vector .. " channels (vstore" .. want_vector .. ")")
  else
    assert(vec == 0, what .. ": expected no tiled kernel")
  end
  print(string.format("%-52s ok (%d kernels, %d with vector stores)", what, #lib.kernels, vec))
  return lib
end

local function conv(x, w, o)
  o.data_layout, o.kernel_layout = "NHWC", o.kernel_layout or "HWIO"
  return relay.nn.conv2d(x, w, o)
end

-- 3x3, pad 1, 5 -> 12 channels (tile 4), 7 columns (tile 1), bias + relu
check("conv2d 3x3 p1 7x7x5 -> 12, bias, relu", { 1, 7, 7, 5 },
      { { "w", { 3, 3, 5, 12 } }, { "b", { 12 }, 0, 1 } },
      function(x, w)
        return relay.nn.relu(relay.nn.bias_add(conv(x, w.w, { padding = { 1, 1 }, channels = 12,
                                                              kernel_size = { 3, 3 } }), w.b, { axis = 3 }))
      end, 4)
-- 1x1, stride 2, 16 -> 64 channels on 32x32 (8 channels a tile: 16 would leave < 512 tiles)
check("conv2d 1x1 s2 32x32x16 -> 64, relu", { 1, 32, 32, 16 }, { { "w", { 1, 1, 16, 64 } } },
      function(x, w)
        return relay.nn.relu(conv(x, w.w, { strides = { 2, 2 }, channels = 64, kernel_size = { 1, 1 } }))
      end, 8)
-- 1x1 on 64x64: 16 channels a tile (a float16)
check("conv2d 1x1 64x64x8 -> 32, relu", { 1, 64, 64, 8 }, { { "w", { 1, 1, 8, 32 } } },
      function(x, w)
        return relay.nn.relu(conv(x, w.w, { channels = 32, kernel_size = { 1, 1 } }))
      end, 16)
-- 14 columns: tiles of 7 columns
check("conv2d 1x1 14x14x32 -> 64, relu (7 columns)", { 1, 14, 14, 32 }, { { "w", { 1, 1, 32, 64 } } },
      function(x, w)
        return relay.nn.relu(conv(x, w.w, { channels = 64, kernel_size = { 1, 1 } }))
      end, 4)
-- 6 channels (tile 2), 10 columns (tile 2), 5x5 window, pad 2
check("conv2d 5x5 p2 6x10x3 -> 6, relu", { 1, 6, 10, 3 }, { { "w", { 5, 5, 3, 6 } } },
      function(x, w)
        return relay.nn.relu(conv(x, w.w, { padding = { 2, 2 }, channels = 6, kernel_size = { 5, 5 } }))
      end, 2)
-- 7 channels: no channel vector (5 columns a tile)
check("conv2d 3x3 5x5x3 -> 7, relu (no vector)", { 1, 5, 5, 3 }, { { "w", { 3, 3, 3, 7 } } },
      function(x, w)
        return relay.nn.relu(conv(x, w.w, { padding = { 1, 1 }, channels = 7, kernel_size = { 3, 3 } }))
      end, false)
-- depthwise 3x3, stride 2, pad 1, 24 channels (HWOI kernel [3, 3, 24, 1]), relu
check("depthwise 3x3 s2 p1 9x9x24, relu", { 1, 9, 9, 24 }, { { "w", { 3, 3, 24, 1 } } },
      function(x, w)
        return relay.nn.relu(conv(x, w.w, { strides = { 2, 2 }, padding = { 1, 1 }, groups = 24, channels = 24,
                                            kernel_size = { 3, 3 }, kernel_layout = "HWOI" }))
      end, 4)
-- a convolution that is the output (no consumer: the fused default)
check("conv2d 3x3 8x8x4 -> 8, no consumer", { 1, 8, 8, 4 }, { { "w", { 3, 3, 4, 8 } } },
      function(x, w) return conv(x, w.w, { padding = { 1, 1 }, channels = 8, kernel_size = { 3, 3 } }) end,
      false)
-- the GPU shapes on windowed convolutions whose channels take no vector or a partial row of
-- work-items (odd and small channel counts, a grid that is not a multiple of the work-group,
-- dilation, a 1x1 stride-2 conv, input channels not a multiple of 4), sized for one compute unit
-- (windowed convs size their grid for 16 x the units) so that these grids take channel vectors:
-- vec, the vector expected (vstoreN)
for _, g in ipairs({
  { "gpu:1 3x3 p1 5x5x3 -> 7 (a channel a work-item)", { 1, 5, 5, 3 }, { 3, 3, 3, 7 }, { 1, 1 }, 1, 1, nil },
  { "gpu:1 3x3 p1 21x21x12 -> 6 (2 channels, 1 across)", { 1, 21, 21, 12 }, { 3, 3, 12, 6 }, { 1, 1 }, 1, 1, 2 },
  { "gpu:1 3x3 s2 p1 d2 121x29x10 -> 20 (2 by 7 columns)", { 1, 121, 29, 10 }, { 3, 3, 10, 20 }, { 1, 1 }, 2, 2, 2 },
  { "gpu:1 1x1 s2 64x64x24 -> 48 (4 channels, 4 across)", { 1, 64, 64, 24 }, { 1, 1, 24, 48 }, { 0, 0 }, 2, 1, 4 },
}) do
  local what, xs, ks, pad, stride, dil, vec = g[1], g[2], g[3], g[4], g[5], g[6], g[7]
  local x, w = var("data", xs), var("w", ks)
  local mod = relay.Module(relay.Function({ x, w }, relay.nn.relu(conv(x, w, {
    padding = pad, strides = { stride, stride }, dilation = { dil, dil }, channels = ks[4],
    kernel_size = { ks[1], ks[2] } }))))
  local lib = ex.check_graph(mod, { w = rand(ks) }, { data = rand(xs, 0, 1) },
                             { target = TARGET, opencl_shapes = "gpu:1" }, what)
  local got = tonumber((lib.kernels[1].ocl_source or ""):match("vstore(%d+)%("))
  assert(got == vec, what .. ": expected " .. (vec and ("vstore" .. vec) or "no vector store") .. ", got "
         .. tostring(got))
  print(string.format("%-52s ok (%d kernels)", what, #lib.kernels))
end
-- pools in NHWC: max (relu after it), avg without the padding in the count, global avg
check("max_pool 3x3 s2 p1 12x12x8, relu", { 1, 12, 12, 8 }, {},
      function(x)
        return relay.nn.relu(relay.nn.max_pool2d(x, { pool_size = { 3, 3 }, strides = { 2, 2 },
                                                      padding = { 1, 1 }, layout = "NHWC" }))
      end, 4)
check("avg_pool 2x2 s2 p1 9x9x12", { 1, 9, 9, 12 }, {},
      function(x)
        return relay.nn.avg_pool2d(x, { pool_size = { 2, 2 }, strides = { 2, 2 }, padding = { 1, 1 },
                                        layout = "NHWC", count_include_pad = false })
      end, 4)
check("global_avg_pool 7x7x32", { 1, 7, 7, 32 }, {},
      function(x) return relay.nn.global_avg_pool2d(x, { layout = "NHWC" }) end, 4)

-- a whole network (1x1 and depthwise convolutions, global pool, dense), with the tiles shaped
-- for this device (auto: pocl is a CPU device) and with the GPU shapes forced
for _, shapes in ipairs({ "auto", "gpu" }) do
  local lib = ex.check_network("mobilenet", "NHWC", 32, 3, { target = TARGET, opencl_shapes = shapes })
  print(string.format("%-52s ok (%d kernels)", "mobilenet NHWC 32x32, shapes " .. shapes, #lib.kernels))
end

-- resnet-18 in NHWC at 32x32 with the GPU shapes sized for 132 compute units: its windowed
-- convolutions' channel-vector tiles, the residual additions fused into them
do
  local lib = ex.check_network("resnet-18", "NHWC", 32, 3, { target = TARGET, opencl_shapes = "gpu:132" })
  print(string.format("%-52s ok (%d kernels)", "resnet-18 NHWC 32x32, shapes gpu:132", #lib.kernels))
end

-- The tile shapes option: a bad value is an error naming it.
do
  local x = var("data", { 1, 4, 4, 4 })
  local mod = relay.Module(relay.Function({ x }, relay.nn.relu(x)))
  for _, bad in ipairs({ "tpu", "gpu:0", "gpu:x" }) do
    local ok, err = pcall(executor.build, mod, { target = TARGET, opencl_shapes = bad, quiet = true })
    assert(not ok and tostring(err):find("opencl_shapes must be", 1, true) and tostring(err):find(bad, 1, true),
           "opencl_shapes = " .. bad .. ": expected an error naming it, got " .. tostring(err))
  end
end

-- Every distinct convolution of resnet-18 and mobilenet (NHWC, 224x224; depthwise included),
-- with bias and relu, under the CPU-device shapes (auto on pocl) and the GPU shapes sized for
-- 132 compute units (an H100/H200: 7, 4 or 2 columns, one on the small layers; work-groups of
-- 64); mobilenet above covers the GPU shapes with this device's compute units (the widest
-- tiles). The GPU shapes give one channel per work-item: no vector stores, a private tile of
-- at most 7 columns. Each kernel runs against the reference.
do
  local seen, convs = {}, {}
  for _, name in ipairs({ "resnet-18", "mobilenet" }) do
    local mod = networks.get_network(name, { layout = "NHWC", image_size = 224 })
    walk.each_op_call(walk.main(mod).body, function(n)
      if n.op ~= "nn.conv2d" then return end
      local d, k = walk.ttype(n.args[1]).shape, walk.ttype(n.args[2]).shape
      local key = string.format("%s %s s%d g%d", table.concat(d, "x"), table.concat(k, "x"),
                                (n.attrs.strides or { 1 })[1], n.attrs.groups or 1)
      if not seen[key] then
        seen[key] = true
        convs[#convs + 1] = { key = name .. " " .. key, d = d, k = k, attrs = n.attrs }
      end
    end)
  end
  assert(#convs >= 25, "expected the distinct convolutions of resnet-18 and mobilenet, got " .. #convs)
  local nrun, ntiled, nblocked = 0, 0, 0
  for ci, c in ipairs(convs) do
    local a = {}
    for k, v in pairs(c.attrs) do a[k] = v end
    local cout = a.kernel_layout == "HWOI" and c.k[3] or c.k[4]
    local x, w, b = var("data", c.d), var("w", c.k), var("b", { cout })
    local mod = relay.Module(relay.Function({ x, w, b },
      relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, a), b, { axis = 3 }))))
    local params = { w = rand(c.k), b = rand({ cout }, 0, 1) }
    local inputs = { data = nd.random_uniform(c.d, { seed = 500 + ci, low = 0, high = 1 }) }
    local ref = reference.run(mod, params, inputs)[1]
    -- sums of up to 4608 products: the tolerance scales with the reduction's length
    local atol = 2e-6 * c.k[1] * c.k[2] * (a.kernel_layout == "HWOI" and 1 or c.k[3])
    local sources = {}
    -- an ungrouped convolution with a window or a stride: the GPU shapes' channel-vector tiles
    local windowed = (a.groups or 1) == 1 and (c.k[1] * c.k[2] > 1 or (a.strides or { 1 })[1] > 1)
    for _, shapes in ipairs({ "auto", "gpu:132" }) do
      local lib = executor.build(mod, { target = TARGET, params = params, quiet = true, opencl_shapes = shapes })
      assert(#lib.kernels == 1, c.key .. ": expected one kernel, got " .. #lib.kernels)
      local src = lib.kernels[1].ocl_source
      local vec = windowed and tonumber(src:match("vstore(%d+)%("))
      if shapes ~= "auto" and vec then
        -- a windowed convolution whose grid (sized for 16 x 132 units) leaves room: a tile of 2
        -- or 4 channels (a vector) by at most 7 columns; the others one output a work-item
        assert(vec == 2 or vec == 4, c.key .. ", shapes " .. shapes ..
               ": expected a GPU tile of 2 or 4 channels (vstore2/vstore4), got vstore" .. tostring(vec))
        local tile = tonumber(src:match("float [%w_]+%[(%d+)%];"))
        assert(tile and tile % vec == 0 and tile <= 7 * vec, c.key .. ", shapes " .. shapes ..
               ": expected a tile of " .. vec .. " channels by at most 7 columns, got " .. tostring(tile))
        nblocked = nblocked + 1
      elseif shapes ~= "auto" then
        assert(not src:find("vstore%d+%("), c.key .. ", shapes " .. shapes .. ": a GPU tile has no channel vector")
        -- a private tile of one channel by at most 7 columns
        local tile = tonumber(src:match("float [%w_]+%[(%d+)%];"))
        assert(tile == nil or tile <= 7, c.key .. ", shapes " .. shapes ..
               ": expected a tile of at most 7 columns of one channel, got " .. tostring(tile))
        if tile and tile > 1 then ntiled = ntiled + 1 end
      end
      if not sources[src] then
        sources[src] = true
        local m = executor.GraphModule(lib)
        m:set_input(inputs)
        m:run()
        local ok, msg = reference.compare(m:get_output(0), ref, { rtol = 1e-4, atol = atol })
        assert(ok, c.key .. ", shapes " .. shapes .. ": " .. tostring(msg))
        nrun = nrun + 1
      end
    end
  end
  assert(ntiled > 0, "expected GPU-shaped column tiles")
  -- the 112x112-output first convolutions of resnet-18 (7x7 s2) and mobilenet (3x3 s2)
  assert(nblocked >= 2, "expected the windowed convolutions' channel-vector GPU tiles, got " .. nblocked)
  print(string.format("%-52s ok (%d kernels run, %d GPU tiles, %d channel-vector GPU tiles)",
                      #convs .. " convolutions of resnet-18 and mobilenet", nrun, ntiled, nblocked))
end
print(string.format("test_opencl_nhwc: ok (%.1f s)", C.tl_now() - t_start))
