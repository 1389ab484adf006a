-- Auto-scheduler records and ApplyHistoryBest (tunelua.auto_scheduler.records, .dispatch, the
-- executor's auto-scheduler path): the record format against TVM's own lines (formats §2.5),
-- round trips, malformed and torn lines, workload matching across the nested and flattened
-- key forms, distill; then mobilenet NHWC at a reduced image size compiled with a log of
-- hand-written step lists per task (inline, fuse, split, reorder, parallel, vectorize,
-- unroll; GPU: fuse, split, thread binding), where the best record of each task must be the
-- one replayed, error records and records of other targets never count, a record that does
-- not replay falls back to the default schedule, a task without records is counted, and the
-- network's output matches the reference interpreter (fp32 rel. error < 1e-4): on the CPU and,
-- when there is an OpenCL device, on OpenCL.
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local json = require "tunelua.json"
local schedule = require "tunelua.schedule"
local networks = require "networks"
local auto_scheduler = require "tunelua.auto_scheduler"
local records = require "tunelua.auto_scheduler.records"
local util = require "tests.lua.lib.util"
local ex = require "tests.lua.lib.executor_check"

local C, ctx = core.C, core.ctx
local eq = ex.eq

local dir = util.tmpdir("ansor_dispatch")

local function write(path, lines)
  local f = assert(io.open(path, "w"))
  for _, l in ipairs(lines) do f:write(l, "\n") end
  f:close()
end

-- ---- the record format ---------------------------------------------------------------------

-- TVM's own lines (formats §2.5: a v0.3 and a v0.5 record)
local TVM1 = [==[{"i": [["[\"matmul_add\", 1024, 1024, 1024, \"float32\"]", "llvm -keys=cpu", [18, 64, 64, 0, 0, 0, 0, 0]], [[], [["SP", 2, 0, 1024, [2, 1, 4], 1], ["SP", 2, 4, 1024, [1, 1, 8], 1], ["SP", 2, 8, 1024, [4], 1], ["RE", 2, [0, 4, 1, 5, 8, 2, 6, 9, 3, 7]], ["FSP", 4, 0, 0, 2], ["FSP", 4, 3, 1, 2], ["RE", 4, [0, 3, 1, 4, 2, 5]], ["CA", 2, 4, 3], ["FU", 4, [0, 1]], ["AN", 4, 0, 3], ["PR", 2, 0, "auto_unroll_max_step$8"], ["AN", 2, 9, 2], ["AN", 4, 4, 2]]]], "r": [[0.0044742], 0, 0.335558, 1607112214], "v": "v0.3"}]==]
local TVM2 = [==[{"i": [["[\"d7b65649a4dd54becea0a52aabbc5af5\", 1, 1000, 1, 1000]", "llvm -keys=cpu -mcpu=core-avx2", [8, 64, 64, 0, 0, 0, 0, 0], "", 2], [[], [["SP", 3, 1, 1000, [50], 1], ["RF", 3, 2, 1], ["RE", 3, [0, 2, 1]], ["SP", 1, 1, 1000, [20], 1], ["RF", 1, 2, 1], ["RE", 1, [0, 2, 1]], ["CR", 6], ["CA", 5, 6, 1], ["CR", 4], ["CA", 2, 3, 1], ["AN", 1, 0, 3], ["FU", 3, [0, 1]], ["AN", 3, 0, 3], ["AN", 4, 0, 3], ["FU", 6, [0, 1]], ["AN", 6, 0, 3], ["PR", 1, 0, "auto_unroll_max_step$16"], ["PR", 2, 0, "auto_unroll_max_step$16"], ["PR", 4, 0, "auto_unroll_max_step$16"], ["PR", 5, 0, "auto_unroll_max_step$64"]]]], "r": [[8.75e-06, 1.0781e-05, 9.875e-06, 9.836e-06, 1.0357e-05, 1.0238e-05, 1.0341e-05, 9.75e-06, 9.561e-06, 1.0122e-05], 0, 0.17921, 1606960872], "v": "v0.5"}]==]
do
  local r1 = assert(records.decode(TVM1))
  eq(r1.workload_key, '["matmul_add", 1024, 1024, 1024, "float32"]', "v0.3 key")
  eq(r1.target, "llvm -keys=cpu", "v0.3 target")
  eq(r1.hardware_params[1], 18, "v0.3 num_cores")
  eq(#r1.steps_list, 13, "v0.3 steps")
  eq(r1.steps_list[11][4], "auto_unroll_max_step$8", "pragma string")
  eq(r1.cost, 0.0044742, "v0.3 cost")
  eq(r1.version, "v0.3", "version kept")
  -- the steps print back as the writer printed them
  assert(TVM1:find(r1.steps, 1, true), "steps text as written: " .. r1.steps)
  local r2 = assert(records.decode(TVM2))
  eq(r2.layout_rewrite, 2, "v0.5 layout option")
  eq(#r2.costs, 10, "v0.5 costs")
  assert(math.abs(r2.cost - 9.9611e-06) < 1e-12, "v0.5 mean cost " .. r2.cost)
  -- re-encoded: the v0.6 form, 6 significant digits; decoding it gives the same record
  local line = records.encode(r2)
  assert(line:find('"" , 2', 1, true) == nil and line:find(', "", 2, []], [[], [["SP", 3, 1, 1000, [50], 1]', 1, true), line)
  assert(line:find('"r": [[8.75e-06, 1.0781e-05,', 1, true) and line:find('"v": "v0.6"}$'), line)
  local r3 = assert(records.decode(line))
  eq(r3.steps, r2.steps, "round trip steps")
  eq(r3.workload_key, r2.workload_key, "round trip key")
  -- an error record carries 1e+10
  local e = records.encode({ workload_key = "k", target = "llvm", steps = "[]", error_no = 4, costs = { 1 },
                             hardware_params = { 2, 64, 64, 0, 0, 0, 0, 0 }, all_cost = 0.5, timestamp = 7 })
  eq(e, '{"i": [["k", "llvm", [2, 64, 64, 0, 0, 0, 0, 0], "", 0, []], [[], []]], "r": [[1e+10], 4, 0.5, 7], "v": "v0.6"}',
     "error record")
  eq(assert(records.decode(e)).cost, math.huge, "an error record has no cost")
  -- malformed: a 4-element task, an unknown key, a bad state, bad costs, not JSON
  local bad = {
    { '{"i": [["k", "llvm", [1,1,1,1,1,1,1,1], ""], [[], []]], "r": [[1], 0, 0, 0], "v": "v0.4"}', "4 elements" },
    { '{"i": [["k", "llvm"], [[], []]], "r": [[1], 0, 0, 0], "x": 1}', "unknown key 'x'" },
    { '{"i": [["k", "llvm"], [[1], []]], "r": [[1], 0, 0, 0]}', "the state is not" },
    { '{"i": [["k", "llvm"], [[], [7]]], "r": [[1], 0, 0, 0]}', "step 0 is not" },
    { '{"i": [["k", "llvm"], [[], []]], "r": [["a"], 0, 0, 0]}', "a cost is not a number" },
    { '{"i": [["k", "llvm", [1, 2]], [[], []]], "r": [[1], 0, 0, 0]}', "8 integers" },
    { '{"i": [["k", "ll', "invalid JSON" },
  }
  for _, b in ipairs(bad) do
    local r, why = records.decode(b[1])
    assert(r == nil and tostring(why):find(b[2], 1, true), b[1] .. " -> " .. tostring(why))
  end
  -- a file: comments, blank lines, a malformed line, a torn record with a whole one after it
  local p = dir .. "/f.json"
  write(p, { "# a comment", TVM1, "", " indented lines are skipped", "{broken",
             TVM2:sub(1, 40) .. TVM2, TVM2 })
  local warns = {}
  local list = records.load(p, { warn = function(m) warns[#warns + 1] = m end })
  eq(#list, 3, "records read")
  eq(list[2].line, 6, "the torn line's whole record")
  eq(#warns, 2, "warnings")
  assert(warns[1]:find("f.json:5: skipped a malformed record line", 1, true), warns[1])
  assert(warns[2]:find("f.json:6: skipped a torn record before column 41", 1, true), warns[2])
  assert(records.is_log(p), "sniffed as an auto-scheduler log")
  -- matching: the nested and the flattened key forms are one workload; others differ
  eq(records.match_key('["abc", [1, 2], [3]]'), records.match_key('["abc", 1, 2, 3]'), "flattened = nested")
  assert(records.match_key('["abc", 1, 2, 3]') ~= records.match_key('["abc", 1, 2, 4]'), "other shapes")
  eq(records.match_key("plain"), "plain", "a key that is not JSON")
end

-- ---- ApplyHistoryBest on a network -----------------------------------------------------

local mod, params, ishape = networks.get_network("mobilenet", { layout = "NHWC", image_size = 32, num_classes = 10 })
local x = nd.random_uniform(ishape, { seed = 11 })

local function fresh(task)
  local p = ffi.new("tl_sched *[1]")
  core.check(C.tl_sched_new(ctx, task.dag, nil, 0, p))
  return setmetatable({ handle = ffi.gc(p[0], C.tl_sched_free), outputs = {} }, schedule.Schedule)
end

-- Hand-written step lists for any task: stages that can be inlined are (variant ~= "plain"),
-- every other computed stage gets a CPU or a GPU loop structure.
local function steps_for(task, variant, gpu)
  local s = fresh(task)
  local an = auto_scheduler.analyze(task)
  for st = 0, C.tl_sched_num_stages(s.handle) - 1 do
    local info = an.stages[st + 1]
    if info.kind == "compute" then
      if info.strictly_inlinable and not info.is_output and variant ~= "plain" then
        s:step_compute_inline(st)
      else
        local n, ns = C.tl_sched_num_iters(s.handle, st), 0
        for i = 0, n - 1 do if C.tl_sched_iter_kind(s.handle, st, i) == 0 then ns = ns + 1 end end
        if gpu then
          -- fuse all spatial iterators, split by the thread count, bind
          if ns > 1 then s:step_fuse(st, (function() local l = {} for i = 0, ns - 1 do l[#l + 1] = i end return l end)()) end
          s:step_split(st, 0, { variant == "a" and 32 or 16 }, 1)
          s:step_annotate(st, 0, C.TL_ANN_BLOCK_X)
          s:step_annotate(st, 1, C.TL_ANN_THREAD_X)
        elseif variant == "a" and ns >= 2 then
          -- fuse the two outer spatial loops (parallel), split the innermost spatial one and
          -- move its inner part innermost (vectorized); reduce loops in between, one unrolled
          s:step_fuse(st, { 0, 1 })
          n, ns = n - 1, ns - 1
          s:step_split(st, ns - 1, { 4 }, 1)
          local order = {}
          for i = 0, ns - 1 do order[#order + 1] = i end
          for i = ns + 1, n do order[#order + 1] = i end
          order[#order + 1] = ns
          s:step_reorder(st, order)
          s:step_annotate(st, 0, C.TL_ANN_PARALLEL)
          s:step_annotate(st, n, C.TL_ANN_VECTORIZE)
          if n - 1 > ns - 1 then s:step_annotate(st, n - 1, C.TL_ANN_UNROLL) end
        else
          s:step_split(st, 0, { 1 }, 1)
          s:step_annotate(st, 0, C.TL_ANN_PARALLEL)
          s:step_pragma(st, 0, "auto_unroll_max_step$16")
        end
      end
    end
  end
  return s:steps()
end

local function rec(task, tgt, steps, cost, err)
  return records.encode({ workload_key = task.workload_key, target = tgt, steps = steps,
                          hardware_params = { 2, 64, 64, 0, 0, 0, 0, 0 }, costs = { cost },
                          error_no = err or 0, all_cost = 0.1, timestamp = 1700000000 })
end

-- Builds the network with the log's best records and checks it; returns the lib and the
-- build's summary line.
local function build_checked(tgt, ctxh, what)
  local lines = {}
  local real_print = print
  print = function(...) lines[#lines + 1] = table.concat({ ... }, "\t") end
  local ok, lib = pcall(ex.check_graph, mod, params, { data = x }, { target = tgt, history = ctxh, quiet = false }, what)
  print = real_print
  if not ok then error(lib, 0) end
  return lib, table.concat(lines, "\n")
end

local function network_case(tgt, gpu)
  local tasks = auto_scheduler.extract_tasks(mod, params, tgt)
  assert(#tasks == 22, "mobilenet tasks: " .. #tasks)
  local lines, want = {}, {}
  for i, t in ipairs(tasks) do
    local a, b = steps_for(t, "a", gpu), steps_for(t, "plain", gpu)
    if i == 1 then
      -- no record at all: the default schedule, counted
    elseif i == 2 then
      -- the best record does not replay on this DAG (a stage it lacks): warned, default
      lines[#lines + 1] = rec(t, tgt, '[["SP", 40, 0, 8, [2], 1]]', 1e-6)
      lines[#lines + 1] = rec(t, tgt, a, 2e-3)
    else
      -- variant a wins on odd tasks, plain on even ones; an error record and a record for
      -- another target are cheaper and must never count; the flattened key form matches
      local wa, wb = i % 2 == 1 and 1e-3 or 3e-3, i % 2 == 1 and 2e-3 or 1.5e-3
      local key = t.workload_key
      if i == 3 then
        local v = json.decode(key)
        local flat = { v[1] }
        local function fl(z) if type(z) == "table" then for _, y in ipairs(z) do fl(y) end else flat[#flat + 1] = z end end
        for k = 2, #v do fl(v[k]) end
        key = json.dumps(flat)
        assert(key ~= t.workload_key and key:find('", 1, ', 1, true), key)
      end
      local tt = setmetatable({ workload_key = key }, { __index = t })
      lines[#lines + 1] = rec(tt, tgt, a, wa)
      lines[#lines + 1] = rec(tt, tgt, b, 1e-7, 4)
      lines[#lines + 1] = rec(tt, gpu and "llvm" or "opencl -device=mali", b, 1e-7)
      lines[#lines + 1] = rec(tt, tgt, b, wb)
      want[t.workload_key] = i % 2 == 1 and a or b
    end
  end
  local log = dir .. "/net_" .. (gpu and "gpu" or "cpu") .. ".json"
  write(log, lines)
  local warns = {}
  local real = io.stderr
  local best = auto_scheduler.ApplyHistoryBest(log)
  local lib, out = build_checked(tgt, best, "mobilenet " .. tgt)
  assert(out:find("2 of 22 tasks have no tuned schedule", 1, true), out)
  local nrec = 0
  for _, k in ipairs(lib.kernels) do
    local wk = k.key:gsub(" ansor$", "")
    if want[wk] then
      assert(k.record, k.name .. ": no record replayed")
      eq(k.record.steps, want[wk], k.name .. ": the best record's steps")
      eq(k.tuned, "ansor", k.name .. ": tuned by the auto-scheduler")
      nrec = nrec + 1
    else
      assert(not k.record, k.name .. ": replayed a record it should not have")
    end
  end
  eq(nrec, 20, tgt .. ": kernels with a replayed record")
  return lib
end

network_case("llvm", false)

-- distill keeps one record per (target key, workload): 20 workloads of llvm (key cpu) plus the
-- task whose best does not replay (distill cannot know) plus the opencl decoys (3 keys)
do
  local n = records.distill(dir .. "/net_cpu.json", dir .. "/best.json")
  local list = records.load(dir .. "/best.json")
  eq(#list, n, "distilled count")
  local seen = {}
  for _, r in ipairs(list) do
    assert(r.error_no == 0, "no error record survives")
    for _, k in ipairs(require("tunelua.target").info(r.target).keys) do
      local id = k .. "|" .. records.match_key(r.workload_key)
      assert(not seen[id], "one record per target key and workload: " .. id)
      seen[id] = true
    end
  end
  eq(n, 21 + 20, "distilled records (cpu winners and the opencl decoys)")
  -- the distilled log builds the same network
  local lib, out = build_checked("llvm", auto_scheduler.ApplyHistoryBest(dir .. "/best.json"), "distilled")
  assert(out:find("2 of 22 tasks have no tuned schedule", 1, true), out)
  -- history = a log path: an auto-scheduler log is told from an AutoTVM one by its records
  lib, out = build_checked("llvm", dir .. "/best.json", "distilled, by path")
  assert(out:find("2 of 22 tasks have no tuned schedule", 1, true), out)
  for _, k in ipairs(lib.kernels) do if k.record then eq(k.tuned, "ansor", "by path") end end
end

-- an NCHW network: the build keeps the graph's layouts on this path (no blocked NCHW[x]c convs
-- as the AutoTVM path makes them), so every task's key is found
do
  local rmod, rparams, rshape = networks.get_network("resnet-18", { image_size = 32, num_classes = 10 })
  local rtasks = auto_scheduler.extract_tasks(rmod, rparams, "llvm")
  local lines = {}
  for _, t in ipairs(rtasks) do lines[#lines + 1] = rec(t, "llvm", steps_for(t, "a", false), 1e-3) end
  write(dir .. "/r18.json", lines)
  local real_print, out = print, {}
  print = function(...) out[#out + 1] = table.concat({ ... }, "\t") end
  local ok, err = pcall(ex.check_graph, rmod, rparams, { data = nd.random_uniform(rshape, { seed = 5 }) },
                        { target = "llvm", history = auto_scheduler.ApplyHistoryBest(dir .. "/r18.json"), quiet = false },
                        "resnet-18")
  print = real_print
  assert(ok, err)
  out = table.concat(out, "\n")
  assert(out:find("0 of " .. #rtasks .. " tasks have no tuned schedule", 1, true), out)
end

if C.tl_opencl_device_count() == 0 then
  print("SKIP test_ansor_dispatch OpenCL part: no OpenCL device")
else
  network_case("opencl", true)
end

util.cleanup(dir)
print("ok")
