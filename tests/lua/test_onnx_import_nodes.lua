-- The ONNX node tests (libonnx-testdata) through the model importer: every test whose
-- nodes are all ops relay.frontend.from_onnx converts is imported with its opset's
-- semantics (the first graph input stays a runtime input; the others are given as
-- const_inputs, as exporters write shapes, axes, scales and weights), built with the graph
-- executor (or folded whole at import) and compared with the test's outputs (rtol 1e-4,
-- atol 1e-5). A test the importer refuses with a named "not supported" error is a skip,
-- listed with its reason; any other error or a wrong number is a failure. Prints a table
-- per op type and "N passed, N failed, N skipped". `tunelua tests/lua/test_onnx_import_nodes.lua
-- resize` runs only the tests whose name contains "resize".
local ffi = require "ffi"
local onnx = require "tunelua.onnx"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local frontend = require "tunelua.relay.frontend.onnx"

local filter = arg and arg[1]
local ok_list, names = pcall(onnx.node_tests)
if not ok_list or #names == 0 then
  print("test_onnx_import_nodes: no ONNX node tests found (libonnx-testdata); nothing to run")
  return
end

local supported = {}
for _, op in ipairs(frontend.supported_ops()) do supported[op] = true end
local FLOAT = { float32 = true, float64 = true }

local function close(got, want)
  if got:numel() ~= want:numel() then
    return false, string.format("%d elements, expected %d", got:numel(), want:numel())
  end
  local gs, ws = got:shape(), want:shape()
  if #gs ~= #ws then return false, "rank " .. #gs .. ", expected " .. #ws end
  for i = 1, #gs do if gs[i] ~= ws[i] then return false, "shape differs at axis " .. (i - 1) end end
  if got:dtype() ~= want:dtype() then
    if not (FLOAT[got:dtype()] and FLOAT[want:dtype()]) then
      return false, "dtype " .. got:dtype() .. ", expected " .. want:dtype()
    end
  end
  local a, b = got:flat(), want:flat()
  for i = 1, #a do
    local x, y = tonumber(a[i]), tonumber(b[i])
    if type(a[i]) == "boolean" then x, y = a[i] and 1 or 0, b[i] and 1 or 0 end
    if not (math.abs(x - y) <= 1e-5 + 1e-4 * math.abs(y)) then
      return false, string.format("element %d: %.7g, expected %.7g", i - 1, x, y)
    end
  end
  return true
end

local function run_test(name)
  local t = onnx.load_node_test(name)
  for _, n in ipairs(t.nodes) do
    if not supported[n.op_type] then return "skip", "op " .. n.op_type .. " is not imported" end
  end
  for _, v in ipairs(t.inputs) do
    if not onnx.is_array(v) then return "skip", "a non-tensor or untyped input" end
  end
  for _, v in ipairs(t.outputs) do
    if not onnx.is_array(v) then return "skip", "a non-tensor or untyped output" end
  end
  local consts = {}
  for i = 2, #t.input_names do consts[t.input_names[i]] = t.inputs[i] end
  local first = t.inputs[1]
  if first and not FLOAT[first:dtype()] then consts[t.input_names[1]] = first end
  local ok, mod, params = pcall(relay.frontend.from_onnx, t.dir .. "/model.onnx", { const_inputs = consts })
  if not ok then
    local msg = tostring(mod)
    if msg:find("not supported", 1, true) or msg:find("must be known at import time", 1, true) then
      return "skip", (msg:gsub("^ONNX node '[^']*' ", ""):gsub(", opset %d+", ""))
    end
    return "fail", msg
  end
  local outs = {}
  local nout = #t.outputs
  local has_input = #mod.main.params > 0 and mod.main.params[1].name == t.input_names[1]
  if not has_input and #mod.main.params == 0 then
    -- folded whole at import
    local v = require("tunelua.relay.eval").run(mod, {})
    outs = nout == 1 and { v } or v
  else
    local lib = executor.build(mod, { target = "llvm", params = params, quiet = true })
    local m = executor.GraphModule(lib)
    m:set_input(t.input_names[1], t.inputs[1])
    m:run()
    for i = 1, nout do outs[i] = m:get_output(i - 1) end
  end
  for i = 1, nout do
    local good, why = close(outs[i], t.outputs[i])
    if not good then return "fail", "output " .. (i - 1) .. ": " .. why end
  end
  return "pass"
end

local by_op, order = {}, {}
local passed, failed, skipped = 0, 0, 0
local failures = {}
for _, name in ipairs(names) do
  if not filter or name:find(filter, 1, true) then
    local okl, t = pcall(onnx.load_node_test, name)
    local op = okl and (t.op_type or (t.nodes[1] and t.nodes[1].op_type .. "+")) or "?"
    if okl and (t.op_type and supported[t.op_type] or (not t.op_type and name:find("_expanded"))) then
      local okr, st, why = pcall(run_test, name)
      if not okr then st, why = "fail", tostring(st) end
      local e = by_op[op]
      if not e then e = { p = 0, f = 0, s = 0, why = {} }; by_op[op] = e; order[#order + 1] = op end
      if st == "pass" then e.p = e.p + 1; passed = passed + 1
      elseif st == "skip" then
        e.s = e.s + 1; skipped = skipped + 1
        e.why[why] = (e.why[why] or 0) + 1
      else
        e.f = e.f + 1; failed = failed + 1
        failures[#failures + 1] = name .. ": " .. why
      end
    end
  end
end
table.sort(order)
print(string.format("%-22s %6s %6s %7s  %s", "op type", "passed", "failed", "skipped", "skip reasons"))
for _, op in ipairs(order) do
  local e = by_op[op]
  local whys = {}
  for w, c in pairs(e.why) do whys[#whys + 1] = c > 1 and (w .. " (" .. c .. ")") or w end
  table.sort(whys)
  print(string.format("%-22s %6d %6d %7d  %s", op, e.p, e.f, e.s, table.concat(whys, "; ")))
end
for _, f in ipairs(failures) do print("FAIL " .. f) end
print(string.format("%d passed, %d failed, %d skipped", passed, failed, skipped))
if failed > 0 then error(failed .. " ONNX node tests failed through the importer", 0) end
if not filter then assert(passed > 150, "the importer passes the node tests of its ops") end
