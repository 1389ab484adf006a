--- tunelua.autotvm.measure_vta: measuring AutoTVM configs of VTA tasks ("ext_dev -device=vta
-- ...", template conv2d_packed.vta) on vta-sim (docs/vta.md, "Measuring").
--
--   build_one (in the tuner's process, cheap): the config's tiles are checked against the
--     SRAMs of the target's configuration (one that does not fit is INSTANTIATION_ERROR naming
--     the buffer); nothing is compiled: the stream is built where it runs.
--   run_one: one forked child per trial (tl_vta_measure): the stream built, run on the
--     simulator with random data and checked against the CPU reference; the cost is the
--     simulated time of the cycle model. RPCRunner sends the same trial to a server
--     (tl_rpc_measure_batch_vta).
local ffi = require "ffi"
local core = require "tunelua.core"
local measure = require "tunelua.autotvm.measure"
local vta = require "tunelua.vta"
local json = require "tunelua.json"

local C, ctx = core.C, core.ctx
local E = measure.MeasureErrorNo

local M = {}

local function now() return tonumber(C.tl_now()) end

local config_index = measure.config_index

-- The VTA task (tunelua.vta) of an AutoTVM task, made once per task.
local vta_tasks = setmetatable({}, { __mode = "k" })
function M.vta_task_of(task)
  local vt = vta_tasks[task]
  if not vt then
    local env = vta.env_of_target(task.target)
    vt = vta.task(env, ffi.string(C.tl_atvm_task_args_json(task.handle)))
    vta_tasks[task] = vt
  end
  return vt
end

--- build_one(builder, inp) -> {vta_config, vta_args, index, time_cost, error_no, error_msg}
function M.build_one(builder, inp)
  local t0 = now()
  local r = {}
  local ok, vt = pcall(M.vta_task_of, inp.task)
  local index = config_index(inp)
  if not ok then
    r.error_no, r.error_msg = E.INSTANTIATION_ERROR, measure.strip_traceback(vt)
  elseif type(index) ~= "number" or index < 0 then
    r.error_no, r.error_msg = E.INSTANTIATION_ERROR, "the input has no config index"
  else
    local fits, why = vt:check(index)
    if fits then
      r.error_no, r.vta_config, r.vta_args, r.index = 0, vt.env.config_text, vt.args, index
    else
      r.error_no, r.error_msg = E.INSTANTIATION_ERROR, why
    end
  end
  r.time_cost = now() - t0
  return r
end

--- run_one(runner, inp, br) -> MeasureResult; costs are simulated seconds. The simulator's
--- counters (cycles, gemm_busy, ...) are in result.vta_stats.
function M.run_one(runner, inp, br)
  local t0, ts = now(), os.time()
  local rep = runner.repeats or runner["repeat"] or 3
  local costs, nc, en, mg = ffi.new("double[?]", rep), ffi.new("int[1]"), ffi.new("int[1]"),
                            ffi.new("char *[1]")
  local rc = C.tl_vta_measure(ctx, br.vta_config, br.vta_args, br.index, rep, runner.timeout or 10,
                              costs, nc, en, mg)
  local msg = mg[0] ~= nil and ffi.string(mg[0]) or nil
  if mg[0] ~= nil then C.tl_vta_free(mg[0]) end
  local eno = tonumber(en[0])
  if rc ~= 0 then
    eno, msg = E.UNKNOWN_ERROR, core.errmsg()
    C.tl_clearerr(ctx)
  end
  local all = (br.time_cost or 0) + now() - t0
  if eno ~= 0 then return measure.MeasureResult({ 1e9 }, eno, all, ts, msg) end
  local c = {}
  for i = 0, nc[0] - 1 do c[#c + 1] = tonumber(costs[i]) end
  local res = measure.MeasureResult(measure.trim_costs(c), 0, all, ts, nil)
  res.vta_stats = msg and json.decode(msg) or nil
  return res
end

function M.register()
  measure.device_hooks.vta = { build_one = M.build_one, run_one = M.run_one, module = M }
end
M.register()

return M
