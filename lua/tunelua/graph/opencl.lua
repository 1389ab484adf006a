--- tunelua.graph.opencl: the graph executor's OpenCL back half (targets "opencl ...").
--
-- executor.build walks the graph, schedules every fused group (template + config, or
-- tl_topi_default_schedule_gpu) and lowers it as for the CPU; then this module:
--   * plans the intermediates into storage slots (tl_graph_plan_storage): one device
--     buffer per slot, since an OpenCL kernel argument cannot start at a byte offset;
--   * copies weights and constants to the device once, allocates inputs and outputs there;
--   * builds every distinct kernel with the OpenCL backend into ONE program
--     (tl_graph_ocl_lib_build: pocl compiles one program of 23 kernels in 1.4 s against
--     7.5 s for 23 programs); steps enqueue their kernels and a run ends with one clFinish;
--   * or, with {one_program = false} or when the joined program fails, one program per
--     kernel (tl_graph_ocl_build) whose steps launch with tl_ocl_module_call (which waits).
-- GraphModule's set_input copies host -> device, get_output device -> host.
local targets = require "tunelua.target"
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local group = require "tunelua.graph.group"
local json = require "tunelua.json"

local C, ctx, check = core.C, core.ctx, core.check

local M = {}

local intarr = ffi.typeof("int[?]")
local i64arr = ffi.typeof("int64_t[?]")
local int1 = ffi.typeof("int[1]")

local ALIGN = 64

--- The default OpenCL schedule of s (tl_topi_default_schedule_gpu).
function M.default_schedule(s)
  check(C.tl_topi_default_schedule_gpu(ctx, s), 3)
  return true
end

--- The tile shapes asked for: opts.opencl_shapes, else the environment variable
--- TUNELUA_OPENCL_SHAPES, else "auto". Returns how ("auto" | "gpu" | "cpu") and the compute
--- units of "gpu:N" (or nil); a bad value is an error naming where it came from.
function M.shapes_option(opts, level)
  level = (level or 1) + 1
  local how, src = opts and opts.opencl_shapes, "opencl_shapes"
  if how == nil then how, src = os.getenv("TUNELUA_OPENCL_SHAPES"), "TUNELUA_OPENCL_SHAPES" end
  if how == nil or how == "" then return "auto", nil end
  local forced_cu, given = nil, how
  if type(how) == "string" and how:match("^gpu:%d+$") then
    forced_cu = tonumber(how:sub(5))
    how = "gpu"
  end
  if (how ~= "auto" and how ~= "gpu" and how ~= "cpu") or forced_cu == 0 then
    error(string.format("executor.build: %s must be \"auto\", \"gpu\", \"gpu:N\" (N compute units, " ..
                        "N > 0) or \"cpu\", got %s", src, tostring(given)), level)
  end
  return how, forced_cu
end

--- How the default schedules shape their channel-last tiles for target tgt (a parsed
--- target): {shapes = C.TL_GPU_SHAPES_CPU | TL_GPU_SHAPES_GPU, compute_units, name = "cpu" |
--- "gpu"}. M.shapes_option's "auto": "gpu" for a local device of type GPU (its compute
--- units size the grid), "cpu" otherwise (a CPU device such as pocl, or no local device);
--- "gpu" or "cpu" force them (the GPU shapes then run on pocl too), "gpu:N" sizes the GPU
--- shapes' grid for N compute units (e.g. "gpu:132", an H100/H200's SMs, to build and check
--- those kernels on pocl). The device is asked only for "auto" and "gpu".
function M.tile_shapes(tgt, opts, level)
  level = (level or 1) + 1
  local how, forced_cu = M.shapes_option(opts, level)
  local cu, kind = forced_cu or 0, how
  if how == "auto" or (how == "gpu" and not forced_cu) then
    local dev = targets.device_id(tgt) or 0
    local dkind = "cpu"
    if C.tl_opencl_device_count() > dev then
      local out = ffi.new("const char *[1]")
      if C.tl_opencl_device_info(ctx, dev, out) == 0 then
        local info = json.decode(ffi.string(out[0]))
        dkind = info.type == "gpu" and "gpu" or "cpu"
        cu = tonumber(info.compute_units) or 0
      else
        C.tl_clearerr(ctx)
      end
    end
    if how == "auto" then kind = dkind end
  end
  return { shapes = kind == "gpu" and C.TL_GPU_SHAPES_GPU or C.TL_GPU_SHAPES_CPU, compute_units = cu,
           name = kind }
end

--- The default OpenCL schedule of s shaped by shp (M.tile_shapes).
function M.default_schedule_for(s, shp)
  check(C.tl_topi_default_schedule_gpu_for(ctx, s, shp.shapes, shp.compute_units), 3)
  return true
end

local dtype_code = group.dtype_code

--- The OpenCL device index of a parsed target ("-device_id=k", default 0).
function M.device_id(tgt, level)
  local id, msg = targets.device_id(tgt)
  if not id then error(string.format("executor.build: target '%s': %s", tgt.str, msg), (level or 1) + 1) end
  return id
end

