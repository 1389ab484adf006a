--- tunelua.autotvm.graph_tuner: pick one config per convolution for the whole network
--- (TVM's graph tuner, the x86 tutorial's step after kernel tuning).
--
--   local autotvm = require "tunelua.autotvm"
--   local gt = autotvm.graph_tuner.DPTuner(mod, {target = "llvm", params = params,
--                                               log = "kernels.log", k = 5})
--   gt:benchmark_layout_transform({number = 10, repeats = 3})
--   gt:run()
--   gt:write_opt_sch2record_file("graph_opt.log")   -- for apply_history_best
--
-- The network is optimized as the executor builds it (relay.optimize with the target and
-- params, up to fusion: the graph AlterOpLayout blocks); every nn.conv2d with an AutoTVM
-- template is a node, built with the template the executor takes for it (the cheapest
-- record's, Winograd by its shape rule where it has none: executor.conv_choice). The
-- kernel-tuning log gives each conv workload its k best distinct configs with their measured
-- costs (a workload without one keeps the config the executor takes: TopHub's unless
-- opts.tophub = false, else the fallback); a conv2d_NCHWc.x86 / depthwise_conv2d_NCHWc.x86
-- config implies a data layout NCHW[ic]c in and NCHW[oc]c out (the last factors of tile_ic
-- and tile_oc). The choice minimizes
--
--   sum over convs of the chosen config's kernel cost
--   + sum over graph edges conv u -> conv v of edge(u's config, v's config)
--   + per conv, the layout conversions at the graph's edges (pack, unpack)
--
-- where the last two come from a layout model (opts.layout):
--   "executor" (default)  what the graph executor pays: on x86 the graph runs blocked
--                         (AlterOpLayout, docs/executor.md) and each conv reads its data in
--                         the block its producer writes (ic_bn only splits the reduction),
--                         so no layout_transform runs between two convs; with layouts =
--                         false each conv reads and writes NCHW itself. Either way the
--                         configs of two conv neighbours do not interact: every edge costs
--                         0 and the choice is each workload's best. The chosen configs'
--                         tile_oc blocks are the layouts the built network runs on.
--   "blocked"             a network kept in NCHW[x]c between convs, as TVM's x86 flow runs
--                         it: an edge costs the layout_transform NCHW[oc_u]c -> NCHW[ic_v]c
--                         of v's input tensor when the blocks differ; a conv fed by the
--                         graph input (or a non-layout-aware op) pays NCHW -> NCHW[ic]c, one
--                         whose output reaches the graph output (or such an op) pays the
--                         unpack. benchmark_layout_transform builds and times each of these
--                         kernels for the shapes involved (tl.build, time_evaluator).
--   a table {edge = f(tensor_shape, src_block, dst_block) -> seconds, ...}: costs supplied
--                         by the caller (a blocked executor plugs its real costs in here).
--
-- Convs of one workload share one variable (apply_history_best keys configs by workload):
-- the solver works on workloads, node costs counted once per conv.
--
-- The solver (graph_tuner.solve) is exact dynamic programming by variable elimination:
-- workloads are eliminated one at a time, smallest intermediate table first, each step
-- keeping for every assignment of the neighbours the best choice of the eliminated one; a
-- chain or a tree needs tables of k^2 entries, a residual network k^3. When an elimination
-- would need a table larger than opts.max_table (default 2^20 entries; inception-like
-- graphs with many branches and large k), it falls back: the exact solution over a
-- spanning forest of the workload graph and the per-workload best are each refined by
-- iterated conditional modes (one workload at a time set to its best given its neighbours,
-- until nothing improves) and the cheaper result is kept -- never worse than the
-- per-workload best, because refinement only lowers the total.
local record = require "tunelua.autotvm.record"
local targets = require "tunelua.target"
local walk = require "tunelua.graph.walk"
local strategy = require "tunelua.graph.strategy"
local extract = require "tunelua.graph.extract"

local graph_tuner = {}

-- ---- the solver ---------------------------------------------------------------------------

-- A factor: vars (sorted list of variable ids), strides, tab (flat, 1-based), value at a
-- full assignment `at` (1-based choices) = tab[1 + sum (at[v] - 1) * stride].
local function factor_index(f, at)
  local i = 1
  for j, v in ipairs(f.vars) do i = i + (at[v] - 1) * f.strides[j] end
  return i
end

local function new_factor(vars, sizes)
  local strides, n = {}, 1
  for j, v in ipairs(vars) do strides[j] = n; n = n * sizes[v] end
  return { vars = vars, strides = strides, n = n, tab = {} }
end

local function problem_check(p, lvl)
  if type(p) ~= "table" or type(p.sizes) ~= "table" then
    error("graph_tuner.solve: expected {sizes = {...}, unary = {...}, pairs = {...}}", lvl + 1)
  end
  for v, k in ipairs(p.sizes) do
    if type(k) ~= "number" or k < 1 or k ~= math.floor(k) then
      error(string.format("graph_tuner.solve: variable %d: expected a positive number of choices, got %s",
                          v, tostring(k)), lvl + 1)
    end
  end
  for i, e in ipairs(p.pairs or {}) do
    if not p.sizes[e[1]] or not p.sizes[e[2]] or e[1] == e[2] then
      error(string.format("graph_tuner.solve: pair %d joins variables %s and %s; expected two " ..
                          "distinct variables of 1..%d", i, tostring(e[1]), tostring(e[2]), #p.sizes), lvl + 1)
    end
  end
end

-- pair cost: e.cost is a function(x, y) or a matrix cost[x][y]
local function pair_cost(e, x, y)
  local c = e.cost
  if type(c) == "function" then return c(x, y) end
  return c[x][y]
end

--- graph_tuner.total(problem, choice) -> the cost of a full choice (list of 1-based indices).
function graph_tuner.total(p, choice)
  local t = 0
  for v = 1, #p.sizes do
    local u = p.unary and p.unary[v]
    if u then t = t + u[choice[v]] end
  end
  for _, e in ipairs(p.pairs or {}) do t = t + pair_cost(e, choice[e[1]], choice[e[2]]) end
  return t
end

-- Exact minimization by variable elimination over the given pairs; nil when a table would
-- exceed max_table entries.
local function eliminate(p, plist, max_table)
  local sizes, nv = p.sizes, #p.sizes
  local factors = {}
  for v = 1, nv do
    local f = new_factor({ v }, sizes)
    local u = p.unary and p.unary[v]
    for x = 1, sizes[v] do f.tab[x] = u and u[x] or 0 end
    factors[#factors + 1] = f
  end
  for _, e in ipairs(plist) do
    local a, b = e[1], e[2]
    local vars = a < b and { a, b } or { b, a }
    local f = new_factor(vars, sizes)
    local at = {}
    for x = 1, sizes[a] do
      for y = 1, sizes[b] do
        at[a], at[b] = x, y
        f.tab[factor_index(f, at)] = pair_cost(e, x, y)
      end
    end
    factors[#factors + 1] = f
  end
  local alive, steps, constant = {}, {}, 0
  for v = 1, nv do alive[v] = true end
  for _ = 1, nv do
    -- the variable whose elimination builds the smallest table (ties: the lowest id)
    local best, best_n, best_scope
    for v = 1, nv do
      if alive[v] then
        local scope, n = {}, sizes[v]
        for _, f in ipairs(factors) do
          for _, w in ipairs(f.vars) do
            if w == v then
              for _, w2 in ipairs(f.vars) do
                if w2 ~= v and not scope[w2] then scope[w2] = true; n = n * sizes[w2] end
              end
              break
            end
          end
        end
        if not best_n or n < best_n then best, best_n, best_scope = v, n, scope end
      end
    end
    if best_n > max_table then return nil end
    local x = best
    local svars = {}
    for w in pairs(best_scope) do svars[#svars + 1] = w end
    table.sort(svars)
    local involved, rest = {}, {}
    for _, f in ipairs(factors) do
      local has = false
      for _, w in ipairs(f.vars) do if w == x then has = true; break end end
      if has then involved[#involved + 1] = f else rest[#rest + 1] = f end
    end
    local g = new_factor(svars, sizes)
    local arg = {}
    local at = {}
    for _, w in ipairs(svars) do at[w] = 1 end
    for i = 1, g.n do
      -- at: the assignment of svars numbered i (mixed radix, first var fastest)
      local bv, bx = math.huge, 1
      for xv = 1, sizes[x] do
        at[x] = xv
        local s = 0
        for _, f in ipairs(involved) do s = s + f.tab[factor_index(f, at)] end
        if s < bv then bv, bx = s, xv end
      end
      g.tab[i], arg[i] = bv, bx
      for _, w in ipairs(svars) do
        if at[w] < sizes[w] then at[w] = at[w] + 1; break end
        at[w] = 1
      end
    end
    steps[#steps + 1] = { x = x, g = g, arg = arg }
    alive[x] = false
    if #svars == 0 then
      constant = constant + g.tab[1]
      factors = rest
    else
      rest[#rest + 1] = g
      factors = rest
    end
  end
  -- back-substitution: a step's scope holds only variables eliminated after it
  local choice = {}
  for i = #steps, 1, -1 do
    local st = steps[i]
    choice[st.x] = st.arg[factor_index(st.g, choice)]
  end
  return choice, constant
end

-- Iterated conditional modes from a start choice: each variable in turn takes its best value
-- given the others, until a full sweep changes nothing. Only lowers the total.
local function refine(p, choice)
  local nv = #p.sizes
  local adj = {}
  for v = 1, nv do adj[v] = {} end
  for _, e in ipairs(p.pairs or {}) do
    adj[e[1]][#adj[e[1]] + 1] = e
    adj[e[2]][#adj[e[2]] + 1] = e
  end
  local c = {}
  for v = 1, nv do c[v] = choice[v] end
  local function local_cost(v, x)
    local u = p.unary and p.unary[v]
    local s = u and u[x] or 0
    for _, e in ipairs(adj[v]) do
      if e[1] == v then s = s + pair_cost(e, x, c[e[2]]) else s = s + pair_cost(e, c[e[1]], x) end
    end
    return s
  end
  local changed, sweeps = true, 0
  while changed and sweeps < 1000 do
    changed, sweeps = false, sweeps + 1
    for v = 1, nv do
      local cur = local_cost(v, c[v])
      for x = 1, p.sizes[v] do
        if x ~= c[v] then
          local s = local_cost(v, x)
          if s < cur - 1e-15 then c[v], cur, changed = x, s, true end
        end
      end
    end
  end
  return c
end

-- The per-variable best of the unary costs alone.
local function unary_best(p)
  local c = {}
  for v = 1, #p.sizes do
    local u, b = p.unary and p.unary[v], 1
    if u then for x = 2, p.sizes[v] do if u[x] < u[b] then b = x end end end
    c[v] = b
  end
  return c
end

-- The pairs of a spanning forest of the variable graph (union-find, pairs in order).
local function spanning_pairs(p)
  local parent = {}
  local function find(v)
    while parent[v] and parent[v] ~= v do v = parent[v] end
    return v
  end
  local out = {}
  for _, e in ipairs(p.pairs or {}) do
    local a, b = find(e[1]), find(e[2])
    if a ~= b then parent[a] = b; out[#out + 1] = e end
  end
  return out
end

--- graph_tuner.solve(problem, {max_table = 2^20}) -> choice, total, method
--- problem = {sizes = {k_1, ...}, unary = {{cost per choice}, ...} (optional per variable),
---            pairs = {{a, b, cost = matrix[x][y] or function(x, y)}, ...}}.
--- method: "dp" (exact) or "fallback" (spanning-forest DP and per-variable best, each refined).
function graph_tuner.solve(p, opts)
  problem_check(p, 2)
  opts = opts or {}
  local max_table = opts.max_table or 2 ^ 20
  local choice = eliminate(p, p.pairs or {}, max_table)
  if choice then return choice, graph_tuner.total(p, choice), "dp" end
  local best, best_total
  local forest = eliminate(p, spanning_pairs(p), math.huge)
  for _, start in ipairs({ unary_best(p), forest }) do
    local c = refine(p, start)
    local t = graph_tuner.total(p, c)
    if not best_total or t < best_total then best, best_total = c, t end
  end
  return best, best_total, "fallback"
end

-- ---- the network's convolutions -------------------------------------------------------

-- Ops that keep a blocked layout (they run on NCHW[x]c in a blocked executor): a conv's
-- output passing only through these reaches the next conv without a conversion.
local LAYOUT_AWARE = {
  ["nn.relu"] = true, ["nn.leaky_relu"] = true, clip = true, add = true, subtract = true,
  multiply = true, divide = true, maximum = true, minimum = true, ["nn.bias_add"] = true,
  ["nn.batch_norm"] = true, ["nn.pad"] = true, ["nn.max_pool2d"] = true, ["nn.avg_pool2d"] = true,
  ["nn.global_avg_pool2d"] = true, ["nn.global_max_pool2d"] = true, concatenate = true,
  sigmoid = true, tanh = true, negative = true, copy = true, cast = true, expand_dims = true,
  tuple = true,
}
graph_tuner.LAYOUT_AWARE = LAYOUT_AWARE

local INPUT = "input"   -- a value from the graph input or from a layout-unaware op

-- Walks the program: conv nodes {call, impls, data_shape, out_shape, producers = {conv
-- index or INPUT}, unpack = bool}. Calls inside fused functions are followed through the
-- functions' parameters.
--
-- Also the conversions the graph executor makes (the "executor" layout model), found by
-- following AlterOpLayout's blocked rewrite (relay/pass/AlterOpLayout.lua, its op sets):
-- each value's block comes from one conv (its source: the conv whose output block it
-- carries) or it is NCHW (INPUT). A conversion {shape, from = conv index or INPUT, to = conv
-- index or nil (NCHW), node} is a layout_transform of that value from from's block to to's
-- that runs whenever the two blocks differ:
--   * a depthwise conv runs on its own block (its config's tile_oc): its data is converted;
--     any other conv reads its data in the block it comes in (ic_bn only splits the
--     reduction), NCHW data in place;
--   * a broadcast binary op with a blocked operand runs on the block of the first one: a
--     blocked operand of another block is converted, a full-size NCHW one too;
--   * concatenate runs on its first blocked input's block (every other input converted);
--   * unary ops and pools pass the block on; every other op, a tuple and the function's
--     result take NCHW (the blocked value unpacked).
-- A transform is made once per (value, layout) in the executor; here once per (value,
-- converting conv), so two consumers of one value converting it to the same block through
-- different convs count twice.
local function find_convs(main, tgt)
  local alter = require "tunelua.relay.pass.AlterOpLayout"
  local convs = {}
  local memo = {}
  local srcm = {}              -- node -> conv index, INPUT, or false (a constant, no tensor)
  local conversions, made = {}, {}
  local function union(sets)
    local s, seen = {}, {}
    for _, set in ipairs(sets) do
      for _, x in ipairs(set) do if not seen[x] then seen[x] = true; s[#s + 1] = x end end
    end
    return s
  end
  local function sink(set)
    for _, x in ipairs(set) do if x ~= INPUT then convs[x].unpack = true end end
  end
  -- a source: INPUT, false (a constant), a conv index, or {id = conv index, chans = {...}}: a
  -- concatenation's output, on that conv's block where the block divides every input's
  -- channels, else NCHW (the concatenation runs on NCHW)
  local function blocked(src) return type(src) == "number" or type(src) == "table" end
  local function sid(src) if type(src) == "table" then return src.id end return src end
  local function schans(src) return type(src) == "table" and src.chans or nil end
  -- value node x (source src) converted to the block of `to` (a source; nil: NCHW)
  local function convert(x, src, to)
    if src == nil or src == false or (src == INPUT and to == nil) then return end
    local from, from_chans, to_id, to_chans = sid(src), schans(src), sid(to), schans(to)
    if from == to_id and not from_chans and not to_chans then return end
    local m = made[x]
    if not m then m = {}; made[x] = m end
    local key = to_id or "NCHW"
    if m[key] then return end
    m[key] = true
    conversions[#conversions + 1] = { shape = walk.ttype(x).shape, from = from, to = to_id, node = x,
                                      from_chans = from_chans, to_chans = to_chans }
  end
  local function plain(x) if blocked(srcm[x]) then convert(x, srcm[x], nil) end end
  local value
  local function eval(expr, env)
    for _, n in ipairs(walk.postorder(expr)) do
      if memo[n] == nil then
        if n.kind == "var" then
          memo[n] = env[n] and env[n].set or { INPUT }
          if env[n] then srcm[n] = env[n].src else srcm[n] = INPUT end
        elseif n.kind == "const" then
          memo[n], srcm[n] = {}, false
        elseif n.kind == "tuple" then
          local l = {}
          for _, f in ipairs(n.fields) do l[#l + 1] = memo[f]; plain(f) end
          memo[n], srcm[n] = union(l), INPUT
        elseif n.kind == "tuple_get" then
          memo[n], srcm[n] = memo[n.tuple], INPUT
        elseif n.kind == "call" then
          memo[n], srcm[n] = value(n)
        else
          memo[n], srcm[n] = {}, false
        end
      end
    end
    return memo[expr], srcm[expr]
  end
  -- the executor's source of a call's value (and its conversions), the blocked rewrite's rules
  local function source(n, conv_id)
    local op, args = n.op, n.args
    if conv_id then
      local c = convs[conv_id]
      local a, kty = n.attrs or {}, walk.ttype(args[2])
      local C, O, g = c.data_shape[2], kty.shape[1], a.groups or 1
      if g > 1 and g == C and O == C and kty.shape[2] == 1 then
        c.depthwise = true
        convert(args[1], srcm[args[1]], conv_id)
      end
      return conv_id
    end
    if alter.UNARY[op] and #args == 1 then return srcm[args[1]] end
    if alter.POOLS[op] and blocked(srcm[args[1]]) and ((n.attrs or {}).layout or "NCHW") == "NCHW" then
      return srcm[args[1]]
    end
    if alter.BINARY[op] and #args == 2 then
      local sa, sb = srcm[args[1]], srcm[args[2]]
      local b = blocked(sa) and sa or blocked(sb) and sb or nil
      if b then
        local full = walk.ttype(n).shape
        local nchw = {}   -- operands converted from NCHW: [1, C, 1, 1] (a bias) or full-size
        for i = 1, 2 do
          local v, s = args[i], srcm[args[i]]
          local sh = walk.ttype(v).shape
          local ones = true
          for _, d in ipairs(sh) do if d ~= 1 then ones = false end end
          if not blocked(s) and not ones then
            if #sh == 4 and #full == 4 and ((sh[1] == 1 and sh[3] == 1 and sh[4] == 1) or
                                            (sh[1] == full[1] and sh[3] == full[3] and sh[4] == full[4])) then
              nchw[i] = true
            else
              for _, x in ipairs(args) do plain(x) end   -- the op runs on NCHW
              return INPUT
            end
          end
        end
        for i = 1, 2 do
          local v, s = args[i], srcm[args[i]]
          if blocked(s) then convert(v, s, b)
          elseif nchw[i] and s == INPUT then convert(v, INPUT, b) end   -- a constant folds
        end
        return b
      end
    elseif op == "concatenate" then
      local first
      for _, v in ipairs(args) do if blocked(srcm[v]) then first = srcm[v]; break end end
      local ax = (n.attrs or {}).axis or 0
      if first and #walk.ttype(n).shape == 4 and (ax == 1 or ax == -3) then
        local chans = {}
        for _, c in ipairs(schans(first) or {}) do chans[#chans + 1] = c end
        for _, v in ipairs(args) do chans[#chans + 1] = walk.ttype(v).shape[2] end
        local out = { id = sid(first), chans = chans }
        for _, v in ipairs(args) do convert(v, srcm[v], out) end
        return out
      end
    end
    for _, v in ipairs(args) do plain(v) end
    return INPUT
  end
  function value(n)
    if walk.is_function(n.op) then
      local env = {}
      for i, prm in ipairs(n.op.params) do env[prm] = { set = memo[n.args[i]] or {}, src = srcm[n.args[i]] } end
      return eval(n.op.body, env)
    end
    if n.op == "nn.conv2d" then
      local impls = strategy.templates(n, tgt)
      if #impls > 0 then
        local data = walk.ttype(n.args[1])
        local out = walk.ttype(n)
        local c = { call = n, impls = impls, data_shape = data.shape, out_shape = out.shape,
                    producers = memo[n.args[1]] or {}, unpack = false }
        convs[#convs + 1] = c
        c.id = #convs
        return { c.id }, source(n, c.id)
      end
    end
    local ins = {}
    for _, a in ipairs(n.args) do ins[#ins + 1] = memo[a] or {} end
    local src = source(n, nil)
    if LAYOUT_AWARE[n.op] then return union(ins), src end
    sink(union(ins))
    return { INPUT }, src
  end
  local _, body_src = eval(main.body, {})
  sink(memo[main.body])
  if blocked(body_src) then convert(main.body, body_src, nil) end
  return convs, conversions
end

-- ---- candidates from the log -------------------------------------------------------------

local function entity_split_last(entity, name)
  for _, it in ipairs(entity) do
    if it[1] == name and it[2] == "sp" and type(it[3]) == "table" then return it[3][#it[3]] end
  end
  return nil
end

--- graph_tuner.layout_of(entity) -> ic_block, oc_block of a conv config's entity (the last
--- factors of tile_ic and tile_oc), or nil when the template blocks no channels.
function graph_tuner.layout_of(entity)
  return entity_split_last(entity, "tile_ic"), entity_split_last(entity, "tile_oc")
end

local function keys_of(str)
  local s = {}
  for _, k in ipairs(targets.info(str).keys) do s[k] = true end
  return s
end

-- The k best distinct configs per workload key, from records of a compatible target.
local function log_candidates(recs, tstr, k)
  local want = keys_of(tstr)
  local by_wk = {}
  for _, r in ipairs(recs) do
    if r.res.error_no == 0 then
      local ok = false
      for _, key in ipairs(targets.info(r.inp.target).keys) do if want[key] then ok = true; break end end
      if ok then
        local wk = record.workload_key(r.inp.workload)
        local ek = require("tunelua.json").dumps(r.inp.config.entity)
        local cost = record.mean_cost(r.res)
        local l = by_wk[wk]
        if not l then l = { seen = {} }; by_wk[wk] = l end
        local cur = l.seen[ek]
        if not cur then
          cur = { record = r, cost = cost, entity = r.inp.config.entity }
          l.seen[ek] = cur
          l[#l + 1] = cur
        elseif cost < cur.cost then
          cur.record, cur.cost = r, cost
        end
      end
    end
  end
  for _, l in pairs(by_wk) do
    table.sort(l, function(a, b) return a.cost < b.cost end)
    for i = #l, k + 1, -1 do l[i] = nil end
    l.seen = nil
  end
  return by_wk
end

-- ---- layout models ---------------------------------------------------------------------

local function layout_name(block)
  if not block then return "NCHW" end
  return "NCHW" .. block .. "c"
end

local function blocked_shape(shape, block)
  if not block then return shape end
  return { shape[1], math.floor(shape[2] / block), shape[3], shape[4], block }
end

local function transform_key(shape, src, dst)
  return table.concat(shape, "x") .. ":" .. layout_name(src) .. "->" .. layout_name(dst)
end

local MODELS = {}

-- What the graph executor runs: the blocked graph of AlterOpLayout, whose layout_transforms
-- find_convs lists (conversions), each measured as a layout_transform kernel.
MODELS.executor = {
  name = "executor",
  measured = true,
  conversions = true,
}

-- NCHW[x]c between convs, conversions as separate layout_transform kernels, measured.
MODELS.blocked = {
  name = "blocked",
  measured = true,
}

-- a list of distinct transforms {key, shape, src, dst} and its add(shape, src, dst) (a
-- conversion between equal layouts is none)
local function transform_list()
  local need, list = {}, {}
  return function(shape, src, dst)
    if src == dst then return end
    local key = transform_key(shape, src, dst)
    if not need[key] then
      need[key] = true
      list[#list + 1] = { key = key, shape = shape, src = src, dst = dst }
    end
  end, list
end

-- the transforms a blocked model needs
local function blocked_transforms(self)
  local add, list = transform_list()
  for _, c in ipairs(self.convs) do
    local v = self.vars[c.var]
    for _, cand in ipairs(v.cands) do
      if cand.ic then
        for _, pr in ipairs(c.producers) do
          if pr == INPUT then
            add(c.data_shape, nil, cand.ic)
          else
            for _, pc in ipairs(self.vars[self.convs[pr].var].cands) do
              if pc.oc then add(c.data_shape, pc.oc, cand.ic) end
            end
          end
        end
      end
      if cand.oc and c.unpack then add(c.out_shape, cand.oc, nil) end
    end
  end
  return list
end

-- the layout of a conversion's end whose conv has block b (nil: NCHW): a concatenation's
-- output (chans: its inputs' channels) is NCHW where b does not divide every one of them
local function eff(b, chans)
  if b and chans then
    for _, c in ipairs(chans) do if c % b ~= 0 then return nil end end
  end
  return b
end

-- the transforms the executor model needs: every conversion's, for every pair of candidate
-- blocks of its two ends (a conv's candidates' tile_oc blocks; NCHW for INPUT and the unpack)
local function executor_transforms(self)
  local add, list = transform_list()
  local function blocks(conv_id)
    if conv_id == nil or conv_id == INPUT then return { false } end
    local out, seen = {}, {}
    for _, cd in ipairs(self.vars[self.convs[conv_id].var].cands) do
      local b = cd.oc or false
      if not seen[b] then seen[b] = true; out[#out + 1] = b end
    end
    return out
  end
  for _, cv in ipairs(self.conversions) do
    for _, src0 in ipairs(blocks(cv.from)) do
      for _, dst0 in ipairs(blocks(cv.to)) do
        add(cv.shape, eff(src0 or nil, cv.from_chans), eff(dst0 or nil, cv.to_chans))
      end
    end
  end
  return list
end

-- ---- DPTuner -----------------------------------------------------------------------------

local DPTuner = {}
DPTuner.__index = DPTuner
graph_tuner.DPTuner_mt = DPTuner

--- graph_tuner.DPTuner(mod, {target = "llvm", log = path(s) or records, k = 5, params = {...},
---   layout = "executor" | "blocked" | {edge = f(shape, src, dst)}, max_table = 2^20,
---   tophub = true, winograd = "auto", quiet = false}) -> tuner
--- (tophub and winograd as the build will have them: relay.build's options of those names)
function graph_tuner.DPTuner(mod, opts)
  opts = opts or {}
  if opts.log == nil then
    error("DPTuner: opts.log is required (the kernel-tuning log: a file name or a list of records)", 2)
  end
  local k = opts.k or 5
  if type(k) ~= "number" or k < 1 or k ~= math.floor(k) then
    error("DPTuner: opts.k must be a positive integer, got " .. tostring(opts.k), 2)
  end
  local model = opts.layout or "executor"
  if type(model) == "string" then
    if not MODELS[model] then
      error(string.format("DPTuner: opts.layout must be \"executor\", \"blocked\" or a table with " ..
                          "an edge function, got %q", model), 2)
    end
    model = MODELS[model]
  elseif type(model) ~= "table" or type(model.edge) ~= "function" then
    error("DPTuner: opts.layout must be \"executor\", \"blocked\" or a table with an edge function", 2)
  end
  local tstr = opts.target or "llvm"
  local tgt = strategy.parse_target(tstr, 2)
  local recs = opts.log
  if type(recs) == "string" then recs = { recs } end
  if type(recs) ~= "table" then
    error("DPTuner: opts.log must be a file name or a list of file names or records, got " .. type(recs), 2)
  end
  if type(recs[1]) == "string" then
    local all = {}
    for _, path in ipairs(recs) do
      for _, r in ipairs(record.load_from_file(path)) do all[#all + 1] = r end
    end
    recs = all
  end
  -- the graph as AlterOpLayout sees it in the executor's build (before fusion: the first conv
  -- is the one whose data is the graph's input variable)
  local m = extract.optimize(mod, { target = tgt.str, params = opts.params or {}, fuse = false }, 2)
  local convs, conversions = find_convs(walk.main(m, 2), tgt)
  local cands = log_candidates(recs, tgt.str, k)
  -- the dispatch contexts of the build: the log's records, then TopHub's
  local executor = require "tunelua.graph.executor"
  local ctxs = { require("tunelua.autotvm.dispatch").apply_history_best(recs, { tophub = false }) }
  if opts.tophub ~= false then
    local th = require("tunelua.autotvm.tophub").context(tgt.str)
    if th then ctxs[#ctxs + 1] = th end
  end
  -- one variable per workload
  local vars, var_of = {}, {}
  for _, c in ipairs(convs) do
    -- the template the executor builds the conv with (by the records' costs; Winograd by
    -- its shape rule where it has no record), its k best configs of the log
    local impl, eic, eoc = executor.conv_choice(c.call, tgt, ctxs, opts.winograd)
    impl = impl or c.impls[1]
    local wl = { impl.name }
    for i, a in ipairs(impl.args) do wl[i + 1] = a end
    local wk = record.workload_key(wl)
    local list = cands[wk]
    local v = var_of[wk]
    if not v then
      local vc = {}
      if list and #list > 0 then
        for i, cd in ipairs(list) do
          local ic, oc = graph_tuner.layout_of(cd.entity)
          vc[i] = { cost = cd.cost, record = cd.record, ic = ic, oc = oc, index = cd.record.inp.config.index }
        end
      else
        -- no record in the log: the config the executor takes (TopHub's, else the template's
        -- fallback), with its layout, at no cost
        vc[1] = { cost = 0, ic = eic, oc = eoc, fallback = true, index = -1 }
      end
      vars[#vars + 1] = { workload = wl, key = wk, name = impl.name, cands = vc, count = 0 }
      v = #vars
      var_of[wk] = v
    end
    vars[v].count = vars[v].count + 1
    c.var = v
  end
  local self = setmetatable({ target = tgt.str, convs = convs, conversions = conversions, vars = vars,
                              model = model, k = k,
                              max_table = opts.max_table, quiet = opts.quiet, transforms = {},
                              mod = mod, params = opts.params or {} }, DPTuner)
  if not self.quiet then
    print(string.format("DPTuner: %d convolutions, %d workloads (%d with records), layout model %s",
                        #convs, #vars, self:num_tuned_workloads(), model.name or "custom"))
  end
  return self
end

function DPTuner:num_tuned_workloads()
  local n = 0
  for _, v in ipairs(self.vars) do if not v.cands[1].fallback then n = n + 1 end end
  return n
end

--- tuner:benchmark_layout_transform({number = 10, repeats = 3, min_repeat_ms = 0})
--- -> the number of transforms measured. Builds and times (tl.build, time_evaluator) every
--- layout_transform the layout model charges for the candidates' layouts; the executor model
--- charges none.
function DPTuner:benchmark_layout_transform(opts)
  opts = opts or {}
  if not self.model.measured then return 0 end
  local te = require "tunelua.te"
  local topi = require "tunelua.topi"
  local build = require "tunelua.build"
  local nd = require "tunelua.nd"
  local n = 0
  for _, t in ipairs(self.model.conversions and executor_transforms(self) or blocked_transforms(self)) do
    if not self.transforms[t.key] then
      local shape = blocked_shape(t.shape, t.src)
      local A = te.placeholder(shape, "float32", "A")
      local B = topi.layout_transform(A, layout_name(t.src), layout_name(t.dst))
      local s = topi.default_schedule(B, self.target)
      local f = build.build(s, { A, B }, self.target)
      local a = nd.random_uniform(shape, { seed = 1 })
      local b = nd.empty(B.shape, "float32")
      local r = f:time_evaluator({ number = opts.number or 10, repeats = opts.repeats or opts["repeat"] or 3,
                                   min_repeat_ms = opts.min_repeat_ms or 0 })(a, b)
      local best = math.huge
      for i = 1, #r do if r[i] < best then best = r[i] end end
      self.transforms[t.key] = best
      n = n + 1
    end
  end
  if not self.quiet then
    print(string.format("DPTuner: measured %d layout transforms", n))
  end
  return n
end

-- the seconds of a conversion shape: src -> dst under the layout model
function DPTuner:transform_cost(shape, src, dst)
  if src == dst then return 0 end
  if self.model.edge then return self.model.edge(shape, src, dst) end
  local key = transform_key(shape, src, dst)
  local c = self.transforms[key]
  if not c then
    error("DPTuner: layout transform " .. key .. " not measured: call tuner:benchmark_layout_transform() " ..
          "before tuner:run()", 3)
  end
  return c
end

-- the executor model's terms: each conversion as a pair (two workloads), or a unary cost
-- (one end NCHW, or both ends one workload: the same block, no cost)
function DPTuner:conversion_terms(unary, pairs_)
  for _, cv in ipairs(self.conversions) do
    local fv = cv.from ~= INPUT and self.convs[cv.from].var or nil
    local tv = cv.to and self.convs[cv.to].var or nil
    if fv and tv and fv ~= tv then
      local fc, tc = self.vars[fv].cands, self.vars[tv].cands
      local m, any = {}, false
      for x, a in ipairs(fc) do
        m[x] = {}
        for y, b in ipairs(tc) do
          m[x][y] = self:transform_cost(cv.shape, eff(a.oc, cv.from_chans), eff(b.oc, cv.to_chans))
          any = any or m[x][y] ~= 0
        end
      end
      if any then pairs_[#pairs_ + 1] = { fv, tv, cost = m } end
    elseif fv and not tv then
      for x, a in ipairs(self.vars[fv].cands) do
        unary[fv][x] = unary[fv][x] + self:transform_cost(cv.shape, eff(a.oc, cv.from_chans), nil)
      end
    elseif tv and not fv then
      for y, b in ipairs(self.vars[tv].cands) do
        unary[tv][y] = unary[tv][y] + self:transform_cost(cv.shape, nil, eff(b.oc, cv.to_chans))
      end
    elseif fv and fv == tv then
      -- both ends on one workload's block: a cost only where a concatenation makes one NCHW
      for x, a in ipairs(self.vars[fv].cands) do
        unary[fv][x] = unary[fv][x] + self:transform_cost(cv.shape, eff(a.oc, cv.from_chans), eff(a.oc, cv.to_chans))
      end
    end
  end
end

--- tuner:layout_transforms(choice) -> the conversions the executor makes for a choice (an index
--- per workload; default the tuner's): {shape, src, dst, from, to} with src ~= dst, the
--- blocks (nil: NCHW) of its two ends. Under the executor model, these are the network's
--- layout_transform steps for the chosen configs.
function DPTuner:layout_transforms(choice)
  choice = choice or self.choice
  if not choice then error("DPTuner:layout_transforms: no choice (call tuner:run() first)", 2) end
  local function block(conv_id)
    if conv_id == nil or conv_id == INPUT then return nil end
    local v = self.convs[conv_id].var
    return self.vars[v].cands[choice[v]].oc
  end
  local out, seen = {}, {}
  for _, cv in ipairs(self.conversions) do
    local src, dst = eff(block(cv.from), cv.from_chans), eff(block(cv.to), cv.to_chans)
    -- one transform per (value, layout), as the executor makes them
    local key = tostring(dst)
    seen[cv.node] = seen[cv.node] or {}
    if src ~= dst and not seen[cv.node][key] then
      seen[cv.node][key] = true
      out[#out + 1] = { shape = cv.shape, src = src, dst = dst, from = cv.from, to = cv.to }
    end
  end
  return out
end

--- tuner:problem() -> the solver's problem over the workloads (see graph_tuner.solve).
function DPTuner:problem()
  local sizes, unary = {}, {}
  for v, var in ipairs(self.vars) do
    sizes[v] = #var.cands
    unary[v] = {}
    for x, cd in ipairs(var.cands) do unary[v][x] = cd.cost * var.count end
  end
  local pairs_ = {}
  if self.model.conversions then
    self:conversion_terms(unary, pairs_)
    return { sizes = sizes, unary = unary, pairs = pairs_ }
  end
  for _, c in ipairs(self.convs) do
    local cv = self.vars[c.var].cands
    for x, cd in ipairs(cv) do
      if cd.ic and self:has_producer(c, INPUT) then
        unary[c.var][x] = unary[c.var][x] + self:transform_cost(c.data_shape, nil, cd.ic)
      end
      if cd.oc and c.unpack then
        unary[c.var][x] = unary[c.var][x] + self:transform_cost(c.out_shape, cd.oc, nil)
      end
    end
    for _, pr in ipairs(c.producers) do
      if pr ~= INPUT then
        local pc = self.convs[pr]
        local pv, v = pc.var, c.var
        local pcands = self.vars[pv].cands
        if pv == v then
          -- one workload feeding itself: the same config on both ends
          for x, cd in ipairs(cv) do
            if cd.ic and cd.oc then unary[v][x] = unary[v][x] + self:transform_cost(c.data_shape, cd.oc, cd.ic) end
          end
        else
          local m, any = {}, false
          for x, pcd in ipairs(pcands) do
            m[x] = {}
            for y, cd in ipairs(cv) do
              m[x][y] = (pcd.oc and cd.ic) and self:transform_cost(c.data_shape, pcd.oc, cd.ic) or 0
              any = any or m[x][y] ~= 0
            end
          end
          -- an edge that costs nothing whatever the choices does not join the workloads
          if any then pairs_[#pairs_ + 1] = { pv, v, cost = m } end
        end
      end
    end
  end
  return { sizes = sizes, unary = unary, pairs = pairs_ }
end

function DPTuner:has_producer(c, what)
  for _, p in ipairs(c.producers) do if p == what then return true end end
  return false
end

--- tuner:run() -> {choice = {index per workload}, total = s, method = "dp"|"fallback",
--- per_workload_best = s}: the total under the layout model of the choice and of each
--- workload's best config alone.
function DPTuner:run()
  local p = self:problem()
  local choice, total, method = graph_tuner.solve(p, { max_table = self.max_table })
  self.choice = choice
  local best = {}
  for v = 1, #p.sizes do best[v] = 1 end   -- candidates are sorted by cost
  local r = { choice = choice, total = total, method = method, per_workload_best = graph_tuner.total(p, best) }
  self.result = r
  if not self.quiet then
    print(string.format("DPTuner: %s over %d workloads: %.4f ms (each workload's best alone: %.4f ms)",
                        method == "dp" and "exact DP" or "fallback (refined spanning-forest DP)", #p.sizes,
                        total * 1e3, r.per_workload_best * 1e3))
  end
  return r
end

--- tuner:get_optimal_records() -> list of {inp, res}: the chosen record per tuned workload.
function DPTuner:get_optimal_records()
  if not self.choice then error("DPTuner: call tuner:run() first", 2) end
  local out = {}
  for v, var in ipairs(self.vars) do
    local cd = var.cands[self.choice[v]]
    if cd.record then out[#out + 1] = cd.record end
  end
  return out
end

--- tuner:pin(history) -> history: the chosen records pinned over an apply_history_best
--- context's own (the build then takes them; other workloads keep the context's best).
function DPTuner:pin(history)
  for _, r in ipairs(self:get_optimal_records()) do history:update(r.inp.target, r.inp.workload, r) end
  return history
end

--- graph_tuner.tune_log(mod, {target, params, log = LOG, ...}) -> tuner, run: a DPTuner over
--- every trial of a kernel-tuning log (LOG and, where it exists, LOG.trials, which the flows
--- keep: LOG itself holds one record per workload), its layout transforms measured and run.
--- The other options are DPTuner's.
function graph_tuner.tune_log(mod, opts)
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  if type(o.log) ~= "string" then error("graph_tuner.tune_log: opts.log must be a log file name", 2) end
  local logs = { o.log }
  if require("tunelua.file").exists(o.log .. ".trials") then logs[2] = o.log .. ".trials" end
  o.log = logs
  local tuner = graph_tuner.DPTuner(mod, o)
  tuner:benchmark_layout_transform()
  return tuner, tuner:run()
end

--- tuner:write_opt_sch2record_file(path) -> number of records: one record per tuned conv
--- workload, its chosen config (the log's line), written atomically.
function DPTuner:write_opt_sch2record_file(path)
  if type(path) ~= "string" then error("write_opt_sch2record_file: expected a file name", 2) end
  if not self.choice then error("DPTuner: call tuner:run() before write_opt_sch2record_file", 2) end
  local lines = {}
  for _, r in ipairs(self:get_optimal_records()) do lines[#lines + 1] = record.encode(r.inp, r.res) end
  require("tunelua.file").write_all(path, lines)
  return #lines
end

return graph_tuner
