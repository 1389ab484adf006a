-- Shared by the Lua tests (required by path as "tests.lua.lib.util", not a test of its own):
-- a private temporary directory, reading a whole file, running a command for its output,
-- checking an error message, a template task's knob names, a kernel's naive reference on
-- random inputs, NCHW data blocked into NCHW[b]c, an OpenCL add template, a small
-- deterministic random index, small search tasks, running a lowered function, comparing with a
-- reference, a lowered function's layout rewrite.
local file = require "tunelua.file"

local M = {}

--- M.tmpdir(name) -> a fresh private directory under $TMPDIR (or /tmp); remove it with
--- M.cleanup(dir) (tunelua.file.remove: no shell, never through a link)
function M.tmpdir(name)
  return file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-" .. name)
end
M.cleanup = file.remove

--- M.read(path) -> the file's bytes (raises naming the file)
function M.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

--- M.raises(f, pat): f() must raise an error whose message contains pat (plain text)
function M.raises(f, pat)
  local ok, err = pcall(f)
  assert(not ok, "expected an error matching " .. pat)
  assert(tostring(err):find(pat, 1, true), "error '" .. tostring(err) .. "' lacks '" .. pat .. "'")
end

--- M.sh(cmd) -> output (stdout and stderr), ok: for tools the tests drive (cc, objdump)
function M.sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("*a")
  local ok = p:close()
  return out, ok == true or ok == 0
end

--- M.asm(src, march, dir, name) -> the assembly of C source src compiled for march (cc -O3
--- -fPIC -S, the file dir/name.c); raises with the compiler's output when it fails
function M.asm(src, march, dir, name)
  local c = dir .. "/" .. name .. ".c"
  local fh = assert(io.open(c, "w"))
  assert(fh:write(src))
  assert(fh:close())
  local asm, ok = M.sh(string.format("cc -std=gnu11 -O3 -fPIC -march=%s -Wno-psabi -S -o - '%s'", march, c))
  assert(ok, "cc -march=" .. march .. " failed:\n" .. asm)
  return asm
end

