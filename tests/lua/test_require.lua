-- Hard requires: a module that exists but fails to load raises its error on every path
-- that needs it (never a silent fallback), and core.optional_require returns nil only
-- for a module that does not exist.
local core = require "tunelua.core"
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"

local function raises(fn, want, what)
  local ok, err = pcall(fn)
  assert(not ok, what .. ": expected an error")
  assert(tostring(err):find(want, 1, true), what .. ": unexpected error: " .. tostring(err))
end

-- a private module tree: broken modules shadow tunelua's for the duration of the test
local util = require "tests.lua.lib.util"
local dir = util.tmpdir("require")
require("tunelua.file").mkdirs(dir .. "/tunelua/autotvm")
local function write(path, text)
  local f = assert(io.open(dir .. "/" .. path, "w"))
  f:write(text)
  f:close()
end
write("tl_broken_syntax.lua", "return { x = = 1 }\n")
write("tl_broken_inner.lua", "return require 'tl_no_such_inner_module'\n")
write("tunelua/autotvm/task.lua", "local task = {\nreturn task\n")
local saved_path = package.path
package.path = dir .. "/?.lua;" .. package.path

-- optional_require: absent -> nil; present but broken -> the error
assert(core.optional_require("tl_no_such_module") == nil, "a missing module is nil")
raises(function() core.optional_require("tl_broken_syntax") end, "tl_broken_syntax.lua", "syntax error")
raises(function() core.optional_require("tl_broken_inner") end, "tl_no_such_inner_module",
       "a missing module inside an existing one")
assert(core.optional_require("tunelua.json") == require "tunelua.json", "a present module")

-- the graph layer with a broken tunelua.autotvm.task: extraction and the executor's tuned
-- path raise the syntax error instead of falling back to untuned schedules
local saved_task = package.loaded["tunelua.autotvm.task"]
package.loaded["tunelua.autotvm.task"] = nil
local extract = require "tunelua.graph.extract"
local executor = require "tunelua.graph.executor"
raises(function()
  extract.make_task("dense_nopack.x86", { { "TENSOR", { 1, 8 }, "float32" },
    { "TENSOR", { 4, 8 }, "float32" }, require("tunelua.json").null, "float32" }, "llvm")
end, "tunelua/autotvm/task.lua", "extract.make_task")
local x = relay.var("data", { shape = { 1, 8 } })
local w = relay.var("w", { shape = { 4, 8 } })
local mod = relay.Module(relay.Function({ x, w }, relay.nn.dense(x, w)))
local params = { w = nd.zeros({ 4, 8 }, "float32") }
raises(function()
  executor.build(mod, { target = "llvm", params = params, tophub = false, quiet = true,
                        history = { query = function() return nil end } })
end, "tunelua/autotvm/task.lua", "executor.build with a history")

package.loaded["tunelua.autotvm.task"] = saved_task
package.path = saved_path
util.cleanup(dir)
print("test_require: ok")
