-- Measuring on several CPU groups at once (LocalRunner cpu_groups, TUNELUA_MEASURE_CPUS="a;b",
-- tl_measure_run_batch): two kernels that each wait for the other prove that two children run
-- together, each pinned to a group of its own (a kernel fails unless its affinity is exactly one
-- group and it runs there); a crash, a hang and a wrong answer in the same batch are the errors
-- tl_measure_run gives them, in input order, and the kernels after the hang (one of them
-- flooding its stderr) finish while it still runs; malformed group lists are errors naming the variable or option; an
-- auto-scheduler search with two groups records one result per trial.
local ffi = require "ffi"
local te = require "tunelua.te"
local auto_scheduler = require "tunelua.auto_scheduler"
local measure = require "tunelua.autotvm.measure"
local util = require "tests.lua.lib.util"
local E = measure.MeasureErrorNo

ffi.cdef [[ int setenv(const char *name, const char *value, int overwrite);
            int unsetenv(const char *name); ]]

-- ---- malformed group lists ------------------------------------------------------------------
for _, bad in ipairs({
  { "0;", "group 2 is empty" }, { ";0", "group 1 is empty" }, { "0;;1", "group 2 is empty" },
  { "0;x", "group 2: CPU list 'x'" }, { "0,1;1", "groups 1 ('0,1') and 2 ('1') share CPU 1" },
  { "0-3;2", "groups 1 ('0-3') and 2 ('2') share CPU 2: expected disjoint groups" }, { "0;-1", "group 2: CPU list '-1'" },
}) do
  util.raises(function() measure.parse_cpu_groups(bad[1]) end, "TUNELUA_MEASURE_CPUS='" .. bad[1] .. "': " .. bad[2])
end
util.raises(function() measure.LocalRunner({ cpu_groups = { "0", "0" } }) end,
            "LocalRunner: cpu_groups: groups 1 ('0') and 2 ('0') share CPU 0")
