-- scripts/bench/opencl_gpu.lua: tuned resnet-18 conv2d layers on an OpenCL GPU vs PyTorch (cuDNN).
--
--   tunelua scripts/bench/opencl_gpu.lua [--n-trial 48] [--tuner xgb_knob] [--tasks all|1,3|2-5]
--           [--budget SECS] [--n-parallel N] [--plan-size N] [--no-check] [--log FILE]
--           [--markdown FILE] [--torch PYTHON | --no-torch] [--device N] [--build-timeout 10]
--   tunelua scripts/bench/opencl_gpu.lua --hand [--quick] [--device N] [--wallclock]
--   (on the accelerator machine: sh scripts/device/run_h200.sh scripts/bench/opencl_gpu.lua ...)
--
-- Tuned mode (the default): extracts resnet-18's conv2d tasks for "opencl -device=mali"
-- (12 conv2d_nchw_spatial_pack.mali + 4 conv2d_nchw_winograd.mali), tunes each briefly on
-- OpenCL device N with LocalBuilder (n_parallel = cores) / LocalRunner through the OpenCL
-- measure hook (docs/measure_opencl.md: OpenCL only in forked children, so this process
-- touches no driver until every measurement is done), then re-measures the best configs of
-- each task (top 3 by tuning speed, with check_correctness against the template's fallback
-- config unless --no-check, min_repeat_ms 50) and keeps the fastest correct one. Then it
-- runs scripts/device/torch_conv.py (python3 with PyTorch + CUDA: fp32, TF32 off, cuDNN
-- benchmark mode, median of CUDA-event repeats) on every distinct conv shape and prints per
-- task: latency and GFLOPS of the tuned kernel, PyTorch's latency (eager calls, and the same
-- calls replayed from a CUDA graph, which removes PyTorch's per-call CPU overhead: our times
-- are OpenCL profiling events of the kernels alone) and the ratio PyTorch time / our time
-- (> 1: ours is faster; against the graph time when there is one). GFLOPS are always the direct convolution's
-- count 2*N*CO*OH*OW*CI*KH*KW / time (as TVM counts them, also for winograd tasks).
-- A summary line follows: over the distinct conv shapes, our best task per shape vs PyTorch,
-- and resnet-18's conv total (each shape times its number of occurrences in the network).
-- --build-timeout limits the device compile of a trial (the re-measurement allows 20 s).
-- --budget caps the total tuning wall time: each task gets the remaining budget divided by
-- the remaining tasks, tuned in chunks of n_parallel trials (at least one chunk per task).
--
-- --hand: the earlier benchmark of hand-written schedules (matmul and 3x3 conv2d, no tuning;
-- --quick: small sizes for pocl). See docs/opencl.md and docs/performance.md for figures.
local tl = require "tunelua"
local te = require "tunelua.te"
local ocl = require "tunelua.opencl"
local nd = tl.nd

local opt = { n_trial = 48, tuner = "xgb_knob", tasks = "all", budget = 0, n_parallel = nil,
              plan_size = 16, check = true, log = nil, markdown = nil, torch = "python3",
              device = 0, build_timeout = 10, hand = false, quick = false, wallclock = false }
do
  local usage = "expected --n-trial N, --tuner NAME, --tasks LIST, --budget SECS, --n-parallel N, " ..
                "--plan-size N, --no-check, --log FILE, --markdown FILE, --torch PYTHON, --no-torch, " ..
                "--device N, --build-timeout SECS, --hand, --quick, --wallclock"
  local i = 1
  local function val(name)
    i = i + 1
    if arg[i] == nil then error("opencl_gpu: " .. name .. " needs a value (" .. usage .. ")", 0) end
    return arg[i]
  end
  local function num(name)
    local v = tonumber(val(name))
    if not v or v < 0 then error("opencl_gpu: " .. name .. " needs a number >= 0", 0) end
    return v
  end
  while arg and arg[i] do
    local a = arg[i]
    if a == "--n-trial" then opt.n_trial = num(a)
    elseif a == "--tuner" then opt.tuner = val(a)
    elseif a == "--tasks" then opt.tasks = val(a)
    elseif a == "--budget" then opt.budget = num(a)
    elseif a == "--n-parallel" then opt.n_parallel = num(a)
    elseif a == "--plan-size" then opt.plan_size = num(a)
    elseif a == "--no-check" then opt.check = false
    elseif a == "--log" then opt.log = val(a)
    elseif a == "--markdown" then opt.markdown = val(a)
    elseif a == "--torch" then opt.torch = val(a)
    elseif a == "--no-torch" then opt.torch = nil
    elseif a == "--device" then opt.device = num(a)
    elseif a == "--build-timeout" then opt.build_timeout = num(a)
    elseif a == "--hand" then opt.hand = true
    elseif a == "--quick" then opt.quick = true; opt.hand = true
    elseif a == "--wallclock" then opt.wallclock = true
    else error("opencl_gpu: unknown option " .. a .. " (" .. usage .. ")", 0) end
    i = i + 1
  end
