--- FuseOps: group operators by fusion pattern, as TVM's FuseOps does.
--
-- 1. An indexed forward graph: nodes in post order (call arguments left to right),
--    each with its pattern (the op's; var and non-scalar const nodes opaque, scalar
--    consts elemwise, tuples "tuple", tuple_get injective) and its output edges with
--    an edge pattern (the consumer's op pattern; a broadcast op whose argument has
--    the output's shape makes an elemwise edge). The function output and the
--    parameters are external references.
-- 2. The post-dominator tree: each node's parent is the least common ancestor of its
--    consumers, with the combined (max) pattern of the edges on the way.
-- 3. Three phases over the nodes in post order, merging a node's group into its
--    post-dominator's group when the rules allow (union-find groups):
--    phase 0: out_elemwise_fusable ops (conv2d, dense, pools, softmax) take their
--             elemwise post-dominator when every op in between is at most broadcast;
--             elemwise/broadcast ops fuse into an injective or reduction
--             post-dominator (paths injective, the sink may be anything fusable);
--    phase 1: injective ops (and tuples) fuse into an injective post-dominator;
--    phase 2: injective ops fuse into a tuple that was fused into injective ops.
--    A group never grows past max_depth nodes (256, TVM's relay.FuseOps.max_depth).
-- 4. Each group becomes a relay Function with attrs.Primitive = 1 whose parameters
--    (p0, p1, ... in first-use order of a depth-first walk of the group from its root)
--    are the values from outside the group (scalar constants stay inside); the group's
--    root is replaced by a call of that function.
local util = require "tunelua.relay.pass.util"
local ops = require "tunelua.relay.ops"

local M = {}

local PAT = ops.PAT
local ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE = PAT.elemwise, PAT.broadcast, PAT.injective, PAT.comm_reduce
local OUT_EWISE, TUPLE, OPAQUE = PAT.out_elemwise_fusable, PAT.tuple, PAT.opaque

M.max_depth = 256

local function same_shape(a, b)
  if not a or not b or not a.shape or not b.shape or #a.shape ~= #b.shape then return false end
  for i = 1, #a.shape do if a.shape[i] ~= b.shape[i] then return false end end
  return true
end

local function op_pattern(n)
  if type(n.op) ~= "string" then return OPAQUE end
  local e = ops.get(n.op)
  return e and e.pattern_code or OPAQUE
end

--- The indexed forward graph of a function body: {nodes = list in post order, index =
--- node -> graph node}; graph node = {ref, index, pattern, outputs = {{node, pattern}},
--- extern_ref}.
function M.forward_graph(f)
  local relay = require "tunelua.relay"
  local index, nodes = {}, {}
  local function gnode(x)
    local g = index[x]
    if not g then
      g = { ref = x, outputs = {}, pattern = OPAQUE, extern_ref = false }
      index[x] = g
    end
    return g
  end
  local function update(x, parent, pat)
    local g = gnode(x)
    if parent then g.outputs[#g.outputs + 1] = { node = parent, pattern = pat }
    else g.extern_ref = true end
  end
  for _, p in ipairs(f.params) do update(p, nil, OPAQUE) end
  update(f.body, nil, OPAQUE)
  -- Edges are recorded when the consumer is visited, before its children (TVM's
  -- recursive visitor): a node's outputs list follows the DFS pre-order of its
  -- consumers. Post order decides the node indices.
  local order = relay.post_order(f.body)
  local pre, seen = {}, { [f.body] = true }
  do
    local st = { { f.body, 0 } }
    pre[1] = f.body
    while #st > 0 do
      local top = st[#st]
      local ks = relay.kids(top[1])
      if top[2] < #ks then
        top[2] = top[2] + 1
        local c = ks[top[2]]
        if not seen[c] then
          seen[c] = true
          pre[#pre + 1] = c
          st[#st + 1] = { c, 0 }
        end
      else
        st[#st] = nil
      end
    end
  end
  for _, n in ipairs(pre) do
    local g = gnode(n)
    local k = n.kind
    if k == "call" then
      local pat = op_pattern(n)
      g.pattern = pat
      for _, a in ipairs(n.args) do
        local ep = pat
        if ep == BROADCAST and same_shape(n.type, a.type) then ep = ELEMWISE end
        update(a, g, ep)
      end
    elseif k == "tuple" then
      g.pattern = TUPLE
      for _, a in ipairs(n.fields) do update(a, g, INJECTIVE) end
    elseif k == "tuple_get" then
      local tt = n.tuple.type
      local all_tensor = true
      for _, ft in ipairs(tt.fields) do if not ft.shape then all_tensor = false end end
      if all_tensor then
        g.pattern = INJECTIVE
        update(n.tuple, g, INJECTIVE)
      else
        update(n.tuple, nil, OPAQUE)
      end
    elseif k == "const" then
      local dt = n.type.dtype
      local simple = dt == "int32" or dt == "int64" or dt == "float32" or dt == "float64" or dt == "bool"
      g.pattern = (#n.type.shape == 0 and simple) and ELEMWISE or OPAQUE
    else
      g.pattern = OPAQUE
    end
  end
  for i, n in ipairs(order) do
    local g = gnode(n)
    g.index = i
    nodes[i] = g
  end
  return { nodes = nodes, index = index }
end

-- ---- post-dominator tree ------------------------------------------------------------------

local function post_dom(graph)
  local n = #graph.nodes
  local tree = {}
  local function lca(lhs, rhs, ep)
    while lhs ~= rhs do
      if lhs == nil or rhs == nil then return nil, ep end
      if lhs.depth < rhs.depth then
        ep = math.max(ep, rhs.pattern)
        rhs = rhs.parent
      elseif rhs.depth < lhs.depth then
        ep = math.max(ep, lhs.pattern)
        lhs = lhs.parent
      else
        ep = math.max(ep, lhs.pattern)
        ep = math.max(ep, rhs.pattern)
        lhs = lhs.parent
        rhs = rhs.parent
      end
    end
    return lhs, ep
  end
  for i = n, 1, -1 do
    local g = graph.nodes[i]
    local t = { gnode = g }
    if g.extern_ref then
      t.depth, t.parent, t.pattern = 1, nil, OPAQUE
    else
      local ep = ELEMWISE
      local parent
      if #g.outputs > 0 then
        local l = g.outputs[1]
        parent = tree[l.node.index]
        ep = math.max(ep, l.pattern)
        for j = 2, #g.outputs do
          l = g.outputs[j]
          parent, ep = lca(parent, tree[l.node.index], ep)
          ep = math.max(ep, l.pattern)
        end
      end
      t.parent = parent
      t.depth = parent and parent.depth + 1 or 1
      t.pattern = ep
    end
    tree[i] = t
  end
  return tree
end

-- ---- partitioning -----------------------------------------------------------------------------

local function find_root(g)
  local r = g
  while r.parent do r = r.parent end
  -- path compression
  while g.parent and g.parent ~= r do
    local nxt = g.parent
    g.parent = r
    g = nxt
  end
  return r
end

function M.partition(graph, max_depth)
  max_depth = max_depth or M.max_depth
  local nodes = graph.nodes
  local groups = {}
  for i, g in ipairs(nodes) do
    groups[i] = { pattern = g.pattern, root_ref = g.ref, num_nodes = 1,
                  anchor_ref = g.pattern == OUT_EWISE and g.ref or nil }
  end
  local tree = post_dom(graph)
  local visited

  local function merge_from_to(child, parent)
    child, parent = find_root(child), find_root(parent)
    if child == parent then return end
    parent.num_nodes = parent.num_nodes + child.num_nodes
    child.parent = parent
    if child.anchor_ref then
      parent.anchor_ref = child.anchor_ref
      parent.pattern = math.max(child.pattern, parent.pattern)
    end
  end
  local function commit_(src, sink, target)
    if src == sink or visited[src] then return end
    visited[src] = true
    merge_from_to(groups[src.index], target)
    for _, l in ipairs(src.outputs) do commit_(l.node, sink, target) end
  end
  local function commit(src, sink)
    visited = {}
    commit_(src, sink, groups[sink.index])
  end
  local function check_(src, sink, fcond)
    if visited[src] then return true end
    visited[src] = true
    local gr = find_root(groups[src.index])
    if not fcond(gr.pattern, src == sink) then return false end
    if src == sink then return true end
    for _, l in ipairs(src.outputs) do
      if not check_(l.node, sink, fcond) then return false end
    end
    return true
  end
  local function check_path(src, sink, fcond)
    visited = {}
    for _, l in ipairs(src.outputs) do
      if not check_(l.node, sink, fcond) then return false end
    end
    return true
  end
  local function count_(src, sink)
    if src == sink or visited[src] then return 0 end
    visited[src] = true
    local gr = find_root(groups[src.index])
    local s = gr.num_nodes
    for _, l in ipairs(src.outputs) do s = s + count_(l.node, sink) end
    return s
  end
  local function count_with_child(child, dom_parent)
    visited = {}
    return find_root(groups[dom_parent.index]).num_nodes + count_(child, dom_parent)
  end

  local function le_injective(k) return k <= INJECTIVE end
  for phase = 0, 2 do
    for nid = 1, #nodes do
      local gnode = nodes[nid]
      local dom = tree[nid]
      local grp = groups[nid]
      if dom.parent and grp.pattern ~= OPAQUE then
        local dpg = dom.parent.gnode
        local dpi = dpg.index
        if count_with_child(gnode, dpg) <= max_depth then
          if phase == 2 then
            if grp.pattern <= INJECTIVE then
              local dparent_group = groups[dpi]
              local droot = find_root(dparent_group)
              if droot.pattern ~= TUPLE and dparent_group.pattern == TUPLE and droot.pattern <= INJECTIVE then
                if check_path(gnode, dpg, le_injective) then commit(gnode, dpg) end
              end
            end
          elseif find_root(grp) ~= find_root(groups[dpi]) and groups[dpi].pattern ~= TUPLE then
            if grp.pattern == OUT_EWISE then
              if phase == 0 and dom.pattern == ELEMWISE then
                if check_path(gnode, dpg, function(k) return k <= BROADCAST end) then
                  commit(gnode, dpg)
                end
              end
            elseif grp.pattern <= BROADCAST then
              if dom.pattern <= INJECTIVE or dom.pattern == COMM_REDUCE then
                local ok = check_path(gnode, dpg, function(k, is_sink)
                  if not is_sink then return k <= INJECTIVE end
                  return k <= BROADCAST or k == COMM_REDUCE or k == INJECTIVE or k == OUT_EWISE
                end)
                if ok then commit(gnode, dpg) end
              end
            elseif grp.pattern == INJECTIVE or grp.pattern == TUPLE then
              if phase == 1 and check_path(gnode, dpg, le_injective) then commit(gnode, dpg) end
            end
          end
        end
      end
    end
  end
  local gmap = {}
  for i, g in ipairs(nodes) do gmap[g.ref] = groups[i] end
  return gmap, groups
end

-- ---- building the fused functions --------------------------------------------------------------

local function transform(f, opts)
  local relay = require "tunelua.relay"
  local graph = M.forward_graph(f)
  local gmap = M.partition(graph, opts.max_depth)
  local ginfo = {}          -- root group -> {params, args, pmap}
  local memo = {}

  local function info(g)
    local i = ginfo[g]
    if not i then i = { params = {}, args = {}, pmap = {} }; ginfo[g] = i end
    return i
  end
  local function alloc_param(g, new_arg)
    local i = info(g)
    local p = i.pmap[new_arg]
    if p then return p end
    p = relay.var("p" .. #i.params, new_arg.type)
    i.params[#i.params + 1] = p
    i.args[#i.args + 1] = new_arg
    i.pmap[new_arg] = p
    return p
  end

  local mutate
  local function new_args(args, cur)
    local r = {}
    for i, a in ipairs(args) do
      local ag = find_root(gmap[a])
      local na = mutate(a)
      if ag ~= cur then r[i] = alloc_param(cur, na) else r[i] = na end
    end
    return r
  end
  local function make_function(g, body)
    local i = info(g)
    local fn = relay.Function(i.params, body, { Primitive = 1 })
    return relay.with_args({ kind = "call", op = fn }, i.args)
  end

  -- recursion depth: groups are small but chains between groups are long; recurse
  -- through the group only, and visit the graph in post order so every argument
  -- outside the current group is already memoized.
  function mutate(x)
    local m = memo[x]
    if m then return m end
    local k = x.kind
    local r
    if k == "var" or k == "const" then
      r = x
    elseif k == "call" and type(x.op) == "string" then
      local g = find_root(gmap[x])
      local na = new_args(x.args, g)
      local nc = relay.with_args(x, na)
      if g.root_ref == x then r = make_function(g, nc) else r = nc end
    elseif k == "call" then
      local na = {}
      for i, a in ipairs(x.args) do na[i] = mutate(a) end
      r = relay.with_args(x, na)
    elseif k == "tuple" then
      local g = find_root(gmap[x])
      if g.root_ref == x then
        local na = {}
        for i, a in ipairs(x.fields) do na[i] = mutate(a) end
        r = relay.tuple(na)
      else
        r = relay.tuple(new_args(x.fields, g))
      end
    elseif k == "tuple_get" then
      local g = find_root(gmap[x])
      if g.root_ref == x and find_root(gmap[x.tuple]) ~= g then
        r = relay.tuple_get(mutate(x.tuple), x.index)
      else
        local nt = new_args({ x.tuple }, g)[1]
        local nn = relay.tuple_get(nt, x.index)
        if g.root_ref == x then r = make_function(g, nn) else r = nn end
      end
    else
      r = x
    end
    memo[x] = r
    return r
  end
  -- group roots first, in post order (their inputs come earlier), so recursion only
  -- runs inside a group
  for _, n in ipairs(relay.post_order(f.body)) do
    local g = gmap[n] and find_root(gmap[n])
    if not g or g.root_ref == n then mutate(n) end
  end
  local body = mutate(f.body)
  return util.refunction(f, body)
end

M.transform = transform
M.pass = util.make("FuseOps", transform)
return M
