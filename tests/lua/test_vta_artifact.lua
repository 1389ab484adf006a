-- A network with VTA groups travels (executor.export / executor.import, targets/vta/artifact.c):
-- a CPU head and two packed conv groups on VTA (config 0 and another valid config), exported,
-- imported (a vta-sim of the artifact's own) and run: the output equals the built network's bit
-- for bit and each group's simulated cycles equal the local simulator's. A malformed VTA part
-- of the description (the section, a kernel, a step's arity) is refused naming the field.
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"
local executor = require "tunelua.graph.executor"
local file = require "tunelua.file"
local json = require "tunelua.json"
local vta = require "tunelua.vta"
local ffi = require "ffi"
local core = require "tunelua.core"
local C = core.C

local read_all = require("tests.lua.lib.util").read

local env = vta.get_env()
local B = 16
local x = nd.random_uniform({ 1, 2, 8, 8, 1, B }, { seed = 1, low = -300, high = 300 }):astype("int32")
local function conv_group(e, co, ci, seed, shift)
  local w = nd.random_uniform({ co, ci, 3, 3, B, B }, { seed = seed, low = -128, high = 128 }):astype("int8")
  local bias = nd.random_uniform({ co, 1, 1, 1, B }, { seed = seed + 1, low = -30000, high = 30000 }):astype("int32")
  e = relay.nn.conv2d(e, relay.const(w), { channels = co * B, kernel_size = 3, strides = 1,
    padding = 1, out_dtype = "int32", data_layout = "NCHW1n16c", kernel_layout = "OIHW16o16i" })
  e = relay.nn.relu(relay.add(e, relay.const(bias)))
  e = relay.right_shift(relay.add(e, relay.const(2 ^ (shift - 1), "int32")), relay.const(shift, "int32"))
  return relay.cast(relay.clip(e, -127, 127), "int8")
end
local data = relay.var("data", { shape = x:shape(), dtype = "int32" })
local head = relay.cast(relay.clip(data, -127, 127), "int8")   -- the CPU part
local body = conv_group(conv_group(head, 2, 2, 10, 9), 2, 2, 20, 10)

-- the first group at config 0, the second at the largest config that fits with its ending
local seen = 0
local function pick(task, m)
  seen = seen + 1
  if seen == 1 then return 0, "default" end
  local sim = vta.simulator(env)
  for i = task:len() - 1, 1, -1 do
    if task:check(i) and pcall(vta.group, sim, task, i, m.epilogue) then return i, "given" end
  end
  return 0, "default"
end
local lib = executor.build(relay.Module(body), { target = "llvm", quiet = true,
                                                 vta = { env = env, config = pick } })
local rows = lib:vta_cycles()
assert(#rows == 2 and rows[2].index ~= 0, "two VTA groups, the second at a config other than 0")
assert(executor.exportable(lib), "a network with VTA groups on a CPU host is exportable")
local m = executor.GraphModule(lib)
m:set_input("data", x)
m:run()
local want = m:get_output(0)
local want_rows, want_total = lib:vta_cycles()

local dir = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tl-vta-artifact")
local ok, err = pcall(function()
  local files = executor.export(lib, dir)
  local g = json.decode(read_all(dir .. "/graph.json"))
  assert(g.vta and g.vta.model == env.MODEL and type(g.vta.config) == "string", "the vta section")
  local nv = 0
  for _, k in ipairs(g.kernels) do if k.vta then nv = nv + 1 end end
  assert(nv == 2, "two VTA kernels in the description")
  for _, f in ipairs(files) do assert(file.exists(dir .. "/" .. f), f) end

  -- imported: the same output bit for bit, the same cycles group by group
  local lib2 = executor.import(dir)
  local m2 = executor.GraphModule(lib2)
  m2:set_input("data", x)
  m2:run()
  local got = m2:get_output(0)
  assert(got:nbytes() == want:nbytes() and
         ffi.string(got:data_ptr(), got:nbytes()) == ffi.string(want:data_ptr(), want:nbytes()),
         "the imported network's output equals the built one's")
  local r2, t2, s2 = lib2:vta_cycles()
  assert(#r2 == 2 and t2 == want_total and s2 > 0, "the imported network's cycles")
  for i = 1, 2 do assert(r2[i].cycles == want_rows[i].cycles and r2[i].cycles > 0, "group " .. i) end
  print(string.format("imported: output equal (%d values), cycles %d = %d", #got:flat(), t2, want_total))

  -- malformed VTA parts: each refused naming the field
  local text = read_all(dir .. "/graph.json")
  local function refused(mutate, pattern)
    local gg = json.decode(text)
    mutate(gg)
    file.write_all(dir .. "/bad.json", json.encode(gg))
    local okb, e = pcall(function()
      local p = ffi.new("tl_graph_artifact *[1]")
      core.check(C.tl_graph_artifact_load_kind(core.ctx, dir, "bad.json", "params.bin", 0, 0,
                                               C.tl_vta_graph_kind(), p))
      C.tl_graph_artifact_free(p[0])
    end)
    assert(not okb, "accepted: " .. pattern)
    assert(tostring(e):find(pattern, 1, true), "expected '" .. pattern .. "', got: " .. tostring(e))
    print("refused: " .. tostring(e):gsub("\n.*", ""))
  end
  local function vk(gg)   -- the first VTA kernel
    for _, k in ipairs(gg.kernels) do if k.vta then return k end end
  end
  local function vki(gg)
    for i, k in ipairs(gg.kernels) do if k.vta then return i - 1 end end
  end
  local k0 = vki(g)
  refused(function(gg) gg.vta.model = "1x16_i8w8a32_15_15_18_17x" end,
          "graph artifact: 'vta': model: the configuration is " .. env.MODEL ..
          ", the artifact was built for 1x16_i8w8a32_15_15_18_17x")
  refused(function(gg) gg.vta.config = "{" end, "graph artifact: 'vta': config: ")
  refused(function(gg) gg.vta.config = nil end, "graph artifact: 'vta': config: expected the vta_config.json text")
  refused(function(gg) gg.vta.dram_bytes = 12 end, "graph artifact: 'vta': dram_bytes: expected an integer in")
  refused(function(gg) gg.vta = nil end,
          string.format("graph artifact: kernels[%d].vta: the description has no 'vta' section", k0))
  refused(function(gg) gg.vta = 7 end, "graph artifact: 'vta': expected an object")
  refused(function(gg) vk(gg).vta = "conv" end,
          string.format("graph artifact: kernels[%d].vta: expected an object", k0))
  refused(function(gg) vk(gg).vta.config = 1e9 end,
          string.format("graph artifact: kernels[%d].vta: config: expected an integer in [0, ", k0))
  refused(function(gg) vk(gg).vta.config = -1 end,
          string.format("graph artifact: kernels[%d].vta: config: expected an integer", k0))
  refused(function(gg) vk(gg).vta.args = nil end,
          string.format("graph artifact: kernels[%d].vta: args: expected the task's args", k0))
  refused(function(gg) vk(gg).vta.args[1][2] = { 1, 2, 8, 8, 1 } end,
          string.format("graph artifact: kernels[%d].vta: args: ", k0))
  refused(function(gg) vk(gg).vta.epilogue = nil end,
          string.format("graph artifact: kernels[%d].vta: epilogue: expected the group's ending", k0))
  refused(function(gg)
    for _, st in ipairs(gg.steps) do
      if st.kernel == k0 then table.remove(st.args) return end
    end
  end, "kernel " .. k0 .. " (vta) takes")
  -- a VTA step over a slot of the wrong size loads (kernels check their arguments when they
  -- run) and its run fails naming the argument, nothing written out of bounds
  do
    local gg = json.decode(text)
    for _, st in ipairs(gg.steps) do
      if st.kernel == k0 then st.args[1] = gg.inputs[1].slot break end   -- int32 data, not int8
    end
    file.write_all(dir .. "/bad.json", json.encode(gg))
    local p = ffi.new("tl_graph_artifact *[1]")
    core.check(C.tl_graph_artifact_load_kind(core.ctx, dir, "bad.json", "params.bin", 0, 0,
                                             C.tl_vta_graph_kind(), p))
    local rc = C.tl_graph_exec_run(core.ctx, C.tl_graph_artifact_exec(p[0]))
    local e = ffi.string(C.tl_errmsg(core.ctx))
    C.tl_graph_artifact_free(p[0])
    assert(rc ~= 0 and e:find("vta group: argument 0 has", 1, true), e)
    print("run refused: " .. e)
  end
  -- a loader without the VTA kind refuses the VTA kernels
  local p = ffi.new("tl_graph_artifact *[1]")
  assert(C.tl_graph_artifact_load(core.ctx, dir, "graph.json", "params.bin", 0, 0, p) ~= 0)
  local e = ffi.string(C.tl_errmsg(core.ctx))
  assert(e:find(string.format("kernels[%d].lib", k0), 1, true), e)
end)
file.remove(dir)
if not ok then error(err, 0) end

-- the device runtime's pack (export_library) has no VTA simulator: refused, naming why
local okl, el = pcall(lib.export_library, lib, "/nonexistent-dir/net.tlpack")
assert(not okl and tostring(el):find("export_library: this network has VTA groups", 1, true), tostring(el))
print("test_vta_artifact: ok")
