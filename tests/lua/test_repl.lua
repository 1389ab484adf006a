-- The REPL's pieces called from Lua: completion (repl.complete: module fields, lazily loaded
-- submodules, object fields and methods, config knobs, cdata methods), printing (repl.show:
-- modules without loading them, tasks, configs, spaces, kernel lists, nested tables) and
-- help (repl.help_text: doc comments read from the source). The loop itself, through a pipe
-- and a terminal, is tests/e2e/test_repl.sh.
local tl = require "tunelua"
local repl = require "tunelua.repl"

local function has(list, x)
  for _, v in ipairs(list) do if v == x then return true end end
  return false
end
local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end
local function contains(s, sub, what)
  assert(s:find(sub, 1, true), (what or "text") .. " lacks '" .. sub .. "':\n" .. s)
end

repl.env = repl.new_env()
assert(repl.env.tl == tl and repl.env.help == repl.help, "the REPL predefines tl and help")

-- ---- modules: listed with the names they load on access, without loading them -------------
assert(rawget(tl, "onnx") == nil, "tunelua.onnx is loaded before the test")
local s = repl.show(tl)
contains(s, "module tunelua", "show(tl)")
contains(s, "onnx", "show(tl)")
contains(s, "autotvm", "show(tl)")
contains(s, "lower", "show(tl)")
contains(s, 'version = "' .. tl.version .. '"', "show(tl)")
assert(rawget(tl, "onnx") == nil, "printing tl loaded tunelua.onnx")
for line in s:gmatch("[^\n]+") do assert(not line:match("%s$"), "a trailing blank in: " .. line) end

-- ---- completion --------------------------------------------------------------------------------
local c = repl.complete("tl.au")
assert(same(c, { "tl.auto_scheduler", "tl.autotvm" }), "tl.au -> " .. table.concat(c, " "))
assert(same(repl.complete("tl.autotvm.ta"), { "tl.autotvm.task" }), "a lazy submodule's field")
assert(has(repl.complete("tl.autotvm.tu"), "tl.autotvm.tune_tasks"), "a lazily re-exported function")
assert(has(repl.complete("tl.autotvm.task.cr"), "tl.autotvm.task.create"), "a submodule loaded on access")
assert(has(repl.complete("pri"), "print") and has(repl.complete("he"), "help"), "globals and help")
assert(has(repl.complete("whi"), "while"), "keywords")
assert(has(repl.complete("tl."), "tl.nd") and not has(repl.complete("tl.nd."), "tl.nd._shape_display"),
       "names starting with '_' are offered only for a '_' prefix")
