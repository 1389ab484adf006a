-- AutoTVM records: encode/decode round trip, legacy lines, malformed lines
-- (warned with file:line and skipped), pick_best, apply_history_best, TopHub.
local autotvm = require "tunelua.autotvm"
local record = require "tunelua.autotvm.record"
local json = require "tunelua.json"
local dispatch = require "tunelua.autotvm.dispatch"
local tophub = require "tunelua.autotvm.tophub"

-- every file under a fresh directory of this run, removed at the end
local util = require "tests.lua.lib.util"
local tmpdir = util.tmpdir("records")
assert(tmpdir:match("^/[%w/._-]+$"), tmpdir)
local tmp = tmpdir .. "/records.log"

-- ---- round trip of TVM's own lines (only tvm_version is rewritten) -------------------------
local lines = {
  '{"input": ["llvm -mcpu=skylake-avx512", "conv2d_NCHWc.x86", [["TENSOR", [1, 3, 224, 224], "float32"], ["TENSOR", [64, 3, 7, 7], "float32"], [2, 2], [3, 3, 3, 3], [1, 1], "NCHW", "NCHW", "float32"], {}], "config": {"index": 193, "code_hash": null, "entity": [["tile_ic", "sp", [1, 3]], ["tile_oc", "sp", [2, 32]], ["tile_ow", "sp", [14, 8]], ["unroll_kw", "ot", false]]}, "result": [[9.593498664366054e-05], 0, 1.757516860961914, 1539972731.352305], "version": 0.2, "tvm_version": "0.8.dev0"}',
  '{"input": ["opencl -model=rk3399 -device=mali", "dense.mali", [["TENSOR", [1, 1024], "float32"], ["TENSOR", [1000, 1024], "float32"], ["TENSOR", [1000], "float32"], null], {}], "config": {"index": 407, "code_hash": null, "entity": [["tile_y", "sp", [1, 1, 1]], ["tile_x", "sp", [40, 25, 1]], ["c_unroll", "sp", [64, 16]]]}, "result": [[0.0008410332727272727], 0, 0.9504795074462891, 1538219132.0322816], "version": 0.2, "tvm_version": "0.8.dev0"}',
  '{"input": ["opencl -model=rk3399 -device=mali", "conv2d_nchw_spatial_pack.mali", [["TENSOR", [1, 3, 224, 224], "float32"], ["TENSOR", [64, 3, 3, 3], "float32"], [2, 2], [1, 1, 1, 1], [1, 1], "float32"], {}], "config": {"index": 2465835, "code_hash": null, "entity": [["tile_co", "sp", [4, 4, 4]], ["reorder_0", "re", [0, 1, 2, 3, 4, 5, 6, 9, 7, 8]], ["ann_reduce", "an", ["none", "unroll"]], ["ann_spatial", "an", ["none", "unroll", "vec"]]]}, "result": [[1000000000.0], 4, 0.631648063659668, 1534784665.5832863], "version": 0.2, "tvm_version": "0.8.dev0"}',
}
for i, line in ipairs(lines) do
  local inp, res = record.decode(line)
  assert(inp, res)
  local again = record.encode(inp, res)
  assert(again == line, "line " .. i .. " re-encodes as\n" .. again)
