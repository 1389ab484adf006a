-- Graph executor on OpenCL (tunelua.graph.executor + graph/opencl.lua, core/graph/executor.c,
-- plan.c): the storage-slot plan, small graphs with default GPU schedules and with Mali
-- template configs (random valid configs of spatial pack, winograd, depthwise, dense), then
-- mobilenet and resnet-18 at reduced image size (Mali fallback configs + default GPU
-- schedules), all against the reference interpreter (fp32 rel. error < 1e-4); also the
-- option parsing of the tuning flow (tunelua.flow, scripts/tune_mobile_gpu.lua).
-- Prints SKIP and passes when there is no OpenCL device. With pocl and a cold kernel cache
-- (POCL_CACHE_DIR empty) the first run compiles ~60 kernels: about 40-50 s on this
-- machine under load; a warm run takes ~10 s.
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local relay = require "tunelua.relay"
local networks = require "networks"
local reference = require "networks.reference"
local ex = require "tests.lua.lib.executor_check"

local C, ctx = core.C, core.ctx

local eq, check_graph = ex.eq, ex.check_graph

-- ---- tl_graph_plan_storage (no device needed) -------------------------------------------

local function plan(sizes, first, last, align)
  local n = #sizes
  local s, f, l = ffi.new("int64_t[?]", n + 1), ffi.new("int[?]", n + 1), ffi.new("int[?]", n + 1)
  local sid, sb, ns = ffi.new("int[?]", n + 1), ffi.new("int64_t[?]", n + 1), ffi.new("int[1]")
  for i = 1, n do s[i - 1], f[i - 1], l[i - 1] = sizes[i], first[i], last[i] end
  core.check(C.tl_graph_plan_storage(ctx, n, s, f, l, align or 64, sid, sb, ns))
  local ids, bytes = {}, {}
  for i = 1, n do ids[i] = sid[i - 1] end
  for i = 1, ns[0] do bytes[i] = tonumber(sb[i - 1]) end
  return ids, bytes
end

do
  -- a chain A [1,2], B [2,3], C [3,4]: A and C share a slot, B has its own
  local ids, bytes = plan({ 100, 100, 100 }, { 1, 2, 3 }, { 2, 3, 4 })
  eq(#bytes, 2, "chain slots")
  eq(ids[1], ids[3], "A and C share")
  assert(ids[2] ~= ids[1], "B has its own slot")
  eq(bytes[ids[1] + 1], 128, "aligned slot size")
  -- a later buffer takes the smallest free slot that fits; a bigger one grows a slot
  ids, bytes = plan({ 1000, 64, 64, 2000 }, { 1, 1, 3, 4 }, { 2, 2, 3, 5 })
  eq(ids[3], ids[2], "the 64-byte buffer reuses the small slot")
  eq(#bytes, 2, "two slots")
  eq(bytes[ids[4] + 1], 2048, "slot grown to the largest holder")
  -- all overlapping: one slot each
  ids, bytes = plan({ 10, 20, 30 }, { 1, 1, 1 }, { 3, 3, 3 }, 16)
  eq(#bytes, 3, "no sharing when all live")
  local ok, err = pcall(plan, { 10 }, { 3 }, { 2 })
  assert(not ok and tostring(err):find("lifetime", 1, true), tostring(err))
  ids, bytes = plan({}, {}, {})
  eq(#bytes, 0, "empty plan")
end

-- ---- the tuning flow's options (scripts/tune_mobile_gpu.lua's defaults, --tutorial) ---------

do
  local flow = require "tunelua.flow"
  local mobile = { target = "opencl -device=mali", image_size = 32, n_trial = 6, early_stopping = 6,
                   number = 2, timeout = 3, ["repeat"] = 10 }
  local o = flow.parse_args({}, mobile)
  eq(o.image_size, 32, "small default image size")
  eq(o.log, "rk3399.resnet-18.log", "default log")
  o = flow.parse_args({ "--tutorial" }, mobile)
  eq(o.image_size, nil, "--tutorial: the network's image size")
  eq(o.n_trial, 1000, "--tutorial n_trial")
  eq(o.early_stopping, 450, "--tutorial early_stopping")
  eq(o.number, 10, "--tutorial number")
  eq(o["repeat"], 30, "--tutorial repeat")
  o = flow.parse_args({ "--tutorial", "--n-trial", "20", "--network", "mobilenet" }, mobile)
  eq(o.n_trial, 20, "explicit options win over --tutorial")
  eq(o.log, "rk3399.mobilenet.log", "log named after the network")
  local ok, err = pcall(flow.parse_args, { "--n-trial", "x" }, mobile)
  assert(not ok and tostring(err):find("non-negative integer", 1, true), tostring(err))
  -- tuner names as users spell them; an unknown one is refused before anything runs
  eq(flow.parse_args({ "--tuner", "xgb-rank" }, mobile).tuner, "xgb_rank", "--tuner xgb-rank")
  ok, err = pcall(flow.parse_args, { "--tuner", "xgboost" }, mobile)
  assert(not ok and tostring(err):find('--tuner: unknown tuner "xgboost"', 1, true), tostring(err))
  -- a Lua tuner in the script's defaults passes through
  local ctor = function() end
  eq(flow.parse_args({}, { tuner = ctor }).tuner, ctor, "a Lua tuner constructor")
  -- a too small --image-size names the option to change
  ok, err = pcall(flow.get_network, { network = "inception_v3", image_size = 32, batch_size = 1,
                                      dtype = "float32" })
  assert(not ok and tostring(err):find("--image-size 32 is too small for inception_v3", 1, true) and
         tostring(err):find("the network's own is 299", 1, true), tostring(err))
end

if C.tl_opencl_device_count() == 0 then
  print("SKIP test_executor_opencl: no OpenCL device (the storage plan was checked)")
  return
end

local t_start = C.tl_now()

-- ---- small graphs ------------------------------------------------------------------------

local function check(mod, params, inputs, opts, what)
  local t0 = C.tl_now()
  local o = { target = "opencl -device=mali" }
  for k, v in pairs(opts or {}) do if k ~= "once" then o[k] = v end end
  local lib, m = check_graph(mod, params, inputs, o, what)
  if opts and opts.once then return lib, m, C.tl_now() - t0 end
  -- a second run with other inputs (buffers reused, outputs overwritten)
  local inputs2 = {}
  for k, v in pairs(inputs) do inputs2[k] = nd.random_uniform(v:shape(), { seed = 99 }) end
  m:set_input(inputs2)
  m:run()
  reference.assert_close(m:get_output(0), reference.run(mod, params, inputs2)[1], { rtol = 1e-4, atol = 1e-6 })
  print(string.format("%-44s %2d kernels, %2d steps, %3d tuned, build %.1f s (OpenCL %.1f s), total %.1f s",
                      what, #lib.kernels, #lib.steps, lib.num_tuned, lib.build_seconds,
                      lib.compile_seconds, C.tl_now() - t0))
  return lib, m
end

local function var(name, shape) return relay.var(name, { shape = shape, dtype = "float32" }) end

-- conv2d(3x3) + bias + relu -> max_pool -> depthwise conv + relu -> flatten -> dense + bias -> softmax
local function small_net()
  local x = var("data", { 1, 4, 10, 10 })
  local w1, b1 = var("w1", { 8, 4, 3, 3 }), var("b1", { 8 })
  local wd = var("wd", { 8, 1, 3, 3 })
  local wf, bf = var("wf", { 10, 8 * 5 * 5 }), var("bf", { 10 })
  local y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w1, { padding = { 1, 1 }, channels = 8,
                                                                   kernel_size = { 3, 3 } }), b1))
  y = relay.nn.max_pool2d(y, { pool_size = { 2, 2 }, strides = { 2, 2 } })
  y = relay.nn.relu(relay.nn.conv2d(y, wd, { padding = { 1, 1 }, groups = 8, channels = 8,
                                             kernel_size = { 3, 3 } }))
  y = relay.nn.batch_flatten(y)
  y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(y, wf, { units = 10 }), bf))
  local mod = relay.Module(relay.Function({ x, w1, b1, wd, wf, bf }, y))
  local params = {
    w1 = nd.random_uniform({ 8, 4, 3, 3 }, { seed = 1, low = -1, high = 1 }),
    b1 = nd.random_uniform({ 8 }, { seed = 2 }),
    wd = nd.random_uniform({ 8, 1, 3, 3 }, { seed = 3, low = -1, high = 1 }),
    wf = nd.random_uniform({ 10, 200 }, { seed = 4, low = -0.2, high = 0.2 }),
    bf = nd.random_uniform({ 10 }, { seed = 5 }),
  }
  return mod, params, { data = nd.random_uniform({ 1, 4, 10, 10 }, { seed = 6 }) }
