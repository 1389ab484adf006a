--- tunelua.vta: VTA, the deep-learning accelerator (targets/vta; docs/vta.md).
--
--   local vta = require "tunelua.vta"
--   local env = vta.get_env()              -- the default vta_config.json
--   print(env.BATCH, env.BLOCK_IN, env.BLOCK_OUT, env.target)
--   local env2 = vta.get_env { config = "my_config.json" }
--   print(env:disasm(bytes))               -- an instruction stream, readable
--
-- The configuration is read by the C side (jansson): TVM's keys, the cycle model's
-- optional keys, the derived parameters. A bad file raises an error naming the key.
local core = require "tunelua.core"
local json = require "tunelua.json"

local ffi, C = core.ffi, core.C

local vta = {}

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

local function source_root()
  local src = debug.getinfo(1, "S").source
  if src:sub(1, 1) ~= "@" then return nil end
  return src:sub(2):match("^(.*)/lua/tunelua/[^/]*$")
end

--- vta.config_path() -> the default vta_config.json: $TUNELUA_VTA_CONFIG, else the source
-- tree's targets/vta/vta_config.json, else the installed share/tunelua/vta/vta_config.json.
function vta.config_path()
  local env = os.getenv("TUNELUA_VTA_CONFIG")
  if env and env ~= "" then return env end
  local root = source_root()
  if root then
    for _, p in ipairs { root .. "/targets/vta/vta_config.json", root .. "/vta/vta_config.json" } do
      if exists(p) then return p end
    end
  end
  error("vta: no default vta_config.json (set TUNELUA_VTA_CONFIG)", 2)
end

-- The CPU target that runs what VTA does not, per board (TVM's target_host choice).
local host_of = {
  pynq = "llvm -mtriple=armv7-none-linux-gnueabihf",
  de10nano = "llvm -mtriple=armv7-none-linux-gnueabihf",
  ultra96 = "llvm -mtriple=aarch64-linux-gnu",
  zcu104 = "llvm -mtriple=aarch64-linux-gnu",
}

local Env = {}
Env.__index = Env

--- env:disasm(bytes) -> one numbered line per 16-byte instruction
function Env:disasm(bytes)
  local out = ffi.new("char *[1]")
  core.check(C.tl_vta_disasm_bytes(core.ctx, self.handle, bytes, #bytes, out), 2)
  local s = ffi.string(out[0])
  C.tl_vta_free(out[0])
  return s
end

local cache = {}

--- vta.get_env([opts]) -> env, the configuration as TVM's vta.get_env() shows it.
-- opts.config: a vta_config.json path (default vta.config_path()); opts.text: the JSON text.
-- Fields: every key (TARGET, HW_VER, LOG_*), the derived parameters (BATCH, BLOCK_IN,
-- BLOCK_OUT, *_WIDTH, *_ELEM_BITS, *_BUFF_DEPTH, BITSTREAM, MODEL), the dtypes (inp_dtype,
-- wgt_dtype, acc_dtype, out_dtype), the SRAM scopes (inp_scope, wgt_scope, acc_scope), the
-- target strings (target, target_host, target_vta_cpu) and the cycle model's keys
-- (CLOCK_MHZ, DRAM_BYTES_PER_CYCLE, DRAM_LATENCY_CYCLES, GEMM_II, ALU_II, ...). One env per
-- file, cached.
function vta.get_env(opts)
  opts = opts or {}
  local h = ffi.new("tl_vta_config *[1]")
  local key
  if opts.text then
    key = "text:" .. opts.text
    if cache[key] then return cache[key] end
    core.check(C.tl_vta_config_from_string(core.ctx, opts.text, opts.name or "vta config", h), 2)
  else
    local path = opts.config or vta.config_path()
    key = "file:" .. path
    if cache[key] then return cache[key] end
    core.check(C.tl_vta_config_load(core.ctx, path, h), 2)
  end
  local handle = ffi.gc(h[0], C.tl_vta_config_free)
  local out = ffi.new("char *[1]")
  core.check(C.tl_vta_config_json(core.ctx, handle, out), 2)
  local fields = json.decode(ffi.string(out[0]))
  C.tl_vta_free(out[0])
  local env = setmetatable(fields, Env)
  env.handle = handle
  env.inp_dtype = "int" .. env.INP_WIDTH
  env.wgt_dtype = "int" .. env.WGT_WIDTH
  env.acc_dtype = "int" .. env.ACC_WIDTH
  env.out_dtype = "int" .. env.OUT_WIDTH
  env.inp_scope, env.wgt_scope, env.acc_scope = "local.inp_buffer", "local.wgt_buffer", "local.acc_buffer"
  env.target = "ext_dev -device=vta -keys=vta,cpu -model=" .. env.MODEL
  env.target_host = host_of[env.TARGET] or "llvm"
  env.target_vta_cpu = env.target_host
  env.MAX_XFER = 33554432   -- 32 MiB, the runtime's largest transfer
  cache[key] = env
  return env
end

return vta