end
do
  local inp, res = record.decode(lines[2])
  assert(inp.args[4] == record.null and inp.workload[1] == "dense.mali" and #inp.workload == 5)
  assert(res.costs[1] == 0.0008410332727272727 and res.error_no == 0)
  local _, r3 = record.decode(lines[3])
  assert(r3.error_no == 4 and r3.costs[1] == 1e9)
end

-- floats print as Python's repr (values checked against CPython 3.11)
do
  local want = { [1e15] = "1000000000000000.0", [1e16] = "1e+16", [2.5e-7] = "2.5e-07", [1e-05] = "1e-05",
                 [1538219132.0322816] = "1538219132.0322816", [123456789012345680.0] = "1.2345678901234568e+17",
                 [1e9] = "1000000000.0", [0.0001] = "0.0001" }
  for v, txt in pairs(want) do
    assert(json.float_text(v) == txt, json.float_text(v) .. " vs " .. txt)
  end
end

-- legacy v0.1
do
  local legacy = '{"i": ["llvm -device=arm_cpu -target=aarch64-linux-gnu", "topi_nn_conv2d", [["TENSOR", [1, 3, 224, 224], "float32"], ["TENSOR", [64, 3, 7, 7], "float32"], [2, 2], [3, 3], "NCHW", "float32"], {}, ["conv2d", [1, 3, 224, 224, "float32"], [64, 3, 7, 7, "float32"], [2, 2], [3, 3], "NCHW", "float32"], {"i": 12, "c": null, "e": [["tile_co", "sp", [8, 8]], ["ann", "an", ["none", "vec"]]], "t": "direct"}], "r": [[0.01, 0.012], 0, 1.5, 1530000000.5], "v": 0.1}'
  local inp, res = record.decode(legacy)
  assert(inp and inp.legacy and inp.task_name == "topi_nn_conv2d" and inp.template_key == "direct", res)
  assert(inp.config.index == 12 and inp.legacy_workload[1] == "conv2d" and math.abs(record.mean_cost(res) - 0.011) < 1e-12)
  assert(record.target_info(inp.target).options.mtriple == "aarch64-linux-gnu")
  local nope, why = record.decode('{"i": [[], []], "r": [], "v": "v0.6"}')
  assert(nope == nil and why:find("auto%-scheduler"), why)
end

-- ---- a log we write loads back; malformed lines are skipped with file:line ----------------------
do
  local args = { { "TENSOR", { 4, 32 }, "float32" }, { "TENSOR", { 24, 32 }, "float32" }, record.null, "float32" }
  local task = autotvm.task.create("dense_nopack.x86", args, "llvm -mcpu=core-avx2")
  os.remove(tmp)
  local w = record.writer(tmp)
  local costs = { 3e-5, 2e-5, 5e-5, 1e9, 2e-5 }
  for i, c in ipairs(costs) do
    local cfg = task.config_space:get(i * 7)
    w.write({ task = task, config = cfg }, { costs = { c, c * 1.5 }, error_no = c == 1e9 and 1 or 0,
                                             all_cost = 0.5, timestamp = 1700000000 + i })
  end
  w.close()
  local f = io.open(tmp, "a")
  f:write("# a comment\n", "{not json}\n", "\n", '{"input": 3}\n')
  f:close()
  local warnings = {}
  local recs = record.load_from_file(tmp, { warn = function(m) warnings[#warnings + 1] = m end })
  assert(#recs == 5, #recs)
  assert(#warnings == 3, table.concat(warnings, "\n"))
  assert(warnings[1]:find(tmp .. ":7:", 1, true), warnings[1])
  assert(warnings[2]:find(tmp .. ":8:", 1, true) and warnings[3]:find(tmp .. ":9:", 1, true))
  assert(recs[4].res.error_no == 1 and recs[4].res.costs[1] == 1e9)
  -- keep only the good lines for what follows
  f = io.open(tmp, "w")
  for _, r in ipairs(recs) do f:write(record.encode(r.inp, r.res), "\n") end
  f:close()
  -- entity round trip into the task's space
  for i, r in ipairs(recs) do
    assert(task.config_space:index_of(r.inp.config.entity) == i * 7)
    assert(r.inp.config.index == i * 7)
  end

  -- apply_history_best: lowest mean cost, first of a tie; errors ignored
  local ctx = autotvm.apply_history_best(tmp)
  local best = ctx:query("llvm -mcpu=core-avx2", task:workload())
  assert(best and best.index == 14 and best.source == "log", best and best.index)
  assert(ctx:query_task(task) == 14)
  -- any llvm target shares the key "cpu"; the model does not matter here
  assert(ctx:query("llvm", task:workload()).index == 14)
  -- other workloads: nothing in the log, nothing in TopHub
  assert(ctx:query("llvm", { "dense_nopack.x86", 1, 2 }) == nil)
  assert(dispatch.apply_history_best({ tmp }, { tophub = false }):query("opencl", task:workload()) == nil)

  -- pick_best: one record per workload
  local out = tmp .. ".best"
  os.remove(out)
  assert(record.pick_best(tmp, out) == 1)
  local b = record.load_from_file(out)
  assert(#b == 1 and b[1].inp.config.index == 14)
  -- running it again (the output is read back too) keeps one
  assert(record.pick_best(tmp, out) == 1)
  os.remove(out)
end

-- ---- TopHub: file choice by target keys, lookup by workload ---------------------------------------
do
  local dir = tophub.dir()
  if not dir then
    print("skip: no TopHub directory")
  else
    assert(tophub.file_for("llvm -mcpu=skylake-avx512"):find("llvm_v0.04.log", 1, true))
    assert(tophub.file_for("opencl -device=mali -model=rk3399"):find("mali_v0.06.log", 1, true))
    assert(tophub.file_for("llvm -device=arm_cpu -model=rk3399"):find("arm_cpu_v0.08.log", 1, true))
    local c = tophub.candidates("opencl -device=mali -model=rk3399")
    assert(table.concat(c, ",") == "mali,mali,opencl,gpu,opencl", table.concat(c, ","))
    local args = { { "TENSOR", { 1, 64, 56, 56 }, "float32" }, { "TENSOR", { 64, 64, 3, 3 }, "float32" }, { 1, 1 },
                   { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
    local task = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm")
    -- an empty user log falls back to TopHub
    os.remove(tmp)
    io.open(tmp, "w"):close()
    local ctx = autotvm.apply_history_best(tmp)
    local hit = ctx:query("llvm", task:workload())
    assert(hit and hit.source == "tophub" and hit.index == 188, hit and hit.index)
    assert(ctx:query_task(task) == 188)
    assert(autotvm.apply_history_best(tmp, { tophub = false }):query_task(task) == -1)
    -- every TopHub file loads without a malformed line (legacy lines are skipped with one warning)
    for _, name in ipairs({ "llvm_v0.04", "mali_v0.06", "arm_cpu_v0.08", "opencl_v0.04", "vta_v0.10" }) do
      local warns = {}
      local recs = record.load_from_file(dir .. "/" .. name .. ".log", { warn = function(m) warns[#warns + 1] = m end })
      assert(#recs > 0 and #warns == 0, name .. ": " .. (warns[1] or "no records"))
    end
  end
end

os.remove(tmp)
local left = io.popen("ls -A " .. tmpdir):read("*a")
assert(left == "", "left behind in " .. tmpdir .. ": " .. left)
util.cleanup(tmpdir)
print("test_records: ok")
