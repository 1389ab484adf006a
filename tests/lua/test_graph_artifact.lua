-- A compiled network that travels (executor.export / executor.import, core/graph/artifact.c):
-- resnet-18 at 32x32 (batched kernel libraries) and mobilenet at 32x32 (one module per kernel)
-- exported to files and loaded into executors of their own give the local GraphModule's outputs
-- on random inputs, bit for bit; bad descriptions are refused with a message naming the field.
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local file = require "tunelua.file"
local json = require "tunelua.json"
local networks = require "networks"
local executor = require "tunelua.graph.executor"

local C, ctx = core.C, core.ctx

local tmp = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-test-artifact")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function same(a, b, what)
  assert(a:nbytes() == b:nbytes(), what .. ": sizes differ")
  local pa, pb = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", b:data_ptr())
  for i = 0, a:nbytes() / 4 - 1 do
    if pa[i] ~= pb[i] then error(string.format("%s: element %d: %g vs %g", what, i, pa[i], pb[i]), 2) end
  end
end

local function round_trip(name, opts, seed)
  local mod, params, ishape = networks.get_network(name, { image_size = 32, num_classes = 10 })
  local o = { target = "llvm", params = params, quiet = true }
  for k, v in pairs(opts or {}) do o[k] = v end
  local lib = executor.build(mod, o)
  local dir = tmp .. "/" .. name
  local files = executor.export(lib, dir)
  assert(files[1] == "graph.json" and files[2] == "params.bin" and files[3] == "lib0.so",
         name .. ": exported files")
  local g = json.decode(read(dir .. "/graph.json"))
  assert(g.format == "tunelua-graph" and #g.steps == #lib.steps, name .. ": the description")
  assert(g.arena == lib.planned_bytes, name .. ": the memory plan travels")
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

-- refused descriptions: the message names the field
local good = read(dir .. "/graph.json")
local function refused(text, want, params)
  file.write_all(dir .. "/graph.json", text)
  if params then file.write_all(dir .. "/params.bin", params) end
  local p = ffi.new("tl_graph_artifact *[1]")
  local rc = C.tl_graph_artifact_load(ctx, dir, "graph.json", "params.bin", 0, p)
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
assert(not ok and err:find("only a C network", 1, true), tostring(err))

file.remove(tmp)
print("test_graph_artifact: ok")
