-- Blocked layouts through the x86 graph (AlterOpLayout with conv_blocks, the NCHW[x]c topi
-- ops, the x86 templates' NCHW[x]c computes): where layout_transform appears (only at the
-- graph's edges and where two neighbours disagree on the block), which ops run blocked, the
-- blocks following the dispatch context's configs, and the built networks against the
-- reference interpreter (the unoptimized NCHW graph), fp32 rel. error < 1e-4.
local nd = require "tunelua.nd"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local strategy = require "tunelua.graph.strategy"
local gt = require "tunelua.autotvm.graph_tuner"
local reference = require "networks.reference"
local check = require "tests.lua.lib.executor_check"

local eq = check.eq

local function rnd(shape, seed, lo, hi)
  return nd.random_uniform(shape, { seed = seed, low = lo or -1, high = hi or 1 })
end

-- op name -> count, over the optimized (unfused) main function; transforms of constants
-- are folded by FoldConstant, so what remains moves activations
local function census(mod, params, blocks)
  local m = relay.optimize(mod, { params = params, fuse = false, conv_blocks = blocks })
  local f = relay.main_of(m, "census", 1)
  local n, layouts = {}, {}
  for _, x in ipairs(relay.post_order(f.body)) do
    if x.kind == "call" and type(x.op) == "string" then
      n[x.op] = (n[x.op] or 0) + 1
      if x.op == "layout_transform" then
        layouts[#layouts + 1] = x.attrs.src_layout .. "->" .. x.attrs.dst_layout
      end
    end
  end
  table.sort(layouts)
  return n, table.concat(layouts, " "), f
end

-- a residual chain: conv+bias+relu, conv+bias, add (residual), relu, max pool, 1x1 conv,
-- global pool, flatten, dense
local function chain()
  local x = relay.var("data", { shape = { 1, 16, 8, 8 } })
  local w1 = relay.var("w1", { shape = { 16, 16, 3, 3 } })
  local b1 = relay.var("b1", { shape = { 16 } })
  local w2 = relay.var("w2", { shape = { 16, 16, 3, 3 } })
  local b2 = relay.var("b2", { shape = { 16 } })
  local w3 = relay.var("w3", { shape = { 32, 16, 1, 1 } })
  local wd = relay.var("wd", { shape = { 10, 32 } })
  local function conv(d, w, c, k)
    return relay.nn.conv2d(d, w, { padding = { (k - 1) / 2, (k - 1) / 2 }, channels = c, kernel_size = { k, k } })
  end
  local r1 = relay.nn.relu(relay.nn.bias_add(conv(x, w1, 16, 3), b1))
  local s = relay.nn.relu(relay.add(relay.nn.bias_add(conv(r1, w2, 16, 3), b2), r1))
  local p = relay.nn.max_pool2d(s, { pool_size = { 2, 2 }, strides = { 2, 2 } })
  local g = relay.nn.global_avg_pool2d(conv(p, w3, 32, 1))
  local out = relay.nn.dense(relay.nn.batch_flatten(g), wd)
  local mod = relay.Module(relay.Function({ x, w1, b1, w2, b2, w3, wd }, out))
  local params = { w1 = rnd({ 16, 16, 3, 3 }, 1, -0.2, 0.2), b1 = rnd({ 16 }, 2),
                   w2 = rnd({ 16, 16, 3, 3 }, 3, -0.2, 0.2), b2 = rnd({ 16 }, 4),
                   w3 = rnd({ 32, 16, 1, 1 }, 5), wd = rnd({ 10, 32 }, 6) }
  return mod, params
end

do
  local mod, params = chain()
  -- equal blocks everywhere: a transform only at the edge before flatten (the first conv
  -- reads the NCHW input in place and writes NCHW8c)
  local n, layouts = census(mod, params, function() return 8, 8 end)
  eq(n["nn.contrib_conv2d_NCHWc"], 3, "blocked convs")
  eq(n["nn.conv2d"], nil, "no NCHW conv left")
  eq(n.layout_transform, 1, "layout transforms with equal blocks (" .. layouts .. ")")
  eq(layouts, "NCHW8c->NCHW", "the edges' transforms")
  eq(n["nn.max_pool2d"], 1, "the pool")
  -- the second conv's config asks for NCHW4c data: it reads the NCHW8c its producer writes
  -- (its ic block only splits the reduction), so nothing converts
  local calls = 0
  n, layouts = census(mod, params, function()
    calls = calls + 1
    if calls == 2 then return 4, 8 end
    return 8, 8
  end)
  eq(layouts, "NCHW8c->NCHW", "a conv takes its producer's block")
  -- the second conv writes NCHW16c, the residual add's other operand is NCHW8c: one
  -- conversion where the two disagree
  calls = 0
  n, layouts = census(mod, params, function()
    calls = calls + 1
    if calls == 2 then return 8, 16 end
    return 8, 8
  end)
  eq(n.layout_transform, 2, "one conversion where the blocks disagree (" .. layouts .. ")")
  eq(layouts, "NCHW8c->NCHW NCHW8c->NCHW16c", "the conversion")
  -- the block of the last conv's output differs from the pool's: the pool runs on NCHW16c
  n, layouts = census(mod, params, function(call)
    if call.args[2].type.shape[1] == 32 then return 8, 16 end
    return 8, 8
  end)
  eq(layouts, "NCHW16c->NCHW", "global pool on the last conv's block")
  -- no blocks (another target, or layouts = false): no transform at all
  n = census(mod, params, nil)
  eq(n.layout_transform, nil, "no transform without conv_blocks")
  eq(n["nn.conv2d"], 3, "NCHW convs")

  -- built with the fallback configs' blocks, and with layouts = false: both match the reference
  local x = rnd({ 1, 16, 8, 8 }, 7)
  local lib = check.check_graph(mod, params, { data = x }, nil, "blocked chain")
  local names = {}
  for _, st in ipairs(lib.steps) do names[#names + 1] = st.name end
  local all = table.concat(names, " ")
  assert(all:find("contrib_conv2d_NCHWc_add_add_nn_relu", 1, true),
         "conv + bias + residual add + relu in one group: " .. all)
  -- the memory report: the weights as deployed (each array once: 16*16*9*2 + 32*16 + 10*32
  -- floats, the biases and the rest), the input and output, peak and total
  local mem = lib:memory()
  local wbytes = 4 * (16 * 16 * 9 * 2 + 32 * 16 + 10 * 32 + 16 + 16)
  eq(mem.weights, wbytes, "weight bytes")
  eq(mem.io, 4 * (16 * 8 * 8 + 10), "input and output bytes")
  eq(mem.peak, mem.planned + mem.weights + mem.io, "peak")
  eq(mem.total, mem.intermediates + mem.weights + mem.io, "total")
  assert(mem.planned < mem.intermediates, "the plan reuses buffers")
  local lib0 = check.check_graph(mod, params, { data = x }, { layouts = false }, "NCHW chain")
  eq(lib0:memory().weights, wbytes, "weight bytes, NCHW graph (packed weights replace the originals)")
  assert(not table.concat((function() local t = {} for i, s in ipairs(lib0.steps) do t[i] = s.name end return t end)(), " ")
           :find("contrib", 1, true), "layouts = false keeps NCHW convs")
end

do
  -- the blocks follow the dispatch context: a context that answers one config index per
  -- task (as apply_history_best does for a log) decides each conv's layout
  local mod, params = chain()
  local tgt = strategy.parse_target("llvm")
  local tm = require "tunelua.autotvm.task"
  local want = {}      -- task args -> ic, oc of the chosen config
  local ctx = {
    query = function() return nil end,
    query_task = function(_, task)
      -- pick the config with the smallest channel blocks that are > 1
      local best, bi
      for i = 0, #task.config_space - 1 do
        local ic, oc = gt.layout_of(task.config_space:get(i):entity())
        if ic and ic > 1 and oc > 1 then
          local key = ic * 100 + oc
          if not best or key < best then best, bi = key, i end
        end
      end
      local ic, oc = gt.layout_of(task.config_space:get(bi):entity())
      want[strategy.args_json(task.args)] = { ic, oc }
      return bi
    end,
  }
  local blocks = executor.conv_blocks(tgt, { ctx })
  local n, layouts, f = census(mod, params, blocks)
  eq(n["nn.contrib_conv2d_NCHWc"], 3, "blocked convs under the context")
  -- every blocked conv's layouts are its chosen config's
  local seen = 0
  for _, c in ipairs(relay.post_order(f.body)) do
    if c.kind == "call" and c.op == "nn.contrib_conv2d_NCHWc" then
      local impl = strategy.templates(c, tgt)[1]
      local w = want[strategy.args_json(impl.args)]
      eq(c.attrs.out_layout, "NCHW" .. w[2] .. "c", "out layout from the config")
      -- the data comes as its producer writes it: the graph's input NCHW, else blocked
      local d = c.args[1]
      eq(c.attrs.data_layout, d.kind == "var" and "NCHW" or "NCHW" .. d.type.shape[5] .. "c",
         "data layout: the producer's")
      seen = seen + 1
    end
  end
  eq(seen, 3, "convs checked")
  eq(layouts, "NCHW2c->NCHW", "equal blocks: one transform, before flatten")
  check.check_graph(mod, params, { data = rnd({ 1, 16, 8, 8 }, 8) }, { history = ctx, tophub = false },
                    "chain under the context")
  local _ = tm
end

do
  -- depthwise + pointwise (mobilenet's block), avg pool, concatenation of two branches
  local x = relay.var("data", { shape = { 1, 16, 10, 10 } })
  local dw = relay.var("dw", { shape = { 16, 1, 3, 3 } })
  local pw = relay.var("pw", { shape = { 16, 16, 1, 1 } })
  local pb = relay.var("pb", { shape = { 8, 16, 3, 3 } })
  local d = relay.nn.relu(relay.nn.conv2d(x, dw, { padding = { 1, 1 }, groups = 16, channels = 16,
                                                   kernel_size = { 3, 3 } }))
  local a = relay.nn.conv2d(d, pw, { channels = 16, kernel_size = { 1, 1 } })
  local b = relay.nn.conv2d(d, pb, { padding = { 1, 1 }, channels = 8, kernel_size = { 3, 3 } })
  local cat = relay.nn.relu(relay.concatenate({ a, b }, 1))
  local p = relay.nn.avg_pool2d(cat, { pool_size = { 2, 2 }, strides = { 2, 2 } })
  local mod = relay.Module(relay.Function({ x, dw, pw, pb }, p))
  local params = { dw = rnd({ 16, 1, 3, 3 }, 21), pw = rnd({ 16, 16, 1, 1 }, 22, -0.3, 0.3),
                   pb = rnd({ 8, 16, 3, 3 }, 23, -0.2, 0.2) }
  local n, layouts = census(mod, params, function() return 8, 8 end)
  eq(n["nn.contrib_depthwise_conv2d_NCHWc"], 1, "blocked depthwise")
  eq(n["nn.contrib_conv2d_NCHWc"], 2, "blocked convs")
  eq(n.concatenate, 1, "concatenation")
  eq(layouts, "NCHW->NCHW8c NCHW8c->NCHW", "transforms at the edges only")
  check.check_graph(mod, params, { data = rnd({ 1, 16, 10, 10 }, 24) }, nil, "depthwise-concat")
  -- branches of different blocks: the concatenation takes the first one's
  n, layouts = census(mod, params, function(call)
    if call.args[2].type.shape[1] == 8 then return 8, 4 end
    return 8, 8
  end)
  eq(layouts, "NCHW->NCHW8c NCHW4c->NCHW8c NCHW8c->NCHW", "one conversion into the concatenation")
end

do
  -- the reference runs the blocked ops themselves (the NCHW[x]c topi computes) like NCHW
  local x = rnd({ 1, 8, 6, 6 }, 31)
  local w = rnd({ 12, 8, 3, 3 }, 32)
  local dv = relay.var("d", { shape = { 1, 8, 6, 6 } })
  local wv = relay.var("w", { shape = { 12, 8, 3, 3 } })
  local plain = relay.nn.conv2d(dv, wv, { strides = { 2, 2 }, padding = { 1, 0, 0, 1 }, channels = 12,
                                          kernel_size = { 3, 3 } })
  local blocked = relay.layout_transform(relay.call("nn.contrib_conv2d_NCHWc", {
    relay.layout_transform(dv, "NCHW", "NCHW4c"), relay.layout_transform(wv, "OIHW", "OIHW4o") },
    { strides = { 2, 2 }, padding = { 1, 0, 0, 1 } }), "NCHW4c", "NCHW")
  eq(table.concat(blocked.type.shape, ","), table.concat(plain.type.shape, ","), "blocked conv output shape")
  local r1 = reference.run(relay.Module(relay.Function({ dv, wv }, plain)), {}, { d = x, w = w })[1]
  local r2 = reference.run(relay.Module(relay.Function({ dv, wv }, blocked)), {}, { d = x, w = w })[1]
  reference.assert_close(r2, r1, { rtol = 1e-5 })
  -- bad operands name what was expected
  local ok, err = pcall(relay.call, "nn.contrib_conv2d_NCHWc", { dv, wv }, {})
  assert(not ok and tostring(err):find("5-D", 1, true), tostring(err))
  ok, err = pcall(relay.nn.max_pool2d, relay.layout_transform(dv, "NCHW", "NCHW4c"),
                  { pool_size = { 2, 2 }, layout = "NCHW8c" })
  assert(not ok and tostring(err):find("block", 1, true), tostring(err))
end

-- a network the other executor tests do not cover, blocked (TopHub's configs: mixed blocks)
check.report_network("vgg-16", "NCHW", 32)

print("test_alter_layout_x86: ok")
