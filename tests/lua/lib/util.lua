-- Shared by the Lua tests (required by path as "tests.lua.lib.util", not a test of its own):
-- a private temporary directory, reading a whole file, running a command for its output,
-- checking an error message.
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

return M
