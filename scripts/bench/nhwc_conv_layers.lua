--- resnet-18's convolutions one by one on the OpenCL device: the default NHWC schedules (tiles
--- shaped for the device's kind, or as TUNELUA_OPENCL_SHAPES / --shapes say) against the NCHW
--- defaults in the same run (docs/performance.md, "GPU shapes of windowed convolutions").
--
--   tunelua scripts/bench/nhwc_conv_layers.lua [--shapes auto|gpu|cpu|gpu:N] [--repeat 30]
--        [--number 10] [--target "opencl -device=mali"] [--layers 1,4,10]
--   on the accelerator machine (scripts/device/pack.sh build build-device here, carry build-device):
--   sh scripts/device/run_h200.sh scripts/bench/nhwc_conv_layers.lua
--
-- Each layer is conv2d + bias_add + relu (one kernel), batch 1, fp32, random data, built with no
-- tuning record (auto-scheduler dispatch with an empty log: every group on the default OpenCL
-- schedule); both layouts are timed interleaved, `number` runs a sample, `repeat` samples, and
-- the table gives medians in microseconds, the NHWC kernel's launch shape (work-groups x
-- work-group size, from its manifest), GFLOPS and the ratio NHWC / NCHW (< 1: NHWC is faster).
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local auto_scheduler = require "tunelua.auto_scheduler"
local nd = require "tunelua.nd"
local json = require "tunelua.json"

local opts = { shapes = nil, ["repeat"] = 30, number = 10, target = "opencl -device=mali", layers = nil }
do
  local i = 1
  while i <= #arg do
    local a, v = arg[i], arg[i + 1]
    local key = a:match("^%-%-(%w+)$")
    if not key or opts[key] == nil and key ~= "shapes" and key ~= "layers" then
      error("nhwc_conv_layers: unknown option " .. tostring(a) .. " (see the header of this script)", 0)
    end
    if v == nil then error("nhwc_conv_layers: " .. a .. " expects a value", 0) end
    if key == "repeat" or key == "number" then
      local n = tonumber(v)
      if not n or n < 1 or n % 1 ~= 0 then error("nhwc_conv_layers: " .. a .. " expects a positive integer, got " .. v, 0) end
      v = n
    end
    opts[key] = v
    i = i + 2
  end
end

-- name, input size, in channels, out channels, window, stride (resnet-18 at 224x224)
local LAYERS = {
  { "7x7 s2 3->64", 224, 3, 64, 7, 2 },     { "3x3 64 @56", 56, 64, 64, 3, 1 },
  { "3x3 s2 64->128", 56, 64, 128, 3, 2 },  { "3x3 128 @28", 28, 128, 128, 3, 1 },
  { "1x1 s2 64->128", 56, 64, 128, 1, 2 },  { "3x3 s2 128->256", 28, 128, 256, 3, 2 },
  { "3x3 256 @14", 14, 256, 256, 3, 1 },    { "1x1 s2 128->256", 28, 128, 256, 1, 2 },
  { "3x3 s2 256->512", 14, 256, 512, 3, 2 }, { "3x3 512 @7", 7, 512, 512, 3, 1 },
  { "1x1 s2 256->512", 14, 256, 512, 1, 2 },
}
local pick
if opts.layers then
  pick = {}
  for n in opts.layers:gmatch("[^,]+") do
    local k = tonumber(n)
    if not k or not LAYERS[k] then error("nhwc_conv_layers: --layers expects indices 1-" .. #LAYERS .. ", got " .. n, 0) end
    pick[k] = true
  end
end

local function var(n, s) return relay.var(n, { shape = s, dtype = "float32" }) end

local function build(l, layout)
  local _, H, CI, CO, K, S = unpack(l)
  local nhwc = layout == "NHWC"
  local d = nhwc and { 1, H, H, CI } or { 1, CI, H, H }
  local k = nhwc and { K, K, CI, CO } or { CO, CI, K, K }
  local x, w, b = var("data", d), var("w", k), var("b", { CO })
  local p = math.floor(K / 2)
  local a = { strides = { S, S }, padding = { p, p }, channels = CO, kernel_size = { K, K } }
  if nhwc then a.data_layout, a.kernel_layout = "NHWC", "HWIO" end
  local body = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, a), b, { axis = nhwc and 3 or 1 }))
  local mod = relay.Module(relay.Function({ x, w, b }, body))
  local lib = executor.build(mod, { target = opts.target, quiet = true, opencl_shapes = nhwc and opts.shapes or nil,
                                    history = auto_scheduler.ApplyHistoryBest({}),
                                    params = { w = nd.random_uniform(k, { seed = 1 }),
                                               b = nd.random_uniform({ CO }, { seed = 2 }) } })
  local m = executor.GraphModule(lib)
  m:set_input({ data = nd.random_uniform(d, { seed = 3 }) })
  local OH = math.floor((H + 2 * p - K) / S) + 1
  local shape = "?"
  local man = lib.kernels[1] and lib.kernels[1].ocl_manifest
  if man then
    local kk = json.decode(man).kernels[1]
    shape = string.format("%dx%d", kk.grid[1], kk.block[1])
  end
  return m, 2 * OH * OH * CO * CI * K * K, shape
end

local rounds = 5
print(string.format("%-18s %10s %10s %8s %8s %12s %7s", "layer", "NCHW us", "NHWC us", "NCHW GF", "NHWC GF",
                    "NHWC launch", "ratio"))
for i, l in ipairs(LAYERS) do
  if not pick or pick[i] then
    local mc, flops = build(l, "NCHW")
    local mn, _, shape = build(l, "NHWC")
    local tc, tn = {}, {}
    local per = math.max(1, math.floor(opts["repeat"] / rounds))
    for _ = 1, rounds do   -- interleaved, so that a load change hits both
      for _, s in ipairs(mc:benchmark({ number = opts.number, repeats = per, quiet = true }).results) do tc[#tc + 1] = s end
      for _, s in ipairs(mn:benchmark({ number = opts.number, repeats = per, quiet = true }).results) do tn[#tn + 1] = s end
    end
    local c, n = executor.bench_result(tc).median, executor.bench_result(tn).median
    print(string.format("%-18s %10.1f %10.1f %8.0f %8.0f %12s %7.2f", l[1], c * 1e6, n * 1e6, flops / c / 1e9,
                        flops / n / 1e9, shape, n / c))
  end
end
