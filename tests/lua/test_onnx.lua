-- tunelua.onnx over the whole ONNX operator test suite (libonnx-testdata):
-- list every node test, load every one with all its data sets, and check a
-- few by content. Prints the counts. Passes, saying so, when the test data
-- is not installed.
local onnx = require "tunelua.onnx"
local C = require("tunelua.core").C

-- shapes and elements through the C API, independent of tl.nd's methods
local function shape(a)
  local r = {}
  for i = 0, C.tl_array_ndim(a) - 1 do r[i + 1] = tonumber(C.tl_array_shape(a)[i]) end
  return table.concat(r, ",")
end
local function dtype(a) return require("ffi").string(C.tl_dtype_name(C.tl_array_dtype(a))) end

local dir = onnx.testdata_dir()
if not dir then
  print("onnx: skipped, the ONNX test data is not installed (Debian package libonnx-testdata)")
  return
end

local t0 = os.clock()
local tests = onnx.node_tests()
print(string.format("onnx: %d node tests in %s", #tests, dir))
assert(#tests > 500, "too few node tests found: " .. #tests)

-- ---- load everything -----------------------------------------------------------

local stats = { loaded = 0, sets = 0, arrays = 0, unsupported = 0, sequences = 0, optionals = 0,
                multi_node = 0 }
local op_types, op_count, unsupported_types = {}, 0, {}

local function walk(v)
  if onnx.is_array(v) then
    stats.arrays = stats.arrays + 1
  elseif v.kind == "tensor" then
    assert(v.unsupported and v.elem_type and v.shape, "placeholder without its reason")
    stats.unsupported = stats.unsupported + 1
    unsupported_types[v.elem_type] = true
  elseif v.kind == "sequence" then
    stats.sequences = stats.sequences + 1
    for _, e in ipairs(v) do walk(e) end
  elseif v.kind == "optional" then
    stats.optionals = stats.optionals + 1
    if v.value ~= nil then walk(v.value) end
  else
    error("unexpected value kind " .. tostring(v.kind))
  end
end

local function count_ops(nodes)
  for _, n in ipairs(nodes) do
    if not op_types[n.op_type] then
      op_types[n.op_type] = true
      op_count = op_count + 1
    end
  end
end

for _, name in ipairs(tests) do
  local ok, t = pcall(onnx.load_node_test, name, { all_sets = true })
  assert(ok, t)
  assert(t.name == name and #t.sets == t.nsets and t.nsets >= 1)
  assert(#t.nodes >= 1, name .. ": no nodes")
  assert(t.opset and t.opset > 0 or next(t.opsets), name .. ": no opset")
  if #t.nodes > 1 then stats.multi_node = stats.multi_node + 1 end
  count_ops(t.nodes)
  for _, set in ipairs(t.sets) do
    assert(#set.inputs == #t.input_names and #set.outputs == #t.output_names)
    for _, v in ipairs(set.inputs) do walk(v) end
    for _, v in ipairs(set.outputs) do walk(v) end
  end
  stats.sets = stats.sets + #t.sets
  stats.loaded = stats.loaded + 1
end
assert(stats.loaded == #tests)
print(string.format("onnx: loaded %d of %d node tests (%d data sets, %d op types, %d multi-node)",
                    stats.loaded, #tests, stats.sets, op_count, stats.multi_node))
local names = {}
for k in pairs(unsupported_types) do names[#names + 1] = k end
table.sort(names)
print(string.format("onnx: %d arrays, %d sequences, %d optionals, %d tensors without a tunelua dtype (%s)",
                    stats.arrays, stats.sequences, stats.optionals, stats.unsupported,
                    table.concat(names, ", ")))

-- ---- a few by content ----------------------------------------------------------

local t = onnx.load_node_test("test_conv_with_strides_padding")
assert(t.op_type == "Conv" and t.domain == "")
assert(t.attr_types.strides == "INTS" and t.attrs.strides[1] == 2 and t.attrs.strides[2] == 2)
assert(#t.attrs.pads == 4 and t.attrs.kernel_shape[1] == 3)
assert(t.input_names[1] == "x" and t.input_names[2] == "W" and t.output_names[1] == "y")
local y = t.outputs[1]
assert(shape(y) == "1,1,4,3" and dtype(y) == "float32")
assert(C.tl_array_get(y, 0) == 12 and C.tl_array_get(y, 4) == 108)
assert(table.concat(t.input_types[1].shape, ",") == "1,1,7,5")

t = onnx.load_node_test("test_gemm_all_attributes")
assert(t.attrs.alpha == 0.25 and math.abs(t.attrs.beta - 0.35) < 1e-7 and t.attrs.transA == 1)

t = onnx.load_node_test("test_constant")
assert(t.attr_types.value == "TENSOR" and onnx.is_array(t.attrs.value))
assert(#t.inputs == 0 and shape(t.outputs[1]) == shape(t.attrs.value))
for i = 0, tonumber(C.tl_array_numel(t.attrs.value)) - 1 do
  assert(C.tl_array_get(t.outputs[1], i) == C.tl_array_get(t.attrs.value, i))
end

t = onnx.load_node_test("test_if_seq")
assert(t.attr_types.then_branch == "GRAPH" and #t.attrs.then_branch.nodes >= 1)
assert(t.output_types[1].kind == "sequence" and t.output_types[1].elem.kind == "tensor")
assert(t.outputs[1].kind == "sequence")

t = onnx.load_node_test("test_cast_FLOAT_to_STRING")
assert(t.outputs[1].kind == "tensor" and t.outputs[1].elem_type == "string")
assert(t.outputs[1].unsupported:find("has no tunelua dtype", 1, true))

-- a test directory given by path; a named data set; errors name what is wrong
t = onnx.load_node_test(dir .. "/test_relu", { set = 0 })
assert(t.op_type == "Relu" and dtype(t.inputs[1]) == "float32")
local ok, err = pcall(onnx.load_node_test, "test_no_such_op")
assert(not ok and err:find("no ONNX node test 'test_no_such_op'", 1, true), err)
ok, err = pcall(onnx.load_node_test, "test_relu", { set = 7 })
assert(not ok and err:find("no test_data_set_7", 1, true), err)

-- a general model: nodes, initializers, inputs with shapes
local m = onnx.load_model(dir .. "/test_conv_with_strides_padding/model.onnx")
assert(m.opset == t.opset or m.opset > 0)
assert(#m.nodes == 1 and m.nodes[1].op_type == "Conv" and #m.initializers == 0)
assert(m.inputs[2].type.elem_type == "float32" and #m.inputs[2].type.shape == 4)
local a, name = onnx.load_tensor(dir .. "/test_relu/test_data_set_0/input_0.pb")
assert(onnx.is_array(a) and name == "x")

print(string.format("onnx: ok (%.2f s cpu)", os.clock() - t0))
