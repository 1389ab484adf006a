-- Benchmark: torchvision models exported to ONNX by PyTorch, imported by
-- relay.frontend.from_onnx and run by the graph executor, against PyTorch on the same model,
-- the same input and the same thread count, in the same run. Per model: the import time, the
-- compile time (executor.build, kernels compiled into a fresh kernel cache: the cold cost),
-- our latency with the default configs (TopHub's where it has the workload, else the
-- templates' fallbacks: "untuned"), with a tuning log's best records when --log is given,
-- PyTorch's latency (torch.set_num_threads(T), no_grad, eval), the ratio PyTorch / ours (> 1:
-- we are faster) and the logits' relative error against PyTorch. Medians of --repeat runs.
--
--   tunelua scripts/bench/onnx_models.lua [--size N] [--repeat R] [--log LOG] [MODEL[:SIZE] ...]
--
-- MODEL: a torchvision.models name (default: the whole list below at 224x224, inception_v3 at
-- 299x299). Threads: TUNELUA_NUM_THREADS, else every core; PyTorch gets the same number.
-- Needs Debian's python3-torch, -torchvision and -onnx (scripts/bootstrap) under /usr/bin/python3
-- (TUNELUA_PYTHON names another interpreter). Exports go to a temporary directory, removed at
-- the end.
local ffi = require "ffi"
local tl = require "tunelua"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local file = require "tunelua.file"
local C = require("tunelua.core").C

if not pcall(function() return ffi.C.setenv end) then
  ffi.cdef "int setenv(const char *name, const char *value, int overwrite);"
end

local MODELS = { "resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1",
                 "vgg11_bn", "googlenet", "inception_v3", "shufflenet_v2_x1_0", "densenet121",
                 "efficientnet_b0" }
local opts = { size = nil, ["repeat"] = 20, log = nil, models = {} }
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--size" then opts.size = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--repeat" then opts["repeat"] = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--log" then opts.log = arg[i + 1]; i = i + 1
  elseif a:match("^%-") then error("unknown option " .. a .. " (see the header of scripts/bench/onnx_models.lua)", 0)
  else opts.models[#opts.models + 1] = a end
  i = i + 1
end
if #opts.models == 0 then opts.models = MODELS end

local THREADS = tonumber(os.getenv("TUNELUA_NUM_THREADS") or "") or tl.num_cores()
tl.set_num_threads(THREADS)
local PYTHON = os.getenv("TUNELUA_PYTHON") or "/usr/bin/python3"
local SRC = debug.getinfo(1, "S").source:match("^@(.*)/scripts/bench/[^/]*$") or "."
local base = os.getenv("TMPDIR") or "/tmp"
local dir = file.tmpdir(base, "tunelua-onnx-bench")
-- a fresh kernel cache, so the compile time is the cold one
local cache = file.tmpdir(base, "tunelua-onnx-bench-cache")
ffi.C.setenv("TUNELUA_CACHE_DIR", cache, 1)
local history = opts.log and require("tunelua.autotvm").apply_history_best(opts.log) or nil

local function read_floats(path, shape)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  local a = tl.nd.empty(shape, "float32")
  ffi.copy(a:data_ptr(), s, math.min(#s, a:nbytes()))
  return a
end

local function rel_error(a, b)
  local pa, pb = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", b:data_ptr())
  local d, big = 0, 0
  for k = 0, a:numel() - 1 do
    d = math.max(d, math.abs(pa[k] - pb[k]))
    big = math.max(big, math.abs(pb[k]))
  end
  return d / math.max(big, 1e-30)
end

print(string.format("ONNX models on the host CPU, batch 1, fp32, %d threads (ours and PyTorch's); medians of %d runs",
                    THREADS, opts["repeat"]))
local head = string.format("%-20s %-9s %9s %10s %11s %11s %11s %9s %9s", "model", "input", "import s",
                           "compile s", "untuned ms", opts.log and "tuned ms" or "-", "PyTorch ms",
                           "PT/ours", "rel.err")
print(head)
print(string.rep("-", #head))
local ok, err = pcall(function()
  for _, spec in ipairs(opts.models) do
    local name, size = spec:match("^([^:]+):?(%d*)$")
    size = tonumber(size) or opts.size or (name == "inception_v3" and 299 or 224)
    local cmd = string.format("%s %s/tests/onnx/export_torch.py %s %s:%d --bench %d --threads %d 2>&1",
                              PYTHON, SRC, dir, name, size, opts["repeat"], THREADS)
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    local torch_ms = tonumber(out:match(name .. " %S+ %S+ ([%d.]+)"))
    if not torch_ms then
      print(string.format("%-20s export failed: %s", name, out:gsub("\n", " "):sub(1, 200)))
    else
      local path = dir .. "/" .. name
      local t0 = C.tl_now()
      local mod, params = relay.frontend.from_onnx(path .. ".onnx")
      local t_import = C.tl_now() - t0
      local shape = mod.main.params[1].type.shape
      t0 = C.tl_now()
      local lib = executor.build(mod, { target = "llvm", params = params, quiet = true })
      local t_compile = C.tl_now() - t0
      local m = executor.GraphModule(lib)
      local x = read_floats(path .. ".in", shape)
      m:set_input("input", x)
      m:run()
      local e = rel_error(m:get_output(0), read_floats(path .. ".out", mod.main.body.type.shape))
      local untuned = m:benchmark({ number = 1, repeats = opts["repeat"], quiet = true }).median * 1e3
      local tuned = "-"
      local best = untuned
      if history then
        local tl_lib = executor.build(mod, { target = "llvm", params = params, quiet = true, history = history })
        local tm = executor.GraphModule(tl_lib)
        tm:set_input("input", x)
        local t = tm:benchmark({ number = 1, repeats = opts["repeat"], quiet = true }).median * 1e3
        tuned, best = string.format("%.2f", t), math.min(t, untuned)
      end
      print(string.format("%-20s %-9s %9.2f %10.2f %11.2f %11s %11.2f %8.2fx %9.1e", name, size .. "x" .. size,
                          t_import, t_compile, untuned, tuned, torch_ms, torch_ms / best, e))
      io.stdout:flush()
      for _, ext in ipairs { ".onnx", ".in", ".out" } do os.remove(path .. ext) end
    end
  end
end)
file.remove(dir)
file.remove(cache)
if not ok then error(err, 0) end
