--- tunelua.graph.executor: compile a relay program and run it (TVM's graph executor).
--
--   local executor = require "tunelua.graph.executor"
--   local lib = executor.build(mod, {target = "llvm", params = params,
--                                    history = "tuned.log"})   -- or a dispatch context
--   local m = executor.GraphModule(lib)
--   m:set_input("data", x)
--   m:run()
--   local y = m:get_output(0)
--   m:benchmark({number = 10, repeats = 3})   -- "Mean inference time (std dev): X ms (Y ms)"
--
-- build: relay.optimize, then for every fused group (tunelua.graph.group) its te DAG
-- with topi ops, a schedule (a tuned AutoTVM config from `history` through the AutoTVM
-- template's compute/schedule, else TopHub's, else the default schedule
-- tl_topi_default_schedule(s, "cpu")), lowering and a C module per distinct group (groups
-- with one workload key share one kernel). Intermediates get offsets in one arena from
-- tl_graph_plan (buffers reused across non-overlapping lifetimes); graph outputs, inputs
-- and weights live in their own arrays. The run loop is C (tl_graph_exec_run): kernel
-- function pointers and their DLTensor arguments, called in order.
-- history = auto_scheduler.ApplyHistoryBest(log) (or the path of an auto-scheduler log) takes
-- the auto-scheduler's path instead (the graph keeps its layouts, as extract_tasks sees it):
-- each group's DAG with the best record's steps of its workload key replayed, else the
-- default schedule (tunelua.auto_scheduler.dispatch); a kernel's .record is the record used.
-- OpenCL targets ("opencl", "opencl -device=mali"): Mali templates (fallback config when
-- no record) or tl_topi_default_schedule_gpu_for (tiles shaped for the device kind:
-- opts.opencl_shapes = "auto" | "gpu" | "cpu", or TUNELUA_OPENCL_SHAPES; tunelua.graph.opencl
-- .tile_shapes), then tunelua.graph.opencl: storage slots on
-- the device, one OpenCL program for all groups, the same C run loop (docs/executor.md).
-- VTA (opts.vta = {env = vta env[, config = function(task, match) -> index]}): the packed
-- conv groups that VTA can run whole (tunelua.graph.vta_groups) become kernels on one
-- vta-sim (their streams built once through targets/vta's IR route), every other group
-- runs on the host target, all in the same C run loop; lib:vta_cycles() gives each VTA
-- group's simulated cycles of the last run (docs/vta_network.md).
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local walk = require "tunelua.graph.walk"
local group = require "tunelua.graph.group"
local strategy = require "tunelua.graph.strategy"
local extract = require "tunelua.graph.extract"
local ocl = require "tunelua.graph.opencl"
local targets = require "tunelua.target"
local stats = require "tunelua.stats"
local vta = require "tunelua.vta"
local vta_groups = require "tunelua.graph.vta_groups"
local winograd = require "tunelua.graph.winograd_x86"
local ansor_weights = require "tunelua.auto_scheduler.weights"

local C, ctx, check = core.C, core.ctx, core.check

local executor = {}

local intarr = ffi.typeof("int[?]")
local i64arr = ffi.typeof("int64_t[?]")
local int1 = ffi.typeof("int[1]")
local dblarr = ffi.typeof("double[?]")

local ALIGN = 64

local dtype_code = group.dtype_code

-- ---- history (tuned configs) ---------------------------------------------------------

local function load_history(h, level)
  if h == nil then return nil end
  if type(h) == "string" then
    -- an auto-scheduler log (its first record tells) or an AutoTVM one
    if require("tunelua.auto_scheduler.records").is_log(h) then
      return require("tunelua.auto_scheduler.dispatch").ApplyHistoryBest(h)
    end
    return require("tunelua.autotvm").apply_history_best(h)
  end
  if type(h) == "table" and type(h.query) == "function" then return h end
  error("executor.build: history must be a log path or a dispatch context with :query, got "
        .. type(h), level + 1)
end

local function tophub_context(tgt)
  return require("tunelua.autotvm.tophub").context(tgt.str)
end

local function config_index(cfg)
  if type(cfg) == "number" then return cfg end
  if type(cfg) == "table" then return cfg.index end
  if type(cfg) == "cdata" then return tonumber(cfg) end
  return nil
end

-- ---- schedules ------------------------------------------------------------------------

local function new_sched(g)
  local outs = intarr(#g.outputs)
  for i, t in ipairs(g.outputs) do outs[i - 1] = t end
  local p = ffi.new("tl_sched *[1]")
  check(C.tl_sched_new(ctx, g.dag, outs, #g.outputs, p), 3)
  return ffi.gc(p[0], C.tl_sched_free)
end

-- The default schedule of the target's class (tgt.schedules: "cpu", "opencl").
-- OpenCL: shaped for the device kind (shp: tunelua.graph.opencl.tile_shapes).
local function default_schedule(s, class, shp)
  if shp then return ocl.default_schedule_for(s, shp) end
  check(C.tl_topi_default_schedule(ctx, s, class), 3)
  return true
end

-- Backends whose kernels run on a device: the rest of the build (storage slots on the device,
-- device kernels) by backend name (a target's .backend); other backends build C modules here.
local device_finish = { opencl = ocl.finish }

-- a tensor id of g.dag -> the tensor id in the schedule's (possibly rewritten) DAG
local function sched_tensor(s, dag, t)
  local op = C.tl_dag_tensor_op(dag, t)
  local name = C.tl_dag_op_name(dag, op)
  local st = C.tl_sched_stage_find(s, name)
  if st < 0 then return t end
  return C.tl_sched_stage_tensor(s, st, C.tl_dag_tensor_index(dag, t))
end

-- ---- one group: DAG, schedule, lowered function ---------------------------------------

-- Try the tuned path: template compute + template schedule with the config that one of
-- the dispatch contexts (history, then TopHub) holds for the anchor op's workload.

local function lookup_index(c, task, tgt, impl)
  if type(c.query_task) == "function" then
    local ok, idx = pcall(c.query_task, c, task)
    if ok and type(idx) == "number" and idx >= 0 then return idx end
    return nil
  end
  local wl = { impl.name }
  for i, a in ipairs(impl.args) do wl[i + 1] = a end
  local ok, cfg = pcall(c.query, c, tgt.str, wl)
  return ok and config_index(cfg) or nil
end

-- Constant inputs deployed pre-transformed (a weight packed once here instead of at every
-- run): the template says which input, its deployed shape and the transform
-- (tl_atvm_template_deployed_shape / tl_atvm_template_deploy_input, next to its compute).
local deployed_cache = setmetatable({}, { __mode = "k" })
local shape8, ndim1 = ffi.typeof("int64_t[8]"), ffi.typeof("int[1]")
--- executor.deployed_shape(name, args, i) -> the shape input i (1-based) of template name
--- takes when deployed, or nil when it is passed as it is.
function executor.deployed_shape(name, args, i)
  local sh, nd_ = shape8(), ndim1()
  check(C.tl_atvm_template_deployed_shape(ctx, name, strategy.args_json(args), i - 1, nd_, sh), 2)
  if nd_[0] == 0 then return nil end
  local r = {}
  for d = 0, nd_[0] - 1 do r[d + 1] = tonumber(sh[d]) end
  return r
end
--- executor.deploy_input(name, args, i, value) -> value as input i (1-based) of template name
--- is deployed (and tuned) with, e.g. conv2d_NCHWc.x86's [O/B, C, KH, KW, B] weight; value
--- itself when the template takes it as it is. Cached per array.
function executor.deploy_input(name, args, i, value)
  local key = name .. "|" .. strategy.args_json(args) .. "|" .. i
  local per = deployed_cache[value]
  if per and per[key] then return per[key] end
  local sh = executor.deployed_shape(name, args, i)
  if not sh then return value end
  local p = nd.empty(sh, value:dtype())
  check(C.tl_atvm_template_deploy_input(ctx, name, strategy.args_json(args), i - 1,
                                        value:data_ptr(), p:data_ptr()), 2)
  per = per or {}
  per[key] = p
  deployed_cache[value] = per
  return p
end

-- The constant weight of impl's call in the deployed form of its template (argument 2), or nil
-- when the template takes it as it is or the value does not match the args.
local function deployed_weight(impl, value)
  if not value or not targets.template_flags(impl.name).prepacked_weight then return nil end
  local ok, sh = pcall(function() return value:shape() end)
  local k = impl.args[2]
  if not ok or type(k) ~= "table" or value:dtype() ~= k[3] or #sh ~= #k[2] then return nil end
  for d = 1, #sh do if sh[d] ~= k[2][d] then return nil end end
  if not executor.deployed_shape(impl.name, impl.args, 2) then return nil end
  return executor.deploy_input(impl.name, impl.args, 2, value)
end

-- Several templates for one op (Mali conv2d 3x3: spatial pack, winograd): as TVM selects
-- the implementation, the one whose best record is fastest comes first, judged in the first
-- context that has a record for any of them; the others keep the strategy's order.
local function by_cost(impls, ctxs, tgt)
  if #impls < 2 then return impls end
  for _, c in ipairs(ctxs) do
    if type(c.query) == "function" then
      local best, best_cost
      for i, impl in ipairs(impls) do
        local wl = { impl.name }
        for j, a in ipairs(impl.args) do wl[j + 1] = a end
        local ok, r = pcall(c.query, c, tgt.str, wl)
        local cost = ok and type(r) == "table" and tonumber(r.cost) or nil
        if cost and (not best_cost or cost < best_cost) then best, best_cost = i, cost end
      end
      if best then
        local out = { impls[best] }
        for i, impl in ipairs(impls) do if i ~= best then out[#out + 1] = impl end end
        return out
      end
    end
  end
  return impls
end

-- The blocked templates (their NCHW[x]c forms run the whole graph blocked on x86).
local BLOCKED = { ["conv2d_NCHWc.x86"] = true, ["depthwise_conv2d_NCHWc.x86"] = true,
                  [winograd.TEMPLATE] = true }
local CONTRIB = { ["nn.contrib_conv2d_NCHWc"] = true, ["nn.contrib_depthwise_conv2d_NCHWc"] = true }

-- The templates for anchor node in the order the build tries them: by_cost, then the
-- Winograd choice of a 3x3 stride-1 conv on x86 (tunelua.graph.winograd_x86; mode
-- "auto", "always" or "never").
local function conv_impls(node, tgt, ctxs, mode)
  local impls = by_cost(strategy.templates(node, tgt), ctxs, tgt)
  return winograd.order(impls, node, mode or "auto", function(impl)
    local okt, task = pcall(require("tunelua.autotvm.task").create, impl.name, impl.args, tgt.str)
    if not okt or type(task) ~= "table" or task.handle == nil then return false end
    for _, c in ipairs(ctxs) do
      if lookup_index(c, task, tgt, impl) then return true end
    end
    return false
  end, tgt.registers)
end

--- executor.conv_choice(call, tgt, ctxs[, winograd mode]) -> impl, ic_bn, oc_bn: the template
--- (strategy impl) a graph build takes for an nn.conv2d call of the graph before fusion (the
--- one whose record in ctxs costs least, a 3x3 stride-1 conv's Winograd one by its shape rule
--- where it has no record; nil when the target has none) and, for a blocked template, the
--- channel blocks of the config it schedules the conv with (the first dispatch context of
--- ctxs with a record for its task, else the template's fallback config): the last factors of
--- tile_ic and tile_oc.
function executor.conv_choice(call, tgt, ctxs, mode)
  local impl = conv_impls(call, tgt, ctxs, mode)[1]
  if not impl or not BLOCKED[impl.name] then return impl end
  local okt, task = pcall(require("tunelua.autotvm.task").create, impl.name, impl.args, tgt.str)
  if not okt or type(task) ~= "table" or task.handle == nil then return impl end
  local index = -1
  for _, c in ipairs(ctxs) do
    local i = lookup_index(c, task, tgt, impl)
    if i then index = i; break end
  end
  local okc, cfg = pcall(task.config, task, index)
  if not okc then return impl end
  return impl, require("tunelua.autotvm.graph_tuner").layout_of(cfg:entity())
end

--- executor.conv_blocks(tgt, ctxs[, winograd mode]) -> function(conv2d call) -> ic_bn, oc_bn,
--- or nil when the target has no blocked conv template: the blocks of executor.conv_choice.
--- AlterOpLayout gives the graph these layouts (relay.optimize's conv_blocks).
function executor.conv_blocks(tgt, ctxs, mode)
  local has = false
  for _, row in ipairs(tgt.strategy or {}) do if BLOCKED[row.template] then has = true end end
  if not has then return nil end
  return function(call)
    local _, ic, oc = executor.conv_choice(call, tgt, ctxs, mode)
    return ic, oc
  end
end

local function tuned_group(call, tgt, ctxs, mode)
  local tm = require "tunelua.autotvm.task"
  local anchor
  if walk.is_function(call.op) then
    walk.each_op_call(call.op.body, function(n) if not anchor and group.ANCHORS[n.op] then anchor = n end end)
  elseif group.ANCHORS[call.op] then
    anchor = call
  end
  if not anchor then return nil end
  local impls = conv_impls(anchor, tgt, ctxs, mode)
  -- a target whose untuned anchors take the first template's fallback config (as TVM does
  -- on Mali): tried after every template was looked up, not counted as tuned
  local passes = tgt.fallback_untuned and 2 or 1
  for pass = 1, passes do
  for pi, impl in ipairs(impls) do
    local okt, task
    if pass == 1 or pi == 1 then okt, task = pcall(tm.create, impl.name, impl.args, tgt.str) end
    local wconst = walk.weight_const(call, anchor)
    -- Winograd takes blocked data and a constant weight (transformed here, once)
    if impl.name == winograd.TEMPLATE and
       not (wconst and CONTRIB[anchor.op] and #anchor.args[1].type.shape == 5) then
      okt = false
    end
    if okt and type(task) == "table" and task.handle ~= nil then
      local cands = {}
      if pass == 1 then
        for _, c in ipairs(ctxs) do cands[#cands + 1] = c end
      else
        cands[1] = "fallback"
      end
      -- no config anywhere: the template's fallback config when the template says it beats
      -- the generic default schedule (TL_TMPL_FALLBACK_DEPLOYS), not counted as tuned
      -- (a blocked conv of the graph: its layout came from that config, so it deploys too)
      if targets.template_flags(impl.name).fallback_deploys or CONTRIB[anchor.op] then
        cands[#cands + 1] = "fallback"
      end
      for _, c in ipairs(cands) do
        local index
        if c == "fallback" then index = -1 else index = lookup_index(c, task, tgt, impl) end
        if index then
          local args_json = strategy.args_json(impl.args)
          local okb, g = pcall(group.build, call, {
            anchor_hook = function(dag, node, in_ids, _)
              -- a blocked conv of the graph: topi's NCHW[x]c compute, the template's schedule
              if node ~= anchor or (CONTRIB[node.op] and impl.name ~= winograd.TEMPLATE) then return nil end
              local n = #in_ids
              local ids = intarr(n)
              for i = 1, n do ids[i - 1] = in_ids[i] end
              local extra
              local pv = n >= 2 and deployed_weight(impl, wconst)
              if impl.name == winograd.TEMPLATE then
                pv = winograd.weight(wconst, winograd.tile_size(task, index), node.args[2].type.shape[5])
              end
              if pv then
                local psh, dt = pv:shape(), pv:dtype()
                local sh = ffi.new("int64_t[?]", #psh, psh)
                local pt = int1()
                check(C.tl_dag_placeholder(ctx, dag, "kernel_packed", #psh, sh, dtype_code(dt), pt))
                ids[1] = pt[0]
                extra = { { tensor = pt[0], value = pv,
                            node = { type = { shape = psh, dtype = dt } } } }
              end
              local outs, nout = intarr(16), int1()
              local rc = C.tl_atvm_template_compute(ctx, impl.name, args_json, dag, ids, n, outs, 16, nout)
              if rc ~= 0 then error(core.errmsg(), 0) end
              local r = {}
              for i = 0, nout[0] - 1 do r[#r + 1] = outs[i] end
              return r, extra
            end })
          if okb then
            local oks, s = pcall(function()
              local s = new_sched(g)
              check(C.tl_atvm_template_schedule(ctx, task.handle, index, s))
              return s
            end)
            if oks then
              if c == "fallback" then return g, s, impl.name .. " fallback", true end
              return g, s, impl.name .. " config " .. tostring(index)
            end
            io.stderr:write("executor: tuned schedule for " .. impl.name .. " failed (" .. tostring(s)
                            .. "); using the default schedule\n")
          else
            io.stderr:write("executor: template compute " .. impl.name .. " failed (" .. tostring(g)
                            .. "); using the default schedule\n")
          end
          C.tl_clearerr(ctx)
          return nil
        end
      end
    end
  end
  end
  return nil
end

-- ---- build --------------------------------------------------------------------------------

local Lib = {}
Lib.__index = function(t, k)
  if k == "default" then
    -- TVM's lib["default"](dev): the graph module factory; here the lib itself
    return function() return t end
  end
  return Lib[k]
end
executor.Lib = Lib

-- The auto-scheduler path: the group's DAG with the steps of the best record of its workload
-- key replayed on it (nil schedule: none, or the record does not replay; default schedule).
-- seen[key] = {tuned = bool} per distinct task (groups with a reduction), seen[i] in order.
local function ansor_group(call, tgt, hist, seen, wmode)
  local g = group.build(call, { anchor_hook = ansor_weights.hook(call, wmode or "auto", tgt.schedules == "cpu") }, 3)
  if not g.has_reduce then return g end
  local key = group.key_text(g)
  local e = seen[key]
  if not e then
    e = { key = key, name = g.name, rec = hist:query(tgt.str, key) }
    seen[key] = e
    seen[#seen + 1] = e
  end
  if not e.rec or e.failed then return g end
  local s = new_sched(g)
  if C.tl_sched_apply_json(ctx, s, e.rec.steps) ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    e.failed = true
    io.stdout:flush()
    local where = e.rec.path and string.format(" (%s:%d)", e.rec.path, e.rec.line) or ""
    io.stderr:write(string.format("executor: the record of %s%s does not replay on its DAG (%s); " ..
                                  "using the default schedule\n", g.name, where, msg))
    return g
  end
  e.tuned = true
  g.record = e.rec
  return g, s, "ansor"
end

-- Layout rewriting (core/te/layout.c): each layout-free argument of an auto-scheduled CPU
-- kernel (positions `known`, 1-based: group.layout_free), stored in the order the kernel's
-- loops read it. Returns {[position] = {handle, shape}} for the arguments rewritten, or nil.
-- A record's layout_rewrite_option says whether its trials ran so (2, TVM's
-- RewriteForPreTransformed) or on the weights as given (0): the build follows it.
local LAYOUT_REWRITE = 2
local function rewrite_layouts(low, known)
  local maps
  for _, pos in ipairs(known) do
    local mp = ffi.new("tl_layout_map *[1]")
    check(C.tl_lowered_rewrite_layout(ctx, low, pos - 1, mp), 4)
    if mp[0] ~= nil then
      local m = ffi.gc(mp[0], C.tl_layout_map_free)
      local shape = {}
      for j = 0, C.tl_layout_map_ndim(m) - 1 do shape[j + 1] = tonumber(C.tl_layout_map_extent(m, j)) end
      maps = maps or {}
      maps[pos] = { handle = m, shape = shape }
    end
  end
  return maps
end

-- A constant in the layout of its kernel's map.
local function apply_layout_map(map, value)
  local out = nd.empty(map.shape, ffi.string(C.tl_dtype_name(C.tl_array_dtype(value))))
  check(C.tl_layout_map_apply(ctx, map.handle, value, out), 4)
  return out
end

-- The build's summary line: AutoTVM counts operators, the auto-scheduler counts tasks.
local function report_tuned(ansor, tasks, ngroups, ntuned)
  io.stdout:flush()
  if ansor then
    local missing = 0
    for _, e in ipairs(tasks) do if not e.tuned then missing = missing + 1 end end
    print(string.format("%d of %d tasks have no tuned schedule", missing, #tasks))
  else
    print(string.format("%d of %d operators use untuned schedules", ngroups - ntuned, ngroups))
  end
end

local function external_slot(e, arr)
  local s = int1()
  check(C.tl_graph_exec_slot_array(ctx, e, arr, s), 3)
  return s[0]
end

--- executor.build(mod, {target = "llvm", params = {...}, history = log or context,
---   quiet = false, opt = true, layouts = true}) -> lib
--- layouts = false keeps every activation NCHW on x86 (each conv packs and unpacks its own
--- data); by default AlterOpLayout runs the graph on the convs' blocked layouts NCHW[x]c.
--- winograd = "auto" (default), "always" or "never": whether x86 3x3 stride-1 convs run as
--- conv2d_NCHWc_winograd.x86 (tunelua.graph.winograd_x86: records decide, else a rule by shape).
--- With an auto-scheduler context it says whether 3x3 stride-1 NHWC convs run as
--- conv2d_winograd_nhwc (tunelua.auto_scheduler.winograd; as extract_tasks was given).
function executor.build(mod, opts)
  opts = opts or {}
  if opts.winograd ~= nil and not winograd.MODES[opts.winograd] then
    error("executor.build: winograd must be \"auto\", \"always\" or \"never\", got " .. tostring(opts.winograd),
          2)
  end
  local tstr = opts.target or "llvm"
  if not targets.record(tstr).backend then
    error("executor.build: only CPU targets ('llvm', 'c') and OpenCL ('opencl ...') run here, got '"
          .. tostring(targets.record(tstr).str) .. "'", 2)
  end
  local tgt = strategy.parse_target(tstr, 2)
  -- a triple of another machine: with a cross toolchain (arm_cpu) the network is built twice
  -- over: its kernels for this host (the same schedules, runnable here: GraphModule) and, at
  -- export_library, for the target with its cross compiler; without one it is an error
  local triple = tgt.options and tgt.options.mtriple
  local host_arch = ({ x64 = "x86_64", x86 = "i686", arm64 = "aarch64", arm = "arm" })[jit.arch] or jit.arch
  local cross = false
  if triple and not triple:match("^" .. host_arch:gsub("%-", "%%-")) and
     not (host_arch == "x86_64" and triple:match("^x86%-64")) then
    if tgt.cross_prefix == "" and not (tgt.cc and tgt.cc ~= "") then
      error(string.format("executor.build: target '%s' is for %s, but a network runs on this host only: " ..
        "this build runs networks for %s (drop -mtriple, or build on that machine)",
        tgt.str, triple, host_arch), 2)
    end
    cross = true
  end
  local build_toolchain = tgt.toolchain
  if cross then build_toolchain = nil end
  local params = opts.params or {}
  -- the OpenCL default schedules' tiles, shaped for the device's kind (docs/opencl.md); asked
  -- when a group first needs a default schedule (a plan_only build asks no device)
  local ocl_shapes
  if tgt.schedules == "opencl" then ocl.shapes_option(opts, 2) end   -- a bad value fails here
  local t0 = C.tl_now()
  local history = load_history(opts.history, 2)
  -- an auto-scheduler context (auto_scheduler.ApplyHistoryBest) replaces templates and TopHub
  local ansor = history and history.auto_scheduler and history or nil
  local ansor_tasks = {}
  local ctxs = {}
  if history and not ansor then ctxs[#ctxs + 1] = history end
  if opts.tophub ~= false and not ansor then
    local th = tophub_context(tgt)
    if th then ctxs[#ctxs + 1] = th end
  end
  local m = mod
  if opts.opt ~= false then
    m = extract.optimize(mod, { target = tgt.str, params = params,
                                conv_blocks = opts.layouts ~= false and not ansor and
                                              executor.conv_blocks(tgt, ctxs, opts.winograd) or nil }, 2)
  end
  local main = walk.main(m, 2)

  -- 1. walk: values (lists of buffer descriptors), steps
  local bufs = {}        -- {shape, dtype, kind = "input"|"param"|"const"|"inter"|"output", ...}
  local val = {}
  local steps = {}       -- {kernel, args = {buf...}, name}
  local inputs = {}      -- name -> buf
  local input_order = {}
  local function new_buf(ty, kind)
    local b = { shape = ty.shape, dtype = ty.dtype or "float32", kind = kind, id = #bufs + 1 }
    bufs[#bufs + 1] = b
    return b
  end
  for _, p in ipairs(main.params) do
    local pv = params[p.name]
    local ty = walk.ttype(p)
    local b
    if pv ~= nil then
      b = new_buf(ty, "param")
      b.value = pv
    else
      b = new_buf(ty, "input")
      b.name = p.name
      inputs[p.name] = b
      input_order[#input_order + 1] = p.name
    end
    val[p] = { b }
  end
  local vopt = opts.vta
  local vsim, vkernels = nil, {}
  if vopt then
    if type(vopt) ~= "table" or type(vopt.env) ~= "table" or not vopt.env.handle then
      error("executor.build: opts.vta must be {env = vta.get_env(), config = ...}", 2)
    end
    if device_finish[tgt.backend] then
      error("executor.build: opts.vta needs a CPU host target ('llvm' or 'c'), got '" .. tgt.str .. "'", 2)
    end
    vsim = vta.simulator(vopt.env, vopt.dram_bytes)
  end
  local cache = {}       -- workload key -> compiled kernel record
  local kernels = {}
  local ntuned, ngroups = 0, 0
  for _, n in ipairs(walk.postorder(main.body)) do
    if n.kind == "const" then
      local b = new_buf(walk.ttype(n), "const")
      b.value = n.value
      val[n] = { b }
    elseif n.kind == "var" then
      if not val[n] then error("executor.build: free variable '" .. tostring(n.name) .. "'", 2) end
    elseif n.kind == "tuple" then
      local l = {}
      for _, f in ipairs(n.fields) do for _, b in ipairs(val[f]) do l[#l + 1] = b end end
      val[n] = l
    elseif n.kind == "tuple_get" then
      val[n] = { val[n.tuple][n.index + 1] }
    elseif n.kind == "call" then
      local args = {}
      for _, a in ipairs(n.args) do
        for _, b in ipairs(val[a]) do args[#args + 1] = b end
      end
      local vm = vopt and vta_groups.match(n)
      if vm then
        -- a VTA group: the conv of the chosen config with the group's own ending
        local task = vta.task(vopt.env, vm.args)
        local index, source, alts = 0, "default", nil
        if vopt.config then index, source, alts = vopt.config(task, vm) end
        -- the ending's bias and residual tiles share the accumulator with the conv's: a
        -- config chosen for the plain template may not fit them; then the picker's next
        -- candidates (alts: {{index, source}}, e.g. TopHub's after a tuned one), the first
        -- config's smaller neighbours (vta_groups.smaller_configs, labelled "<source>-fit")
        -- and last config 0 are tried
        local ok, vg = pcall(vta.group, vsim, task, index, vm.epilogue)
        local cands = {}
        for _, a in ipairs(alts or {}) do cands[#cands + 1] = a end
        if not ok and index ~= 0 and tostring(vg):find("accumulator", 1, true) then
          -- the same config with fewer threads or smaller spatial tiles
          for _, i in ipairs(vta_groups.smaller_configs(task, vm.args, index)) do
            cands[#cands + 1] = { i, (source or "given") .. "-fit" }
          end
        end
        cands[#cands + 1] = { 0, "default" }
        local ci = 1
        while not ok and index ~= 0 and tostring(vg):find("accumulator", 1, true) and cands[ci] do
          local nxt = cands[ci]
          ci = ci + 1
          if nxt[1] ~= index then
            if not opts.quiet then
              io.stderr:write(string.format("executor: VTA group %d: config %d (%s) does not fit with its ending; config %d (%s)\n",
                                            #vkernels, index, source or "given", nxt[1], nxt[2]))
            end
            index, source = nxt[1], nxt[2]
            ok, vg = pcall(vta.group, vsim, task, index, vm.epilogue)
          end
        end
        if not ok then
          local layer = vm.conv.attrs and vm.conv.attrs.name
          error(string.format("executor.build: VTA group %d (nn.conv2d%s, data %s, kernel %s, config %d): %s",
                              #vkernels, layer and (" layer " .. layer) or "",
                              table.concat(vm.args[1][2], "x"), table.concat(vm.args[2][2], "x"),
                              index, tostring(vg)), 2)
        end
        ngroups = ngroups + 1
        local k = { vta = vg, name = string.format("vta_conv2d_packed_%d", #vkernels),
                    key = vm.args, index = index, task = task, epilogue = vm.epilogue,
                    source = source or "given" }
        vkernels[#vkernels + 1] = k
        local sargs = {}
        for _, i in ipairs(vm.inputs) do sargs[#sargs + 1] = args[i] end
        local out = new_buf({ shape = walk.ttype(n).shape, dtype = "int8" }, "inter")
        sargs[#sargs + 1] = out
        local si = #steps + 1
        for _, b in ipairs(sargs) do
          if b.kind == "inter" then
            b.first = b.first or si
            b.last = si
          end
        end
        steps[si] = { kernel = k, args = sargs, name = k.name, vta = vg }
        val[n] = { out }
        goto next_node
      end
      do
      local g, s, how, fallback
      if ansor then
        g, s, how = ansor_group(n, tgt, ansor, ansor_tasks, opts.winograd)
      else
        g, s, how, fallback = tuned_group(n, tgt, ctxs, opts.winograd)
      end
      if not g then
        g = group.build(n, nil, 2)
        s = nil
      end
      -- layout-free arguments (weights): an auto-scheduled CPU kernel whose record was measured
      -- with them in its loops' order reads them so here too; the kernel is then shared only
      -- between groups whose layout-free arguments sit at the same places
      local known
      if how == "ansor" and tgt.schedules == "cpu" and opts.layout_rewrite ~= false and
         g.record and g.record.layout_rewrite == LAYOUT_REWRITE then
        local _, positions = group.layout_free(g)
        if #positions > 0 then known = positions end
      end
      local key = group.key_text(g) .. (how and (" " .. how) or "") ..
                  (known and (" known " .. table.concat(known, ",")) or "")
      ngroups = ngroups + 1
      if how and not fallback then ntuned = ntuned + 1 end
      local k = cache[key]
      if not k and opts.plan_only then
        k = { name = g.name, key = key }
        cache[key] = k
      elseif not k then
        if not s then
          s = new_sched(g)
          if tgt.schedules == "opencl" and not ocl_shapes then ocl_shapes = ocl.tile_shapes(tgt, opts, 2) end
          local ok, err = pcall(default_schedule, s, tgt.schedules, ocl_shapes)
          if not ok then
            -- a default schedule that fails leaves the group unscheduled (correct, slow)
            C.tl_clearerr(ctx)
            io.stderr:write("executor: default schedule of " .. g.name .. " failed (" .. tostring(err)
                            .. "); using the naive loops\n")
            s = new_sched(g)
          end
        end
        local targs = {}
        for _, inp in ipairs(g.inputs) do
          if inp.tensor >= 0 then targs[#targs + 1] = inp.tensor end
        end
        for _, c in ipairs(g.consts) do targs[#targs + 1] = c.tensor end
        for _, o in ipairs(g.outputs) do targs[#targs + 1] = o end
        local ids = intarr(#targs)
        for i, t in ipairs(targs) do ids[i - 1] = sched_tensor(s, g.dag, t) end
        local fname = string.format("tlg_%d", #kernels)
        local lp = ffi.new("tl_lowered *[1]")
        local rc = C.tl_lower(ctx, s, ids, #targs, fname, lp)
        if rc ~= 0 then
          local msg = core.errmsg()
          C.tl_clearerr(ctx)
          error("executor.build: lowering " .. g.name .. " failed: " .. msg, 2)
        end
        local low = ffi.gc(lp[0], C.tl_lowered_free)
        k = { lowered = low, fname = fname, name = g.name, key = key, tuned = how, compile_s = 0,
              record = g.record }
        if known then k.layout_maps = rewrite_layouts(low, known) end
        kernels[#kernels + 1] = k
        cache[key] = k
      end
      -- arguments of the step: used inputs, consts, outputs
      local sargs = {}
      for i, inp in ipairs(g.inputs) do
        if inp.tensor >= 0 then sargs[#sargs + 1] = args[i] end
      end
      for _, c in ipairs(g.consts) do
        local b = new_buf(walk.ttype(c.node), "const")
        b.value = c.value
        sargs[#sargs + 1] = b
      end
      -- layout-free arguments the kernel reads in its own layout: each value rewritten once
      -- (a weight two steps of the kernel share, once for both)
      for pos, map in pairs(k.layout_maps or {}) do
        local old = sargs[pos]
        map.done = map.done or {}
        local b = map.done[old.value]
        if not b then
          b = new_buf({ shape = map.shape, dtype = old.dtype }, "const")
          b.value = apply_layout_map(map, old.value)
          map.done[old.value] = b
        end
        sargs[pos] = b
      end
      local outs = {}
      for _, o in ipairs(g.outputs) do
        local ty = { shape = group.shape(g.dag, o),
                     dtype = ffi.string(C.tl_dtype_name(C.tl_dag_tensor_dtype(g.dag, o))) }
        local b = new_buf(ty, "inter")
        outs[#outs + 1] = b
        sargs[#sargs + 1] = b
      end
      local si = #steps + 1
      for _, b in ipairs(sargs) do
        if b.kind == "inter" then
          b.first = b.first or si
          b.last = si
        end
      end
      steps[si] = { kernel = k, args = sargs, name = g.name }
      val[n] = outs
      end
    end
    ::next_node::
  end
  local outputs = val[main.body]
  for _, b in ipairs(outputs) do
    if b.kind == "inter" then b.kind = "output" end
  end

  -- a device backend (OpenCL: storage slots on the device, device kernels; graph/opencl.lua)
  local finish = device_finish[tgt.backend]
  if finish and not opts.plan_only then
    local r = finish({ tgt = tgt, bufs = bufs, steps = steps, kernels = kernels, opts = opts }, 2)
    r.kernels, r.steps, r.inputs, r.input_order, r.outputs = kernels, steps, inputs, input_order, outputs
    r.target, r.num_groups, r.num_tuned, r.build_seconds = tgt.str, ngroups, ntuned, C.tl_now() - t0
    local lib = setmetatable(r, Lib)
    if not opts.quiet then report_tuned(ansor, ansor_tasks, ngroups, ntuned) end
    return lib
  end

  -- 2. memory plan over the intermediates
  local inter, sum = group.intermediates(bufs)
  local weight_bytes, io_bytes = executor.tensor_bytes(bufs, steps)
  local n = #inter
  local sizes, first, last, offs = i64arr(n + 1), intarr(n + 1), intarr(n + 1), i64arr(n + 1)
  for i, b in ipairs(inter) do
    sizes[i - 1] = b.nbytes
    first[i - 1] = b.first
    last[i - 1] = b.last
  end
  local total = i64arr(1)
  check(C.tl_graph_plan(ctx, n, sizes, first, last, ALIGN, offs, total), 2)
  local arena = tonumber(total[0])
  if opts.plan_only then
    local largest = 0
    for _, b in ipairs(inter) do if b.nbytes > largest then largest = b.nbytes end end
    return { planned = arena, intermediates = sum, groups = ngroups, buffers = n, largest = largest,
             weights = weight_bytes, io = io_bytes, steps = #steps }
  end
  local ep = ffi.new("tl_graph_exec *[1]")
  check(C.tl_graph_exec_new(ctx, arena, ep), 2)
  local e = ffi.gc(ep[0], C.tl_graph_exec_free)

  -- 3. slots
  local out_arrays = {}
  for i, b in ipairs(inter) do
    local sh = i64arr(#b.shape + 1)
    for j, d in ipairs(b.shape) do sh[j - 1] = d end
    local s = int1()
    check(C.tl_graph_exec_slot_view(ctx, e, offs[i - 1], #b.shape, sh, dtype_code(b.dtype), s), 2)
    b.slot = s[0]
    b.offset = tonumber(offs[i - 1])
  end
  -- a constant no step reads (one whose kernels take it in a rewritten layout) is not bound
  local used = {}
  for _, st in ipairs(steps) do
    for _, b in ipairs(st.args) do used[b] = true end
  end
  for _, b in ipairs(outputs) do used[b] = true end
  for _, b in ipairs(bufs) do
    if b.kind == "input" or b.kind == "output" then
      b.array = nd.empty(b.shape, b.dtype)
      b.slot = external_slot(e, b.array)
    elseif b.kind == "const" and not used[b] then
      b.slot = nil
    elseif b.kind == "param" or b.kind == "const" then
      local v = b.value
      if type(v) == "number" then v = nd.full(b.shape, v, b.dtype) end
      if not nd.is_array(v) then
        error("executor.build: value of a constant or param is not a tl.nd array", 2)
      end
      b.slot = external_slot(e, v)
    end
  end
  -- compile: all kernels in a few batched compiler runs (default), or one module each
  local glib
  local compile_s = 0
  if #kernels > 0 and opts.batch ~= false then
    local fs = ffi.new("tl_lowered *[?]", #kernels)
    for i, k in ipairs(kernels) do fs[i - 1] = k.lowered end
    local parts = opts.jobs or math.max(1, math.min(C.tl_pool_size(C.tl_pool_global()), 4))
    if #kernels < 4 then parts = 1 end
    local lp = ffi.new("tl_graph_lib *[1]")
    check(C.tl_graph_lib_build(ctx, fs, #kernels, parts, build_toolchain, opts.cflags, opts.timeout or 0, lp), 2)
    glib = ffi.gc(lp[0], C.tl_graph_lib_free)
    compile_s = C.tl_graph_lib_compile_seconds(glib)
    for _, k in ipairs(kernels) do
      local kid = int1()
      check(C.tl_graph_exec_add_kernel_lib(ctx, e, glib, k.fname, kid), 2)
      k.id = kid[0]
    end
  else
    for _, k in ipairs(kernels) do
      local mp = ffi.new("tl_module *[1]")
      check(C.tl_lowered_build(ctx, k.lowered, build_toolchain, opts.cflags, mp), 2)
      k.module = ffi.gc(mp[0], C.tl_module_free)
      k.compile_s = C.tl_module_compile_seconds(k.module)
      compile_s = compile_s + k.compile_s
      local kid = int1()
      check(C.tl_graph_exec_add_kernel(ctx, e, k.module, k.fname, kid), 2)
      k.id = kid[0]
    end
  end
  -- the lowered kernels stay for export_library (compiled again with the target's toolchain)
  for i, k in ipairs(vkernels) do
    local kid = int1()
    check(C.tl_vta_group_attach(ctx, k.vta.handle, e, string.format("vta_%d", i - 1), kid), 2)
    k.id = kid[0]
  end
  for _, st in ipairs(steps) do
    local ids = intarr(#st.args)
    for i, b in ipairs(st.args) do ids[i - 1] = b.slot end
    check(C.tl_graph_exec_add_step(ctx, e, st.kernel.id, ids, #st.args), 2)
  end

  local lib = setmetatable({
    exec = e, glib = glib, compile_seconds = compile_s, kernels = kernels, steps = steps, inputs = inputs, input_order = input_order,
    outputs = outputs, target = tgt.str, cross = cross, planned_bytes = arena, intermediate_bytes = sum, bufs = bufs,
    weight_bytes = weight_bytes, io_bytes = io_bytes,
    num_groups = ngroups, num_tuned = ntuned, build_seconds = C.tl_now() - t0,
    vta_sim = vsim, vta_kernels = #vkernels > 0 and vkernels or nil, vta_env = vopt and vopt.env,
    vta_dram_bytes = vopt and vopt.dram_bytes,
  }, Lib)
  if not opts.quiet then report_tuned(ansor, ansor_tasks, ngroups, ntuned) end
  return lib
end

--- lib:vta_cycles() -> the VTA groups of the last run: a list of {name, step, cycles,
--- index, source, args, epilogue, macs} in step order, and the total simulated cycles and seconds (the
--- cycle model at the configuration's clock); nil when the lib has no VTA group.
function Lib:vta_cycles()
  local ks = rawget(self, "vta_kernels")
  local na = rawget(self, "vta_artifact_groups")
  if not ks and na then
    -- an imported network: each group's cycles of the last run, in kernel order
    local cyc = ffi.new("uint64_t[?]", na)
    C.tl_vta_graph_cycles(C.tl_graph_artifact_host_state(self.artifact), 0, cyc, na)
    local rows, total = {}, 0
    for i = 1, na do
      rows[i] = { name = "vta_" .. (i - 1), cycles = tonumber(cyc[i - 1]) }
      total = total + rows[i].cycles
    end
    return rows, total, total / ((self.vta_env.CLOCK_MHZ or 100) * 1e6)
  end
  if not ks then return nil end
  local rows, total = {}, 0
  for si, st in ipairs(self.steps) do
    if st.vta then
      local c = st.vta:cycles()
      rows[#rows + 1] = { name = st.name, step = si, cycles = c, index = st.kernel.index,
                          args = st.kernel.key, epilogue = st.kernel.epilogue,
                          source = st.kernel.source, macs = st.kernel.task:flop() / 2 }
      total = total + c
    end
  end
  local mhz = self.vta_env.CLOCK_MHZ or 100
  return rows, total, total / (mhz * 1e6)
end

--- executor.plan_memory(mod, {target, params}) -> {planned, intermediates, groups, buffers,
--- largest}: the memory plan build would make, without compiling anything.
function executor.plan_memory(mod, opts)
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.plan_only, o.quiet, o.tophub = true, true, false
  o.history = nil
  return executor.build(mod, o)
end

--- Memory: planned arena bytes, sum of all intermediates' bytes, the weights and constants
--- the steps read (each array once, as deployed: packed weights, not the originals they
--- came from), the inputs and outputs; peak = planned + weights + io (what a run holds),
--- total = intermediates + weights + io (every tensor in its own buffer).
function Lib:memory()
  local w, io_ = self.weight_bytes or 0, self.io_bytes or 0
  return { planned = self.planned_bytes, intermediates = self.intermediate_bytes, weights = w, io = io_,
           peak = self.planned_bytes + w + io_, total = self.intermediate_bytes + w + io_ }
end

--- executor.tensor_bytes(bufs, steps) -> weight bytes, io bytes: the distinct constant
--- arrays the steps read, and the inputs and graph outputs.
function executor.tensor_bytes(bufs, steps)
  local seen, w, io_ = {}, 0, 0
  local function nbytes(b)
    local n = 1
    for _, d in ipairs(b.shape) do n = n * d end
    return n * C.tl_dtype_bytes(dtype_code(b.dtype))
  end
  for _, st in ipairs(steps) do
    for _, b in ipairs(st.args) do
      if (b.kind == "param" or b.kind == "const") and not seen[b.value or b] then
        seen[b.value or b] = true
        w = w + nbytes(b)
      elseif (b.kind == "input" or b.kind == "output") and not seen[b] then
        seen[b] = true
        io_ = io_ + nbytes(b)
      end
    end
  end
  return w, io_
end

-- ---- GraphModule --------------------------------------------------------------------

local GraphModule = {}
GraphModule.__index = GraphModule
executor.GraphModule_mt = GraphModule

function executor.GraphModule(lib)
  if getmetatable(lib) ~= Lib then error("GraphModule: expected a lib from executor.build", 2) end
  -- host kernels of a CPU this one lacks (an -mcpu of another machine) do not run here; the
  -- lib can still be exported to that machine (executor.export)
  local tgt = targets.record(lib.target)
  if not tgt.on_device and not lib.cross then   -- a cross build's host twin runs here
    local ok, why = tgt:check_host()
    if not ok then error("GraphModule: " .. why, 2) end
  end
  local m = setmetatable({ lib = lib }, GraphModule)
  -- m.module:time_evaluator("run", dev, {number, repeat, min_repeat_ms}) as in TVM
  m.module = {
    time_evaluator = function(_, fname, _, o)
      if fname ~= "run" then error("time_evaluator: only \"run\" can be timed, got " .. tostring(fname), 2) end
      o = o or {}
      return function()
        return m:benchmark({ number = o.number, repeats = o.repeats or o["repeat"],
                             min_repeat_ms = o.min_repeat_ms, quiet = true })
      end
    end,
  }
  return m
end

--- executor.find_input(inputs, order, name, level) -> name, input: a network input by name or
--- 0-based index (order: the names in input order), for GraphModule and the remote graph
--- module (tunelua.rpc.graph); an error naming the inputs at level when there is none.
function executor.find_input(inputs, order, name, level)
  if type(name) == "number" then name = order[name + 1] or name end
  local b = inputs[name]
  if not b then
    error(string.format("set_input: no input named '%s' (inputs: %s)", tostring(name),
                        table.concat(order, ", ")), level + 1)
  end
  return name, b
end

local function input_buf(self, name, level)
  local _, b = executor.find_input(self.lib.inputs, self.lib.input_order, name, level + 1)
  return b
end

--- m:set_input(name, array) or m:set_input({name = array, ...})
function GraphModule:set_input(name, value)
  if type(name) == "table" and value == nil then
    for k, v in pairs(name) do self:set_input(k, v) end
    return
  end
  local b = input_buf(self, name, 2)
  if not nd.is_array(value) then value = nd.array(value, b.dtype) end
  check(C.tl_graph_exec_set(ctx, self.lib.exec, b.slot, value), 2)
end

function GraphModule:get_input(name)
  local b = input_buf(self, name, 2)
  return b.array
end

function GraphModule:run(inputs)
  if inputs then self:set_input(inputs) end
  check(C.tl_graph_exec_run(ctx, self.lib.exec), 2)
end

function GraphModule:get_num_outputs() return #self.lib.outputs end
function GraphModule:get_num_inputs() return #self.lib.input_order end

--- m:get_output(i): output i (0-based, as TVM) as a tl.nd array sharing the output buffer.
function GraphModule:get_output(i)
  i = i or 0
  local b = self.lib.outputs[i + 1]
  if not b then
    error(string.format("get_output: index %s out of range (%d outputs)", tostring(i),
                        #self.lib.outputs), 2)
  end
  local out = ffi.new("tl_array *[1]")
  check(C.tl_graph_exec_slot_ref(ctx, self.lib.exec, b.slot, out), 2)
  local a = nd.adopt(out[0])
  if self.lib.device then return a:copyto("cpu") end   -- OpenCL: a host copy
  return a
end

--- m:benchmark({number = 1, repeats = 3, min_repeat_ms = 0, quiet = false})
--- -> {mean = s, median = s, std = s, results = {s...}}; prints "Mean inference time (std dev): X ms (Y ms)".
local BenchResult = {}
BenchResult.__index = BenchResult
BenchResult.__tostring = function(r)
  return string.format("Mean inference time (std dev): %.2f ms (%.2f ms)", r.mean * 1e3, r.std * 1e3)
end

function GraphModule:benchmark(opts, opts2)
  if opts2 ~= nil or (opts ~= nil and type(opts) ~= "table") or
     (type(opts) == "table" and getmetatable(opts) ~= nil) then
    opts = opts2        -- m:benchmark(dev, {...}) as in TVM
  end
  opts = opts or {}
  local number = opts.number or 1
  local repeats = opts.repeats or opts["repeat"] or 3
  local secs = dblarr(repeats)
  check(C.tl_graph_exec_time(ctx, self.lib.exec, number, repeats, opts.min_repeat_ms or 0, secs), 2)
  local r = {}
  for i = 0, repeats - 1 do r[i + 1] = secs[i] end
  local res = executor.bench_result(r)
  if not opts.quiet then print(tostring(res)) end
  return res
end

--- executor.bench_result(list of seconds per run) -> {mean, median, std, results}, printed as
--- "Mean inference time (std dev): X ms (Y ms)" (GraphModule:benchmark's result).
function executor.bench_result(r)
  local repeats, mean = #r, 0
  for _, x in ipairs(r) do mean = mean + x end
  mean = mean / repeats
  local var = 0
  for _, x in ipairs(r) do var = var + (x - mean) ^ 2 end
  local std = math.sqrt(var / repeats)
  return setmetatable({ mean = mean, median = stats.median(r), std = std, results = r }, BenchResult)
end

--- executor.benchmark_interleaved(mods, total, rounds) -> one bench_result per GraphModule of
--- mods: in each of rounds rounds every module in turn runs max(1, floor(total / rounds))
--- timed single calls, so that drifts of the machine (clock, other load) fall on all alike.
function executor.benchmark_interleaved(mods, total, rounds)
  local per = math.max(1, math.floor(total / rounds))
  local runs = {}
  for i = 1, #mods do runs[i] = {} end
  for _ = 1, rounds do
    for i, m in ipairs(mods) do
      for _, x in ipairs(m:benchmark({ number = 1, repeats = per, quiet = true }).results) do
        runs[i][#runs[i] + 1] = x
      end
    end
  end
  local res = {}
  for i = 1, #mods do res[i] = executor.bench_result(runs[i]) end
  return res
end

--- Per-step mean seconds: list of {name, seconds}.
function GraphModule:profile(number)
  number = number or 1
  local n = #self.lib.steps
  local secs = dblarr(n + 1)
  check(C.tl_graph_exec_profile(ctx, self.lib.exec, number, secs), 2)
  local r = {}
  for i, st in ipairs(self.lib.steps) do r[i] = { name = st.name, seconds = secs[i - 1] } end
  return r
end

-- ---- export and import: a compiled network that travels (core/graph/artifact.c) ------------

--- executor.exportable(lib) -> true when lib can be exported (a network executor.build made).
function executor.exportable(lib)
  if getmetatable(lib) ~= Lib or lib.exec == nil or lib.bufs == nil then return false end
  -- VTA groups travel as their recipe (targets/vta/artifact.c) on a CPU host target
  if rawget(lib, "vta_kernels") and lib.device then return false end
  if lib.device then
    for _, k in ipairs(lib.kernels) do if not k.ocl_source then return false end end
  end
  return true
end

local function copy_file(src, dst)
  local f, err = io.open(src, "rb")
  if not f then error("executor.export: cannot read " .. tostring(err), 3) end
  local data = f:read("*a")
  f:close()
  require("tunelua.file").write_all(dst, data)
end

--- executor.export(lib, dir, prefix) -> {"graph.json", "params.bin", "lib0.so", ...}: lib as
--- files in dir (made if missing): the kernels' shared objects, the graph description
--- (graph.json: slots, steps, memory plan, inputs, outputs) and the constant arrays' bytes
--- (params.bin), which executor.import or an RPC server's graph_load (docs/rpc.md) load into
--- an executor. Every name starts with prefix (default ""), so that several networks can share
--- a directory (a shared object is loaded once per path).
function executor.export(lib, dir, prefix)
  prefix = prefix or ""
  if not executor.exportable(lib) then
    error("executor.export: expected a network built by executor.build", 2)
  end
  local json = require "tunelua.json"
  local file = require "tunelua.file"
  file.mkdirs(dir)
  local ocl = lib.device ~= nil
  local names = { prefix .. "graph.json", prefix .. "params.bin" }
  local libs, lib_of, kernels = {}, {}, {}
  for i, k in ipairs(lib.kernels) do
    if k.id ~= i - 1 then error("executor.export: kernel ids out of order", 2) end
    local path
    if ocl then
      -- an OpenCL kernel travels as its source and manifest (built where it runs)
      local src, man = string.format("%sk%d.cl", prefix, i - 1), string.format("%sk%d.json", prefix, i - 1)
      file.write_all(dir .. "/" .. src, k.ocl_source)
      file.write_all(dir .. "/" .. man, k.ocl_manifest)
      names[#names + 1], names[#names + 2] = src, man
      kernels[i] = { source = src, manifest = man }
    elseif lib.glib then
      local part = C.tl_graph_lib_part_of(lib.glib, k.fname)
      path = part >= 0 and ffi.string(C.tl_graph_lib_part_path(lib.glib, part)) or nil
    elseif k.module then
      path = ffi.string(C.tl_module_path(k.module))
    end
    if not ocl and not path then error("executor.export: no shared object holds kernel " .. k.fname, 2) end
    if path and not lib_of[path] then
      libs[#libs + 1] = path
      lib_of[path] = #libs - 1
    end
    if path then kernels[i] = { lib = lib_of[path], name = k.fname } end
  end
  -- VTA groups: each rebuilt where it is loaded from its task args, config index and ending
  -- on a simulator of the artifact's configuration (targets/vta/artifact.c)
  local vks = rawget(lib, "vta_kernels")
  for j, k in ipairs(vks or {}) do
    if k.id ~= #lib.kernels + j - 1 then error("executor.export: VTA kernel ids out of order", 2) end
    kernels[#lib.kernels + j] = { vta = { args = json.decode(k.task.args), config = k.index,
                                          epilogue = json.decode(k.vta.epilogue) } }
  end
  local lib_names = json.array({})
  for i, path in ipairs(libs) do
    lib_names[i] = string.format("%slib%d.so", prefix, i - 1)
    copy_file(path, dir .. "/" .. lib_names[i])
    names[#names + 1] = lib_names[i]
  end
  -- slots by id; a constant's bytes once per array
  local slots, blob, at, nblob = {}, {}, {}, 0
  local inputs, outputs = json.array({}), json.array({})
  for _, b in ipairs(lib.bufs) do
    if b.slot then
      local d = { shape = json.array({ unpack(b.shape) }), dtype = b.dtype }
      if b.kind == "inter" and ocl then
        d.storage = b.storage
      elseif b.kind == "inter" then
        d.view = b.offset
      elseif b.kind == "param" or b.kind == "const" then
        local v = b.value
        if type(v) == "number" then v = nd.full(b.shape, v, b.dtype) end
        local off = at[v]
        if not off then
          off = nblob
          blob[#blob + 1] = ffi.string(v:data_ptr(), v:nbytes())
          nblob = nblob + v:nbytes()
          at[v] = off
        end
        d.param = off
      end
      slots[b.slot + 1] = d
    end
  end
  for i = 1, #slots do
    if not slots[i] then error("executor.export: slot " .. (i - 1) .. " has no buffer", 2) end
  end
  for _, name in ipairs(lib.input_order) do
    inputs[#inputs + 1] = { name = name, slot = lib.inputs[name].slot }
  end
  for i, b in ipairs(lib.outputs) do outputs[i] = b.slot end
  local steps = json.array({})
  for i, st in ipairs(lib.steps) do
    local args = json.array({})
    for j, b in ipairs(st.args) do args[j] = b.slot end
    steps[i] = { kernel = st.kernel.id, args = args }
  end
  local graph = { format = "tunelua-graph", version = 1, arena = ocl and 0 or lib.planned_bytes,
                  device = ocl and "opencl" or "cpu",
                  libs = lib_names, kernels = json.array(kernels), slots = json.array(slots),
                  steps = steps, inputs = inputs, outputs = outputs, params_bytes = nblob }
  if ocl then graph.storages = json.array({ unpack(lib.storage_bytes) }) end
  if vks then
    graph.vta = { config = lib.vta_env.config_text, model = lib.vta_env.MODEL,
                  dram_bytes = lib.vta_dram_bytes or 2 ^ 28 }
  end
  file.write_all(dir .. "/" .. names[2], table.concat(blob))
  file.write_all(dir .. "/" .. names[1], json.encode(graph))
  return names
end

-- ---- export_library: one file for a device's runtime (device/runtime.c, tunelua-run) ---------

-- The machine a target's code is for: "aarch64", "arm", "x86_64" (its -mtriple, arm_cpu
-- without one: aarch64, else this host).
local function target_arch(tgt)
  local t = tgt.options and tgt.options.mtriple
  if not t and tgt.family == "arm_cpu" then t = "aarch64" end
  if not t then
    return ({ x64 = "x86_64", x86 = "i686", arm64 = "aarch64", arm = "arm" })[jit.arch] or jit.arch
  end
  if t:match("^aarch64") or t:match("^arm64") then return "aarch64" end
  if t:match("^arm") then return "arm" end
  if t:match("^x86_64") or t:match("^x86%-64") then return "x86_64" end
  return (t:match("^[^-]+"))
end
executor.target_arch = target_arch

local function u32le(n)
  return string.char(n % 256, math.floor(n / 256) % 256, math.floor(n / 65536) % 256,
                     math.floor(n / 16777216) % 256)
end
local function u64le(n) return u32le(n % 4294967296) .. u32le(math.floor(n / 4294967296)) end

--- lib:export_library(path) -> path: the compiled network as one file (a "tlpack") for the
--- device runtime (device/tl_runtime.h: tl_runtime_load ... tl_runtime_get_output, and
--- tunelua-run): the kernels compiled by the target's toolchain into one shared object (the
--- cross compiler of an arm_cpu target), the graph description and the params of
--- executor.export, and meta.json (the target and the machine it is for). Layout:
---   "TLPACK01", uint32 count, count x (uint32 name length, name, uint64 size, bytes),
---   "TLPKEND1", uint64 total file size          (little-endian; a truncated file is refused)
function Lib:export_library(path)
  if type(path) ~= "string" or path == "" then error("export_library: expected a file path", 2) end
  if self.device or not self.exec or not self.kernels then
    error("export_library: expected a CPU network built by executor.build", 2)
  end
  if rawget(self, "vta_kernels") then
    -- the device runtime has no VTA simulator; executor.export (graph_load) carries the groups
    error("export_library: this network has VTA groups, which the device runtime cannot run " ..
          "(executor.export and an RPC server's graph_load carry them)", 2)
  end
  local json = require "tunelua.json"
  local file = require "tunelua.file"
  local tgt = targets.parse(self.target)
  local fs = ffi.new("tl_lowered *[?]", #self.kernels)
  for i, k in ipairs(self.kernels) do
    if not k.lowered then error("export_library: kernel " .. k.fname .. " has no lowered function", 2) end
    fs[i - 1] = k.lowered
  end
  local dir = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-export")
  local ok, err = pcall(function()
    local so = dir .. "/lib0.so"
    check(C.tl_graph_lib_compile(ctx, fs, #self.kernels, tgt.toolchain, nil, 0, so), 3)
    -- the graph and params as executor.export writes them, then one library for every kernel
    local names = executor.export(self, dir, "x_")
    local gj = json.decode(assert(io.open(dir .. "/x_graph.json", "rb")):read("*a"))
    gj.libs = json.array({ "lib0.so" })
    local kernels = json.array({})
    for i, k in ipairs(self.kernels) do kernels[i] = { lib = 0, name = k.fname } end
    gj.kernels = kernels
    local meta = { format = "tunelua-pack", version = 1, target = tgt.str, arch = target_arch(tgt) }
    local members = {
      { "meta.json", json.encode(meta) },
      { "graph.json", json.encode(gj) },
      { "params.bin", assert(io.open(dir .. "/x_params.bin", "rb")):read("*a") },
      { "lib0.so", assert(io.open(so, "rb")):read("*a") },
    }
    local parts = { "TLPACK01", u32le(#members) }
    local size = 12
    for _, m in ipairs(members) do
      parts[#parts + 1] = u32le(#m[1]) .. m[1] .. u64le(#m[2])
      parts[#parts + 1] = m[2]
      size = size + 4 + #m[1] + 8 + #m[2]
    end
    size = size + 16
    parts[#parts + 1] = "TLPKEND1" .. u64le(size)
    file.write_all(path, table.concat(parts))
    for _, n in ipairs(names) do os.remove(dir .. "/" .. n) end
  end)
  file.remove(dir)
  if not ok then error("export_library: " .. tostring(err):gsub("^[^%s:]+%.lua:%d+: ", ""), 2) end
  return path
end

--- executor.import(dir, prefix, dev) -> lib: an exported network (executor.export) loaded into
--- an executor of its own (tl_graph_artifact_load; an OpenCL network on OpenCL device dev,
--- default 0), for executor.GraphModule.
function executor.import(dir, prefix, dev)
  prefix = prefix or ""
  local p = ffi.new("tl_graph_artifact *[1]")
  check(C.tl_graph_artifact_load_kind(ctx, dir, prefix .. "graph.json", prefix .. "params.bin", 0,
                                      dev or 0, C.tl_vta_graph_kind(), p), 2)
  local a = ffi.gc(p[0], C.tl_graph_artifact_free)
  local lib = { artifact = a, exec = C.tl_graph_artifact_exec(a), inputs = {}, input_order = {},
                outputs = {}, steps = {}, target = "artifact " .. dir }
  if C.tl_graph_artifact_device(a) == C.TL_DEV_OPENCL then lib.device = "opencl:" .. (dev or 0) end
  local function desc(slot)
    local out = ffi.new("tl_array *[1]")
    check(C.tl_graph_exec_slot_ref(ctx, lib.exec, slot, out), 3)
    local arr = nd.adopt(out[0])
    return { slot = slot, array = arr, shape = arr:shape(), dtype = arr:dtype() }
  end
  for i = 0, C.tl_graph_artifact_num_inputs(a) - 1 do
    local name = ffi.string(C.tl_graph_artifact_input_name(a, i))
    local b = desc(C.tl_graph_artifact_input_slot(a, i))
    b.name = name
    lib.inputs[name] = b
    lib.input_order[i + 1] = name
  end
  for i = 0, C.tl_graph_artifact_num_outputs(a) - 1 do
    lib.outputs[i + 1] = desc(C.tl_graph_artifact_output_slot(a, i))
  end
  for i = 1, C.tl_graph_artifact_num_steps(a) do lib.steps[i] = { name = "step " .. (i - 1) } end
  -- VTA groups on a simulator of the artifact's own (lib:vta_cycles())
  local nvta = C.tl_vta_graph_cycles(C.tl_graph_artifact_host_state(a), 0, nil, 0)
  if nvta > 0 then
    lib.vta_artifact_groups = nvta
    local f = assert(io.open(dir .. "/" .. prefix .. "graph.json", "rb"))
    local g = require("tunelua.json").decode(f:read("*a"))
    f:close()
    lib.vta_env = vta.get_env({ text = g.vta.config, name = "the artifact's vta_config.json" })
  end
  return setmetatable(lib, Lib)
end

return executor