--- Finish executor.build for an OpenCL target. w: {tgt, bufs, steps, kernels, opts};
--- returns the lib's fields (exec, kernels, planned_bytes, ...).
function M.finish(w, level)
  level = (level or 1) + 1
  local dev = M.device_id(w.tgt, level)
  local devname = "opencl:" .. dev
  if C.tl_opencl_device_count() <= dev then
    error(string.format("executor.build: target '%s' needs OpenCL device %d, but %d device(s) found",
                        w.tgt.str, dev, C.tl_opencl_device_count()), level)
  end
  -- 1. storage slots for the intermediates
  local inter, sum = group.intermediates(w.bufs)
  local n = #inter
  local sizes, first, last = i64arr(n + 1), intarr(n + 1), intarr(n + 1)
  local sid, sbytes, ns = intarr(n + 1), i64arr(n + 1), int1()
  for i, b in ipairs(inter) do
    sizes[i - 1], first[i - 1], last[i - 1] = b.nbytes, b.first, b.last
  end
  check(C.tl_graph_plan_storage(ctx, n, sizes, first, last, ALIGN, sid, sbytes, ns), level)
  local ep = ffi.new("tl_graph_exec *[1]")
  check(C.tl_graph_exec_new(ctx, 0, ep), level)
  local e = ffi.gc(ep[0], C.tl_graph_exec_free)
  local storages, planned = {}, 0
  for s = 0, ns[0] - 1 do
    storages[s] = nd.empty({ tonumber(sbytes[s]) }, "uint8", devname)
    planned = planned + tonumber(sbytes[s])
  end
  for i, b in ipairs(inter) do
    local sh = i64arr(#b.shape + 1)
    for j, d in ipairs(b.shape) do sh[j - 1] = d end
    local s = int1()
    check(C.tl_graph_exec_slot_storage(ctx, e, storages[sid[i - 1]], #b.shape, sh,
                                       dtype_code(b.dtype), s), level)
    b.slot = s[0]
    b.storage = sid[i - 1]
  end
  -- 2. inputs, outputs, weights on the device
  local uploaded = {}
  for _, b in ipairs(w.bufs) do
    local arr
    if b.kind == "input" or b.kind == "output" then
      arr = nd.empty(b.shape, b.dtype, devname)
      b.array = arr
    elseif b.kind == "param" or b.kind == "const" then
      local v = b.value
      if type(v) == "number" then v = nd.full(b.shape, v, b.dtype) end
      if not nd.is_array(v) then
        error("executor.build: value of a constant or param is not a tl.nd array", level)
      end
      arr = uploaded[v]
      if not arr then
        arr = v:copyto(devname)
        uploaded[v] = arr
      end
      b.array = arr
    end
    if arr then
      local s = int1()
      check(C.tl_graph_exec_slot_array(ctx, e, arr, s), level)
      b.slot = s[0]
    end
  end
  -- 3. kernels; each one's OpenCL C and manifest kept for export (executor.export)
  local kernels = w.kernels
  local t0 = C.tl_now()
  for _, k in ipairs(kernels) do
    local src, man = ffi.new("char *[1]"), ffi.new("char *[1]")
    check(C.tl_opencl_source_manifest(ctx, k.lowered, src, man), level)
    k.ocl_source, k.ocl_manifest = ffi.string(src[0]), ffi.string(man[0])
    C.tl_opencl_str_free(src[0])
    C.tl_opencl_str_free(man[0])
  end
  local olib
  if #kernels > 0 and w.opts.one_program ~= false then
    -- one program for all groups; if the driver refuses it, one program per group below
    local fs = ffi.new("tl_lowered *[?]", #kernels)
    for i, k in ipairs(kernels) do fs[i - 1] = k.lowered end
    local lp = ffi.new("tl_graph_ocl_lib *[1]")
    local rc = C.tl_graph_ocl_lib_build(ctx, fs, #kernels, dev, lp)
    if rc == 0 then
      olib = ffi.gc(lp[0], C.tl_graph_ocl_lib_free)
      for i, k in ipairs(kernels) do
        local kid = int1()
        check(C.tl_graph_exec_add_kernel_ocl_lib(ctx, e, olib, i - 1, kid), level)
        k.id = kid[0]
        k.lowered = nil
      end
    else
      io.stderr:write("executor: one OpenCL program for the graph failed (" .. core.errmsg()
                      .. "); building one program per kernel\n")
      C.tl_clearerr(ctx)
    end
  end
  if #kernels > 0 and not olib then
    local fs = ffi.new("tl_lowered *[?]", #kernels)
    for i, k in ipairs(kernels) do fs[i - 1] = k.lowered end
    local mods = ffi.new("struct tl_ocl_module *[?]", #kernels)
    local threads = w.opts.jobs or 1
    local rc = C.tl_graph_ocl_build(ctx, fs, #kernels, dev, threads, mods)
    if rc ~= 0 then
      local msg = core.errmsg()
      C.tl_clearerr(ctx)
      error("executor.build: OpenCL build failed: " .. msg, level)
    end
    for i, k in ipairs(kernels) do
      k.module = ffi.gc(ffi.cast("tl_ocl_module *", mods[i - 1]), C.tl_ocl_module_free)
      local kid = int1()
      check(C.tl_graph_exec_add_kernel_ocl(ctx, e, k.module, k.name, kid), level)
      k.id = kid[0]
      k.lowered = nil
    end
  end
  local compile_s = C.tl_now() - t0
  for _, st in ipairs(w.steps) do
    local ids = intarr(#st.args)
    for i, b in ipairs(st.args) do ids[i - 1] = b.slot end
    check(C.tl_graph_exec_add_step(ctx, e, st.kernel.id, ids, #st.args), level)
  end
  local storage_bytes = {}
  for s = 0, ns[0] - 1 do storage_bytes[s + 1] = tonumber(sbytes[s]) end
  return {
    exec = e, olib = olib, storages = storages, uploaded = uploaded, compile_seconds = compile_s,
    storage_bytes = storage_bytes, bufs = w.bufs,
    planned_bytes = planned, intermediate_bytes = sum, device = devname,
  }
end

return M
