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
local file = require "tunelua.file"
local json = require "tunelua.json"
local target = require "tunelua.target"

local ffi, C = core.ffi, core.C

local vta = {}

--- vta.config_path() -> the default vta_config.json: $TUNELUA_VTA_CONFIG, else the source
-- tree's targets/vta/vta_config.json, else the installed share/tunelua/vta/vta_config.json.
function vta.config_path()
  local env = os.getenv("TUNELUA_VTA_CONFIG")
  if env and env ~= "" then return env end
  local root = file.source_root()
  if root then
    for _, p in ipairs { root .. "/targets/vta/vta_config.json", root .. "/vta/vta_config.json" } do
      if file.exists(p) then return p end
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
  local source = opts.text
  if not source then
    local f = assert(io.open(opts.config or vta.config_path(), "r"))
    source = f:read("*a")
    f:close()
  end
  local out = ffi.new("char *[1]")
  core.check(C.tl_vta_config_json(core.ctx, handle, out), 2)
  local fields = json.decode(ffi.string(out[0]))
  C.tl_vta_free(out[0])
  local env = setmetatable(fields, Env)
  env.handle = handle
  env.config_text = source     -- the vta_config.json text (measurements send it)
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

local function log2(n)
  local l = 0
  while 2 ^ l < n do l = l + 1 end
  if 2 ^ l ~= n then return nil end
  return l
end

--- vta.config_of_model(model) -> vta_config.json text for a MODEL string such as
-- "pynq_1x16_i8w8a32_15_15_18_17" (TARGET_BITSTREAM), or nil and why
function vta.config_of_model(model)
  local tgt, b, blk, i, w, a, u, inp, wgt, acc =
    tostring(model):match("^(%w+)_(%d+)x(%d+)_i(%d+)w(%d+)a(%d+)_(%d+)_(%d+)_(%d+)_(%d+)$")
  if not tgt then return nil, "not a VTA model name: " .. tostring(model) end
  local lb, lk, li, lw, la = log2(tonumber(b)), log2(tonumber(blk)), log2(tonumber(i)),
    log2(tonumber(w)), log2(tonumber(a))
  if not (lb and lk and li and lw and la) then return nil, "not powers of 2 in " .. model end
  return json.encode { TARGET = tgt, HW_VER = "0.0.2", LOG_INP_WIDTH = li, LOG_WGT_WIDTH = lw,
    LOG_ACC_WIDTH = la, LOG_BATCH = lb, LOG_BLOCK = lk, LOG_UOP_BUFF_SIZE = tonumber(u),
    LOG_INP_BUFF_SIZE = tonumber(inp), LOG_WGT_BUFF_SIZE = tonumber(wgt),
    LOG_ACC_BUFF_SIZE = tonumber(acc) }
end

--- vta.env_of_target(target) -> the env of a VTA target string: the default configuration when
-- its -model is the default's MODEL, else the configuration the model names
function vta.env_of_target(tgt)
  local model = target.record(type(tgt) == "table" and (tgt.str or tgt.string) or tgt).model
  local env = vta.get_env()
  if model == nil or model == env.MODEL then return env end
  local text, why = vta.config_of_model(model)
  if not text then error("vta: target " .. tostring(tgt) .. ": " .. why, 2) end
  return vta.get_env { text = text, name = model }
end

-- ---- conv2d_packed.vta tasks ------------------------------------------------------------

local Task = {}
Task.__index = Task

local function take_string(p)
  local s = ffi.string(p[0])
  C.tl_vta_free(p[0])
  return s
end

--- vta.task(env, args) -> a conv2d_packed.vta task on env's configuration. args: TVM's
-- [data, kernel, strides, padding, dilation, layout, out_dtype] (a table or JSON text).
function vta.task(env, args)
  local text = type(args) == "string" and args or json.encode(args)
  local h = ffi.new("tl_vta_task *[1]")
  core.check(C.tl_vta_task_new(core.ctx, env.handle, text, h), 2)
  return setmetatable({ handle = ffi.gc(h[0], C.tl_vta_task_free), env = env, args = text,
                        name = "conv2d_packed.vta" }, Task)