util.raises(function() measure.LocalRunner({ cpu_groups = {} }) end, "LocalRunner: cpu_groups: expected a non-empty list")
util.raises(function() measure.LocalRunner({ cpu_groups = { 3 } }) end, "cpu_groups: group 1: expected a CPU list string")
util.raises(function() measure.LocalRunner({ cpu_groups = "0;1" }) end, "cpu_groups: expected a non-empty list")
local g = measure.parse_cpu_groups(" 0 ; 2-3 ")
assert(#g == 2 and g[1] == "0" and g[2] == "2-3", "two groups parsed")

-- the CPUs this process may use, from /proc
local allowed, cpus = util.allowed_cpus()
if #cpus < 2 then
  print("test_cpu_groups: group lists checked; batches skipped (one CPU allowed: " .. allowed .. ")")
  return
end
local C0, C1 = cpus[1], cpus[2]
local GROUPS = { tostring(C0), tostring(C1) }

local dir = util.tmpdir("cpu-groups")

-- ---- kernels ----------------------------------------------------------------------------------
local SIG = '{"name": "f", "args": [{"name": "A", "dtype": "float32", "shape": [16]}]}'
local HEAD = string.format([[
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static const char *dir = "%s";
static int exists(const char *name) {
  char p[512]; snprintf(p, sizeof p, "%%s/%%s", dir, name); return access(p, F_OK) == 0;
}
static void put(const char *name, int v) {
  char p[512]; snprintf(p, sizeof p, "%%s/%%s", dir, name);
  FILE *f = fopen(p, "w"); if (f) { fprintf(f, "%%d\n", v); fclose(f); }
}
static void nap(void) { struct timespec t = {0, 5000000}; nanosleep(&t, NULL); }
/* the CPU of the one group this process is pinned to, and runs on; -1 otherwise */
static int pinned(void) {
  cpu_set_t s; CPU_ZERO(&s);
  if (sched_getaffinity(0, sizeof s, &s) != 0 || CPU_COUNT(&s) != 1) return -1;
  int c = sched_getcpu();
  if (!CPU_ISSET(c, &s) || (c != %d && c != %d)) return -1;
  return c;
}
static void fill(float *A) { for (int i = 0; i < 16; i++) A[i] = (float)i; }
]], dir, C0, C1)

local BODY = {
  -- waits (at its first call) for its partner to start: both run at once, or this fails
  sync_a = [[ static int done; int c = pinned(); if (c < 0) return 7;
    if (!done) { put("a_cpu", c); put("a_started", 1);
      for (int k = 0; k < 6000 && !exists("b_started"); k++) nap();
      if (!exists("b_started")) return 8; done = 1; }
    fill(A); return 0; ]],
  sync_b = [[ static int done; int c = pinned(); if (c < 0) return 7;
    if (!done) { put("b_cpu", c); put("b_started", 1);
      for (int k = 0; k < 6000 && !exists("a_started"); k++) nap();
      if (!exists("a_started")) return 8; done = 1; }
    fill(A); return 0; ]],
  crash = [[ (void)A; *(volatile int *)(uintptr_t)8 = 1; return 0; ]],
  -- never ends; notes whether the last kernel of the batch ran while it hung
  hang = [[ (void)A; for (;;) { if (exists("last_done") && !exists("hang_saw_last")) put("hang_saw_last", 1); nap(); } ]],
  wrong = [[ fill(A); A[3] = -1.0f; return 0; ]],
  ok = [[ if (pinned() < 0) return 7; fill(A); return 0; ]],
  ref = [[ fill(A); return 0; ]],
  -- more than a pipe holds on stderr: the batch drains it while the child runs
  flood = [[ static int done; if (pinned() < 0) return 7;
    if (!done) { for (int k = 0; k < 4096; k++) fprintf(stderr, "%063d\n", k); fflush(stderr); done = 1; }
    fill(A); return 0; ]],
  last = [[ if (pinned() < 0) return 7; put("last_done", 1); fill(A); return 0; ]],
}
local function source(kind)
  return HEAD .. "int32_t f(void **a, int32_t n) { (void)n; float *A = *(float **)a[0];\n" ..
         BODY[kind] .. "\n}\n"
end

local function make_task(kinds)
  local task = { name = "cpu_groups_test", target = "llvm", args = {}, flop = 16 }
  function task:lower(i) return { source = source(kinds[i + 1]), sig = SIG } end
  function task:lower_reference() return { source = source("ref"), sig = SIG } end
  return task
end

local TIMEOUT = 6
local function measure_kinds(kinds, runner_opts)
  local task = make_task(kinds)
  local o = { number = 2, ["repeat"] = 2, timeout = TIMEOUT, cooldown_interval = 0.01, check_correctness = true }
  for k, v in pairs(runner_opts or {}) do o[k] = v end
  local option = measure.measure_option({
    builder = measure.LocalBuilder({ n_parallel = 2, timeout = 60 }),
    runner = measure.LocalRunner(o),
  })
  local batch = measure.create_measure_batch(task, option)
  local inputs = {}
  for i = 1, #kinds do inputs[i] = measure.MeasureInput(task, { index = i - 1 }) end
  return batch(inputs)
end

-- ---- one batch over two groups ------------------------------------------------------------------
local KINDS = { "sync_a", "sync_b", "crash", "hang", "wrong", "ok", "flood", "last" }
local res = measure_kinds(KINDS, { cpu_groups = GROUPS })
assert(#res == #KINDS, "one result per kernel")
local want = { E.NO_ERROR, E.NO_ERROR, E.RUNTIME_DEVICE, E.RUN_TIMEOUT, E.WRONG_ANSWER, E.NO_ERROR,
               E.NO_ERROR, E.NO_ERROR }
for i, r in ipairs(res) do
  assert(r.error_no == want[i], string.format("kernel %d (%s): %s, expected %s: %s", i, KINDS[i],
         measure.error_name(r.error_no), measure.error_name(want[i]), tostring(r.error_msg)))
  if r.error_no == 0 then
    assert(#r.costs == 2 and r.costs[1] > 0 and r.costs[1] < 1, "kernel " .. i .. " costs")
  else
    assert(#r.costs == 1 and r.costs[1] == 1e9, "kernel " .. i .. " error cost")
  end
  assert(r.all_cost > 0 and r.timestamp > 0, "kernel " .. i .. " all_cost and timestamp")
end
local a_cpu = tonumber(util.read(dir .. "/a_cpu"))
local b_cpu = tonumber(util.read(dir .. "/b_cpu"))
assert(a_cpu ~= b_cpu and (a_cpu == C0 or a_cpu == C1) and (b_cpu == C0 or b_cpu == C1),
       "the two first kernels ran together on CPUs " .. a_cpu .. " and " .. b_cpu)
assert(io.open(dir .. "/hang_saw_last"), "the last kernel ran while the hung one held its group")
assert(res[3].error_msg:find("kernel 'f' crashed: signal 11", 1, true), res[3].error_msg)
assert(res[4].error_msg == string.format("kernel 'f' timed out after %.1f s", TIMEOUT), res[4].error_msg)

-- the same errors as one kernel at a time (tl_measure_run) reports them
local serial = measure_kinds({ "crash", "wrong", "ok" })
assert(serial[1].error_no == res[3].error_no and serial[1].error_msg == res[3].error_msg,
       "crash as tl_measure_run reports it: " .. tostring(serial[1].error_msg))
assert(serial[2].error_no == res[5].error_no and serial[2].error_msg == res[5].error_msg,
       "wrong answer as tl_measure_run reports it: " .. tostring(serial[2].error_msg))
assert(serial[3].error_no == E.RUNTIME_DEVICE and serial[3].error_msg:find("failed with code 7", 1, true),
       "a kernel that is not pinned to one group fails: " .. tostring(serial[3].error_msg))

-- TUNELUA_MEASURE_CPUS with two groups does the same; a malformed one fails the run, naming it
ffi.C.setenv("TUNELUA_MEASURE_CPUS", GROUPS[1] .. ";" .. GROUPS[2], 1)
res = measure_kinds({ "ok", "wrong", "ok", "last" })
assert(res[1].error_no == 0 and res[2].error_no == E.WRONG_ANSWER and res[3].error_no == 0 and
       res[4].error_no == 0, "groups from TUNELUA_MEASURE_CPUS")
ffi.C.setenv("TUNELUA_MEASURE_CPUS", GROUPS[1] .. ";" .. GROUPS[1], 1)
util.raises(function() measure_kinds({ "ok" }) end,
            "TUNELUA_MEASURE_CPUS='" .. GROUPS[1] .. ";" .. GROUPS[1] .. "': groups 1")
ffi.C.unsetenv("TUNELUA_MEASURE_CPUS")

-- ---- an auto-scheduler search over two groups: every trial measured and recorded -----------------
local kernels = 0
local run_batch = measure.run_batch
measure.run_batch = function(r, items, groups)
  assert(#groups == 2, "the runner's two groups")
  kernels = kernels + #items
  return run_batch(r, items, groups)
end
local A = te.placeholder({ 16, 16 }, "float32", "A")
local B = te.placeholder({ 16, 16 }, "float32", "B")
local k = te.reduce_axis({ 0, 16 }, "k")
local Cm = te.compute({ 16, 16 }, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
local task = auto_scheduler.SearchTask{ compute_dag = Cm, target = "llvm" }
local log = dir .. "/matmul.json"
local policy = auto_scheduler.SketchPolicy(task, { seed = 1, program_cost_model = auto_scheduler.RandomModel(),
  params = { evolutionary_search_population = 32, sample_init_min_population = 8 } })
local r = task:tune(auto_scheduler.TuningOptions{ num_measure_trials = 8, num_measures_per_round = 4, verbose = 0,
  builder = auto_scheduler.LocalBuilder({ timeout = 60 }),
  runner = auto_scheduler.LocalRunner({ number = 1, timeout = 60, cooldown_interval = 0, cpu_groups = GROUPS }),
  measure_callbacks = { auto_scheduler.RecordToFile(log) } }, policy)
measure.run_batch = run_batch
local lines, nok = 0, 0
for l in io.lines(log) do
  lines = lines + 1
  if require("tunelua.json").decode(l).r[2] == 0 then nok = nok + 1 end
end
assert(r.trials == 8 and lines == 8 and kernels == 8,
       string.format("8 trials: %d trials, %d records, %d kernels timed on the groups", r.trials, lines, kernels))
assert(nok >= 6 and r.best_cost < math.huge, nok .. " of 8 trials measured without error")

-- ---- the kernels' thread count: TUNELUA_NUM_THREADS, not the tuning process's own pool ---------
BODY.threads3 = [[ extern void *tl_pool_global(void); extern int tl_pool_size(const void *);
  fill(A); return tl_pool_size(tl_pool_global()) == 3 ? 0 : 40 + tl_pool_size(tl_pool_global()); ]]
BODY.threads1 = [[ extern void *tl_pool_global(void); extern int tl_pool_size(const void *);
  fill(A); return tl_pool_size(tl_pool_global()) == 1 ? 0 : 40 + tl_pool_size(tl_pool_global()); ]]
local tl = require "tunelua"
tl.set_num_threads(3)
ffi.C.unsetenv("TUNELUA_NUM_THREADS")
res = measure_kinds({ "threads3" }, { cpu_groups = GROUPS, check_correctness = false })
assert(res[1].error_no == 0, "without TUNELUA_NUM_THREADS the kernel runs on the parent's 3 threads: " ..
       tostring(res[1].error_msg))
ffi.C.setenv("TUNELUA_NUM_THREADS", "1", 1)
res = measure_kinds({ "threads1", "threads1" }, { cpu_groups = GROUPS, check_correctness = false })
assert(res[1].error_no == 0 and res[2].error_no == 0, "TUNELUA_NUM_THREADS=1 wins over the parent's 3 threads: " ..
       tostring(res[1].error_msg or res[2].error_msg))
res = measure_kinds({ "threads1" }, { check_correctness = false })
assert(res[1].error_no == 0, "and so with no groups: " .. tostring(res[1].error_msg))
ffi.C.unsetenv("TUNELUA_NUM_THREADS")
tl.set_num_threads(0)

util.cleanup(dir)
print(string.format("test_cpu_groups: ok (groups %s;%s)", GROUPS[1], GROUPS[2]))
