-- Shared by the graph executor tests (tests/lua/test_executor*.lua; required by path as
-- "tests.lua.lib.executor_check", not a test of its own): build a graph with the executor, run
-- it and compare every output with the reference interpreter (fp32 rel. error < 1e-4).
local nd = require "tunelua.nd"
local networks = require "networks"
local reference = require "networks.reference"
local executor = require "tunelua.graph.executor"

local M = {}

function M.eq(a, b, what)
  if a ~= b then error(string.format("%s: expected %s, got %s", what, tostring(b), tostring(a)), 2) end
end

-- Builds mod (opts: executor.build options over {target = "llvm", params = params, quiet = true}),
-- runs it on inputs (name -> array) and checks each output, a host array, against the reference.
-- Returns lib, the GraphModule.
function M.check_graph(mod, params, inputs, opts, what)
  local o = { target = "llvm", params = params, quiet = true }
  for k, v in pairs(opts or {}) do o[k] = v end
  local lib = executor.build(mod, o)
  local m = executor.GraphModule(lib)
  m:set_input(inputs)
  m:run()
  local ref = reference.run(mod, params, inputs)
  for i = 1, #ref do
    local out = m:get_output(i - 1)
    M.eq(out:device(), "cpu:0", (what or "graph") .. ": get_output gives a host array")
    reference.assert_close(out, ref[i], { rtol = 1e-4, atol = 1e-6 })
  end
  return lib, m
end

-- networks.get_network(name) at image_size size with 10 classes, its input random (seed),
-- checked as above; the memory plan must reuse buffers. Returns lib, the GraphModule.
function M.check_network(name, layout, size, seed, opts)
  local mod, params, ishape = networks.get_network(name, { layout = layout, image_size = size, num_classes = 10 })
  local x = nd.random_uniform(ishape, { seed = seed })
  local lib, m = M.check_graph(mod, params, { data = x }, opts, name)
  assert(lib.planned_bytes < lib.intermediate_bytes, name .. ": buffers are reused")
  return lib, m
end

-- check_network and one line about the kernels and the memory plan.
function M.report_network(name, layout, size)
  local lib = M.check_network(name, layout, size, 3)
  print(string.format("%-16s %-5s %3d: %2d kernels, planned %d of %d bytes", name, layout, size,
                      #lib.kernels, lib.planned_bytes, lib.intermediate_bytes))
  return lib
end

return M
