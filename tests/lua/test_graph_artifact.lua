-- A compiled network that travels (executor.export / executor.import, core/graph/artifact.c):
-- resnet-18 at 32x32 (batched kernel libraries) and mobilenet at 32x32 (one module per kernel)
-- exported to files and loaded into executors of their own give the local GraphModule's outputs
-- on random inputs, bit for bit; so does a small conv net built for OpenCL (Mali fallback
-- configs and default GPU schedules; each kernel rebuilt from its source and manifest on the
-- local OpenCL device). Bad descriptions are refused with a message naming the field.
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local file = require "tunelua.file"
local json = require "tunelua.json"
local networks = require "networks"
local executor = require "tunelua.graph.executor"

local C, ctx = core.C, core.ctx

local tmp = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-test-artifact")

local read = require("tests.lua.lib.util").read

local function same(a, b, what)
  assert(a:nbytes() == b:nbytes(), what .. ": sizes differ")
  local pa, pb = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", b:data_ptr())
  for i = 0, a:nbytes() / 4 - 1 do
    if pa[i] ~= pb[i] then error(string.format("%s: element %d: %g vs %g", what, i, pa[i], pb[i]), 2) end
  end
end

local function round_trip(name, opts, seed, net)
  local mod, params, ishape
  if net then mod, params, ishape = net()
  else mod, params, ishape = networks.get_network(name, { image_size = 32, num_classes = 10 }) end
  local o = { target = "llvm", params = params, quiet = true }
  for k, v in pairs(opts or {}) do o[k] = v end
  local lib = executor.build(mod, o)
  local dir = tmp .. "/" .. name
  local files = executor.export(lib, dir)
  assert(files[1] == "graph.json" and files[2] == "params.bin", name .. ": exported files")
  assert(files[3] == (o.target == "llvm" and "lib0.so" or "k0.cl"), name .. ": kernel files")
  local g = json.decode(read(dir .. "/graph.json"))
  assert(g.format == "tunelua-graph" and #g.steps == #lib.steps, name .. ": the description")
  if lib.device then
    local sum = 0
    for _, x in ipairs(g.storages) do sum = sum + x end
    assert(sum == lib.planned_bytes, name .. ": the storage plan travels")
  else
    assert(g.arena == lib.planned_bytes, name .. ": the memory plan travels")
  end
  local here = executor.GraphModule(lib)
  local there = executor.GraphModule(executor.import(dir))
  assert(there:get_num_inputs() == 1 and there:get_num_outputs() == 1, name .. ": io")
  for k = 1, 2 do
    local x = nd.random_uniform(ishape, { seed = seed + k, low = -1, high = 1 })
    here:set_input("data", x)
    there:set_input("data", x)
    here:run()
    there:run()
    local a, b = here:get_output(0), there:get_output(0)
    local pa = ffi.cast("float *", a:data_ptr())
    assert(pa[0] ~= 0 or pa[1] ~= 0, name .. ": a real output")
    same(a, b, name .. " run " .. k)
  end
  assert(there:benchmark({ number = 1, repeats = 2, quiet = true }).mean > 0, name .. ": timed")
  return dir
end

local dir = round_trip("resnet-18", nil, 10)
round_trip("mobilenet", { batch = false }, 20)

-- OpenCL: conv2d + bias + relu -> max_pool -> dense + bias
local relay = require "tunelua.relay"
local function small_net()
  local function var(n, shape) return relay.var(n, { shape = shape, dtype = "float32" }) end
  local x, w1, b1 = var("data", { 1, 4, 8, 8 }), var("w1", { 8, 4, 3, 3 }), var("b1", { 8 })
  local wf, bf = var("wf", { 10, 8 * 4 * 4 }), var("bf", { 10 })
  local y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w1, { padding = { 1, 1 }, channels = 8,
                                                                   kernel_size = { 3, 3 } }), b1))
  y = relay.nn.max_pool2d(y, { pool_size = { 2, 2 }, strides = { 2, 2 } })
  y = relay.nn.bias_add(relay.nn.dense(relay.nn.batch_flatten(y), wf, { units = 10 }), bf)
  local params = {
    w1 = nd.random_uniform({ 8, 4, 3, 3 }, { seed = 1, low = -1, high = 1 }),
    b1 = nd.random_uniform({ 8 }, { seed = 2 }),
    wf = nd.random_uniform({ 10, 128 }, { seed = 4, low = -0.2, high = 0.2 }),
    bf = nd.random_uniform({ 10 }, { seed = 5 }),
  }
  return relay.Module(relay.Function({ x, w1, b1, wf, bf }, y)), params, { 1, 4, 8, 8 }
end
local odir = round_trip("small-opencl", { target = "opencl -device=mali", tophub = false }, 30, small_net)
local og = json.decode(read(odir .. "/graph.json"))
assert(og.device == "opencl" and #og.storages > 0 and og.arena == 0, "an OpenCL description")

-- refused descriptions: the message names the field
local good = read(dir .. "/graph.json")
local function refused(text, want, params)
  file.write_all(dir .. "/graph.json", text)
  if params then file.write_all(dir .. "/params.bin", params) end
  local p = ffi.new("tl_graph_artifact *[1]")
  local rc = C.tl_graph_artifact_load(ctx, dir, "graph.json", "params.bin", 0, 0, p)
  local msg = core.errmsg()
  C.tl_clearerr(ctx)
  assert(rc ~= 0 and p[0] == nil, "accepted: " .. want)
  assert(msg:find(want, 1, true), "message '" .. msg .. "' lacks '" .. want .. "'")
end
local g = json.decode(good)
refused("[1]", "not a JSON object")
refused((good:gsub('"tunelua%-graph"', '"other"')), "'format' is not \"tunelua-graph\"")
g.steps[1].args[1] = 1e6
refused(json.encode(g), "steps[0].args[0]: expected an integer in [0,")
g = json.decode(good)
g.libs[1] = "../x.so"
refused(json.encode(g), "libs[0]: expected a plain file name")
g = json.decode(good)
g.arena = 8
refused(json.encode(g), "do not fit the arena of 8 bytes")
local params = read(dir .. "/params.bin")
refused(good, "the params file 'params.bin' has 3 bytes", "abc")
file.write_all(dir .. "/params.bin", params)
file.write_all(dir .. "/graph.json", good)
assert(executor.import(dir), "restored")
local ok, err = pcall(executor.export, { exec = true }, dir)
assert(not ok and err:find("expected a network built by executor.build", 1, true), tostring(err))
-- an OpenCL slot kind in a C graph, a C one in an OpenCL graph
g = json.decode(good)
g.slots[1] = { storage = 0, shape = json.array({ 1 }), dtype = "float32" }
refused(json.encode(g), "slots[0]: a storage slot in a cpu graph")
g = json.decode(good)
g.device = "gpu"
refused(json.encode(g), "'device' must be \"cpu\" or \"opencl\"")

file.remove(tmp)
print("test_graph_artifact: ok")
