-- relay.frontend.from_onnx on small graphs made with python3-onnx's helper
-- (tests/onnx/make_graphs.py: attributes and forms PyTorch's exporter does not write, expected
-- outputs from PyTorch/NumPy; rel. error < 1e-4), import from bytes, and the named errors: an
-- unsupported op (node, op type, opset, the supported list), an unsupported attribute value,
-- a dynamic dimension without a shape, not an ONNX file, a truncated file, missing external
-- data.
local models = require "tests.lua.lib.onnx_models"
local util = require "tests.lua.lib.util"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local file = require "tunelua.file"

local dir = util.tmpdir("test_onnx_import")

local function expect_error(f, pattern, what)
  local ok, err = pcall(f)
  assert(not ok, what .. ": expected an error")
  err = tostring(err)
  if not err:find(pattern) then
    error(string.format("%s: error %q does not match %q", what, err, pattern), 2)
  end
  print(what .. ": " .. err:sub(1, 160) .. (#err > 160 and " ..." or ""))
end

local ok, err = pcall(function()
  local out, good = util.sh(string.format("%s tests/onnx/make_graphs.py %s", models.PYTHON, dir))
  if not good then error("tests/onnx/make_graphs.py failed:\n" .. out, 0) end
  local n = 0
  for name, i, o in out:gmatch("([%w_]+) (%d[%dx]*) (%d[%dx]*)") do
    local function dims(s) local t = {}; for d in s:gmatch("%d+") do t[#t + 1] = tonumber(d) end; return t end
    local mod, params = relay.frontend.from_onnx(dir .. "/" .. name .. ".onnx")
    local lib = executor.build(mod, { target = "llvm", params = params, quiet = true })
    local m = executor.GraphModule(lib)
    m:set_input("x", models.read_floats(dir .. "/" .. name .. ".in", dims(i)))
    m:run()
    local e = models.rel_error(m:get_output(0), models.read_floats(dir .. "/" .. name .. ".out", dims(o)))
    print(string.format("%-28s %-10s -> %-10s rel. error %.2e", name, i, o, e))
    assert(e < 1e-4, name .. ": relative error " .. e)
    n = n + 1
  end
  assert(n >= 16, "every hand-made graph ran (" .. n .. ")")

  -- the same model from its bytes
  local bytes = util.read(dir .. "/conv_asym_pads.onnx")
  local mod = relay.frontend.from_onnx(bytes)
  assert(mod.main.params[1].name == "x" and mod.main.params[2].name == "w", "import from bytes")

  -- named errors
  expect_error(function() relay.frontend.from_onnx(dir .. "/unsupported.onnx") end,
    "^ONNX node 'the_einsum' %(Einsum%), opset 13: op Einsum is not supported; the importer supports: .*Conv, ConvTranspose.*Resize",
    "unsupported op")
  expect_error(function() relay.frontend.from_onnx(dir .. "/badattr.onnx") end,
    "^ONNX node 'pool0' %(MaxPool%), opset 13: attribute storage_order = 1 is not supported", "unsupported attribute")
  expect_error(function() relay.frontend.from_onnx(dir .. "/dyn.onnx") end,
    "^ONNX input 'x' dimension 0 %('batch'%) is dynamic: give the input's shape with the shape option", "dynamic dimension")
  local dmod = relay.frontend.from_onnx(dir .. "/dyn.onnx", { shape = { x = { 2, 3, 8, 8 } } })
  assert(dmod.main.params[1].type.shape[1] == 2, "the shape option fixes the dynamic dimension")
  expect_error(function() relay.frontend.from_onnx(dir .. "/dyn.onnx", { shape = { x = { 2, 4, 8, 8 } } }) end,
    "the shape option gives dimension 1 as 4, the model fixes it to 3", "a shape that contradicts the model")
  file.write_all(dir .. "/text.onnx", "this is a text file, not a model\n")
  expect_error(function() relay.frontend.from_onnx(dir .. "/text.onnx") end,
    "^from_onnx: .*text%.onnx is not a valid ONNX model %(", "not ONNX")
  file.write_all(dir .. "/trunc.onnx", bytes:sub(1, math.floor(#bytes * 0.6)))
  expect_error(function() relay.frontend.from_onnx(dir .. "/trunc.onnx") end,
    "^from_onnx: .*trunc%.onnx is not a valid ONNX model %(.*truncated", "truncated")
  expect_error(function() relay.frontend.from_onnx(dir .. "/missing.onnx") end,
    "missing%.onnx", "no such file")
  relay.frontend.from_onnx(dir .. "/ext.onnx")   -- external data next to the model: imports
  os.remove(dir .. "/ext.bin")
  expect_error(function() relay.frontend.from_onnx(dir .. "/ext.onnx") end,
    "cannot open external data.*ext%.bin", "missing external data")
end)
util.cleanup(dir)
if not ok then error(err, 0) end
print("test_onnx_import: ok")