end

-- ---- tuned resnet-18 conv2d tasks vs PyTorch -------------------------------------------------

local function now() return tonumber(require("tunelua.core").C.tl_now()) end

local function say(...)
  io.stdout:write(string.format(...), "\n")
  io.stdout:flush()
end

-- task selection: "all", "1,3", "2-5", "1,4-6" (1-based, extraction order)
local function select_tasks(spec, n)
  local pick = {}
  if spec == "all" then
    for k = 1, n do pick[#pick + 1] = k end
    return pick
  end
  for part in spec:gmatch("[^,]+") do
    local a, b = part:match("^(%d+)%-(%d+)$")
    a, b = tonumber(a or part), tonumber(b or a or part)
    if not a or not b or a < 1 or b > n or a > b then
      error(string.format("opencl_gpu: --tasks %s: expected indices in 1..%d such as 1,3 or 2-5", spec, n), 0)
    end
    for k = a, b do pick[#pick + 1] = k end
  end
  return pick
end

-- the conv of a task's args (data, kernel, strides, padding, dilation, out_dtype)
local function conv_of(args)
  local d, k, s, p, dl = args[1][2], args[2][2], args[3], args[4], args[5] or { 1, 1 }
  local pt, pl, pb, pr = p[1], p[2], p[3] or p[1], p[4] or p[2]
  local c = { n = d[1], ci = d[2], h = d[3], w = d[4], co = k[1], kh = k[3], kw = k[4],
              sh = s[1], sw = s[2] or s[1], pt = pt, pl = pl, pb = pb, pr = pr,
              dh = dl[1], dw = dl[2] or dl[1] }
  c.oh = math.floor((c.h + pt + pb - ((c.kh - 1) * c.dh + 1)) / c.sh) + 1
  c.ow = math.floor((c.w + pl + pr - ((c.kw - 1) * c.dw + 1)) / c.sw) + 1
  c.flop = 2 * c.n * c.co * c.oh * c.ow * c.ci * c.kh * c.kw
  c.key = string.format("%dx%dx%dx%d-%dx%dx%dx%d-s%dx%d-p%d,%d,%d,%d-d%dx%d", c.n, c.ci, c.h, c.w,
                        c.co, c.ci, c.kh, c.kw, c.sh, c.sw, pt, pl, pb, pr, c.dh, c.dw)
  c.label = string.format("%dx%dx%d -> %d, %dx%d/%d", c.ci, c.h, c.w, c.co, c.kh, c.kw, c.sh)
  return c
end

-- number of times each conv shape occurs in the network (nil when the graph cannot be walked)
local function occurrences(mod)
  local counts = {}
  local ok = pcall(function()
    local walk = require "tunelua.graph.walk"
    local strategy = require "tunelua.graph.strategy"
    walk.each_op_call(walk.main(mod).body, function(node)
      if node.op ~= "nn.conv2d" then return end
      local a = node.attrs or {}
      local c = conv_of({ { "TENSOR", walk.ttype(node.args[1]).shape },
                          { "TENSOR", walk.ttype(node.args[2]).shape },
                          a.strides or { 1, 1 }, strategy.pad4(a.padding or { 0, 0 }),
                          a.dilation or { 1, 1 } })
      counts[c.key] = (counts[c.key] or 0) + 1
    end)
  end)
  return ok and counts or nil
end

local median = require("tunelua.stats").median

local function mean(t)
  local a = 0
  for k = 1, #t do a = a + t[k] end
  return a / #t
end

-- PyTorch peer: {ok, reason | torch, cudnn, device, driver, ms = {[key] = ms}}
local function torch_peer(convs)
  if not opt.torch then return { ok = false, reason = "--no-torch" } end
  local json = require "tunelua.json"
  local path = os.tmpname()
  local list = {}
  for _, c in ipairs(convs) do
    list[#list + 1] = { key = c.key, n = c.n, ci = c.ci, h = c.h, w = c.w, co = c.co, kh = c.kh,
                        kw = c.kw, sh = c.sh, sw = c.sw, pt = c.pt, pl = c.pl, pb = c.pb,
                        pr = c.pr, dh = c.dh, dw = c.dw }
  end
  local f = assert(io.open(path, "w"))
  f:write(json.encode(json.array(list)))
  f:close()
  local script = (debug.getinfo(1, "S").source:match("^@(.*)scripts/bench/[^/]*$") or "") ..
                 "scripts/device/torch_conv.py"
  local p = io.popen(string.format("%s %q %q 2>&1", opt.torch, script, path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  local line = out:match("(%{\"ok\".-)%s*$")
  local ok, r = pcall(json.decode, line or "")
  if not ok or type(r) ~= "table" then
    local tail = out:gsub("%s+$", ""):sub(-300)
    return { ok = false, reason = "the PyTorch peer failed: " .. (tail ~= "" and tail or "no output") }
  end
  if not r.ok then return { ok = false, reason = tostring(r.reason) } end
  r.ms, r.graph_ms = {}, {}
  for _, e in ipairs(r.results) do
    r.ms[e.key] = e.ms
    if type(e.graph_ms) == "number" then r.graph_ms[e.key] = e.graph_ms end
  end
  return r
end

local function make_tuner(autotvm, name, task)
  if name:match("^xgb") then
    return autotvm.tuner.by_name(name, task, { plan_size = opt.plan_size })
  end
  return autotvm.tuner.by_name(name, task)
end

local function tuned_bench()
  local autotvm = require "tunelua.autotvm"
  local measure = require "tunelua.autotvm.measure"
  local measure_opencl = require "tunelua.autotvm.measure_opencl"
  local networks = require "networks"
  local strategy = require "tunelua.graph.strategy"
  local T0 = now()

  local target = "opencl -device=mali" .. (opt.device ~= 0 and (" -device_id=" .. opt.device) or "")
  local info, reason = measure_opencl.device_info(opt.device)   -- queried in a child
  if not info then
    say("opencl_gpu: %s; nothing to measure", tostring(reason))
    return
  end
  local mod, params = networks.get_network("resnet-18", { layout = "NCHW", batch_size = 1 })
  local all = autotvm.task.extract_from_program(mod, { target = target, params = params,
                                                       ops = { "nn.conv2d" } })
  local counts = occurrences(mod)
  local pick = select_tasks(opt.tasks, #all)
  local np = opt.n_parallel or tonumber(require("tunelua.core").C.tl_num_cores())
  say("opencl_gpu: device %d %s (%s, %s), %d compute units @ %d MHz", opt.device, info.name,
      info.vendor, info.version, info.compute_units, info.max_clock_mhz)
  say("opencl_gpu: resnet-18 batch 1 fp32 NCHW, target %q: %d conv2d tasks, tuning %d; " ..
      "tuner %s, n_trial %d, n_parallel %d%s", target, #all, #pick, opt.tuner, opt.n_trial, np,
      opt.budget > 0 and string.format(", tuning budget %.0f s", opt.budget) or "")

  local option = autotvm.measure_option({
    builder = autotvm.LocalBuilder({ n_parallel = np, timeout = opt.build_timeout }),
    runner = autotvm.LocalRunner({ number = 4, ["repeat"] = 3, min_repeat_ms = 5, timeout = 10,
                                   cooldown_interval = 0 }),
  })
  local final_option = autotvm.measure_option({
    builder = autotvm.LocalBuilder({ n_parallel = np, timeout = 20 }),
    runner = autotvm.LocalRunner({ number = 1, ["repeat"] = 7, min_repeat_ms = 50, timeout = 20,
                                   cooldown_interval = 0, check_correctness = opt.check }),
  })

  local rows = {}
  local tune_end = opt.budget > 0 and (now() + opt.budget) or math.huge
  for pi, ti in ipairs(pick) do
    local task = all[ti]
    local conv = conv_of(task.args)
    local row = { index = ti, task = task, conv = conv, trials = 0, n_errors = 0 }
    rows[#rows + 1] = row
    local t0 = now()
    local ok, err = pcall(function()
      local tuner = make_tuner(autotvm, opt.tuner, task)
      local good = {}
      local cbs = { function(_, inputs, results)
        for k, r in ipairs(results) do
          if r.error_no == 0 then good[#good + 1] = { cost = mean(r.costs), config = inputs[k].config } end
        end
      end }
      if opt.log then cbs[#cbs + 1] = autotvm.callback.log_to_file(opt.log) end
      local mb = measure.create_measure_batch(task, option)
      local left = #pick - pi + 1
      local task_budget = tune_end == math.huge and math.huge or math.max(0, (tune_end - now()) / left)
      repeat
        local r = tuner:tune({ n_trial = math.min(np, opt.n_trial - row.trials), measure_option = option,
                               measure_batch = mb, callbacks = cbs })
        row.trials = row.trials + r.trials
        row.n_errors = row.n_errors + (r.n_errors or 0)
        for no, e in pairs(r.errors or {}) do
          row.first_error = row.first_error or string.format("error %d: %s", no, e.first)
        end
      until row.trials >= opt.n_trial or r.trials == 0 or now() - t0 >= task_budget
      row.tune_s = now() - t0
      if #good == 0 then
        row.failure = "no successful trial" .. (row.first_error and (" (" .. row.first_error .. ")") or "")
        return
      end
      -- re-measure the 3 fastest configs of tuning, longer, with the correctness check
      table.sort(good, function(a, b) return a.cost < b.cost end)
      local inputs = {}
      for k = 1, math.min(3, #good) do inputs[k] = measure.MeasureInput(task, good[k].config) end
      local res = measure.create_measure_batch(task, final_option)(inputs)
      for k, r in ipairs(res) do
        if r.error_no == 0 then
          local s = median(r.costs)
          if not row.secs or s < row.secs then row.secs, row.config = s, inputs[k].config end
        else
          row.final_errors = (row.final_errors or "") ..
            string.format(" [config %d: error %d %s]", inputs[k].config.index, r.error_no,
                          tostring(r.error_msg or ""):match("^[^\n]*"):sub(1, 160))
        end
      end
      if not row.secs then row.failure = "the re-measurement failed:" .. row.final_errors end
    end)
    if not ok then row.failure = "error: " .. tostring(err):match("^[^\n]*") end
    row.tune_s = row.tune_s or (now() - t0)
    if row.secs then
      say("[%2d/%2d] task %2d %-30s %-22s %8.4f ms %8.1f GFLOPS  (%d trials, %d failed, %.0f s, config %d)",
          pi, #pick, ti, task.name, conv.label, row.secs * 1e3, conv.flop / row.secs / 1e9, row.trials,
          row.n_errors, row.tune_s, row.config.index)
    else
      say("[%2d/%2d] task %2d %-30s %-22s FAILED: %s", pi, #pick, ti, task.name, conv.label, row.failure)
    end
    if row.final_errors and row.secs then say("        re-measure errors:%s", row.final_errors) end
  end
  local tune_total = now() - T0

  -- PyTorch on the distinct conv shapes (after tuning: no tuning child is alive)
  local convs, seen = {}, {}
  for _, row in ipairs(rows) do
    if not seen[row.conv.key] then seen[row.conv.key] = true; convs[#convs + 1] = row.conv end
  end
  local tp0 = now()
  local peer = torch_peer(convs)
  local torch_s = now() - tp0
  if peer.ok then
    say("opencl_gpu: PyTorch %s, CUDA %s, cuDNN %s on %s (driver %s): fp32, TF32 off, cuDNN benchmark " ..
        "mode, median of %d CUDA-event repeats, eager and as a CUDA graph (%.0f s)", peer.torch, tostring(peer.cuda), tostring(peer.cudnn),
        peer.device, tostring(peer.driver), peer.results[1] and peer.results[1].repeats or 0, torch_s)
  else
    say("opencl_gpu: PyTorch peer n/a: %s", peer.reason)
  end

  -- the table: PyTorch's eager time and its CUDA-graph replay time (no launch overhead; the
  -- ratio uses it when there is one, else the eager time)
  local function fmt(x, f) return x and string.format(f, x) or "n/a" end
  local md = {}
  local function out(line) say("%s", line); md[#md + 1] = line end
  out("")
  out("| # | task | conv (CIxHxW -> CO, KxK/stride) | tuned ms | tuned GFLOPS | PyTorch ms (eager) | " ..
      "PyTorch ms (graph) | PyTorch GFLOPS | PyTorch/ours | PyTorch/ours (eager) | trials |")
  out("|---|---|---|---|---|---|---|---|---|---|---|")
  local best_of = {}
  for _, row in ipairs(rows) do
    local c = row.conv
    local ems, gms = peer.ok and peer.ms[c.key], peer.ok and peer.graph_ms[c.key]
    local tms = gms or ems
    local ours = row.secs and row.secs * 1e3
    local kind = row.task.name:match("winograd") and "winograd" or "spatial pack"
    out(string.format("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |", row.index, kind, c.label,
        ours and string.format("%.4f", ours) or "failed", fmt(ours and c.flop / ours / 1e6, "%.0f"),
        fmt(ems, "%.4f"), fmt(gms, "%.4f"), fmt(tms and c.flop / tms / 1e6, "%.0f"),
        fmt(tms and ours and tms / ours, "%.2f"), fmt(ems and ours and ems / ours, "%.2f"), row.trials))
    if row.secs and (not best_of[c.key] or row.secs < best_of[c.key]) then best_of[c.key] = row.secs end
  end
  -- summary over distinct shapes: our best task per shape vs PyTorch
  local function summary(ms, what)
    local n, logsum, wins, ours_net, torch_net, nshape = 0, 0, 0, 0, 0, 0
    for _, c in ipairs(convs) do
      local s, tms = best_of[c.key], peer.ok and ms[c.key]
      if s and tms then
        local r = tms / (s * 1e3)
        n, logsum = n + 1, logsum + math.log(r)
        if r >= 1 then wins = wins + 1 end
        local w = counts and counts[c.key] or 1
        ours_net, torch_net, nshape = ours_net + w * s * 1e3, torch_net + w * tms, nshape + w
      end
    end
    if n == 0 then return false end
    out(string.format("summary (%s): %d distinct conv shapes, best tuned task per shape vs PyTorch: geometric " ..
      "mean PyTorch/ours %.3f, ours at least as fast on %d of %d; resnet-18 conv total (%d convs%s) ours " ..
      "%.3f ms, PyTorch %.3f ms (ratio %.3f)", what, n, math.exp(logsum / n), wins, n, nshape,
      counts and "" or ", each shape once", ours_net, torch_net, torch_net / ours_net))
    return true
  end
  out("")
  local any = false
  if peer.ok and next(peer.graph_ms) then any = summary(peer.graph_ms, "PyTorch as a CUDA graph") end
  if peer.ok then any = summary(peer.ms, "PyTorch eager") or any end
  if not any then
    out(string.format("summary: no ratio (%s)", peer.ok and "no tuned task succeeded" or ("PyTorch n/a: " .. peer.reason)))
  end
  out(string.format("time: tuning %.0f s, PyTorch %.0f s, total %.0f s", tune_total, torch_s, now() - T0))
  if opt.markdown then
    local f = assert(io.open(opt.markdown, "w"))
    f:write(table.concat(md, "\n"), "\n")
    f:close()
  end
end

-- ---- hand-written schedules (--hand) ---------------------------------------------------------

local function hand_bench(quick, dev, wallclock)
  if not ocl.available() then
    print("opencl_gpu: no OpenCL device; nothing to measure")
    return
  end
  local info = ocl.device(dev)
  local DEV = "opencl:" .. dev
  local target = "opencl -device_id=" .. dev
  local peak
  if info.vendor:find("NVIDIA") then peak = info.compute_units * 128 * 2 * info.max_clock_mhz * 1e6 end
  print(ocl.info():match("[^\n]*"))
  print(string.format("fp32 peak: %s", peak and string.format("%.1f GFLOPS (%d CUs x 128 x 2 x %d MHz)",
        peak / 1e9, info.compute_units, info.max_clock_mhz) or "not estimated for this device"))

  local function time_it(f, args, flop)
    local ev = f:time_evaluator({ number = quick and 2 or 20, repeats = 3, min_repeat_ms = quick and 0 or 50,
                                  wallclock = wallclock })
    local t = ev(unpack(args))
    local best = math.min(t[1], t[2], t[3])
    return best, flop / best / 1e9
  end

  local results = {}
  local function report(name, secs, gflops)
    local frac = peak and string.format("%5.1f%%", gflops * 1e9 / peak * 100) or "   n/a"
    print(string.format("%-34s %10.3f ms %9.1f GFLOPS %s of peak", name, secs * 1e3, gflops, frac))
    results[#results + 1] = { name = name, secs = secs, gflops = gflops }
  end

  -- ---- matmul ----------------------------------------------------------------------------------

  local matmul, conv2d, conv2d_run, conv2d_shared
  function matmul(M, N, K, tile, nt, kt)
    local A = te.placeholder({M, K}, "float32", "A")
    local B = te.placeholder({K, N}, "float32", "B")
    local k = te.reduce_axis({0, K}, "k")
    local Cm = te.compute({M, N}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
    local s = te.create_schedule(Cm.op)
    local AA = s:cache_read(A, "shared", {Cm})
    local BB = s:cache_read(B, "shared", {Cm})
    local CL = s:cache_write(Cm, "local")
    local by, yi = s[Cm]:split(Cm.op.axis[1], {factor = tile})
    local bx, xi = s[Cm]:split(Cm.op.axis[2], {factor = tile})
    local ty, yii = s[Cm]:split(yi, {nparts = nt})
    local tx, xii = s[Cm]:split(xi, {nparts = nt})
    s[Cm]:reorder(by, bx, ty, tx, yii, xii)
    s[Cm]:bind(by, "blockIdx.y")
    s[Cm]:bind(bx, "blockIdx.x")
    s[Cm]:bind(ty, "threadIdx.y")
    s[Cm]:bind(tx, "threadIdx.x")
    s[Cm]:unroll(yii)
    s[Cm]:vectorize(xii)
    s[CL]:compute_at(s[Cm], tx)
    local ko, ki = s[CL]:split(CL.op.reduce_axis[1], {factor = kt})
    s[CL]:reorder(ko, ki, CL.op.axis[1], CL.op.axis[2])
    s[CL]:unroll(ki)
    s[CL]:unroll(CL.op.axis[1])
    s[CL]:vectorize(CL.op.axis[2])
    for _, T in ipairs({AA, BB}) do
      s[T]:compute_at(s[CL], ko)
      local fz = s[T]:fuse(T.op.axis[1], T.op.axis[2])
      local fty, r = s[T]:split(fz, {nparts = nt})
      local ftx, rr = s[T]:split(r, {nparts = nt})
      s[T]:bind(fty, "threadIdx.y")
      s[T]:bind(ftx, "threadIdx.x")
      s[T]:vectorize(rr)
    end
    local f = tl.build(s, {A, B, Cm}, target, { name = "matmul" })
    local a = nd.random_uniform({M, K}, {low = -1, high = 1, seed = 1})
    local b = nd.random_uniform({K, N}, {low = -1, high = 1, seed = 2})
    local da, db, dc = a:copyto(DEV), b:copyto(DEV), nd.empty({M, N}, "float32", DEV)
    f(da, db, dc)
    local c = dc:copyto("cpu")
    for t = 1, 16 do
      local i, j = (t * 37) % M + 1, (t * 101) % N + 1
      local acc = 0
      for kk = 1, K do acc = acc + a:get(i, kk) * b:get(kk, j) end
      assert(math.abs(c:get(i, j) - acc) <= 1e-3 * (1 + math.abs(acc)),
             string.format("matmul C[%d,%d] = %g, expected %g", i, j, c:get(i, j), acc))
    end
    local secs, gf = time_it(f, {da, db, dc}, 2 * M * N * K)
    report(string.format("matmul %dx%dx%d (tile %d, %dx%d/thread)", M, N, K, tile, tile / nt, tile / nt), secs, gf)
  end

  -- ---- conv2d (NCHW, 3x3, stride 1, pad 1) ------------------------------------------------------

  -- the declaration: X, W, the padded input (to inline) and the output
  local function conv2d_compute(N, CI, H, W, CO)
    local KH, pad = 3, 1
    local X = te.placeholder({N, CI, H, W}, "float32", "X")
    local Wt = te.placeholder({CO, CI, KH, KH}, "float32", "W")
    local P = te.compute({N, CI, H + 2 * pad, W + 2 * pad}, function(n, c, h, w)
      return te.if_then_else(te.all(te.ge(h, pad), te.lt(h, H + pad), te.ge(w, pad), te.lt(w, W + pad)),
                             X(n, c, h - pad, w - pad), 0.0)
    end, "pad")
    local rc = te.reduce_axis({0, CI}, "rc")
    local ry = te.reduce_axis({0, KH}, "ry")
    local rx = te.reduce_axis({0, KH}, "rx")
    local O = te.compute({N, CO, H, W}, function(n, f, y, x)
      return te.sum(P(n, rc, y + ry, x + rx) * Wt(f, rc, ry, rx), {rc, ry, rx})
    end, "conv")
    return X, Wt, P, O
  end

  -- the output's work split, the same for both conv2d schedules: per work-item 4 output
  -- channels x 1 row x 4 columns; a block: 2 channel groups x 7 rows x (W/4) column groups (at
  -- most 196 work-items: the compiled kernel's limit on the H200 is 256); OL at the work-item
  local function tile_output(s, O, OL)
    local n, f, y, x = O.op.axis[1], O.op.axis[2], O.op.axis[3], O.op.axis[4]
    local fo, fi = s[O]:split(f, {factor = 4})
    local bz, tz = s[O]:split(fo, {factor = 2})
    local yo, yi = s[O]:split(y, {factor = 7})
    local xo, xi = s[O]:split(x, {factor = 4})
    s[O]:reorder(n, bz, yo, tz, yi, xo, fi, xi)   -- n has extent 1 (batch 1)
    s[O]:bind(bz, "blockIdx.z")
    s[O]:bind(yo, "blockIdx.y")
    s[O]:bind(tz, "threadIdx.z")
    s[O]:bind(yi, "threadIdx.y")
    s[O]:bind(xo, "threadIdx.x")
    s[O]:unroll(fi)
    s[O]:vectorize(xi)
    s[OL]:compute_at(s[O], xo)
  end

  function conv2d(N, CI, H, W, CO, shared)
    if shared then
      local s, X, Wt, O = conv2d_shared(N, CI, H, W, CO)
      return conv2d_run(s, X, Wt, O, N, CI, H, W, CO, "shared tiles")
    end
    local X, Wt, P, O = conv2d_compute(N, CI, H, W, CO)
    local s = te.create_schedule(O.op)
    s[P]:compute_inline()
    local OL = s:cache_write(O, "local")
    tile_output(s, O, OL)
    local orc, ory, orx = OL.op.reduce_axis[1], OL.op.reduce_axis[2], OL.op.reduce_axis[3]
    s[OL]:reorder(orc, ory, orx, OL.op.axis[1], OL.op.axis[2], OL.op.axis[3], OL.op.axis[4])
    s[OL]:unroll(ory)
    s[OL]:unroll(orx)
    s[OL]:unroll(OL.op.axis[2])
    s[OL]:unroll(OL.op.axis[4])
    return conv2d_run(s, X, Wt, O, N, CI, H, W, CO, "direct")
  end

  function conv2d_run(s, X, Wt, O, N, CI, H, W, CO, what)
    local KH = 3
    local fn = tl.build(s, {X, Wt, O}, target, { name = "conv2d" })
    local xa = nd.random_uniform({N, CI, H, W}, {low = -1, high = 1, seed = 3})
    local wa = nd.random_uniform({CO, CI, KH, KH}, {low = -1, high = 1, seed = 4})
    local dx, dw, dy = xa:copyto(DEV), wa:copyto(DEV), nd.empty({N, CO, H, W}, "float32", DEV)
    fn(dx, dw, dy)
    local yh = dy:copyto("cpu")
    for t = 1, 8 do
      local nn, ff, yy, xx = 1, (t * 13) % CO + 1, (t * 5) % H + 1, (t * 11) % W + 1
      local acc = 0
      for c = 1, CI do
        for dy_ = 0, 2 do
          for dx_ = 0, 2 do
            local iy, ix = yy + dy_ - 1, xx + dx_ - 1
            if iy >= 1 and iy <= H and ix >= 1 and ix <= W then
              acc = acc + xa:get(nn, c, iy, ix) * wa:get(ff, c, dy_ + 1, dx_ + 1)
            end
          end
        end
      end
      assert(math.abs(yh:get(nn, ff, yy, xx) - acc) <= 1e-3 * (1 + math.abs(acc)),
             string.format("conv2d out[%d,%d,%d,%d] = %g, expected %g", nn, ff, yy, xx, yh:get(nn, ff, yy, xx), acc))
    end
    local secs, gf = time_it(fn, {dx, dw, dy}, 2 * N * CO * H * W * CI * KH * KH)
    report(string.format("conv2d %dx%dx%dx%d -> %d, 3x3 (%s)", N, CI, H, W, CO, what), secs, gf)
  end

  -- conv2d with shared-memory tiles: a block computes FC output channels x 7 rows x the full
  -- width (4 channels x 4 columns per work-item); per chunk of 8 input channels the padded input
  -- tile and the weights are fetched into __local memory by all work-items together.
  function conv2d_shared(N, CI, H, W, CO)
    local RC = 8
    local X, Wt, P, O = conv2d_compute(N, CI, H, W, CO)
    local s = te.create_schedule(O.op)
    local OL = s:cache_write(O, "local")
    local PS = s:cache_read(P, "shared", {OL})
    local WS = s:cache_read(Wt, "shared", {OL})
    s[P]:compute_inline()
    tile_output(s, O, OL)
    local rco, rci = s[OL]:split(OL.op.reduce_axis[1], {factor = RC})
    s[OL]:reorder(rco, rci, OL.op.reduce_axis[2], OL.op.reduce_axis[3], OL.op.axis[1], OL.op.axis[2],
                  OL.op.axis[3], OL.op.axis[4])
    s[OL]:unroll(OL.op.reduce_axis[2])
    s[OL]:unroll(OL.op.reduce_axis[3])
    s[OL]:unroll(OL.op.axis[2])
    s[OL]:unroll(OL.op.axis[4])
    local ntx = math.ceil(W / 4)
    for _, T in ipairs({PS, WS}) do
      s[T]:compute_at(s[OL], rco)
      local ax = T.op.axis
      local fz = s[T]:fuse(ax[1], ax[2], ax[3], ax[4])
      local a, r = s[T]:split(fz, {nparts = 2})
      local b, r2 = s[T]:split(r, {nparts = 7})
      local c = s[T]:split(r2, {nparts = ntx})
      s[T]:bind(a, "threadIdx.z")
      s[T]:bind(b, "threadIdx.y")
      s[T]:bind(c, "threadIdx.x")
    end
    return s, X, Wt, O
  end

  -- a failing case (e.g. a work-group the compiled kernel cannot run) is reported, not fatal
  local function try(fn, ...)
    local ok, err = pcall(fn, ...)
    if not ok then print("  FAILED: " .. tostring(err)) end
  end
  local real_matmul, real_conv2d = matmul, conv2d
  matmul = function(...) try(real_matmul, ...) end
  conv2d = function(...) try(real_conv2d, ...) end

  local t0 = os.clock()
  if quick then
    matmul(128, 128, 64, 64, 16, 16)
    matmul(128, 128, 64, 128, 16, 8)
    conv2d(1, 16, 28, 28, 32)
    conv2d(1, 16, 28, 28, 32, true)
  else
    matmul(1024, 1024, 1024, 64, 16, 16)
    matmul(2048, 2048, 2048, 64, 16, 16)
    matmul(4096, 4096, 4096, 64, 16, 16)
    matmul(2048, 2048, 2048, 128, 16, 8)
    matmul(4096, 4096, 4096, 128, 16, 8)
    conv2d(1, 64, 56, 56, 64)
    conv2d(1, 128, 28, 28, 128)
    conv2d(1, 256, 14, 14, 256)
    conv2d(1, 512, 7, 7, 512)
    conv2d(1, 64, 56, 56, 64, true)
    conv2d(1, 128, 28, 28, 128, true)
    conv2d(1, 256, 14, 14, 256, true)
    conv2d(1, 512, 7, 7, 512, true)
  end
  print(string.format("opencl_gpu: %d kernels measured (%.1f s host CPU time)", #results, os.clock() - t0))
end

if opt.hand then
  hand_bench(opt.quick, opt.device, opt.wallclock)
else
  tuned_bench()
end
