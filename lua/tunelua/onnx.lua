--- tunelua.onnx: ONNX models and the ONNX operator test vectors, from Lua.
--
--   local onnx = require "tunelua.onnx"
--   for _, name in ipairs(onnx.node_tests()) do ... end   -- "test_abs", ...
--   local t = onnx.load_node_test("test_conv_with_strides_padding")
--   t.op_type, t.attrs.strides, t.inputs[1]:shape(), t.outputs[1]
--   local m = onnx.load_model("resnet18.onnx")
--   m.nodes[1].op_type, m.initializer["conv1.weight"], m.inputs[1].type.shape
--
-- Everything is read eagerly into plain Lua tables by core/graph/onnx.c
-- (protobuf-c) and the C model is freed before returning; tensors become
-- tl.nd arrays on the cpu, owned by the Lua GC. The node tests are those of
-- Debian's libonnx-testdata (see docs/onnx.md); their directory is found by
-- probing the known install paths, or set with $TUNELUA_ONNX_TESTDATA.
--
-- Values. A tensor whose ONNX element type has a tunelua dtype is an array.
-- One without (uint16/32/64, bfloat16, string, complex) is a table
-- {kind = "tensor", elem_type = "uint32", shape = {...}, name = ...,
-- unsupported = "<why>"}, so that loading never fails on it; callers test
-- with onnx.is_array. A sequence is {kind = "sequence", name = ..., v1, v2,
-- ...}; an optional is {kind = "optional", name = ..., value = v or nil}.
--
-- Attributes: INT -> number (an int64 cdata beyond 2^53), FLOAT -> number
-- (the float's exact value as a double), STRING -> string, TENSOR -> value as
-- above, GRAPH -> graph table, TYPE_PROTO -> type table, and lists of each.
-- attr_types gives each attribute's ONNX type name ("INTS", ...), which tells
-- an empty INTS list from an empty FLOATS one.
--
-- Types: {kind = "tensor", elem_type = "float32", shape = {1, 3, "N"}} with
-- shape nil for an unknown rank, a symbolic dimension as its name and an
-- unknown one as -1; {kind = "sequence" | "optional", elem = type};
-- {kind = "map", key_type = "int64", value = type}.
--
-- Errors are raised at the caller's line and name the file and what is wrong.
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"

local C, ctx = core.C, core.ctx

local onnx = {}

if not pcall(function() return ffi.C.free end) then ffi.cdef "void free(void *ptr);" end
local array_t = ffi.typeof("tl_array *")

local adopt = nd.adopt

--- True for a tensor loaded as an array (not a placeholder or container).
function onnx.is_array(x)
  return type(x) == "cdata" and ffi.istype(array_t, x) and x ~= nil
end

-- Internal functions raise position-less errors; `api` turns them into
-- errors at the line that called the public function.
local function fail(msg) error(msg, 0) end

local function check(rc)
  if rc ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    if msg == "" then msg = "tunelua.onnx: error " .. tonumber(rc) end
    fail(msg)
  end
end

local function api(fn)
  return function(...)
    local r = { pcall(fn, ...) }
    if not r[1] then error(r[2], 2) end
    return unpack(r, 2, table.maxn(r))
  end
end

local function str(p, len)
  if p == nil then return nil end
  if len then return ffi.string(p, len) end
  return ffi.string(p)
end

local TWO53 = 2 ^ 53
local function int64_value(v)
  if v >= -TWO53 and v <= TWO53 then return tonumber(v) end
  return v
end

-- ---- directories --------------------------------------------------------------

local need_t = ffi.typeof("size_t[1]")

-- The sorted entries of dir.
local function list_dir(dir)
  local need = need_t()
  check(C.tl_onnx_list_dir(ctx, dir, nil, 0, need))
  while true do
    local cap = tonumber(need[0])
    local buf = ffi.new("char[?]", cap + 1)
    check(C.tl_onnx_list_dir(ctx, dir, buf, cap, need))
    if tonumber(need[0]) <= cap then
      local names, at = {}, 0
      while at < cap do
        local s = ffi.string(buf + at)
        names[#names + 1] = s
        at = at + #s + 1
      end
      return names
    end
  end
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- The node-test directory of libonnx-testdata, or nil when not installed.
function onnx.testdata_dir()
  local p = C.tl_onnx_testdata_dir()
  return p ~= nil and ffi.string(p) or nil
end

local function default_dir()
  local d = onnx.testdata_dir()
  if not d then
    fail("the ONNX test data is not installed: install the Debian package 'libonnx-testdata' " ..
         "(scripts/bootstrap does this) or set TUNELUA_ONNX_TESTDATA to its data/node directory")
  end
  return d
end

--- The names of the node tests in dir (default: the libonnx-testdata node
--- directory), sorted: the subdirectories that hold a model.onnx.
onnx.node_tests = api(function(dir)
  dir = dir or default_dir()
  local tests = {}
  for _, name in ipairs(list_dir(dir)) do
    if file_exists(dir .. "/" .. name .. "/model.onnx") then tests[#tests + 1] = name end
  end
  return tests
end)

-- ---- types and values ------------------------------------------------------------

local KIND = {
  [C.TL_ONNX_KIND_TENSOR] = "tensor", [C.TL_ONNX_KIND_SEQUENCE] = "sequence",
  [C.TL_ONNX_KIND_MAP] = "map", [C.TL_ONNX_KIND_SPARSE_TENSOR] = "sparse_tensor",
  [C.TL_ONNX_KIND_OPTIONAL] = "optional",
}
local KIND_CODE = {
  tensor = C.TL_ONNX_KIND_TENSOR, sequence = C.TL_ONNX_KIND_SEQUENCE,
  optional = C.TL_ONNX_KIND_OPTIONAL, map = C.TL_ONNX_KIND_MAP,
  sparse_tensor = C.TL_ONNX_KIND_SPARSE_TENSOR,
}

local function elem_type_name(code) return ffi.string(C.tl_onnx_elem_type_name(code)) end

local function convert_type(t)
  if t == nil then return nil end
  local code = C.tl_onnx_type_kind(t)
  local r = { kind = KIND[code] or "none" }
  if code == C.TL_ONNX_KIND_TENSOR or code == C.TL_ONNX_KIND_SPARSE_TENSOR then
    r.elem_type = elem_type_name(C.tl_onnx_type_elem_type(t))
    local ndim = C.tl_onnx_type_ndim(t)
    if ndim >= 0 then
      r.shape = {}
      for d = 0, ndim - 1 do
        local param = ffi.string(C.tl_onnx_type_dim_param(t, d))
        r.shape[d + 1] = param ~= "" and param or tonumber(C.tl_onnx_type_dim(t, d))
      end
    end
  elseif code == C.TL_ONNX_KIND_MAP then
    r.key_type = elem_type_name(C.tl_onnx_type_elem_type(t))
    r.value = convert_type(C.tl_onnx_type_elem(t))
  elseif code == C.TL_ONNX_KIND_SEQUENCE or code == C.TL_ONNX_KIND_OPTIONAL then
    r.elem = convert_type(C.tl_onnx_type_elem(t))
  end
  return r
end

local out_array_t = ffi.typeof("tl_array *[1]")
local dtype_t = ffi.typeof("int[1]")

-- A TensorProto handle as an array, or a placeholder when its element type
-- has no tunelua dtype. base_dir resolves external data.
local function convert_tensor(t, base_dir)
  local et = C.tl_onnx_tensor_elem_type(t)
  local dt = dtype_t()
  local known = et > 0 and et <= C.TL_ONNX_BFLOAT16
  if known and C.tl_onnx_elem_type_dtype(ctx, et, dt) ~= 0 then
    local why = core.errmsg()
    C.tl_clearerr(ctx)
    local shape, dims = {}, C.tl_onnx_tensor_dims(t)
    for i = 0, C.tl_onnx_tensor_ndim(t) - 1 do shape[i + 1] = tonumber(dims[i]) end
    return { kind = "tensor", elem_type = elem_type_name(et), shape = shape,
             name = ffi.string(C.tl_onnx_tensor_name(t)), unsupported = why }
  end
  local out = out_array_t()
  check(C.tl_onnx_tensor_to_array(ctx, t, base_dir, out))
  return adopt(out[0])
end

local function convert_value(v, base_dir)
  local code = C.tl_onnx_value_kind(v)
  if code == C.TL_ONNX_KIND_TENSOR then
    return convert_tensor(C.tl_onnx_value_tensor(v), base_dir)
  end
  local r = { kind = KIND[code], name = ffi.string(C.tl_onnx_value_name(v)) }
  local n = C.tl_onnx_value_count(v)
  if code == C.TL_ONNX_KIND_OPTIONAL then
    if n > 0 then r.value = convert_value(C.tl_onnx_value_elem(v, 0), base_dir) end
  else
    for i = 0, n - 1 do r[i + 1] = convert_value(C.tl_onnx_value_elem(v, i), base_dir) end
  end
  return r
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

local out_value_t = ffi.typeof("tl_onnx_value *[1]")

local function load_value(path, kind)
  local code = KIND_CODE[kind or "tensor"]
  if not code then fail("unknown value kind '" .. tostring(kind) .. "'") end
  local out = out_value_t()
  check(C.tl_onnx_value_load(ctx, path, code, out))
  local v = out[0]
  local ok, r = pcall(convert_value, v, dirname(path))
  C.tl_onnx_value_free(v)
  if not ok then fail(path .. ": " .. r) end
  return r
end

--- Read a test-data file: kind "tensor" (default), "sequence" or "optional"
--- says which message it holds (the model's input type tells).
onnx.load_value = api(load_value)

--- Read a TensorProto file into an array; also returns the tensor's name.
--- Unlike load_value, an element type without tunelua dtype is an error.
onnx.load_tensor = api(function(path)
  local out = out_array_t()
  local name = ffi.new("char *[1]")
  check(C.tl_onnx_tensor_load(ctx, path, out, name))
  local a = adopt(out[0])
  local s = ffi.string(name[0])
  ffi.C.free(name[0])
  return a, s
end)

-- ---- models ------------------------------------------------------------------------

local ATTR = {}
for _, n in ipairs { "UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS",
                     "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS",
                     "TYPE_PROTO", "TYPE_PROTOS" } do
  ATTR[n] = C["TL_ONNX_ATTR_" .. n]
end

local len_t = ffi.typeof("size_t[1]")
local convert_graph

local function convert_attr(n, k, base_dir)
  local t = C.tl_onnx_attr_type(n, k)
  local len = len_t()
  if t == ATTR.INT then return int64_value(C.tl_onnx_attr_int(n, k)) end
  if t == ATTR.FLOAT then return tonumber(C.tl_onnx_attr_float(n, k)) end
  if t == ATTR.STRING then
    local p = C.tl_onnx_attr_string(n, k, len)
    return str(p, len[0])
  end
  if t == ATTR.TENSOR then return convert_tensor(C.tl_onnx_attr_tensor(n, k), base_dir) end
  if t == ATTR.GRAPH then return convert_graph(C.tl_onnx_attr_graph(n, k), base_dir) end
  if t == ATTR.TYPE_PROTO then return convert_type(C.tl_onnx_attr_type_proto(n, k)) end
  local count = C.tl_onnx_attr_count(n, k)
  local list = {}
  if t == ATTR.INTS then
    local p = C.tl_onnx_attr_ints(n, k)
    for j = 0, count - 1 do list[j + 1] = int64_value(p[j]) end
  elseif t == ATTR.FLOATS then
    local p = C.tl_onnx_attr_floats(n, k)
    for j = 0, count - 1 do list[j + 1] = tonumber(p[j]) end
  elseif t == ATTR.STRINGS then
    for j = 0, count - 1 do
      local p = C.tl_onnx_attr_strings(n, k, j, len)
      list[j + 1] = str(p, len[0])
    end
  elseif t == ATTR.TENSORS then
    for j = 0, count - 1 do list[j + 1] = convert_tensor(C.tl_onnx_attr_tensors(n, k, j), base_dir) end
  elseif t == ATTR.GRAPHS then
    for j = 0, count - 1 do list[j + 1] = convert_graph(C.tl_onnx_attr_graphs(n, k, j), base_dir) end
  elseif t == ATTR.TYPE_PROTOS then
    for j = 0, count - 1 do list[j + 1] = convert_type(C.tl_onnx_attr_type_protos(n, k, j)) end
  else
    -- sparse tensors and untyped attributes: kept as a marker
    return { unsupported = "attribute type " .. ffi.string(C.tl_onnx_attr_type_name(t)) ..
                           " is not supported" }
  end
  return list
end

local function convert_node(n, base_dir)
  local node = {
    op_type = ffi.string(C.tl_onnx_node_op_type(n)),
    name = ffi.string(C.tl_onnx_node_name(n)),
    domain = ffi.string(C.tl_onnx_node_domain(n)),
    inputs = {}, outputs = {}, attrs = {}, attr_types = {},
  }
  for i = 0, C.tl_onnx_node_num_inputs(n) - 1 do
    node.inputs[i + 1] = ffi.string(C.tl_onnx_node_input(n, i))
  end
  for i = 0, C.tl_onnx_node_num_outputs(n) - 1 do
    node.outputs[i + 1] = ffi.string(C.tl_onnx_node_output(n, i))
  end
  for k = 0, C.tl_onnx_node_num_attrs(n) - 1 do
    local name = ffi.string(C.tl_onnx_attr_name(n, k))
    local ok, v = pcall(convert_attr, n, k, base_dir)
    if not ok then
      fail(string.format("%s node '%s': attribute '%s': %s", node.op_type, node.name, name, v))
    end
    node.attrs[name] = v
    node.attr_types[name] = ffi.string(C.tl_onnx_attr_type_name(C.tl_onnx_attr_type(n, k)))
  end
  return node
end

local function convert_values(g, which)
  local list = {}
  for i = 0, C.tl_onnx_graph_num_values(g, which) - 1 do
    list[i + 1] = {
      name = ffi.string(C.tl_onnx_graph_value_name(g, which, i)),
      type = convert_type(C.tl_onnx_graph_value_type(g, which, i)),
    }
  end
  return list
end

function convert_graph(g, base_dir)
  local graph = {
    name = ffi.string(C.tl_onnx_graph_name(g)),
    nodes = {},
    inputs = convert_values(g, C.TL_ONNX_GRAPH_INPUTS),
    outputs = convert_values(g, C.TL_ONNX_GRAPH_OUTPUTS),
    value_info = convert_values(g, C.TL_ONNX_GRAPH_VALUE_INFO),
    initializers = {},   -- in file order: {name = ..., value = array or placeholder}
    initializer = {},    -- by name
  }
  for i = 0, C.tl_onnx_graph_num_nodes(g) - 1 do
    graph.nodes[i + 1] = convert_node(C.tl_onnx_graph_node(g, i), base_dir)
  end
  for i = 0, C.tl_onnx_graph_num_initializers(g) - 1 do
    local t = C.tl_onnx_graph_initializer(g, i)
    local name = ffi.string(C.tl_onnx_tensor_name(t))
    local v = convert_tensor(t, base_dir)
    graph.initializers[i + 1] = { name = name, value = v }
    graph.initializer[name] = v
  end
  return graph
end

local out_model_t = ffi.typeof("tl_onnx_model *[1]")

-- A string that is the bytes of a model, not a file name: ONNX bytes start
-- with a field key (a control character, 0x08 for ir_version), a path never
-- holds one.
local function is_bytes(s) return s:find("[%z\1-\31]") ~= nil end
onnx.is_model_bytes = is_bytes

local function load_model(path, opts)
  if type(path) ~= "string" then fail("load_model: expected a file name or the model's bytes, got " .. type(path)) end
  local out = out_model_t()
  if is_bytes(path) then
    local name = opts and opts.name or "<bytes>"
    check(C.tl_onnx_model_load_bytes(ctx, path, #path, name, opts and opts.dir or nil, out))
    path = name
  else
    check(C.tl_onnx_model_load(ctx, path, out))
  end
  local m = out[0]
  local ok, r = pcall(function()
    local dir = ffi.string(C.tl_onnx_model_dir(m))
    local model = convert_graph(C.tl_onnx_model_graph(m), dir)
    model.graph_name, model.name = model.name, nil
    model.path, model.dir = path, dir
    model.ir_version = tonumber(C.tl_onnx_model_ir_version(m))
    model.producer = ffi.string(C.tl_onnx_model_producer(m))
    model.opsets = {}
    for i = 0, C.tl_onnx_model_num_opsets(m) - 1 do
      local d = ffi.string(C.tl_onnx_model_opset_domain(m, i))
      if d == "ai.onnx" then d = "" end
      model.opsets[d] = tonumber(C.tl_onnx_model_opset_version(m, i))
    end
    model.opset = model.opsets[""]
    return model
  end)
  C.tl_onnx_model_free(m)
  if not ok then fail(path .. ": " .. r) end
  return r
end

--- Read an ONNX model from a file, or from its bytes (a string holding them;
--- opts.name names it in messages, opts.dir resolves external data): {path, dir, ir_version, producer, opset (ai.onnx),
--- opsets = {[domain] = version}, graph_name, nodes = {{op_type, name,
--- domain, inputs, outputs, attrs, attr_types}...} in file order, inputs and
--- outputs = {{name, type}...}, value_info, initializers = {{name, value}...},
--- initializer = {[name] = value}}.
onnx.load_model = api(load_model)

-- ---- node tests -----------------------------------------------------------------------

-- The numbered files prefix_N.pb of a data-set directory, in order.
local function numbered(files, prefix, where)
  local found, n = {}, 0
  for _, f in ipairs(files) do
    local k = f:match("^" .. prefix .. "_(%d+)%.pb$")
    if k then
      found[tonumber(k)] = f
      n = n + 1
    end
  end
  for k = 0, n - 1 do
    if not found[k] then fail(string.format("%s: %s_%d.pb is missing (found %d %s files)", where,
                                            prefix, k, n, prefix)) end
  end
  return n
end

local function load_set(dir, set_dir, test)
  local path = dir .. "/" .. set_dir
  local files = list_dir(path)
  local nin, nout = numbered(files, "input", path), numbered(files, "output", path)
  if nin ~= #test.input_names or nout ~= #test.output_names then
    fail(string.format("%s: %d input and %d output files, but the model has %d inputs and %d outputs",
                       path, nin, nout, #test.input_names, #test.output_names))
  end
  local set = { dir = path, inputs = {}, outputs = {} }
  for k = 1, nin do
    local ty = test.input_types[k]
    set.inputs[k] = load_value(string.format("%s/input_%d.pb", path, k - 1), ty and ty.kind)
  end
  for k = 1, nout do
    local ty = test.output_types[k]
    set.outputs[k] = load_value(string.format("%s/output_%d.pb", path, k - 1), ty and ty.kind)
  end
  return set
end

--- Load a node test: name is a test name in opts.dir (default: the
--- libonnx-testdata node directory) or the path of a test directory.
--- opts.set = N picks test_data_set_N (default: the first); opts.all_sets =
--- true loads every set into t.sets (t.inputs and t.outputs are the first's).
--- Returns {name, dir, op_type, domain, attrs, attr_types (of the single
--- node; op_type is nil when the graph has several nodes, as the
--- "_expanded" tests do), nodes, opset, opsets, input_names, output_names,
--- input_types, output_types, inputs, outputs, nsets, sets}.
onnx.load_node_test = api(function(name, opts)
  if type(name) ~= "string" then fail("load_node_test: expected a test name, got " .. type(name)) end
  opts = opts or {}
  local dir
  if name:find("/", 1, true) then
    dir = name:gsub("/+$", "")
    name = dir:match("([^/]+)$")
  else
    dir = (opts.dir or default_dir()) .. "/" .. name
  end
  local model_path = dir .. "/model.onnx"
  if not file_exists(model_path) then
    fail(string.format("no ONNX node test '%s': %s does not exist", name, model_path))
  end
  local m = load_model(model_path)
  local test = {
    name = name, dir = dir, nodes = m.nodes, opset = m.opset, opsets = m.opsets,
    input_names = {}, output_names = {}, input_types = {}, output_types = {},
  }
  local init = m.initializer
  for _, v in ipairs(m.inputs) do
    if init[v.name] == nil then
      test.input_names[#test.input_names + 1] = v.name
      test.input_types[#test.input_types + 1] = v.type
    end
  end
  for _, v in ipairs(m.outputs) do
    test.output_names[#test.output_names + 1] = v.name
    test.output_types[#test.output_types + 1] = v.type
  end
  if #m.nodes == 1 then
    local n = m.nodes[1]
    test.op_type, test.domain, test.attrs, test.attr_types = n.op_type, n.domain, n.attrs, n.attr_types
  end
  local sets = {}
  for _, f in ipairs(list_dir(dir)) do
    local k = f:match("^test_data_set_(%d+)$")
    if k then sets[#sets + 1] = { k = tonumber(k), dir = f } end
  end
  table.sort(sets, function(a, b) return a.k < b.k end)
  if #sets == 0 then fail(dir .. ": no test_data_set_N directory") end
  test.nsets = #sets
  if opts.all_sets then
    test.sets = {}
    for i, s in ipairs(sets) do test.sets[i] = load_set(dir, s.dir, test) end
    test.inputs, test.outputs = test.sets[1].inputs, test.sets[1].outputs
  else
    local want, pick = opts.set or sets[1].k, nil
    for _, s in ipairs(sets) do if s.k == want then pick = s end end
    if not pick then fail(string.format("%s: no test_data_set_%s", dir, tostring(want))) end
    local s = load_set(dir, pick.dir, test)
    test.inputs, test.outputs = s.inputs, s.outputs
  end
  return test
end)

return onnx
