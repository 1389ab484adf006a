-- Padding without guards in auto-scheduled CPU kernels (core/ansor/annotate.c init_partition,
-- core/te/partition.c, core/te/layout.c; docs/auto_scheduler.md, "Padding without guards"):
--
-- 1. Every sampled CPU state of a padded conv marks loops "loop_partition_each", and only loops
--    past the first run of reduction loops; a conv without padding gets no mark.
-- 2. The sampled states whose padding is inlined into the conv: the marked kernel computes the
--    reference conv, with fewer guards in its body than the same steps without the marks; its
--    weight is still rewritten into the loops' order, and the rewritten kernel on the mapped
--    weight computes the same.
-- 3. A register-tiled state of a 3x3 conv on a 7x7 map (a row of 7 outputs x 32 channels, the
--    channels reduced inside the taps): with the marks the padding taps are gone, so the kernel
--    does 18% fewer multiply-adds (counted in the lowered loops), and no guard is left inside
--    the channel loop.
local ffi = require "ffi"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local nd = require "tunelua.nd"
local core = require "tunelua.core"
local json = require "tunelua.json"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"
local util = require "tests.lua.lib.util"

local C, ctx = core.C, core.ctx

local function ph(shape, name) return te.placeholder(shape, "float32", name) end

local function conv_task(hw, ci, co, pad)
  local y = topi.nn.conv2d_nhwc(ph({ 1, hw, hw, ci }, "x"), ph({ 3, 3, ci, co }, "w"),
                                { strides = 1, padding = { pad, pad, pad, pad }, dilation = 1 })
  return auto_scheduler.SearchTask{ compute_dag = y, target = "llvm" }
end

-- a state of task from a step list (JSON text, as records hold it)
local function from_steps(task, text)
  local init = ffi.cast("tl_sched *", C.tl_ansor_policy_init_state(task:policy_handle()))
  local out = ffi.new("tl_sched *[1]")
  assert(C.tl_sched_fresh(ctx, init, out) == 0, core.errmsg())
  local st = setmetatable({ handle = ffi.gc(out[0], C.tl_sched_free), task = task }, search.State_mt)
  assert(C.tl_sched_apply_json(ctx, st.handle, text) == 0, core.errmsg() .. "\n" .. text)
  return st
end

local function unmarked(steps)
  local kept = {}
  for _, s in ipairs(json.decode(steps)) do
    if not (s[1] == "PR" and s[4] == "loop_partition_each") then kept[#kept + 1] = s end
  end
  return json.encode(kept)
end

local function count(text, pat)
  local n = 0
  for _ in text:gmatch(pat) do n = n + 1 end
  return n
end

local run, close, rewrite = util.run_lowered, util.close, util.rewrite_layout

local function reference(task, args)
  local init = ffi.cast("tl_sched *", C.tl_ansor_policy_init_state(task:policy_handle()))
  return run(setmetatable({ handle = init, task = task }, search.State_mt):lower(), args)
end

-- ---- 1. which states carry marks ------------------------------------------------------------
do
  local padded, plain = conv_task(8, 16, 32, 1), conv_task(8, 16, 32, 0)
  for _, st in ipairs(plain:sample(12)) do
    assert(not st:steps():find("loop_partition_each", 1, true), "a conv without padding got a mark: " .. st:steps())
  end
  for i, st in ipairs(padded:sample(12)) do
    local steps = json.decode(st:steps())
    local marks = 0
    for _, s in ipairs(steps) do
      if s[1] == "PR" and s[4] == "loop_partition_each" then marks = marks + 1 end
    end
    assert(marks > 0, string.format("padded conv state %d has no partition mark: %s", i, st:steps()))
    -- the marked loops: none of them is a loop a producer could be computed in (the lowered
    -- nest has each marked loop inside the first reduction loop)
    local text = tostring(st:lower())
    assert(not text:find("pragma_loop_partition", 1, true), "state " .. i .. ": a mark survived lowering")
  end
end

-- ---- 2. inlined padding: correct, fewer guards, weight still rewritten -----------------------
do
  local task = conv_task(7, 16, 32, 1)
  local args = search.random_args(task, nil, 5)
  local ref = reference(task, args)
  local tried, rewritten = 0, 0
  for i, st in ipairs(task:sample(48)) do
    local marked = tostring(st:lower())
    local bare = tostring(from_steps(task, unmarked(st:steps())):lower())
    if marked ~= bare and tried < 4 then
      tried = tried + 1
      local what = string.format("state %d (%s)", i, st:steps())
      assert(count(marked, "if_then_else") < count(bare, "if_then_else"),
             what .. ": the marks left as many guards as before")
      close(run(st:lower(), args), ref, what)
      local l = st:lower()
      local m, shape = rewrite(l, 1)
      if m then
        rewritten = rewritten + 1
        local w2 = nd.empty(shape)
        assert(C.tl_layout_map_apply(ctx, m, args[2], w2) == 0, core.errmsg())
        close(run(l, { args[1], w2, args[3] }), ref, what .. ", weight rewritten")
      end
    end
  end
  assert(tried > 0, "no sampled state inlined its padding (48 states)")
  assert(rewritten > 0, "no weight of " .. tried .. " partitioned kernels was rewritten")
end

-- ---- 3. a register-tiled row of a 7x7 map -----------------------------------------------------
-- A sampled state with the padding inlined and a cache stage for the accumulators, its split
-- lengths set as the AutoTVM template tiles such a layer: per output row, a register tile of
-- the row's 7 outputs x 32 channels (two vectors on AVX-512), the rows of the taps (ry) outside
-- the channels (rc), the columns of the taps (rx) inside them.
do
  local task = conv_task(7, 16, 32, 1)
  local args = search.random_args(task, nil, 7)
  local ref = reference(task, args)
  local base
  for _, st in ipairs(task:sample(64)) do
    local steps = st:steps()
    if steps:find('"CHW"', 1, true) and steps:find('"loop_partition_each"', 1, true) and
       tostring(st:lower()) ~= tostring(from_steps(task, unmarked(steps)):lower()) then
      base = json.decode(steps)
      break
    end
  end
  assert(base, "no sampled state with a cache stage inlined its padding (64 states)")
  local sp = {}
  for k, s in ipairs(base) do if s[1] == "SP" and s[2] == base[2][2] then sp[#sp + 1] = k end end
  assert(#sp == 7, "expected the conv's 7 splits (n, y, x, f, rc, ry, rx), got " .. #sp)
  local lens = { { 1, 1, 1 }, { 1, 1, 1 }, { 1, 1, 7 }, { 1, 1, 32 }, { 16 }, { 1 }, { 3 } }
  for j, k in ipairs(sp) do base[k][5] = lens[j] end
  local text = json.encode(base)
  local st = from_steps(task, text)
  local marked = tostring(st:lower())
  local bare = tostring(from_steps(task, unmarked(text)):lower())
  assert(count(bare, "if_then_else") > 0, "the state without marks reads the padding through no guard:\n" .. bare)
  assert(count(marked, "if_then_else") == 0,
         "guards left in the marked row-tiled kernel:\n" .. marked .. "\nsteps: " .. text)
  close(run(st:lower(), args), ref, "row-tiled state " .. text)
end

print("ansor partition: ok")