end

function Task:len() return tonumber(C.tl_vta_task_space_len(self.handle)) end
function Task:flop() return tonumber(C.tl_vta_task_flop(self.handle)) end

--- task:entity(index) -> the config's entity as TVM's records write it (decoded JSON)
function Task:entity(index)
  local out = ffi.new("char *[1]")
  core.check(C.tl_vta_task_entity_json(core.ctx, self.handle, index, out), 2)
  return json.decode(take_string(out))
end

--- task:index_of(entity) -> the config index of an entity (a table or JSON text)
function Task:index_of(entity)
  local text = type(entity) == "string" and entity or json.encode(entity)
  local idx = ffi.new("int64_t[1]")
  core.check(C.tl_vta_task_index_of_entity(core.ctx, self.handle, text, idx), 2)
  return tonumber(idx[0])
end

--- task:check(index) -> true, or false and why the config cannot run (an SRAM it overflows)
function Task:check(index)
  if C.tl_vta_task_check(core.ctx, self.handle, index) == 0 then return true end
  local msg = core.errmsg()
  C.tl_clearerr(core.ctx)
  return false, msg
end

--- task:run(index[, opts]) -> stats: the config run on a fresh simulator with random data
-- (opts.seed), checked against the CPU reference unless opts.check == false; cycles, seconds,
-- gops, gemm_busy, busy cycles per module, byte and GEMM/ALU counters, macs
function Task:run(index, opts)
  opts = opts or {}
  local out = ffi.new("char *[1]")
  core.check(C.tl_vta_task_run(core.ctx, self.handle, index, opts.seed or 1,
                               opts.check == false and 0 or 1, out), 2)
  return json.decode(take_string(out))
end

--- task:run_data(index, data, kernel, out) -> stats: the config run on the caller's data and
-- kernel (int8 buffers in the packed layouts: cdata pointers or tunelua.nd arrays), the
-- simulator's output written to out (also checked against the CPU reference)
function Task:run_data(index, data, kernel, outbuf)
  local nd = require "tunelua.nd"
  local function ptr(x, which, what)
    if nd.is_array(x) then
      local want = tonumber(C.tl_vta_task_nbytes(self.handle, which))
      if x:nbytes() ~= want or x:dtype() ~= "int8" then
        error(string.format("task:run_data: %s must be int8 of %d bytes, got %s of %d bytes", what,
                            want, tostring(x:dtype()), x:nbytes()), 3)
      end
      return x:data_ptr()
    end
    if type(x) ~= "cdata" then error("task:run_data: " .. what .. " must be an nd array or a pointer", 3) end
    return x
  end
  local p0, p1, p2 = ptr(data, 0, "data"), ptr(kernel, 1, "kernel"), ptr(outbuf, 2, "out")
  local out = ffi.new("char *[1]")
  core.check(C.tl_vta_task_run_data(core.ctx, self.handle, index, p0, p1, p2, out), 2)
  return json.decode(take_string(out))
end

--- task:run_fused(index, epilogue[, opts]) -> stats: the conv of config index with a
-- network group's own ending (epilogue: a list of {op[, value]}, op add, shr, shl, min,
-- max, bias, res (int8 residual) or res32 (int32 residual); docs/vta.md), through the IR
-- route on a fresh simulator. opts: data, kernel, bias, residual, out (nd arrays or
-- pointers; absent inputs are random from opts.seed), check (default true: compared with
-- the CPU reference of the same group).
function Task:run_fused(index, epilogue, opts)
  opts = opts or {}
  local nd = require "tunelua.nd"
  local function ptr(x)
    if x == nil then return nil end
    if nd.is_array(x) then return x:data_ptr() end
    return x
  end
  local text = type(epilogue) == "string" and epilogue or json.encode(epilogue)
  local out = ffi.new("char *[1]")
  core.check(C.tl_vta_task_run_fused(core.ctx, self.handle, index, text, ptr(opts.data),
                                     ptr(opts.kernel), ptr(opts.bias), ptr(opts.residual),
                                     ptr(opts.out), opts.seed or 1,
                                     opts.check == false and 0 or 1, out), 2)
  return json.decode(take_string(out))
