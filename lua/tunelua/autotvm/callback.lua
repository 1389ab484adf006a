--- tunelua.autotvm.callback: callbacks of the tuning loop (TVM's autotvm.callback).
--
--   callback.progress_bar(total, {prefix = "[Task  1/17] ", si_prefix = "G", out = io.stdout,
--                                 tty = nil})
--     after every batch: "\r<prefix> Current/Best: %7.2f/%7.2f GFLOPS | Progress: (i/total) | t s"
--     and " Done.\n" when the tune call ends. "Current" is the last successful trial's FLOPS.
--     When out is not a terminal (tty = false; by default: unless out is io.stdout on a
--     terminal) each batch is one plain line ending in "\n", without "\r".
--   callback.log_to_file(path)   appends one record (record.encode) per trial, fsync'd per batch.
--
-- A callback is a function(tuner, inputs, results) or a callable table; a table may also have
-- :finish(tuner), which Tuner.tune calls once at the end.
local core = require "tunelua.core"

local callback = {}

local SI = { [""] = 1, K = 1e3, M = 1e6, G = 1e9, T = 1e12, P = 1e15 }

local function now() return core.C.tl_now() end

local ffi = require "ffi"
ffi.cdef "int isatty(int fd);"
local function stdout_is_tty() return ffi.C.isatty(1) == 1 end

--- progress_bar(total[, {prefix, si_prefix, out}]) (also progress_bar(total, prefix)).
function callback.progress_bar(total, o)
  if type(total) ~= "number" then
    error("progress_bar: total must be the number of trials, got " .. type(total), 2)
  end
  if type(o) == "string" then o = { prefix = o } end
  o = o or {}
  local prefix = o.prefix or ""
  local si = o.si_prefix or "G"
  if not SI[si] then error("progress_bar: si_prefix must be one of K, M, G, T, P; got " .. tostring(si), 2) end
  local out = o.out or io.stdout
  -- rewritten in place (\r) on a terminal; one plain line per batch elsewhere (a log file)
  local tty = o.tty
  if tty == nil then tty = out == io.stdout and stdout_is_tty() end
  local st = { ct = 0, cur = 0, best = 0, start = now(), done = false }
  local function line()
    return string.format("%s%s Current/Best: %7.2f/%7.2f %sFLOPS | Progress: (%d/%d) | %.2f s",
      tty and "\r" or "", prefix, st.cur / SI[si], st.best / SI[si], si, st.ct, total, now() - st.start)
  end
  local obj = { state = st }
  setmetatable(obj, {
    __call = function(_, tuner, inputs, results)
      st.ct = st.ct + #inputs
      local flops = 0
      for k, res in ipairs(results) do
        if res.error_no == 0 and res.costs and #res.costs > 0 then
          local s = 0
          for _, c in ipairs(res.costs) do s = s + c end
          local m = s / #res.costs
          local task = inputs[k].task or tuner.task
          if m > 0 then flops = (task.flop or 0) / m end
        end
      end
      st.cur = flops
      st.best = tuner.best_flops or st.best
      out:write(line() .. (tty and "" or "\n"))
      out:flush()
    end,
  })
  function obj.finish(_, tuner)
    if st.done then return end
    st.done = true
    if tuner then st.best = tuner.best_flops or st.best end
    out:write(line() .. " Done.\n")
    out:flush()
  end
  return obj
end

--- log_to_file(path): append every trial to path as one JSON line; each batch is written,
--- fsync'd and closed before the tuner goes on. A write error raises (naming the file and the
--- errno) and so ends the tuning run.
function callback.log_to_file(path)
  if type(path) ~= "string" then
    error("log_to_file: expected a file name, got " .. type(path), 2)
  end
  local record = require "tunelua.autotvm.record"
  local file = require "tunelua.file"
  return function(_, inputs, results)
    local lines = {}
    for k, inp in ipairs(inputs) do lines[k] = record.encode(inp, results[k]) end
    file.append_lines(path, lines)
  end
end

return callback
