--- tunelua.opencl: OpenCL devices from Lua.
--
--   local ocl = require "tunelua.opencl"
--   print(ocl.info())                  -- one line per device
--   ocl.count()                        -- number of devices (0: none)
--   ocl.device(0)                      -- {name =, vendor =, max_work_group_size =, ...}
--   ocl.hw_params(0)                   -- {max_work_group_size, local_mem_bytes, compute_units, warp_size}
--   ocl.device_str(1)                  -- "opencl:1", for nd.array(x, dtype, "opencl:1")
--
-- Device 0 is the default device: $TUNELUA_OPENCL_DEVICE (an index in
-- platform order) if set, else the first GPU, else the first device.
-- Building for OpenCL is tl.build(s, args, "opencl") (see tunelua.build).
local ffi = require "ffi"
local core = require "tunelua.core"
local json = require "tunelua.json"

local C, ctx = core.C, core.ctx

local opencl = {}

--- Number of OpenCL devices (0 when there is none).
function opencl.count() return C.tl_opencl_device_count() end

--- True when at least one OpenCL device is present.
function opencl.available() return C.tl_opencl_device_count() > 0 end

local function dev_arg(dev, lvl)
  dev = dev or 0
  if type(dev) ~= "number" or dev < 0 or dev % 1 ~= 0 then
    error("opencl: device must be a non-negative integer, got " .. tostring(dev), lvl)
  end
  return dev
end

--- Properties of device dev (default 0) as a table.
function opencl.device(dev)
  dev = dev_arg(dev, 3)
  local out = ffi.new("const char *[1]")
  core.check(C.tl_opencl_device_info(ctx, dev, out), 2)
  local t = json.decode(ffi.string(out[0]))
  return t
end

--- Hardware params of device dev for the tuners.
function opencl.hw_params(dev)
  dev = dev_arg(dev, 3)
  local a, b, c, d = ffi.new("int64_t[1]"), ffi.new("int64_t[1]"), ffi.new("int64_t[1]"), ffi.new("int64_t[1]")
  core.check(C.tl_opencl_hw_params(ctx, dev, a, b, c, d), 2)
  return { max_work_group_size = tonumber(a[0]), local_mem_bytes = tonumber(b[0]),
           compute_units = tonumber(c[0]), warp_size = tonumber(d[0]) }
end

--- "opencl:<dev>"
function opencl.device_str(dev) return "opencl:" .. dev_arg(dev, 3) end

--- A text summary of every device (or "no OpenCL device").
function opencl.info()
  local n = opencl.count()
  if n == 0 then return "no OpenCL device (install an ICD such as pocl, see docs/opencl.md)" end
  local lines = {}
  for i = 0, n - 1 do
    local d = opencl.device(i)
    lines[#lines + 1] = string.format(
      "opencl:%d %s (%s, %s, %s): %d compute units @ %d MHz, max work-group %d (%s), "
      .. "local mem %d KiB, global mem %d MiB, subgroup %d, fp16 %s, fp64 %s",
      i, d.name, d.type, d.vendor, d.version, d.compute_units, d.max_clock_mhz,
      d.max_work_group_size, table.concat(d.max_work_item_sizes, "x"),
      math.floor(d.local_mem_bytes / 1024), math.floor(d.global_mem_bytes / 1048576),
      d.subgroup_size, tostring(d.fp16), tostring(d.fp64))
  end
  return table.concat(lines, "\n")
end

--- Build OpenCL C source for device dev (errors carry the build log).
function opencl.build_program(source, options, dev)
  dev = dev_arg(dev, 3)
  core.check(C.tl_opencl_build_program(ctx, dev, source, options or ""), 2)
end

return opencl
