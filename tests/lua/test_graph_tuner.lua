-- Graph tuner (tunelua.autotvm.graph_tuner): the solver against brute force on random
-- branching graphs (seeded), its fallback for graphs too wide for exact DP, and a whole run
-- on a small network with a branch and a residual add: a synthetic log of valid configs,
-- layout transforms built and timed for real, the record file loaded by apply_history_best
-- and the network built from it checked against the reference interpreter.
local nd = require "tunelua.nd"
local relay = require "tunelua.relay"
local autotvm = require "tunelua.autotvm"
local gt = require "tunelua.autotvm.graph_tuner"
local record = require "tunelua.autotvm.record"
local executor = require "tunelua.graph.executor"
local extract = require "tunelua.graph.extract"
local reference = require "networks.reference"
local file = require "tunelua.file"
local util = require "tests.lua.lib.util"

local function eq(a, b, what)
  if a ~= b then error(string.format("%s: expected %s, got %s", what, tostring(b), tostring(a)), 2) end
end

-- ---- the solver against brute force ---------------------------------------------------------

-- A deterministic generator (the tests must not depend on math.random's implementation).
local function lcg(seed)
  local s = seed
  return function(n)
    s = (s * 1103515245 + 12345) % 2147483648
    if n then return 1 + s % n end
    return s / 2147483648
  end
end

-- A random branching graph of nv variables: a random tree (each variable after the first
-- hangs off an earlier one), plus `extra` edges that close cycles (residual, join).
local function random_problem(seed, nv, extra)
  local r = lcg(seed)
  local p = { sizes = {}, unary = {}, pairs = {} }
  for v = 1, nv do
    p.sizes[v] = 1 + r(3)
    p.unary[v] = {}
    for x = 1, p.sizes[v] do p.unary[v][x] = r() end
  end
  local function add(a, b)
    local m = {}
    for x = 1, p.sizes[a] do
      m[x] = {}
      for y = 1, p.sizes[b] do m[x][y] = r() < 0.3 and 0 or r() * 0.8 end
    end
    p.pairs[#p.pairs + 1] = { a, b, cost = m }
  end
  for v = 2, nv do add(r(v - 1), v) end
  for _ = 1, extra do
    local a, b = r(nv), r(nv)
    if a ~= b then add(math.min(a, b), math.max(a, b)) end
  end
  return p
end

local function brute_force(p)
  local nv, best, best_c = #p.sizes, math.huge, nil
  local c = {}
  for v = 1, nv do c[v] = 1 end
  while true do
    local t = gt.total(p, c)
    if t < best then
      best = t
      best_c = {}
      for v = 1, nv do best_c[v] = c[v] end
    end
    local v = 1
    while v <= nv and c[v] == p.sizes[v] do c[v] = 1; v = v + 1 end
    if v > nv then break end
    c[v] = c[v] + 1
  end
  return best, best_c
end

local function near(a, b) return math.abs(a - b) <= 1e-9 * math.max(1, math.abs(b)) end

do
  local ntree, ncyc = 0, 0
  for seed = 1, 40 do
    local nv = 3 + seed % 5              -- 3..7 variables
    local extra = seed % 3               -- trees (0) and graphs with cycles
    local p = random_problem(seed, nv, extra)
    local bf = brute_force(p)
    local choice, total, method = gt.solve(p)
    eq(method, "dp", "seed " .. seed .. ": exact DP on a small graph")
    assert(near(total, bf), string.format("seed %d: DP %.9f, brute force %.9f", seed, total, bf))
    assert(near(gt.total(p, choice), total), "seed " .. seed .. ": the total is the choice's")
    -- the fallback (forced by a tiny table limit) is never worse than each variable's best
    -- alone, never better than the optimum, and exact on trees
    local fc, ft, fm = gt.solve(p, { max_table = 1 })
    eq(fm, "fallback", "seed " .. seed .. ": fallback forced")
    assert(near(gt.total(p, fc), ft), "seed " .. seed .. ": fallback total")
    local alone = {}
    for v = 1, nv do
      local b = 1
      for x = 2, p.sizes[v] do if p.unary[v][x] < p.unary[v][b] then b = x end end
      alone[v] = b
    end
    assert(ft <= gt.total(p, alone) + 1e-12, "seed " .. seed .. ": fallback worse than per-variable best")
    assert(ft >= bf - 1e-12, "seed " .. seed .. ": fallback below the optimum")
    if #p.pairs == nv - 1 then
      ntree = ntree + 1
      assert(near(ft, bf), string.format("seed %d: fallback on a tree %.9f, optimum %.9f", seed, ft, bf))
    else
      ncyc = ncyc + 1
    end
  end
  assert(ntree >= 10 and ncyc >= 10, "both trees and graphs with cycles were checked")
  -- the pair costs matter: a chain where each variable's best alone disagrees with its neighbour
  local p = { sizes = { 2, 2, 2 }, unary = { { 0, 0.1 }, { 0.1, 0 }, { 0, 0.1 } },
              pairs = { { 1, 2, cost = { { 0, 1 }, { 1, 0 } } }, { 2, 3, cost = { { 0, 1 }, { 1, 0 } } } } }
  local c, t = gt.solve(p)
  eq(table.concat(c, ","), "1,1,1", "chain: the neighbours agree")
  assert(near(t, 0.1), "chain total")
  -- bad problems are named
  local ok, err = pcall(gt.solve, { sizes = { 2, 0 } })
  assert(not ok and err:find("variable 2: expected a positive number of choices", 1, true), err)
  ok, err = pcall(gt.solve, { sizes = { 2, 2 }, pairs = { { 1, 3, cost = {} } } })
  assert(not ok and err:find("pair 1 joins variables 1 and 3", 1, true), err)
end

-- ---- a small network: branch and residual ------------------------------------------------

local dir = util.tmpdir("graph-tuner")

local function rnd(shape, seed, lo, hi)
  return nd.random_uniform(shape, { seed = seed, low = lo or -1, high = hi or 1 })
end

-- conv1 (8 -> 16, 3x3) -> relu -> {conv2a 3x3, conv2b 1x1} -> add + conv1's output -> relu
-- -> conv3 (16 -> 8, 1x1)
local x = relay.var("data", { shape = { 1, 8, 8, 8 } })
local w1 = relay.var("w1", { shape = { 16, 8, 3, 3 } })
local w2a = relay.var("w2a", { shape = { 16, 16, 3, 3 } })
local w2b = relay.var("w2b", { shape = { 16, 16, 1, 1 } })
local w3 = relay.var("w3", { shape = { 8, 16, 1, 1 } })
local c1 = relay.nn.relu(relay.nn.conv2d(x, w1, { padding = { 1, 1 }, channels = 16, kernel_size = { 3, 3 } }))
local c2a = relay.nn.conv2d(c1, w2a, { padding = { 1, 1 }, channels = 16, kernel_size = { 3, 3 } })
local c2b = relay.nn.conv2d(c1, w2b, { channels = 16, kernel_size = { 1, 1 } })
local y = relay.nn.relu(relay.add(relay.add(c2a, c2b), c1))
local out = relay.nn.conv2d(y, w3, { channels = 8, kernel_size = { 1, 1 } })
local mod = relay.Module(relay.Function({ x, w1, w2a, w2b, w3 }, out))
local params = { w1 = rnd({ 16, 8, 3, 3 }, 1), w2a = rnd({ 16, 16, 3, 3 }, 2, -0.3, 0.3),
                 w2b = rnd({ 16, 16, 1, 1 }, 3), w3 = rnd({ 8, 16, 1, 1 }, 4) }
local data = rnd({ 1, 8, 8, 8 }, 5)

local tasks = {}
local all_tasks = extract.autotvm(mod, { target = "llvm", params = params, ops = { "nn.conv2d" } })
-- the two 3x3 stride-1 convs have a winograd task each too; this graph's choices are among
-- the direct conv's layouts (16 channels: the executor's rule keeps them direct)
for _, t in ipairs(all_tasks) do
  if t.name == "conv2d_NCHWc.x86" then tasks[#tasks + 1] = t end
end
eq(#all_tasks - #tasks, 2, "two winograd workloads")
eq(#tasks, 4, "four conv workloads")

-- A synthetic log: per task 4 valid configs with made-up costs. The best alone has blocks
-- (ic, oc) = (2, 4) on every conv -- its output block never matches the next conv's input
-- block 2 -- while the second best keeps every block at 8, 0.5 us slower.
local function find_config(t, ic, oc, skip)
  local sp = t.config_space
  for i = 0, #sp - 1 do
    local cfg = sp:get(i)
    local a, b = gt.layout_of(cfg:entity())
    if a == ic and b == oc and i ~= skip then return cfg end
  end
  error(string.format("task %s: no config with blocks (%d, %d)", t.name, ic, oc))
end

local log = dir .. "/kernels.log"
local want_best, want_matched = {}, {}
do
  local lines = {}
  for i, t in ipairs(tasks) do
    local base = 1e-4 * i
    local ics, ocs = t.args[1][2][2], t.args[2][2][1]
    local best = find_config(t, 2, 4)
    local matched = find_config(t, math.min(8, ics), math.min(8, ocs))
    local other1 = find_config(t, 1, 1)
    local other2 = find_config(t, 1, 2)
    want_best[i], want_matched[i] = best.index, matched.index
    for _, e in ipairs({ { best, base }, { matched, base + 5e-7 }, { other1, base * 3 }, { other2, base * 4 } }) do
      lines[#lines + 1] = record.encode({ task = t, config = e[1] },
                                        { costs = { e[2] }, error_no = 0, all_cost = 1, timestamp = 0 })
    end
    -- a failed measurement is never a candidate
    lines[#lines + 1] = record.encode({ task = t, config = other1 }, { costs = { 1e-9 }, error_no = 4,
                                                                    all_cost = 1, timestamp = 0 })
  end
  file.write_all(log, lines)
end

local function workload_index(tuner, t)
  local wk = record.workload_key(t:workload())
  for v, var in ipairs(tuner.vars) do if var.key == wk then return v end end
  error("no variable for task " .. t.name)
end

-- The executor model's conversions for a choice against the layout_transform steps of the
-- network built from that choice's records (the graph's input and output edges included).
local function executor_model_matches_build(tuner, choice, what)
  local recs = {}
  for v, var in ipairs(tuner.vars) do
    local cd = var.cands[choice[v]]
    if cd.record then recs[#recs + 1] = record.encode(cd.record.inp, cd.record.res) end
  end
  local path = dir .. "/choice.log"
  file.write_all(path, recs)
  local lib = executor.build(tuner.mod, { target = "llvm", params = tuner.params, quiet = true,
                                          history = autotvm.apply_history_best(path, { tophub = false }) })
  local built, predicted = {}, {}
  for _, st in ipairs(lib.steps) do
    if st.name:find("layout_transform", 1, true) then
      built[#built + 1] = table.concat(st.args[1].shape, "x") .. " -> " .. table.concat(st.args[#st.args].shape, "x")
    end
  end
  local function blocked(shape, b)
    if not b then return table.concat(shape, "x") end
    return table.concat({ shape[1], math.floor(shape[2] / b), shape[3], shape[4], b }, "x")
  end
  for _, c in ipairs(tuner:layout_transforms(choice)) do
    predicted[#predicted + 1] = blocked(c.shape, c.src) .. " -> " .. blocked(c.shape, c.dst)
  end
  table.sort(built)
  table.sort(predicted)
  eq(table.concat(predicted, "; "), table.concat(built, "; "), what .. ": the model's transforms are the build's")
  return #built
end

-- the graph as the tuner sees it
do
  local tuner = autotvm.graph_tuner.DPTuner(mod, { target = "llvm", params = params, log = log, k = 3, quiet = true })
  eq(#tuner.convs, 4, "four convs")
  eq(#tuner.vars, 4, "four workloads")
  eq(tuner:num_tuned_workloads(), 4, "all tuned")
  for _, v in ipairs(tuner.vars) do eq(#v.cands, 3, "k = 3 candidates, the failed record left out") end
  local function conv_of(t) local v = workload_index(tuner, t)
    for _, c in ipairs(tuner.convs) do if c.var == v then return c end end
  end
  local k1, k2a, k2b, k3 = conv_of(tasks[1]), conv_of(tasks[2]), conv_of(tasks[3]), conv_of(tasks[4])
  eq(table.concat(k1.producers, ","), "input", "conv1 reads the graph input")
  eq(table.concat(k2a.producers, ","), tostring(k1.id), "conv2a reads conv1")
  eq(table.concat(k2b.producers, ","), tostring(k1.id), "conv2b reads conv1")
  local ps = {}
  for _, p in ipairs(k3.producers) do ps[#ps + 1] = p end
  table.sort(ps)
  local want = { k1.id, k2a.id, k2b.id }
  table.sort(want)
  eq(table.concat(ps, ","), table.concat(want, ","), "conv3 reads the branch and the residual")
  assert(k3.unpack and not k1.unpack and not k2a.unpack, "only the last conv reaches the graph output")

  -- executor model: the executor's own conversions. The residual adds run on the block of
  -- their first blocked operand (one of the branches, as the optimized graph orders them), so
  -- the other branch's and conv1's outputs are converted to it when their blocks differ;
  -- conv3's output is unpacked to NCHW for the graph's result; conv1 reads the NCHW input in
  -- place and every conv reads its data in the block it comes in.
  local conv_name = {}
  conv_name[k1.id], conv_name[k2a.id], conv_name[k2b.id], conv_name[k3.id] = "conv1", "conv2a", "conv2b", "conv3"
  local seen = {}
  for _, cv in ipairs(tuner.conversions) do
    seen[#seen + 1] = conv_name[cv.from] .. "->" .. (cv.to and conv_name[cv.to] or "NCHW")
  end
  table.sort(seen)
  local want_a = "conv1->conv2a conv2b->conv2a conv3->NCHW"
  local want_b = "conv1->conv2b conv2a->conv2b conv3->NCHW"
  local got = table.concat(seen, " ")
  assert(got == want_a or got == want_b, "the executor's conversions: expected " .. want_a .. " or " ..
         want_b .. ", got " .. got)
  local n = tuner:benchmark_layout_transform({ number = 2, repeats = 2 })
  assert(n > 0, "the executor model measures its transforms")
  local r = tuner:run()
  eq(r.method, "dp", "exact")
  assert(near(r.total, brute_force(tuner:problem())), "executor model: DP equals brute force")
  assert(r.total <= r.per_workload_best + 1e-15, "executor model: never worse than the per-workload best")
  executor_model_matches_build(tuner, r.choice, "residual graph, the tuner's choice")
  local best = {}
  for v = 1, #tuner.vars do best[v] = 1 end
  executor_model_matches_build(tuner, best, "residual graph, each workload's best")
  -- a choice whose blocks disagree: conv1 and the branches on different blocks
  local mixed = {}
  for v = 1, #tuner.vars do mixed[v] = 1 end
  local v1 = workload_index(tuner, tasks[1])
  for x, cd in ipairs(tuner.vars[v1].cands) do
    if cd.oc ~= tuner.vars[v1].cands[1].oc then mixed[v1] = x; break end
  end
  assert(mixed[v1] ~= 1, "conv1 has a candidate of another block")
  assert(executor_model_matches_build(tuner, mixed, "residual graph, disagreeing blocks") >= 2,
         "disagreeing blocks: a conversion between convs besides the output's")

  -- a caller's edge costs (a blocked executor's): a mismatch costs 1 ms, so every conv takes
  -- the matched configs
  local custom = autotvm.graph_tuner.DPTuner(mod, { target = "llvm", params = params, log = log, k = 3,
    quiet = true, layout = { name = "test", edge = function(_, src, dst) return src == dst and 0 or 1e-3 end } })
  r = custom:run()
  for i, t in ipairs(tasks) do
    local v = workload_index(custom, t)
    eq(custom.vars[v].cands[r.choice[v]].index, want_matched[i], "custom model: task " .. i .. " keeps blocks of 8")
  end
  local bf = brute_force(custom:problem())
  assert(near(r.total, bf), "custom model: DP equals brute force")
  assert(r.total < r.per_workload_best, "custom model: the joint choice beats the per-workload best")
end

-- executor model on a depthwise chain (mobilenet's pattern): conv1 1x1 (8 -> 16) -> relu ->
-- depthwise 3x3 (16) -> relu -> conv3 1x1 (16 -> 8). A depthwise conv runs on its own block,
-- so conv1's output is converted to it unless conv1's block is the same. conv1's best alone
-- has block 8 against the depthwise's 16; its second best has block 16 and costs 1 ns more,
-- less than any transform: the tuner takes it and the network runs without a conversion.
do
  local xd = relay.var("data", { shape = { 1, 8, 8, 8 } })
  local wa = relay.var("wa", { shape = { 16, 8, 1, 1 } })
  local wd = relay.var("wd", { shape = { 16, 1, 3, 3 } })
  local wb = relay.var("wb", { shape = { 8, 16, 1, 1 } })
  local a = relay.nn.relu(relay.nn.conv2d(xd, wa, { channels = 16, kernel_size = { 1, 1 } }))
  local d = relay.nn.relu(relay.nn.conv2d(a, wd, { padding = { 1, 1 }, groups = 16, channels = 16,
                                                   kernel_size = { 3, 3 } }))
  local dmod = relay.Module(relay.Function({ xd, wa, wd, wb },
    relay.nn.conv2d(d, wb, { channels = 8, kernel_size = { 1, 1 } })))
  local dparams = { wa = rnd({ 16, 8, 1, 1 }, 11), wd = rnd({ 16, 1, 3, 3 }, 12), wb = rnd({ 8, 16, 1, 1 }, 13) }
  local dtasks = extract.autotvm(dmod, { target = "llvm", params = dparams, ops = { "nn.conv2d" } })
  local byname = {}
  for _, t in ipairs(dtasks) do
    byname[t.name] = byname[t.name] or {}
    table.insert(byname[t.name], t)
  end
  eq(#(byname["depthwise_conv2d_NCHWc.x86"] or {}), 1, "one depthwise workload")
  eq(#(byname["conv2d_NCHWc.x86"] or {}), 2, "two 1x1 workloads")
  local c1
  for _, t in ipairs(byname["conv2d_NCHWc.x86"]) do if t.args[1][2][2] == 8 then c1 = t end end
  local lines = {}
  local function rec(t, cfg, cost)
    lines[#lines + 1] = record.encode({ task = t, config = cfg }, { costs = { cost }, error_no = 0, all_cost = 1, timestamp = 0 })
  end
  rec(c1, find_config(c1, 8, 8), 1e-5)
  rec(c1, find_config(c1, 8, 16), 1e-5 + 1e-9)
  local dwt = byname["depthwise_conv2d_NCHWc.x86"][1]
  rec(dwt, find_config(dwt, 16, 16), 2e-5)
  for _, t in ipairs(byname["conv2d_NCHWc.x86"]) do
    if t ~= c1 then rec(t, find_config(t, 16, 8), 3e-5) end
  end
  local dlog = dir .. "/dw.log"
  file.write_all(dlog, lines)
  local tuner = autotvm.graph_tuner.DPTuner(dmod, { target = "llvm", params = dparams, log = dlog, k = 2, quiet = true })
  local kinds = {}
  for _, cv in ipairs(tuner.conversions) do
    local from = tuner.convs[cv.from].depthwise and "depthwise" or tuner.convs[cv.from].data_shape[2] == 8 and "conv1" or "conv3"
    local to = cv.to and (tuner.convs[cv.to].depthwise and "depthwise" or "conv") or "NCHW"
    kinds[#kinds + 1] = from .. "->" .. to
  end
  table.sort(kinds)
  eq(table.concat(kinds, " "), "conv1->depthwise conv3->NCHW", "the depthwise chain's conversions")
  assert(tuner:benchmark_layout_transform({ number = 2, repeats = 2 }) > 0, "transforms measured")
  local best = {}
  for v = 1, #tuner.vars do best[v] = 1 end
  local n_best = executor_model_matches_build(tuner, best, "depthwise chain, each workload's best")
  local r = tuner:run()
  assert(near(r.total, brute_force(tuner:problem())), "depthwise chain: DP equals brute force")
  local n_chosen = executor_model_matches_build(tuner, r.choice, "depthwise chain, the tuner's choice")
  eq(n_best, 2, "each workload's best: conv1's block 8 converted for the depthwise conv, and the output")
  eq(n_chosen, 1, "the tuner's choice: only the output's conversion")
  assert(r.total < r.per_workload_best, "the joint choice beats each workload's best")
end

-- executor model on whole networks: random valid configs (some workloads left without a
-- record: the executor's fallback), the model's transforms against the layout_transforms
-- AlterOpLayout puts into the executor's graph for those configs (mobilenet: depthwise
-- blocks; resnet-50: residual adds; inception_v3: concatenations, nested ones, blocks that do
-- not divide every input's channels, so that some run on NCHW)
do
  local networks = require "networks"
  local strategy = require "tunelua.graph.strategy"
  local walk = require "tunelua.graph.walk"
  local tgt = strategy.parse_target("llvm", 1)
  local function lay(b) return b and ("NCHW" .. b .. "c") or "NCHW" end
  for _, case in ipairs({ { "mobilenet", 3 }, { "resnet-50", 2 }, { "inception_v3", 2 } }) do
    local net = case[1]
    local nmod, nparams = networks.get_network(net, { batch_size = 1 })
    local ntasks = extract.autotvm(nmod, { target = "llvm", params = nparams, ops = { "nn.conv2d" } })
    for seed = 1, case[2] do
      local st = seed * 7919
      local function rnd(n) st = (st * 48271) % 2147483647; return st % n end
      local lines = {}
      for _, t in ipairs(ntasks) do
        if rnd(4) > 0 then
          lines[#lines + 1] = record.encode({ task = t, config = t.config_space:get(rnd(#t.config_space)) },
            { costs = { 1e-4 + rnd(100) * 1e-6 }, error_no = 0, all_cost = 1, timestamp = 0 })
        end
      end
      local nlog = dir .. "/random.log"
      file.write_all(nlog, lines)
      local tuner = autotvm.graph_tuner.DPTuner(nmod, { target = "llvm", params = nparams, log = nlog, k = 1,
                                                       quiet = true, tophub = false })
      local one = {}
      for v = 1, #tuner.vars do one[v] = 1 end
      local model = {}
      for _, c in ipairs(tuner:layout_transforms(one)) do
        model[#model + 1] = table.concat(c.shape, "x") .. " " .. lay(c.src) .. "->" .. lay(c.dst)
      end
      local ctxs = { autotvm.apply_history_best(nlog, { tophub = false }) }
      local g = extract.optimize(nmod, { target = "llvm", params = nparams, fuse = false,
                                         conv_blocks = executor.conv_blocks(tgt, ctxs) }, 1)
      local built = {}
      for _, n in ipairs(walk.postorder(walk.main(g, 1).body)) do
        if n.kind == "call" and n.op == "layout_transform" and n.args[1].kind ~= "const" then
          local sh = walk.ttype(n.args[1]).shape
          if #sh == 5 then sh = { sh[1], sh[2] * sh[5], sh[3], sh[4] } end
          built[#built + 1] = table.concat(sh, "x") .. " " .. n.attrs.src_layout .. "->" .. n.attrs.dst_layout
        end
      end
      table.sort(model)
      table.sort(built)
      assert(#built > 0, net .. " seed " .. seed .. ": random blocks disagree somewhere")
      eq(table.concat(model, "; "), table.concat(built, "; "),
         net .. " seed " .. seed .. ": the executor model's transforms")
    end
  end
end

-- blocked model: transforms built and timed for real; the written records drive the executor
do
  local tuner = autotvm.graph_tuner.DPTuner(mod, { target = "llvm", params = params, log = log, k = 3,
                                                  layout = "blocked", quiet = true })
  local ok, err = pcall(tuner.run, tuner)
  assert(not ok and err:find("not measured: call tuner:benchmark_layout_transform()", 1, true), err)
  local n = tuner:benchmark_layout_transform({ number = 2, repeats = 2 })
  assert(n > 0, "transforms measured")
  for key, s in pairs(tuner.transforms) do
    assert(s > 0 and s < 1, "a measured time in seconds: " .. key .. " " .. tostring(s))
  end
  eq(tuner:benchmark_layout_transform(), 0, "each transform measured once")
  local r = tuner:run()
  local bf = brute_force(tuner:problem())
  assert(near(r.total, bf), "blocked model: DP equals brute force")
  assert(r.total <= r.per_workload_best + 1e-15, "never worse than the per-workload best")

  local path = dir .. "/graph_opt.log"
  eq(tuner:write_opt_sch2record_file(path), 4, "one record per conv workload")
  local recs = record.load_from_file(path)
  eq(#recs, 4, "records written")
  local ctx = autotvm.apply_history_best(path, { tophub = false })
  for _, t in ipairs(tasks) do
    local v = workload_index(tuner, t)
    local idx = ctx:query_task(t)
    eq(idx, tuner.vars[v].cands[r.choice[v]].index, "apply_history_best gives the chosen config")
  end
  local lib = executor.build(mod, { target = "llvm", params = params, history = path, quiet = true })
  eq(lib.num_tuned, 4, "every conv built with a chosen config")
  local m = executor.GraphModule(lib)
  m:set_input("data", data)
  m:run()
  reference.assert_close(m:get_output(0), reference.run(mod, params, { data = data })[1], { rtol = 1e-4, atol = 1e-6 })
end

-- bad options are named
do
  local ok, err = pcall(autotvm.graph_tuner.DPTuner, mod, { target = "llvm", params = params })
  assert(not ok and err:find("opts.log is required", 1, true), err)
  ok, err = pcall(autotvm.graph_tuner.DPTuner, mod, { params = params, log = log, k = 0 })
  assert(not ok and err:find("opts.k must be a positive integer, got 0", 1, true), err)
  ok, err = pcall(autotvm.graph_tuner.DPTuner, mod, { params = params, log = log, layout = "nhwc" })
  assert(not ok and err:find('opts.layout must be "executor", "blocked"', 1, true), err)
end

-- the flows' option
do
  local flow = require "tunelua.flow"
  eq(flow.parse_args({ "--graph-tuner" }, { target = "llvm" }).graph_tuner, true, "--graph-tuner")
  eq(flow.parse_args({}, { target = "llvm" }).graph_tuner, false, "no graph tuner by default")
end

util.cleanup(dir)
print("test_graph_tuner: ok")