end

do
  local mod, params, inputs = small_net()
  -- generic OpenCL: no templates, every group on tl_topi_default_schedule_gpu
  local lib = check(mod, params, inputs, { target = "opencl" }, "small net, opencl (default schedules)")
  eq(lib.num_tuned, 0, "generic opencl: no tuned groups")
  -- Mali, no history: the templates' fallback configs
  check(mod, params, inputs, { tophub = false }, "small net, mali fallback configs")
  -- Mali with random valid configs of each template (a dispatch context answering every
  -- task of the chosen templates; spatial pack declined so that winograd is taken)
  for _, choice in ipairs({ { "conv2d_nchw_spatial_pack.mali", 11 }, { "conv2d_nchw_winograd.mali", 12 } }) do
    local seed = choice[2]
    local hist = {
      query = function() return nil end,
      query_task = function(_, task)
        local name = task.name
        if name:match("^conv2d_nchw_") and name ~= choice[1] then return nil end
        local cs = task.config_space
        local n = cs:range_length()
        for _ = 1, 1000 do
          seed = (seed * 1103515245 + 12345) % 2147483648
          local idx = seed % n
          if cs:is_index_valid(idx) then return idx end
        end
        return nil
      end,
    }
    local l = check(mod, params, inputs, { history = hist, tophub = false },
                    "small net, random configs (" .. choice[1]:match("^conv2d_nchw_(%w+)") .. ")")
    eq(l.num_tuned, 3, "conv, depthwise and dense use the given configs")
  end
end

-- ---- networks at reduced image size -------------------------------------------------------

local function check_network(name, size)
  local mod, params, ishape = networks.get_network(name, { layout = "NCHW", image_size = size,
                                                           num_classes = 10 })
  local x = nd.random_uniform(ishape, { seed = 3 })
  local lib, m, secs = check(mod, params, { data = x }, { once = true }, name)
  assert(lib.planned_bytes < lib.intermediate_bytes, name .. ": storage slots are reused")
  local r = m:benchmark({ number = 1, repeats = 1, quiet = true })
  assert(r.mean > 0, name .. ": benchmark")
  print(string.format("%s %dx%d: %2d kernels, %2d steps, build %.1f s (OpenCL %.1f s), checked in %.1f s, "
                      .. "%.1f ms per run, device memory %d of %d bytes", name, size, size, #lib.kernels,
                      #lib.steps, lib.build_seconds, lib.compile_seconds, secs, r.mean * 1e3,
                      lib.planned_bytes, lib.intermediate_bytes))
end

check_network("mobilenet", 32)
check_network("resnet-18", 32)

print(string.format("test_executor_opencl: ok (%.1f s)", C.tl_now() - t_start))
