-- Layout rewriting of layout-free arguments (core/te/layout.c, docs/auto_scheduler.md "Layout
-- rewriting"): an auto-scheduled CPU kernel reads a constant weight in the order of its loops.
--
-- 1. Random CPU states of small conv2d NHWC (1x1 and 3x3), depthwise and matmul tasks: each
--    state's kernel with its weight rewritten, run on the weight transformed by the layout map,
--    computes what the kernel on the weight as given computes; the map is a permutation of the
--    weight (same size, every element once); the weight's loads in the rewritten IR use
--    stride 1 for the innermost atom.
-- 2. Arguments the pass must leave alone: a stored output, an argument whose loads already
--    walk it in order. A map given arrays of the wrong size is a clear error.
-- 3. A small NHWC network tuned with the task scheduler: its records carry
--    layout_rewrite_option 2, the build rewrites the weights of those kernels (and not of a
--    record measured on the weights as given), and the output matches the reference
--    interpreter.
local ffi = require "ffi"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local nd = require "tunelua.nd"
local core = require "tunelua.core"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"
local util = require "tests.lua.lib.util"

local C, ctx = core.C, core.ctx
local N = tonumber(os.getenv("TUNELUA_LAYOUT_N") or "") or 10

local function ph(shape, name) return te.placeholder(shape, "float32", name) end

local close, rewrite = util.close, util.rewrite_layout

local function apply(m, shape, value)
  local out = nd.empty(shape)
  assert(C.tl_layout_map_apply(ctx, m, value, out) == 0, core.errmsg())
  return out
end

local run = util.run_lowered

-- ---- 1. random states: rewritten kernels on transformed weights ------------------------------
local types = {
  { "conv2d_nhwc_1x1", function()
      return topi.nn.conv2d_nhwc(ph({ 1, 6, 6, 32 }, "x"), ph({ 1, 1, 32, 48 }, "w"),
                                 { strides = 1, padding = { 0, 0, 0, 0 }, dilation = 1 })
    end },
  { "conv2d_nhwc_3x3", function()
      return topi.nn.conv2d_nhwc(ph({ 1, 8, 8, 16 }, "x"), ph({ 3, 3, 16, 32 }, "w"),
                                 { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
    end },
  { "depthwise_nhwc", function()
      return topi.nn.depthwise_conv2d_nhwc(ph({ 1, 10, 10, 32 }, "x"), ph({ 3, 3, 32, 1 }, "w"),
                                           { strides = 2, padding = { 1, 1, 1, 1 }, dilation = 1 })
    end },
  { "matmul_kn", function() return topi.matmul(ph({ 4, 64 }, "a"), ph({ 64, 80 }, "w")) end },
}

local rewritten, total = 0, 0
for _, ty in ipairs(types) do
  local name, make = ty[1], ty[2]
  local task = auto_scheduler.SearchTask{ compute_dag = make(), target = "llvm" }
  local args = search.random_args(task, nil, 3)
  local policy = auto_scheduler.SketchPolicy(task, { seed = 17 })
  local n_rw = 0
  for i, st in ipairs(policy:sample(N)) do
    local what = string.format("%s state %d", name, i)
    local plain = st:lower()
    local ref = run(plain, args)
    local l = st:lower()
    local m, shape = rewrite(l, 1)           -- the weight: the second placeholder
    total = total + 1
    if m then
      n_rw = n_rw + 1
      -- a permutation of the weight: the map applied to 0, 1, 2, ... gives each index once
      local numel = 1
      for _, e in ipairs(args[2]:shape()) do numel = numel * e end
      local iota = nd.empty(args[2]:shape())
      for k = 0, numel - 1 do C.tl_array_set(iota, k, k) end
      local seen, cnt = {}, 0
      for _, v in ipairs(apply(m, shape, iota):flat()) do
        assert(not seen[v], what .. ": the map reads element " .. v .. " twice")
        seen[v] = true
        cnt = cnt + 1
      end
      assert(cnt == numel, what .. ": the rewritten weight has " .. cnt .. " elements, expected " .. numel)
      -- the kernel's signature takes the new shape
      local text = tostring(setmetatable(l, { __tostring = function(x) return ffi.string(C.tl_lowered_text(x.handle)) end }))
      assert(text:find(table.concat(shape, ", "), 1, true), what .. ": signature lacks [" .. table.concat(shape, ", ") .. "]\n" .. text)
      local a2 = { args[1], apply(m, shape, args[2]) }
      for k = 3, #args do a2[k] = args[k] end
      local ok, err = pcall(close, run(l, a2), ref, what)
      if not ok then error(tostring(err) .. "\nsteps: " .. st:steps() .. "\n" .. text) end
    end
  end
  assert(n_rw >= 1, name .. ": no state of " .. N .. " had its weight rewritten")
  rewritten = rewritten + n_rw
end

-- ---- 2. what the pass leaves alone, and bad input ------------------------------------------
do
  local task = auto_scheduler.SearchTask{ compute_dag = topi.matmul(ph({ 4, 64 }, "a"), ph({ 64, 80 }, "w")),
                                          target = "llvm" }
  local l = task:sample(1)[1]:lower()
  assert(rewrite(l, 2) == nil, "the output (stored) must not be rewritten")
  local mp = ffi.new("tl_layout_map *[1]")
  assert(C.tl_lowered_rewrite_layout(ctx, l.handle, 7, mp) ~= 0, "argument 7 of 3 must be an error")
  assert(core.errmsg():find("argument 7", 1, true), core.errmsg())
  C.tl_clearerr(ctx)
  -- an unscheduled elementwise add reads its second input in its own order: nothing to rewrite
  local add = auto_scheduler.SearchTask{ compute_dag = topi.add(ph({ 6, 10 }, "a"), ph({ 6, 10 }, "b")),
                                         target = "llvm" }
  local init = ffi.cast("tl_sched *", C.tl_ansor_policy_init_state(add:policy_handle()))
  local l0 = setmetatable({ handle = init, task = add }, search.State_mt):lower()
  assert(rewrite(l0, 1) == nil, "an input read in its own order must keep its layout")
  -- the unscheduled matmul reads its weight [k, j] column by column (k innermost): transposed
  init = ffi.cast("tl_sched *", C.tl_ansor_policy_init_state(task:policy_handle()))
  local _, tshape = rewrite(setmetatable({ handle = init, task = task }, search.State_mt):lower(), 1)
  assert(tshape and table.concat(tshape, ",") == "80,64", "the naive matmul's weight: " ..
         (tshape and table.concat(tshape, ",") or "not rewritten"))
  -- a map applied to an array of another size
  local m, shape
  for _, st in ipairs(task:sample(12)) do
    m, shape = rewrite(st:lower(), 1)
    if m then break end
  end
  assert(m, "no matmul state rewrote its weight")
  local bad = C.tl_layout_map_apply(ctx, m, nd.empty({ 64, 81 }), nd.empty(shape))
  assert(bad ~= 0 and core.errmsg():find("expected 5120", 1, true), "wrong-size source: " .. core.errmsg())
  C.tl_clearerr(ctx)
end

-- ---- 3. a network: records with the option, the build, the reference -----------------------
do
  local relay = require "tunelua.relay"
  local reference = require "networks.reference"
  local x = relay.var("data", { shape = { 1, 8, 8, 16 } })
  local w1 = relay.var("w1", { shape = { 1, 1, 16, 32 } })
  local w2 = relay.var("w2", { shape = { 3, 3, 32, 32 } })
  local params = { w1 = nd.random_uniform({ 1, 1, 16, 32 }, { low = -1, high = 1, seed = 1 }),
                   w2 = nd.random_uniform({ 3, 3, 32, 32 }, { low = -1, high = 1, seed = 2 }) }
  local y = relay.nn.relu(relay.nn.conv2d(x, w1, { data_layout = "NHWC", kernel_layout = "HWIO", channels = 32,
                                                   kernel_size = { 1, 1 } }))
  y = relay.nn.conv2d(y, w2, { data_layout = "NHWC", kernel_layout = "HWIO", channels = 32, kernel_size = { 3, 3 },
                               padding = { 1, 1 }, strides = { 2, 2 } })
  local mod = relay.Module(relay.Function({ x, w1, w2 }, y))
  local tasks, weights = auto_scheduler.extract_tasks(mod, params, "llvm", {})
  assert(#tasks == 2, "expected 2 tasks, got " .. #tasks)
  for _, t in ipairs(tasks) do
    assert(t.layout_rewrite == 2 and #t.layout_free == 1, t.workload_key .. ": its weight is layout-free")
  end
  local dir = util.tmpdir("layout_rewrite")
  local log = dir .. "/net.json"
  local tuner = auto_scheduler.TaskScheduler(tasks, weights, { callbacks = {} })
  tuner:tune(auto_scheduler.TuningOptions{ num_measure_trials = 16, num_measures_per_round = 8, verbose = 0,
    runner = auto_scheduler.LocalRunner({ number = 1, ["repeat"] = 1, timeout = 20 }),
    measure_callbacks = { auto_scheduler.RecordToFile(log) } })
  local recs = auto_scheduler.records.load(log)
  assert(#recs >= 16, #recs .. " records")
  for _, r in ipairs(recs) do assert(r.layout_rewrite == 2, "a trial's record says layout_rewrite " .. tostring(r.layout_rewrite)) end
  local data = nd.random_uniform({ 1, 8, 8, 16 }, { low = 0, high = 1, seed = 4 })
  local ref = reference.run(mod, params, { data = data })[1]
  local executor = require "tunelua.graph.executor"
  local function built(records_)
    local lib = relay.build(mod, { target = "llvm", params = params, history = auto_scheduler.ApplyHistoryBest(records_),
                                   quiet = true })
    local m = executor.GraphModule(lib)
    m:set_input("data", data)
    m:run()
    local n = 0
    for _, k in ipairs(lib.kernels) do if k.layout_maps then n = n + 1 end end
    return m:get_output(0), n, lib
  end
  local out, n = built(log)
  close(out, ref, "the network with the best records")
  -- of each task, a record whose state the pass rewrites (most do: part 1): the build must
  -- rewrite exactly those kernels' weights
  local chosen = {}
  for _, t in ipairs(tasks) do
    local p = t:policy_handle()
    local warg
    for i = 0, C.tl_ansor_policy_num_args(p) - 1 do
      if C.tl_ansor_policy_arg(p, i) == t.layout_free[1] then warg = i end
    end
    for _, r in ipairs(recs) do
      if r.workload_key == t.workload_key and r.error_no == 0 then
        local init = ffi.cast("tl_sched *", C.tl_ansor_policy_init_state(p))
        local sp = ffi.new("tl_sched *[1]")
        assert(C.tl_sched_fresh(ctx, init, sp) == 0)
        local st = setmetatable({ handle = ffi.gc(sp[0], C.tl_sched_free), task = t }, search.State_mt)
        assert(C.tl_sched_apply_json(ctx, st.handle, r.steps) == 0, core.errmsg())
        if rewrite(st:lower(), warg) then chosen[#chosen + 1] = r; break end
      end
    end
  end
  assert(#chosen == 2, "a task has no record whose weight the pass rewrites")
  local lib
  out, n, lib = built(chosen)
  assert(n == 2, n .. " of 2 kernels read their weights rewritten")
  close(out, ref, "the network with rewritten weights")
  -- exported and imported, the rewritten weights travel with the kernels
  local adir = dir .. "/artifact"
  executor.export(lib, adir)
  local there = executor.GraphModule(executor.import(adir))
  there:set_input("data", data)
  there:run()
  close(there:get_output(0), ref, "the imported network with rewritten weights")
  -- the same records as if measured on the weights as given: the build keeps the weights
  for _, r in ipairs(chosen) do r.layout_rewrite = 0 end
  out, n = built(chosen)
  assert(n == 0, n .. " kernels rewritten from records measured on the weights as given")
  close(out, ref, "the network with the weights as given")
  util.cleanup(dir)
end

print(string.format("test_layout_rewrite: %d of %d random states rewrote their weight and match; the network's " ..
                    "records carry the option and its build matches the reference", rewritten, total))
