-- tunelua.relay: builders and eager type inference (shapes of every op, error messages
-- naming op, layer and shapes), TVM-style printing, functions/modules/params, the
-- traversal helpers, and every pass: numerics before/after (evaluated node by node
-- through topi kernels built for "c") and the structure each pass must produce.
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"
local ops = require "tunelua.relay.ops"
local eval = require "tunelua.relay.eval"

local function shape_eq(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end
local function S(s) return ops.shape_str(s) end
local function check_shape(node, want, what)
  assert(node.type and node.type.shape, (what or "") .. ": no tensor type")
  assert(shape_eq(node.type.shape, want),
         string.format("%s: shape %s, expected %s", what or "", S(node.type.shape), S(want)))
end
local function expect_error(pat, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pat)
  assert(tostring(err):find(pat, 1, true), "error '" .. tostring(err) .. "' lacks '" .. pat .. "'")
  return err
end

local seed = 10
local function rand(shape, lo, hi)
  seed = seed + 1
  return nd.random_uniform(shape, { low = lo or -1, high = hi or 1, seed = seed })
end
local function maxdiff(a, b)
  local x, y = a:flat(), b:flat()
  assert(#x == #y, "sizes differ")
  local m = 0
  for i = 1, #x do m = math.max(m, math.abs(x[i] - y[i]) / (1 + math.abs(x[i]))) end
  return m
end

-- Evaluate with every call through its topi kernel (the test's own evaluator).
local function run_topi(mod, inputs)
  local f = relay.main_of(mod, "run_topi", 1)
  local function body_eval(body, env)
    for _, n in ipairs(relay.post_order(body)) do
      local k, v = n.kind, nil
      if k == "var" then v = env[n] or inputs[n.name]; assert(v, "no input " .. n.name)
      elseif k == "const" then v = n.value
      elseif k == "tuple" then v = {}; for i, a in ipairs(n.fields) do v[i] = env[a] end
      elseif k == "tuple_get" then v = env[n.tuple][n.index + 1]
      else
        local vals = {}
        for i, a in ipairs(n.args) do vals[i] = env[a] end
        if relay.is_function(n.op) then
          local sub = {}
          for i, p in ipairs(n.op.params) do sub[p] = vals[i] end
          v = body_eval(n.op.body, sub)
        else
          local r = eval.call_topi(n, vals)
          v = n.type.fields and r or r[1]
        end
      end
      env[n] = v
    end
    return env[body]
  end
  return body_eval(f.body, {})
end

-- ---- builders and type inference ---------------------------------------------------------

do
  local x = relay.var("data", { shape = { 1, 3, 32, 32 }, dtype = "float32" })
  assert(x.kind == "var" and x.name == "data" and x.type.dtype == "float32")
  local w = relay.var("conv1_weight", { shape = { 16, 3, 3, 3 } })
  local y = relay.nn.conv2d(x, w, { strides = 2, padding = 1, channels = 16, kernel_size = 3 })
  assert(y.kind == "call" and y.op == "nn.conv2d" and y.args[1] == x and y.args[2] == w)
  check_shape(y, { 1, 16, 16, 16 }, "conv2d")
  assert(shape_eq(y.attrs.padding, { 1, 1, 1, 1 }) and shape_eq(y.attrs.strides, { 2, 2 }))
  -- padding: 2 values -> 4 (top, left, bottom, right) as TVM normalizes
  local y2 = relay.nn.conv2d(x, relay.var("c2_weight", { 8, 3, 3, 5 }), { padding = { 1, 2 } })
  check_shape(y2, { 1, 8, 32, 32 }, "conv2d pad 2")
  assert(shape_eq(y2.attrs.padding, { 1, 2, 1, 2 }))
  -- untyped weight: typed from channels / kernel_size (OIHW)
  local wu = relay.var("c3_weight")
  local y3 = relay.nn.conv2d(x, wu, { channels = 4, kernel_size = { 1, 1 } })
  check_shape(wu, { 4, 3, 1, 1 }, "inferred weight")
  check_shape(y3, { 1, 4, 32, 32 }, "conv2d 1x1")
  -- NHWC / HWIO and depthwise NHWC / HWOI
  local xh = relay.var("xh", { shape = { 1, 16, 16, 8 } })
  local yh = relay.nn.conv2d(xh, relay.var("h_weight"), { channels = 12, kernel_size = 3, padding = 1,
                                                         data_layout = "NHWC", kernel_layout = "HWIO" })
  check_shape(yh.args[2], { 3, 3, 8, 12 }, "HWIO weight")
  check_shape(yh, { 1, 16, 16, 12 }, "conv2d NHWC")
  local dw = relay.nn.conv2d(xh, relay.var("dw_weight"), { channels = 8, groups = 8, kernel_size = 3,
                                                          strides = 2, padding = 1,
                                                          data_layout = "NHWC", kernel_layout = "HWOI" })
  check_shape(dw.args[2], { 3, 3, 8, 1 }, "HWOI weight")
  check_shape(dw, { 1, 8, 8, 8 }, "depthwise NHWC")
  local dwc = relay.nn.conv2d(x, relay.var("dwc_weight"), { channels = 3, groups = 3, kernel_size = 3, padding = 1 })
  check_shape(dwc.args[2], { 3, 1, 3, 3 }, "depthwise OIHW weight")
  local ct = relay.nn.conv2d_transpose(relay.var("ct_in", { 1, 4, 5, 5 }), relay.var("ct_weight", { 4, 2, 3, 3 }),
                                       { strides = 2, padding = 1, output_padding = 1 })
  check_shape(ct, { 1, 2, 10, 10 }, "conv2d_transpose")
  -- batch norm: a tuple of 3; index with [1] or tuple_get
  local bn = relay.nn.batch_norm(y, relay.var("bn_gamma"), relay.var("bn_beta"),
                                 relay.var("bn_moving_mean"), relay.var("bn_moving_var"), { epsilon = 2e-5 })
  assert(bn.type.fields and #bn.type.fields == 3)
  check_shape(bn.args[2], { 16 }, "bn gamma")
  assert(bn[1] == bn[1] and bn[1].kind == "tuple_get" and bn[1].index == 0)
  check_shape(bn[1], { 1, 16, 16, 16 }, "bn[1]")
  check_shape(relay.tuple_get(bn, 2), { 16 }, "bn field 2")
  local r = relay.nn.relu(bn[1])
  local p = relay.nn.max_pool2d(r, { pool_size = 3, strides = 2, padding = 1 })
  check_shape(p, { 1, 16, 8, 8 }, "max_pool2d")
  check_shape(relay.nn.max_pool2d(r, { pool_size = 3, strides = 2, ceil_mode = true }), { 1, 16, 8, 8 }, "ceil_mode")
  check_shape(relay.nn.avg_pool2d(r, { pool_size = 2, strides = 2 }), { 1, 16, 8, 8 }, "avg_pool2d")
  local g = relay.nn.global_avg_pool2d(p)
  check_shape(g, { 1, 16, 1, 1 }, "global_avg_pool2d")
  check_shape(relay.nn.global_max_pool2d(relay.var("gh", { 1, 7, 7, 32 }), { layout = "NHWC" }),
              { 1, 1, 1, 32 }, "global_max_pool2d NHWC")
  local fl = relay.nn.batch_flatten(g)
  check_shape(fl, { 1, 16 }, "batch_flatten")
  local d = relay.nn.dense(fl, relay.var("fc_weight"), { units = 10 })
  check_shape(d.args[2], { 10, 16 }, "dense weight")
  local b = relay.nn.bias_add(d, relay.var("fc_bias"), { axis = -1 })
  check_shape(b.args[2], { 10 }, "bias")
  local dr = relay.nn.dropout(b, { rate = 0.3 })
  assert(dr.kind == "tuple_get" and dr.tuple.op == "nn.dropout")
  local sm = relay.nn.softmax(dr)
  check_shape(sm, { 1, 10 }, "softmax")
  check_shape(relay.nn.log_softmax(dr, { axis = 1 }), { 1, 10 }, "log_softmax")
  check_shape(relay.nn.batch_matmul(relay.var("bm_a", { 2, 3, 4 }), relay.var("bm_b", { 2, 5, 4 })),
              { 2, 3, 5 }, "batch_matmul")
  check_shape(relay.nn.leaky_relu(r, { alpha = 0.1 }), { 1, 16, 16, 16 }, "leaky_relu")
  check_shape(relay.nn.pad(x, { pad_width = { { 0, 0 }, { 0, 0 }, { 1, 2 }, { 3, 4 } } }), { 1, 3, 35, 39 }, "pad")
  -- element-wise, broadcast, transforms
  local a = relay.var("a", { 2, 3, 4 })
  check_shape(relay.add(a, relay.var("bb", { 3, 1 })), { 2, 3, 4 }, "broadcast add")
  check_shape(relay.multiply(a, relay.const(2)), { 2, 3, 4 }, "scalar multiply")
  for _, name in ipairs { "subtract", "divide", "maximum", "minimum" } do
    check_shape(relay[name](a, a), { 2, 3, 4 }, name)
  end
  check_shape(relay.sigmoid(a), { 2, 3, 4 }, "sigmoid")
  check_shape(relay.tanh(a), { 2, 3, 4 }, "tanh")
  check_shape(relay.clip(a, 0, 6), { 2, 3, 4 }, "clip")
  local c = relay.cast(a, "float64")
  assert(c.type.dtype == "float64")
  check_shape(relay.reshape(a, { 6, -1 }), { 6, 4 }, "reshape -1")
  check_shape(relay.reshape(a, { 0, -1 }), { 2, 12 }, "reshape 0")
  check_shape(relay.reshape(a, { -3, 4 }), { 6, 4 }, "reshape -3")
  check_shape(relay.reshape(a, { 2, -4, 1, 3, -2 }), { 2, 1, 3, 4 }, "reshape -4/-2")
  check_shape(relay.transpose(a, { 2, 0, 1 }), { 4, 2, 3 }, "transpose")
  check_shape(relay.transpose(a), { 4, 3, 2 }, "transpose default")
  check_shape(relay.squeeze(relay.var("sq", { 1, 3, 1, 2 })), { 3, 2 }, "squeeze")
  check_shape(relay.squeeze(relay.var("sq2", { 1, 3, 1, 2 }), { 2 }), { 1, 3, 2 }, "squeeze axis")
  check_shape(relay.expand_dims(a, 1, 2), { 2, 1, 1, 3, 4 }, "expand_dims")
  check_shape(relay.concatenate({ a, a, relay.var("a3", { 2, 1, 4 }) }, { axis = 1 }), { 2, 7, 4 }, "concatenate")
  local sp = relay.split(a, 3, 1)
  assert(#sp.type.fields == 3)
  check_shape(sp[3], { 2, 1, 4 }, "split")
  check_shape(relay.split(a, { indices_or_sections = { 1, 3 }, axis = 2 })[2], { 2, 3, 2 }, "split indices")
  check_shape(relay.layout_transform(x, "NCHW", "NHWC"), { 1, 32, 32, 3 }, "layout_transform")
  check_shape(relay.nn.prelu(x, relay.var("pr_alpha")), { 1, 3, 32, 32 }, "prelu")
  check_shape(relay.call("nn.relu", { a }), { 2, 3, 4 }, "generic call")
  -- tuples
  local t = relay.tuple({ a, x })
  assert(t.kind == "tuple" and #t.type.fields == 2)
  check_shape(t[2], { 1, 3, 32, 32 }, "tuple field")
  -- conv3d / pool3d only once topi has them
  if ops.topi_has("conv3d") then
    local v = relay.var("vol", { 1, 3, 8, 16, 16 })
    local c3 = relay.nn.conv3d(v, relay.var("c3d_weight"), { channels = 4, kernel_size = 3, padding = 1 })
    check_shape(c3, { 1, 4, 8, 16, 16 }, "conv3d")
  end
  if ops.topi_has("pool3d") then
    local v = relay.var("vol2", { 1, 3, 8, 16, 16 })
    check_shape(relay.nn.max_pool3d(v, { pool_size = 2, strides = 2 }), { 1, 3, 4, 8, 8 }, "max_pool3d")
  end
  -- registry
  local e = relay.op.get("nn.conv2d")
  assert(e.name == "nn.conv2d" and e.topi == "conv2d" and e.pattern == "out_elemwise_fusable")
  local ta, tname = e.to_topi(y.attrs, { x.type, w.type })
  assert(tname == "conv2d" and ta.layout == "NCHW" and shape_eq(ta.padding, { 1, 1, 1, 1 }))
  assert(relay.op.get("nn.softmax").pattern == "out_elemwise_fusable")
  assert(relay.op.get("add").pattern == "broadcast" and relay.op.get("nn.relu").pattern == "elemwise")
  assert(relay.op.get("nn.batch_flatten").pattern == "injective")
  assert(relay.op.get("nn.batch_norm").pattern == "opaque")
  local _, dname = e.to_topi(dw.attrs, { xh.type, dw.args[2].type })
  assert(dname == "depthwise_conv2d")
  for _, name in ipairs { "nn.conv2d", "nn.conv3d", "nn.conv2d_transpose", "nn.dense", "nn.batch_matmul",
                          "nn.bias_add", "nn.batch_norm", "nn.relu", "nn.leaky_relu", "nn.softmax",
                          "nn.log_softmax", "nn.max_pool2d", "nn.avg_pool2d", "nn.max_pool3d",
                          "nn.avg_pool3d", "nn.global_avg_pool2d", "nn.global_max_pool2d",
                          "nn.batch_flatten", "nn.dropout", "nn.pad", "add", "subtract", "multiply",
                          "divide", "maximum", "minimum", "sigmoid", "tanh", "clip", "cast", "reshape",
                          "transpose", "squeeze", "expand_dims", "concatenate", "split",
                          "layout_transform", "nn.prelu" } do
    assert(relay.op.get(name), "op not registered: " .. name)
  end
end

-- ---- type errors name op, layer and shapes ---------------------------------------------------

do
  local x = relay.var("data", { 1, 3, 32, 32 })
  local err = expect_error("nn.conv2d (layer conv1_weight): conv2d: channel mismatch", relay.nn.conv2d, x,
                           relay.var("conv1_weight", { 8, 4, 3, 3 }))
  assert(err:find("Tensor[(1, 3, 32, 32), float32], Tensor[(8, 4, 3, 3), float32]", 1, true), err)
  expect_error("nn.conv2d (layer stem): conv2d: channel mismatch",
               relay.nn.conv2d, x, relay.var("w", { 8, 4, 3, 3 }), { name = "stem" })
  local y = relay.nn.conv2d(x, relay.var("c_weight", { 8, 3, 3, 3 }))
  err = expect_error("add (after layer c_weight): add: shapes", relay.add, y, relay.var("q", { 5 }))
  assert(err:find("(1, 8, 30, 30)", 1, true))
  expect_error("has no type and none can be inferred", relay.nn.conv2d, x, relay.var("u_weight"))
  expect_error("unknown op 'nn.nope'", relay.call, "nn.nope", { x })
  expect_error("nn.dense (layer fc_weight): units=10 but the weight has 12 rows", relay.nn.dense,
               relay.var("v", { 1, 4 }), relay.var("fc_weight", { 12, 4 }), { units = 10 })
  expect_error("pool_size is required", relay.nn.max_pool2d, x, {})
  expect_error("not a tuple", relay.tuple_get, x, 0)
  expect_error("is not a parameter", relay.Function, {}, y)
  -- the error is raised at the caller's line
  local ok, e2 = pcall(function() return relay.nn.relu(relay.var("zz", { 2 }), 5) end)
  assert(not ok and e2:find("attributes must be a table"), e2)
end

-- ---- printing --------------------------------------------------------------------------------

do
  local x = relay.var("data", { shape = { 1, 3, 224, 224 } })
  local w = relay.var("conv1_weight", { shape = { 64, 3, 7, 7 } })
  local y = relay.nn.conv2d(x, w, { strides = { 2, 2 }, padding = { 3, 3 }, channels = 64, kernel_size = { 7, 7 } })
  y = relay.nn.relu(relay.add(y, relay.const(1.5)))
  local mod = relay.Module(relay.Function({ x, w }, y))
  local want = table.concat({
    "def @main(%data: Tensor[(1, 3, 224, 224), float32], %conv1_weight: Tensor[(64, 3, 7, 7), float32]) -> Tensor[(1, 64, 112, 112), float32] {",
    "  %0 = nn.conv2d(%data, %conv1_weight, strides=[2, 2], padding=[3, 3, 3, 3], channels=64, kernel_size=[7, 7]) /* ty=Tensor[(1, 64, 112, 112), float32] */;",
    "  %1 = add(%0, 1.5f) /* ty=Tensor[(1, 64, 112, 112), float32] */;",
    "  nn.relu(%1) /* ty=Tensor[(1, 64, 112, 112), float32] */",
    "}" }, "\n")
  assert(tostring(mod) == want, "module text:\n" .. tostring(mod))
  local bn = relay.nn.batch_norm(x, relay.var("g"), relay.var("b"), relay.var("m"), relay.var("v"),
                                 { epsilon = 2e-5 })
  local txt = tostring(bn[1])
  assert(txt:find("nn.batch_norm(%data, %g, %b, %m, %v, epsilon=2e-05f)", 1, true), txt)
  assert(txt:find("%1 = %0.0", 1, true) or txt:find("%0.0 /*", 1, true), txt)
  local c = relay.concatenate({ x, x }, 1)
  assert(tostring(c):find("concatenate((%data, %data), axis=1)", 1, true), tostring(c))
  assert(tostring(relay.nn.max_pool2d(x, { pool_size = 2, ceil_mode = true })):find("ceil_mode=True", 1, true))
end

-- ---- functions, params, traversal, mutation ----------------------------------------------------

do
  local x = relay.var("data", { 1, 2, 4, 4 })
  local w1, w2 = relay.var("a_weight", { 2, 2, 1, 1 }), relay.var("b_weight", { 2, 2, 1, 1 })
  local c1 = relay.nn.conv2d(x, w1)
  local y = relay.add(relay.nn.conv2d(c1, w2), c1)
  local fv = relay.free_vars(y)
  assert(#fv == 3 and fv[1] == x and fv[2] == w1 and fv[3] == w2)
  local po = relay.post_order(y)
  assert(po[#po] == y and #po == 6)
  local mod = relay.Module(y)
  assert(#mod.main.params == 3 and mod.main.body == y)
  assert(mod:infer_type().main.body.type.shape[2] == 2)
  local wv = rand({ 2, 2, 1, 1 })
  local bound = relay.bind_params(mod, { a_weight = wv })
  assert(#bound.main.params == 2 and bound.main.params[2].name == "b_weight")
  local consts = 0
  relay.visit(bound.main.body, function(n) if n.kind == "const" then consts = consts + 1; assert(n.value == wv) end end)
  assert(consts == 1, "shared var bound to one const")
  expect_error("param 'a_weight' is Tensor[(2, 2, 1, 1), float32] but the value is Tensor[(3,), float32]",
               relay.bind_params, mod, { a_weight = rand({ 3 }) })
  -- mutate: replace relu-free add by subtract, memoized (c1 shared stays shared)
  local new = relay.mutate(y, function(n) if n.kind == "call" and n.op == "add" then return relay.subtract(n.args[1], n.args[2]) end end)
  assert(new.op == "subtract" and new.args[2] == c1 and new.args[1].args[1] == c1)
  -- mutate with a changed child rebuilds the parents once
  local calls = 0
  local new2 = relay.mutate(y, function(n, old)
    if old == w1 then return relay.var("a2_weight", { 2, 2, 1, 1 }) end
    if n.kind == "call" then calls = calls + 1 end
  end)
  assert(calls == 3 and new2.args[2].args[2].name == "a2_weight" and new2.args[1].args[1] == new2.args[2])
end

-- ---- passes: numerics and structure ----------------------------------------------------------

-- A small network with everything the passes touch: bn on the input (forward folding),
-- conv -> bn -> relu (backward), a pre-activation feeding two convs (forward with two
-- consumers), a residual add, pools, dense + bias_add, dropout.
local function small_net(layout)
  local nhwc = layout == "NHWC"
  local axis = nhwc and 3 or 1
  local kl = nhwc and "HWIO" or "OIHW"
  local x = relay.var("data", nhwc and { 1, 8, 8, 3 } or { 1, 3, 8, 8 })
  local function bn(y, name)
    return relay.nn.batch_norm(y, relay.var(name .. "_gamma"), relay.var(name .. "_beta"),
                               relay.var(name .. "_moving_mean"), relay.var(name .. "_moving_var"),
                               { axis = axis, epsilon = 2e-5 })[1]
  end
  local function conv(y, name, ch, k, s, groups)
    return relay.nn.conv2d(y, relay.var(name .. "_weight"), { channels = ch, kernel_size = k, strides = s or 1,
                                                             padding = math.floor(k / 2), groups = groups,
                                                             data_layout = layout,
                                                             kernel_layout = (groups and nhwc) and "HWOI" or kl })
  end
  local y = bn(x, "bn_data")
  y = conv(y, "conv0", 4, 3)
  y = relay.nn.relu(bn(y, "bn0"))
  local pre = relay.nn.relu(bn(y, "u_bn1"))
  local c1 = conv(pre, "u_conv1", 6, 3)
  local c2 = conv(relay.nn.relu(bn(c1, "u_bn2")), "u_conv2", 6, 3)
  local sc = conv(pre, "u_sc", 6, 1)
  local out = relay.add(c2, sc)
  out = relay.nn.relu(bn(out, "u_bn3"))
  out = conv(out, "dw", 6, 3, 1, 6)
  out = relay.nn.max_pool2d(out, { pool_size = 2, strides = 2, layout = layout })
  out = relay.nn.global_avg_pool2d(out, { layout = layout })
  out = relay.nn.batch_flatten(out)
  out = relay.nn.dense(out, relay.var("fc_weight"), { units = 5 })
  out = relay.nn.bias_add(out, relay.var("fc_bias"), { axis = -1 })
  out = relay.nn.dropout(out)
  local f = relay.Function(relay.free_vars(out), out)
  local params = {}
  for i, p in ipairs(f.params) do
    if p.name ~= "data" then
      local lo, hi = -1, 1
      if p.name:match("var$") or p.name:match("gamma$") then lo, hi = 0.5, 2 end
      params[p.name] = nd.random_uniform(p.type.shape, { low = lo, high = hi, seed = 1000 + i })
    end
  end
  return relay.Module(f), params, nd.random_uniform(x.type.shape, { seed = 77 })
end

local function inputs_of(params, data)
  local t = { data = data }
  for k, v in pairs(params) do t[k] = v end
  return t
end

local function ops_in(mod)
  local n = {}
  local function walk(body)
    for _, x in ipairs(relay.post_order(body)) do
      if x.kind == "call" then
        if relay.is_function(x.op) then walk(x.op.body) else n[x.op] = (n[x.op] or 0) + 1 end
      end
    end
  end
  walk(relay.main_of(mod, "ops_in", 1).body)
  return n
end

do
  local mod, params, data = small_net("NCHW")
  local ref = run_topi(mod, inputs_of(params, data))
  assert(shape_eq(ref:shape(), { 1, 5 }))
  -- the Lua kernels of relay.eval agree with topi
  assert(maxdiff(eval.run(mod, inputs_of(params, data)), ref) < 1e-5)

  -- SimplifyInference: no batch_norm / dropout; numerics unchanged
  local si = relay.transform.SimplifyInference()(mod)
  local c = ops_in(si)
  assert(not c["nn.batch_norm"] and not c["nn.dropout"] and c.sqrt == 5 and c.expand_dims == 10,
         "simplify: sqrt " .. tostring(c.sqrt) .. " expand_dims " .. tostring(c.expand_dims))
  assert(maxdiff(run_topi(si, inputs_of(params, data)), ref) < 1e-5, "SimplifyInference numerics")

  -- FoldConstant after binding: the BN arithmetic becomes constants
  local fc = relay.transform.FoldConstant()(relay.bind_params(si, params))
  c = ops_in(fc)
  assert(not c.sqrt and not c.expand_dims and not c.negative and c.multiply == 5 and c.add == 6, "fold: " .. tostring(c.multiply) .. " " .. tostring(c.add))
  assert(#fc.main.params == 1)
  assert(maxdiff(run_topi(fc, { data = data }), ref) < 1e-5, "FoldConstant numerics")

  -- FoldScaleAxis: backward folds bn0 / u_bn2 into conv0 / u_conv1, forward folds
  -- bn_data into conv0, u_bn1 into u_conv1 and u_sc (two consumers), u_bn3 into dw
  local fs = relay.transform.FoldScaleAxis()(fc)
  c = ops_in(fs)
  assert(not c.multiply, "every scale folded, got " .. tostring(c.multiply))
  assert(c.add == 6 and c["nn.conv2d"] == 5, "fold scale: add " .. tostring(c.add) .. " conv " .. tostring(c["nn.conv2d"]))
  assert(maxdiff(run_topi(fs, { data = data }), ref) < 1e-4, "FoldScaleAxis numerics")
  -- a scale along a non-channel axis stays
  do
    local x = relay.var("x", { 1, 4, 6, 6 })
    local y = relay.nn.conv2d(x, relay.const(rand({ 4, 4, 1, 1 })), { channels = 4, kernel_size = 1 })
    local s = relay.multiply(y, relay.const(rand({ 6, 1 }, 0.5, 1)))
    local m = relay.transform.FoldScaleAxis()(relay.Module(s))
    assert(ops_in(m).multiply == 1, "H-axis scale must stay")
    local s2 = relay.nn.relu(relay.multiply(y, relay.const(rand({ 4, 1, 1 }, -1, -0.5))))
    local s3 = relay.nn.conv2d(s2, relay.const(rand({ 4, 4, 1, 1 })), { channels = 4, kernel_size = 1 })
    local m3 = relay.transform.FoldScaleAxis()(relay.Module(s3))
    -- negative scale: backward still folds (no relu between conv and multiply)
    assert(not ops_in(m3).multiply)
    local xin = rand({ 1, 4, 6, 6 })
    assert(maxdiff(run_topi(m3, { x = xin }), run_topi(relay.Module(s3), { x = xin })) < 1e-5)
    -- backward through bias_add (VGG with batch norm)
    local yb = relay.nn.bias_add(y, relay.const(rand({ 4 })))
    local sb = relay.nn.relu(relay.multiply(yb, relay.const(rand({ 4, 1, 1 }, 0.5, 2))))
    local mb = relay.transform.FoldScaleAxis()(relay.Module(sb))
    assert(not ops_in(mb).multiply and ops_in(mb)["nn.bias_add"] == 1)
    assert(maxdiff(run_topi(mb, { x = xin }), run_topi(relay.Module(sb), { x = xin })) < 1e-5)
  end

  -- CanonicalizeOps: bias_add -> add(x, expand_dims(b))
  local co = relay.transform.CanonicalizeOps()(fs)
  assert(not ops_in(co)["nn.bias_add"])
  assert(maxdiff(run_topi(co, { data = data }), ref) < 1e-4)

  -- AlterOpLayout: constant operands after a conv go full rank ([C,1,1] -> [1,C,1,1])
  local al = relay.transform.FoldConstant()(relay.transform.AlterOpLayout()(co))
  relay.visit(al.main.body, function(n)
    if n.kind == "call" and n.op == "add" and n.args[2].kind == "const" and n.args[1].kind == "call"
       and n.args[1].op == "nn.conv2d" then
      assert(#n.args[2].type.shape == 4, "shift not expanded: " .. S(n.args[2].type.shape))
    end
  end)
  assert(maxdiff(run_topi(al, { data = data }), ref) < 1e-4)

  -- FuseOps: the groups TVM makes
  local fu = relay.transform.FuseOps()(al)
  local groups = {}
  for _, n in ipairs(relay.post_order(fu.main.body)) do
    if n.kind == "call" then
      assert(relay.is_function(n.op) and n.op.attrs.Primitive == 1, "every call is a fused group")
      local names = {}
      for _, x in ipairs(relay.post_order(n.op.body)) do if x.kind == "call" then names[#names + 1] = x.op end end
      groups[#groups + 1] = table.concat(names, "+")
      for i, p in ipairs(n.op.params) do assert(p.name == "p" .. (i - 1)) end
    end
  end
  local want = { "add", "nn.conv2d+add+nn.relu+add+nn.relu", "nn.conv2d+add+nn.relu", "nn.conv2d",
                 "nn.conv2d+add+add+nn.relu", "nn.conv2d", "nn.max_pool2d", "nn.global_avg_pool2d",
                 "nn.batch_flatten", "nn.dense+add" }
  assert(#groups == #want, "groups: " .. table.concat(groups, " | "))
  for i = 1, #want do assert(groups[i] == want[i], "groups: " .. table.concat(groups, " | ")) end
  assert(maxdiff(run_topi(fu, { data = data }), ref) < 1e-4, "FuseOps numerics")
  -- the conv+add+relu group: p0 data, p1 weight, p2 shift
  local g = fu.main.body.args[1]   -- batch_flatten's input ...
  local _ = g

  -- DeadCodeElimination keeps the program
  local dce = relay.transform.DeadCodeElimination()(fu)
  assert(tostring(dce) == tostring(fu))

  -- relay.optimize = the whole sequence
  local opt = relay.optimize(mod, { params = params, target = "llvm" })
  assert(tostring(opt) == tostring(fu), "optimize differs from the passes run one by one")
end

-- FuseOps rules: residual add goes to the conv in its first argument; max depth
do
  local x = relay.var("x", { 1, 4, 6, 6 })
  local a = relay.nn.conv2d(x, relay.var("a_weight", { 4, 4, 1, 1 }))
  local b = relay.nn.conv2d(x, relay.var("b_weight", { 4, 4, 1, 1 }))
  local s = relay.nn.relu(relay.add(b, a))
  local fu = relay.transform.FuseOps()(relay.Module(s))
  local body = fu.main.body
  local names = {}
  for _, n in ipairs(relay.post_order(body.op.body)) do if n.kind == "call" then names[#names + 1] = n.op end end
  assert(table.concat(names, "+") == "nn.conv2d+add+nn.relu", table.concat(names, "+"))
  assert(body.op.body.args[1].args[1].args[2].name == "p1")  -- conv b's weight
  -- injective chain fuses; elementwise before a conv does not fuse into it
  local y = relay.reshape(relay.transpose(relay.sigmoid(x), { 0, 2, 3, 1 }), { 1, -1 })
  local z = relay.nn.conv2d(relay.nn.relu(x), relay.var("c_weight", { 4, 4, 1, 1 }))
  local t = relay.Module(relay.Function({ x, relay.free_vars(z)[2] }, relay.add(relay.reshape(z, { 1, -1 }), y)))
  local fu2 = relay.transform.FuseOps()(t)
  local gs = {}
  for _, n in ipairs(relay.post_order(fu2.main.body)) do
    if n.kind == "call" then
      local nm = {}
      for _, q in ipairs(relay.post_order(n.op.body)) do if q.kind == "call" then nm[#nm + 1] = q.op end end
      gs[#gs + 1] = table.concat(nm, "+")
    end
  end
  assert(table.concat(gs, " | ") == "nn.relu | nn.conv2d | reshape+sigmoid+transpose+reshape+add",
         table.concat(gs, " | "))
  -- max depth 2: a chain of 4 relus splits
  local r = x
  for _ = 1, 4 do r = relay.nn.relu(r) end
  local f3 = relay.transform.FuseOps({ max_depth = 2 })(relay.Module(r))
  local ng = 0
  for _, n in ipairs(relay.post_order(f3.main.body)) do if n.kind == "call" then ng = ng + 1 end end
  assert(ng == 2, "max_depth groups " .. ng)
end

-- ConvertLayout NCHW -> NHWC: numerics equal, layout_transform at the boundaries
do
  local mod, params, data = small_net("NCHW")
  local ref = run_topi(mod, inputs_of(params, data))
  local m = relay.bind_params(mod, params)
  local cl = relay.transform.ConvertLayout({ ["nn.conv2d"] = { "NHWC", "default" } })(m)
  local c = ops_in(cl)
  local nlt = c.layout_transform or 0
  local nbn3 = 0
  relay.visit(cl.main.body, function(n)
    if n.kind == "call" and n.op == "nn.conv2d" then
      assert(n.attrs.data_layout == "NHWC")
      assert(n.attrs.kernel_layout == (n.attrs.groups > 1 and "HWOI" or "HWIO"))
    end
    if n.kind == "call" and (n.op == "nn.max_pool2d" or n.op == "nn.global_avg_pool2d") then
      assert(n.attrs.layout == "NHWC")
    end
    if n.kind == "call" and n.op == "nn.batch_norm" and n.attrs.axis == 3 then nbn3 = nbn3 + 1 end
  end)
  assert(nbn3 == 4, "batch norms following NHWC: " .. nbn3)
  -- data in, 5 weights, one back to NCHW before batch_flatten
  assert(nlt == 7, "layout_transforms: " .. nlt)
  assert(maxdiff(run_topi(cl, { data = data }), ref) < 1e-5, "ConvertLayout numerics")
  local opt = relay.optimize(mod, { params = params, desired_layouts = { ["nn.conv2d"] = { "NHWC", "default" } } })
  assert(maxdiff(run_topi(opt, { data = data }), ref) < 1e-4, "ConvertLayout + optimize numerics")
  -- and back: an NHWC network converted to NCHW
  local modh, paramsh, datah = small_net("NHWC")
  local refh = run_topi(modh, inputs_of(paramsh, datah))
  local back = relay.transform.ConvertLayout({ ["nn.conv2d"] = { "NCHW", "default" } })(relay.bind_params(modh, paramsh))
  relay.visit(back.main.body, function(n)
    if n.kind == "call" and n.op == "nn.conv2d" then assert(n.attrs.kernel_layout == "OIHW") end
  end)
  assert(maxdiff(run_topi(back, { data = datah }), refh) < 1e-5, "ConvertLayout NHWC->NCHW numerics")
end

-- SimplifyExpr and EliminateCommonSubexpr
do
  local x = relay.var("x", { 2, 3 })
  local c1, c2 = relay.const(rand({ 3 })), relay.const(rand({ 3 }))
  local y = relay.add(relay.add(x, c1), c2)
  local z = relay.multiply(relay.add(x, c1), c2)
  local m = relay.Module(relay.Function({ x }, relay.subtract(y, z)))
  local se = relay.transform.SimplifyExpr()(m)
  local xin = rand({ 2, 3 })
  assert(maxdiff(run_topi(se, { x = xin }), run_topi(m, { x = xin })) < 1e-5)
  local a1 = relay.nn.relu(x)
  local a2 = relay.nn.relu(x)
  local e = relay.transform.EliminateCommonSubexpr()(relay.Module(relay.Function({ x }, relay.add(a1, a2))))
  assert(e.main.body.args[1] == e.main.body.args[2])
end

-- prelu (composed of topi ops) and leaky_relu / clip numerics
do
  local x = relay.var("x", { 1, 2, 2, 2 })
  local al = relay.var("alpha", { 2 })
  local m = relay.Module(relay.Function({ x, al }, relay.nn.prelu(x, al)))
  local xv = nd.array({ { { { -1, 2 }, { 3, -4 } }, { { -5, 6 }, { 7, -8 } } } })
  local av = nd.array({ 0.5, 0.25 })
  local r = run_topi(m, { x = xv, alpha = av }):flat()
  local want = { -0.5, 2, 3, -2, -1.25, 6, 7, -2 }
  for i = 1, 8 do assert(math.abs(r[i] - want[i]) < 1e-6, "prelu " .. i .. ": " .. r[i]) end
  local c = run_topi(relay.Module(relay.clip(x, -2, 3)), { x = xv }):flat()
  assert(c[1] == -1 and c[2] == 2 and c[4] == -2 and c[6] == 3)
end

-- dump after each pass
do
  local mod, params = small_net("NCHW")
  local old = io.stdout
  local buf = {}
  io.stdout = { write = function(_, ...) for _, s in ipairs { ... } do buf[#buf + 1] = s end end }
  local ok, err = pcall(relay.optimize, mod, { params = params, dump = true })
  io.stdout = old
  assert(ok, err)
  local text = table.concat(buf)
  for _, p in ipairs { "SimplifyInference", "FoldConstant", "FoldScaleAxis", "CanonicalizeOps", "FuseOps" } do
    assert(text:find("// ---- after " .. p .. " ----", 1, true), "no dump for " .. p)
  end
end

-- batch_norm with scale = false (resnet's bn_data) evaluates: gamma is not read
do
  local nd = require "tunelua.nd"
  local x = relay.var("data", { shape = { 1, 3, 2, 2 } })
  local bn = relay.nn.batch_norm(x, relay.var("g"), relay.var("b"), relay.var("m"), relay.var("v"),
    { scale = false, epsilon = 0 })
  local mod = relay.Module(relay.Function(relay.free_vars(relay.tuple_get(bn, 0)),
    relay.tuple_get(bn, 0)))
  local data = nd.random_uniform({ 1, 3, 2, 2 }, { seed = 5 })
  local out = require("tunelua.relay.eval").run(mod, { data = data, g = nd.full({ 3 }, 7),
    b = nd.full({ 3 }, 1), m = nd.full({ 3 }, 0.5), v = nd.full({ 3 }, 4) })
  local xs, ys = data:flat(), out:flat()
  for i = 1, 12 do   -- (x - 0.5) / 2 + 1, gamma ignored
    local want = (xs[i] - 0.5) / 2 + 1
    assert(math.abs(ys[i] - want) < 1e-6, "bn scale=false at " .. i)
  end
  local g3 = relay.nn.global_avg_pool3d(relay.var("v3", { shape = { 1, 2, 3, 4, 5 } }))
  assert(table.concat(g3.type.shape, ",") == "1,2,1,1,1")
end

assert(type(relay.build) == "function" and type(relay.transform.FuseOps) == "function")
print("test_relay: ok")