--- M.fma_spills(src, march, dir, name) -> n, widest: the vector registers reloaded from the
--- stack (a move or an FMA's memory operand) in the blocks (between labels) that hold FMAs, in
--- the assembly of C source src compiled for march (cc -O3, the file dir/name.c): the reloads
--- of spilled accumulators; widest: those in the blocks with the most FMAs (a kernel's
--- interior, where the borders' partitions have fewer). (A stage's accumulators written to a
--- local buffer after its loop are stores only, not counted.)
function M.fma_spills(src, march, dir, name)
  local asm = M.asm(src, march, dir, name)
  local n, reloads, fmas = 0, 0, 0
  local most, widest = 0, 0
  for line in (asm .. "\n.Lend:\n"):gmatch("[^\n]+") do
    if line:match("^[%.%w_]+:") then
      if fmas > 0 then
        n = n + reloads
        if fmas > most then most, widest = fmas, reloads
        elseif fmas == most then widest = widest + reloads end
      end
      reloads, fmas = 0, 0
    else
      if line:match("^%s*v%w+%s+%-?%d*%(%%r[sb]p[^)]*%),.*%%[yz]mm%d+$") then reloads = reloads + 1 end
      if line:match("^%s*vfn?m[as][du][db]") then fmas = fmas + 1 end
    end
  end
  return n, widest
end

--- M.rpc_exchange(port) -> function(bytes, timeout) -> the bytes a loopback peer answered
--- (tl_rpc_raw_exchange: send, then read until the peer closes or the timeout passes)
function M.rpc_exchange(port)
  local ffi = require "ffi"
  local core = require "tunelua.core"
  local C, ctx = core.C, core.ctx
  return function(bytes, timeout)
    local out, n = ffi.new("char *[1]"), ffi.new("size_t[1]")
    core.check(C.tl_rpc_raw_exchange(ctx, "127.0.0.1", port, bytes, #bytes, timeout or 1, out, n))
    local s = ffi.string(out[0], n[0])
    C.tl_rpc_free(out[0])
    return s
  end
end

--- M.knob_names(task) -> the names of the task's config-space knobs, comma-separated
function M.knob_names(task)
  local n = {}
  for i, k in ipairs(task.config_space:knobs()) do n[i] = k.name end
  return table.concat(n, ",")
end

--- M.reference(op, shapes, attrs, seed) -> inputs, expect, oshape: float32 inputs of the shapes
--- (uniform in [-1, 1], input i from seed + i) and the output topi's op gives on them through
--- its unscheduled compute built for the host (a tuned kernel's numerical reference)
function M.reference(op, shapes, attrs, seed)
  local te, topi, tl = require "tunelua.te", require "tunelua.topi", require "tunelua"
  local ins = {}
  for i, s in ipairs(shapes) do ins[i] = te.placeholder(s, "float32", "in" .. i) end
  local outs = topi.op(op, ins, attrs)
  local out = outs[#outs]
  local args = {}
  for i, x in ipairs(ins) do args[i] = x end
  args[#args + 1] = out
  local ref = tl.build(te.create_schedule(out.op), args, "c")
  local inputs = {}
  for i, s in ipairs(shapes) do inputs[i] = tl.nd.random_uniform(s, { seed = seed + i, low = -1, high = 1 }) end
  local expect = tl.nd.empty(out.shape, "float32")
  local call = { unpack(inputs) }
  call[#call + 1] = expect
  ref(unpack(call))
  return inputs, expect, out.shape
end

--- M.f32(a) -> a float * over an NDArray's data
function M.f32(a) return require("ffi").cast("float *", a:data_ptr()) end

--- M.block_data(src, N, C, H, W, b, dst): NCHW [N, C, H, W] src -> NCHW[b]c [N, C/b, H, W, b] dst
--- (float32 NDArrays; dst allocated by the caller)
function M.block_data(src, N, C, H, W, b, dst)
  local s, d = M.f32(src), M.f32(dst)
  for n = 0, N - 1 do for c = 0, C - 1 do for y = 0, H - 1 do for x = 0, W - 1 do
    d[(((n * (C / b) + math.floor(c / b)) * H + y) * W + x) * b + c % b] = s[((n * C + c) * H + y) * W + x]
  end end end end
end

--- M.block_kernel(src, O, C, KH, KW, b, dst): OIHW [O, C, KH, KW] src -> OIHW[b]o
--- [O/b, C, KH, KW, b] dst (float32 NDArrays; dst allocated by the caller)
function M.block_kernel(src, O, C, KH, KW, b, dst)
  local s, d = M.f32(src), M.f32(dst)
  local n = C * KH * KW
  for o = 0, O - 1 do for k = 0, n - 1 do
    d[(math.floor(o / b) * n + k) * b + o % b] = s[o * n + k]
  end end
end

--- M.gpu_add(cfg, n[, c]) -> s, { A, B, C }: an autotvm template (for autotvm.task.register) of
--- C = A + B (with c: C = A * c + B) over n float32 elements, its one axis split by the knob
--- tile_x and bound to blockIdx.x / threadIdx.x (the OpenCL measurement checks' kernel)
function M.gpu_add(cfg, n, c)
  local te = require "tunelua.te"
  local A = te.placeholder({ n }, "float32", "A")
  local B = te.placeholder({ n }, "float32", "B")
  local Cc = te.compute({ n }, function(i) return c and A(i) * c + B(i) or A(i) + B(i) end, "C")
  local s = te.create_schedule(Cc.op)
  cfg:define_split("tile_x", n, { num_outputs = 2 })
  local bx, tx = cfg.tile_x:apply(s, Cc, Cc.op.axis[1])
  s[Cc]:bind(bx, "blockIdx.x")
  s[Cc]:bind(tx, "threadIdx.x")
  return s, { A, B, Cc }
end

--- M.children(pid) -> {"PID (STATE)", ...}: the processes whose parent is pid, zombies
--- included, from /proc
function M.children(pid)
  local p = assert(io.popen("ls /proc"))
  local pids = {}
  for name in p:lines() do if name:match("^%d+$") then pids[#pids + 1] = name end end
  p:close()
  local out = {}
  for _, c in ipairs(pids) do
    local f = io.open("/proc/" .. c .. "/stat")
    if f then
      local st = f:read("*l") or ""
      f:close()
      local state, ppid = st:match("%) (%S) (%d+)")
      if tonumber(ppid) == pid then out[#out + 1] = c .. " (" .. state .. ")" end
    end
  end
  return out
end

--- M.pid_exists(pid) -> whether a process exists at all (a zombie does: reaped means gone)
function M.pid_exists(pid)
  local f = io.open("/proc/" .. tostring(pid) .. "/stat")
  if f then f:close() end
  return f ~= nil
end

--- M.allowed_cpus() -> this process's CPU list as /proc shows it ("0-3,8"), and its CPUs
function M.allowed_cpus()
  local allowed = M.read("/proc/self/status"):match("Cpus_allowed_list:%s*(%S+)")
  local cpus = {}
  for part in allowed:gmatch("[^,]+") do
    local a, b = part:match("^(%d+)%-(%d+)$")
    if a then for c = tonumber(a), tonumber(b) do cpus[#cpus + 1] = c end
    else cpus[#cpus + 1] = tonumber(part) end
  end
  return allowed, cpus
end

--- M.lcg(seed) -> function(n) -> an index in [0, n): a small LCG, the same indices every run
function M.lcg(seed)
  return function(n)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n
  end
end

--- M.small_search_tasks() -> two small auto-scheduler tasks on llvm: a 4 -> 4 channel 3x3 conv
--- (NCHW, 6x6) and a 4x16 by 8x16 dense; quick to search and to measure
function M.small_search_tasks()
  local te, topi = require "tunelua.te", require "tunelua.topi"
  local auto_scheduler = require "tunelua.auto_scheduler"
  local x = te.placeholder({ 1, 4, 6, 6 }, "float32", "data")
  local w = te.placeholder({ 4, 4, 3, 3 }, "float32", "kernel")
  local conv = topi.nn.conv2d(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
  local a = te.placeholder({ 4, 16 }, "float32", "a")
  local b = te.placeholder({ 8, 16 }, "float32", "b")
  local dense = topi.nn.dense(a, b)
  return { auto_scheduler.SearchTask{ compute_dag = conv, target = "llvm" },
           auto_scheduler.SearchTask{ compute_dag = dense, target = "llvm" } }
end

--- M.run_lowered(l, args) -> the last array after running lowered function l (C backend, -O1,
--- 2 threads) on copies of args (so the inputs stay as they were)
function M.run_lowered(l, args)
  local build, target = require "tunelua.build", require "tunelua.target"
  local f = build.backends.c(l, target.parse("llvm"), { cflags = "-O1" }, 2)
  local out = {}
  for i, a in ipairs(args) do out[i] = a:copyto("cpu") end
  f(unpack(out))
  return out[#out]
end

--- M.close(a, b, what): a equals the reference b within 1e-4 relative, 1e-4 of b's largest
--- magnitude absolute (an error naming what otherwise; b all zeros proves nothing: an error)
function M.close(a, b, what)
  local big = 0
  for _, v in ipairs(b:flat()) do big = math.max(big, math.abs(v)) end
  assert(big > 0, what .. ": the reference output is all zeros; the check would prove nothing")
  local ok, err = pcall(require("tunelua.testing").assert_allclose, a, b,
                        { rtol = 1e-4, atol = 1e-4 * math.max(1, big) })
  if not ok then error(what .. ": " .. tostring(err), 2) end
end

--- M.rewrite_layout(l, arg) -> the layout map of argument arg (0-based) of lowered function l
--- and the rewritten argument's shape, or nil where the pass leaves it alone
function M.rewrite_layout(l, arg)
  local ffi, core = require "ffi", require "tunelua.core"
  local mp = ffi.new("tl_layout_map *[1]")
  assert(core.C.tl_lowered_rewrite_layout(core.ctx, l.handle, arg, mp) == 0, core.errmsg())
  if mp[0] == nil then return nil end
  local m = ffi.gc(mp[0], core.C.tl_layout_map_free)
  local shape = {}
  for j = 0, core.C.tl_layout_map_ndim(m) - 1 do shape[j + 1] = tonumber(core.C.tl_layout_map_extent(m, j)) end
  return m, shape
end

return M