assert(has(repl.complete("tl.nd._"), "tl.nd._shape_display"), "a '_' prefix offers them")
assert(#repl.complete("tl.au", 'print("tl.au', 7) == 0, "nothing inside a string literal")
assert(#repl.complete("nosuch.x") == 0 and #repl.complete("tl.nosuch.") == 0, "unknown bases")
assert(#repl.complete("f(x).a") == 0, "no calls are made to complete")

local task = tl.autotvm.task.create("dense_nopack.x86",
  { { "TENSOR", { 1, 512 }, "float32" }, { "TENSOR", { 1000, 512 }, "float32" }, nil, "float32" }, "llvm")
repl.env.t = task
c = repl.complete("t:")
for _, m in ipairs({ "t:build", "t:config", "t:instantiate", "t:lower", "t:workload" }) do
  assert(has(c, m), "t: lacks " .. m .. ": " .. table.concat(c, " "))
end
assert(not has(c, "t:config_space") and not has(c, "t:flop"), "':' offers methods only")
assert(same(repl.complete("t:ins"), { "t:instantiate" }), "a task's method by prefix")
assert(has(repl.complete("t."), "t.config_space") and has(repl.complete("t.fl"), "t.flop"), "a task's fields")

local sp = task.config_space
repl.env.sp = sp
assert(same(repl.complete("sp:kn"), { "sp:knob2point", "sp:knobs" }), "a config space's (cdata) methods")
assert(has(repl.complete("t.config_space:"), "t.config_space:get"), "methods through a field")

local cfg = task:config(5)
repl.env.cfg = cfg
c = repl.complete("cfg.tile_")
assert(same(c, { "cfg.tile_k", "cfg.tile_x", "cfg.tile_y" }), "a config's knobs: " .. table.concat(c, " "))
assert(has(repl.complete("cfg:"), "cfg:entity"), "a config's methods")

-- methods an __index function finds in a table of methods (schedules, stages, tensors)
local te = tl.te
local X = te.placeholder({ 8 }, "float32", "X")
local Y = te.compute({ 8 }, function(i) return X(i) + 1 end, "Y")
repl.env.sch = te.create_schedule(Y.op)
repl.env.st = repl.env.sch[Y]
assert(same(repl.complete("sch:cache_"), { "sch:cache_read", "sch:cache_write" }), "a schedule's methods")
assert(has(repl.complete("st:spl"), "st:split"), "a stage's methods")
contains(repl.help_text(repl.env.sch), "a tunelua.schedule.Schedule: steps (0): ...", "help(schedule)")
contains(repl.help_text(repl.env.sch), "s:copy() -> an independent schedule", "help(schedule)")

-- ---- printing ----------------------------------------------------------------------------------
assert(repl.show(task) == tostring(task), "a task prints through its __tostring")
assert(repl.show(cfg) == tostring(cfg) and tostring(cfg):find("tile_x", 1, true), "a config")
assert(repl.show(sp):match("^ConfigSpace %(len=160"), "a space: " .. repl.show(sp))
assert(repl.show("plain text") == "plain text", "a string alone prints as it is")
assert(repl.show({ 1, 2, { a = 1, b = "x" } }) == '{1, 2, {a = 1, b = "x"}}', repl.show({ 1, 2, { a = 1, b = "x" } }))
assert(repl.show({}) == "{}", "an empty table")
assert(repl.show({ name = "k", block = { 1, 1, 1 } }) == '{name = "k", block = {1, 1, 1}}', "name first")
assert(repl.show({ ["a b"] = 1, [true] = 2 }) == '{["a b"] = 1, [true] = 2}', repl.show({ ["a b"] = 1, [true] = 2 }))
assert(repl.show({ "a\nb" }) == '{"a\\nb"}', "strings inside a table are quoted")
local cyc = { 1 }
cyc.self = cyc
assert(repl.show(cyc) == "{1, self = <cycle>}", repl.show(cyc))
-- a list of tasks: one a line, numbered
local lst = repl.show({ task, task })
assert(lst == "{\n  [1] = " .. tostring(task) .. ",\n  [2] = " .. tostring(task) .. ",\n}", lst)
local long = {}
for i = 1, 150 do long[i] = i end
contains(repl.show(long), "... (50 more)", "a long list")
assert(repl.show({ m = tl.autotvm }) == "{m = <module tunelua.autotvm>}", "a module inside a table")
contains(repl.show(tl.lower), "build.lua:", "a function shows where it is defined")

-- kernels of an OpenCL function (pocl in CI)
local ocl = require "tunelua.opencl"
if ocl.available() then
  local te = tl.te
  local A = te.placeholder({ 64 }, "float32", "A")
  local B = te.compute({ 64 }, function(i) return A(i) * 2 end, "B")
  local s = te.create_schedule(B.op)
  local bx, tx = s[B]:split(B.op.axis[1], { factor = 16 })
  s[B]:bind(bx, "blockIdx.x")
  s[B]:bind(tx, "threadIdx.x")
  local f = tl.build(s, { A, B }, "opencl")
  local k = repl.show(f:kernels())
  assert(k == '{{name = "default_function_kernel0", block = {16, 1, 1}, grid = {4, 1, 1}}}', k)
else
  print("SKIP kernels printing: no OpenCL device")
end

-- ---- eval prints through show ---------------------------------------------------------------
local out = { buf = {} }
function out:write(...) for _, x in ipairs({ ... }) do self.buf[#self.buf + 1] = x end end
assert(repl.eval("{1, {2, 3}}", out))
assert(table.concat(out.buf) == "{1, {2, 3}}\n", table.concat(out.buf))
out.buf = {}
assert(repl.eval("tl.target", out))
contains(table.concat(out.buf), "module tunelua.target", "tl.target")
contains(table.concat(out.buf), "parse", "tl.target")

-- ---- help --------------------------------------------------------------------------------------
local h = repl.help_text()
contains(h, "help(x)", "help()")
contains(h, "Tab", "help()")
contains(h, "autotvm", "help()")
h = repl.help_text(tl.lower)
contains(h, "tunelua.build.lower(s, args, opts)", "help(tl.lower)")
contains(h, 'tl.lower(s, {A, B, C}, {name = "f"}) -> a lowered function', "help(tl.lower)")
h = repl.help_text("tl.autotvm.task.create")
contains(h, "tl.autotvm.task.create(name, args, target)", "help by name")
contains(h, "task.create(name, args, target) -> Task", "help by name")
h = repl.help_text(task)
contains(h, "a tunelua.autotvm.task.Task: Task(func_name=dense_nopack.x86", "help(task)")
contains(h, "instantiate(index)", "help(task)")
contains(h, "task:instantiate(index | config) -> schedule, args", "help(task)")
contains(h, "config_space", "help(task)")
h = repl.help_text(cfg)
contains(h, "a tunelua.autotvm.space.Config", "help(cfg)")
contains(h, "knobs (x.name -> the chosen entity): tile_y tile_x tile_k", "help(cfg)")
h = repl.help_text(sp)
contains(h, "a tunelua.autotvm.space.ConfigSpace: ConfigSpace (len=160", "help(space)")
contains(h, "s:get(index) -> Config", "help(space)")
h = repl.help_text(tl.target)
contains(h, "tunelua.target: target strings", "help(tl.target): the module's header")
contains(h, "functions:", "help(tl.target): its contents")
contains(repl.help_text(print), "built-in", "help(print)")
contains(repl.help_text("no.such"), "help: no value named 'no.such'", "help of an unknown name")
contains(repl.help_text(42), "a number: 42", "help(42)")

print("test_repl: ok")
