-- Shared by tests/lua/test_onnx_models_*.lua (required by path as "tests.lua.lib.onnx_models",
-- not a test of its own): export torchvision models with PyTorch at test time (Debian's
-- python3-torch under /usr/bin/python3, random weights, tests/onnx/export_torch.py), import
-- them with relay.frontend.from_onnx, build them with the graph executor and compare their
-- logits with PyTorch's on the same random input: max |ours - torch| / max |torch| < 1e-4.
local ffi = require "ffi"
local nd = require "tunelua.nd"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local util = require "tests.lua.lib.util"

local M = {}

M.PYTHON = os.getenv("TUNELUA_TORCH_PYTHON") or "/usr/bin/python3"

local function read_floats(path, shape)
  local s = util.read(path)
  local a = nd.empty(shape, "float32")
  assert(#s == a:nbytes(), string.format("%s: %d bytes, expected %d", path, #s, a:nbytes()))
  ffi.copy(a:data_ptr(), s, #s)
  return a
end
M.read_floats = read_floats

--- M.export(dir, specs) -> {tag = {input = dims, output = dims}}: runs the exporter once for
--- all specs ("resnet18:64", "mobilenet_v2:64@9"); raises with the exporter's output on failure.
function M.export(dir, specs)
  local cmd = string.format("%s tests/onnx/export_torch.py %s %s", M.PYTHON, dir, table.concat(specs, " "))
  local out, ok = util.sh(cmd)
  if not ok then
    error("exporting with PyTorch failed (python3-torch, python3-torchvision and python3-onnx come " ..
          "from scripts/bootstrap):\n" .. cmd .. "\n" .. out, 2)
  end
  local r = {}
  for tag, i, o in out:gmatch("([%w_@]+) ([%dx]+) ([%dx]+)") do
    local function dims(s) local t = {}; for d in s:gmatch("%d+") do t[#t + 1] = tonumber(d) end; return t end
    r[tag] = { input = dims(i), output = dims(o) }
  end
  for _, s in ipairs(specs) do
    local tag = s:match("^([^:]+)") .. (s:match("(@%d+)$") or "")
    if not r[tag] then error("the exporter printed no line for " .. tag .. ":\n" .. out, 2) end
  end
  return r
end

--- Largest |a - b| over largest |b| (float32 arrays of the same size).
function M.rel_error(a, b)
  assert(a:numel() == b:numel(), "output sizes differ")
  local pa, pb = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", b:data_ptr())
  local d, big = 0, 0
  for i = 0, a:numel() - 1 do
    local x = math.abs(pa[i] - pb[i])
    if not (x <= d) then d = x end
    big = math.max(big, math.abs(pb[i]))
  end
  return d / math.max(big, 1e-30), big
end

--- M.check(dir, tag, opts) -> mod, params, lib: import dir/tag.onnx, build (opts.build: more
--- executor.build options; opts.mod: a function turning the module before the build), run on
--- dir/tag.in, compare with dir/tag.out; prints one line.
function M.check(dir, tag, info, opts)
  opts = opts or {}
  local t0 = os.clock()
  local mod, params = relay.frontend.from_onnx(dir .. "/" .. tag .. ".onnx")
  local t_import = os.clock() - t0
  local p1 = mod.main.params[1]
  assert(p1.name == "input", tag .. ": the first parameter is the graph input")
  local s = p1.type.shape
  for i, d in ipairs(info.input) do assert(s[i] == d, tag .. ": input shape") end
  local bmod = opts.mod and opts.mod(mod, params) or mod
  local bo = { target = "llvm", params = params, quiet = true }
  for k, v in pairs(opts.build or {}) do bo[k] = v end
  local lib = executor.build(bmod, bo)
  local m = executor.GraphModule(lib)
  m:set_input("input", read_floats(dir .. "/" .. tag .. ".in", info.input))
  m:run()
  local y = m:get_output(0)
  local want = read_floats(dir .. "/" .. tag .. ".out", info.output)
  local err, big = M.rel_error(y, want)
  print(string.format("%-24s %-12s -> %-8s %3d kernels  import %.2f s  rel. error %.2e (max |logit| %.3g)%s",
                      tag, table.concat(info.input, "x"), table.concat(info.output, "x"), #lib.kernels,
                      t_import, err, big, opts.label and ("  " .. opts.label) or ""))
  if not (err < 1e-4) then
    error(string.format("%s: relative error of the logits %.3g against PyTorch (limit 1e-4)", tag, err), 2)
  end
  return mod, params, lib
end

--- M.run_group(name, specs, extra(dir, info)): export the specs into a fresh directory, check
--- each, then call extra (more checks on the exported files) and clean up.
function M.run_group(name, specs, extra)
  local dir = util.tmpdir(name)
  local ok, err = pcall(function()
    local info = M.export(dir, specs)
    for _, s in ipairs(specs) do
      local tag = s:match("^([^:]+)") .. (s:match("(@%d+)$") or "")
      M.check(dir, tag, info[tag])
    end
    if extra then extra(dir, info) end
  end)
  util.cleanup(dir)
  if not ok then error(err, 0) end
  print(name .. ": ok")
end

return M