end

--- vta.simulator(env[, dram_bytes]) -> a vta-sim of env's configuration (DRAM default 256 MiB
-- of address space), shared by a network's groups
function vta.simulator(env, dram_bytes)
  local h = ffi.new("tl_vta_sim *[1]")
  core.check(C.tl_vta_sim_new(core.ctx, env.handle, dram_bytes or 2 ^ 28, h), 2)
  -- the groups built on it are freed with it, before it (they use its DRAM)
  local groups = {}
  local handle = ffi.gc(h[0], function(p)
    for _, g in ipairs(groups) do C.tl_vta_group_free(g) end
    C.tl_vta_sim_free(p)
  end)
  return { handle = handle, env = env, groups = groups }
end

--- vta.group(sim, task, index, epilogue) -> a network's packed conv group on sim: config
-- index of task with the group's ending, its stream built once; group.handle attaches to a
-- graph executor (C.tl_vta_group_attach); group:cycles([total]) gives the simulated cycles
-- of its last run (or of all its runs)
local Group = {}
Group.__index = Group
function vta.group(sim, task, index, epilogue)
  local text = type(epilogue) == "string" and epilogue or json.encode(epilogue)
  local h = ffi.new("tl_vta_group *[1]")
  core.check(C.tl_vta_group_new(core.ctx, sim.handle, task.handle, index, text, h), 2)
  sim.groups[#sim.groups + 1] = h[0]
  return setmetatable({ handle = h[0], sim = sim, task = task, index = index, epilogue = text },
                      Group)
end
function Group:cycles(total) return tonumber(C.tl_vta_group_cycles(self.handle, total and 1 or 0)) end
function Group:runs() return tonumber(C.tl_vta_group_runs(self.handle)) end

--- task:disasm(index) -> the config's instruction stream, one line per instruction
function Task:disasm(index)
  local out = ffi.new("char *[1]")
  core.check(C.tl_vta_task_disasm(core.ctx, self.handle, index, out), 2)
  return take_string(out)
end

--- vta.tophub_map(path) -> how a TopHub VTA log maps onto our spaces:
-- { lines, records, by_template = {name = n}, accepted, same_index, fits, entries, rejected }
-- A conv2d_packed.vta record is accepted when its model names a configuration we build,
-- its workload parses and its entity is a point of our space; same_index counts those whose
-- index in our space is the record's (older TVM versions enumerated some spaces in another
-- order), fits those whose tiles fit the SRAMs. entries[i] = {task, index, record, fits}.
function vta.tophub_map(path)
  local f = assert(io.open(path, "r"))
  local res = { lines = 0, records = 0, by_template = {}, accepted = 0, same_index = 0, fits = 0,
                entries = {}, rejected = {} }
  for line in f:lines() do
    res.lines = res.lines + 1
    if line:match("^%s*{") then
      res.records = res.records + 1
      local rec = json.decode(line)
      local name = rec.input[2]
      res.by_template[name] = (res.by_template[name] or 0) + 1
      if name == "conv2d_packed.vta" then
        local ok, task, idx
        local text, why = vta.config_of_model(target.record(rec.input[1]).model)
        if text then
          ok, task = pcall(function()
            return vta.task(vta.get_env { text = text, name = "model" }, rec.input[3])
          end)
          if not ok then why = task end
        end
        if ok then
          ok, idx = pcall(task.index_of, task, rec.config.entity)
          if not ok then why = idx end
        end
        if ok then
          res.accepted = res.accepted + 1
          if idx == rec.config.index then res.same_index = res.same_index + 1 end
          local fits = task:check(idx)
          if fits then res.fits = res.fits + 1 end
          res.entries[#res.entries + 1] = { task = task, index = idx, record = rec, fits = fits }
        else
          res.rejected[#res.rejected + 1] = why
        end
      end
    end
  end
  f:close()
  return res
end

return vta
