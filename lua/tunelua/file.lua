--- tunelua.file: durable writes and shell-free directories (core/base/file.c).
--
--   local file = require "tunelua.file"
--   local w = file.append("t.log")      -- a torn last line is ended first
--   w:write(line, "\n"); w:sync(); w:close()
--   local w = file.replace("t.log")     -- a temporary file beside it; :close() syncs it and
--   w:write(text); w:close()            -- renames it over t.log (the old file stays whole
--                                       -- until then; w:abort() drops it)
--   file.write_all("t.log", {line1, line2})   -- replace with these lines, each + "\n"
--   file.mkdirs(dir); file.remove(path) -- mkdir -p, rm -rf (never through a link)
--   file.tmpdir(base, prefix)           -- a private <base>/<prefix>-<pid>-XXXXXX
--   for line in file.lines(f) do ... end -- lines of an open file, NUL bytes and all
--   file.exists(path)                   -- true when path opens for reading
--   file.source_root()                  -- the source tree holding lua/tunelua, or nil
--
-- Every failure raises an error naming the file, the error and its errno name, without a
-- Lua position: "cannot write 't.log': No space left on device (ENOSPC)". A failed write is
-- a failed run: callers let it propagate.
local core = require "tunelua.core"
local ffi, C, ctx = core.ffi, core.C, core.ctx

local file = {}

local function check(rc)
  if rc ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    error(msg, 0)
  end
end

local Writer = {}
Writer.__index = Writer

local function writer(path, open)
  if type(path) ~= "string" or path == "" then error("tunelua.file: expected a file name", 3) end
  local out = ffi.new("tl_file *[1]")
  check(open(ctx, path, out))
  return setmetatable({ h = ffi.gc(out[0], C.tl_file_free), path = path }, Writer)
end

--- file.append(path) -> writer appending to path
function file.append(path) return writer(path, C.tl_file_append) end

--- file.replace(path) -> writer of path's next version (committed by :close())
function file.replace(path) return writer(path, C.tl_file_replace) end

function Writer:write(...)
  if not self.h then error("tunelua.file: " .. self.path .. " is closed", 2) end
  for i = 1, select("#", ...) do
    local s = tostring((select(i, ...)))
    check(C.tl_file_write(ctx, self.h, s, #s))
  end
  return self
end

function Writer:sync()
  if not self.h then error("tunelua.file: " .. self.path .. " is closed", 2) end
  check(C.tl_file_sync(ctx, self.h))
  return self
end

function Writer:close()
  local h = self.h
  if not h then return end
  self.h = nil
  ffi.gc(h, nil)
  check(C.tl_file_close(ctx, h))
end

function Writer:abort()
  local h = self.h
  if not h then return end
  self.h = nil
  ffi.gc(h, nil)
  C.tl_file_free(h)
end

-- Run fn(w) with a writer; on error, drop it and raise again.
local function with(w, fn)
  local ok, err = pcall(fn, w)
  if not ok then w:abort(); error(err, 0) end
  w:close()
end

--- file.write_all(path, text | list of lines): replace path's contents; a list's lines each
--- end with "\n".
function file.write_all(path, content)
  with(file.replace(path), function(w)
    if type(content) == "table" then
      for _, l in ipairs(content) do w:write(l, "\n") end
    else
      w:write(content)
    end
  end)
end

--- file.append_lines(path, lines): append the lines (each + "\n") and sync.
function file.append_lines(path, lines)
  with(file.append(path), function(w)
    for _, l in ipairs(lines) do w:write(l, "\n") end
  end)
end

function file.mkdirs(path)
  if type(path) ~= "string" then error("file.mkdirs: expected a directory name", 2) end
  check(C.tl_mkdirs(ctx, path))
end

--- file.lines(f) -> iterator over the lines of the open file f (without their "\n"; a last
--- line without one included). Unlike f:lines(), a line holding a NUL byte is read whole and
--- the lines after it are not lost: a log is read as bytes, in blocks.
function file.lines(f)
  local buf, pos, eof = "", 1, false
  return function()
    while true do
      local nl = buf:find("\n", pos, true)
      if nl then
        local line = buf:sub(pos, nl - 1)
        pos = nl + 1
        return line
      end
      if eof then
        if pos > #buf then return nil end
        local line = buf:sub(pos)
        pos = #buf + 1
        return line
      end
      local block = f:read(65536)
      if block then buf, pos = buf:sub(pos) .. block, 1 else eof = true end
    end
  end
end

function file.remove(path)
  if type(path) ~= "string" then error("file.remove: expected a path", 2) end
  check(C.tl_path_remove(ctx, path))
end

function file.tmpdir(base, prefix)
  local buf = ffi.new("char[?]", 4096)
  check(C.tl_tmpdir_make(ctx, base, prefix, buf, 4096))
  return ffi.string(buf)
end

--- file.exists(path) -> true when path can be opened for reading
function file.exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

--- file.source_root() -> the directory holding lua/tunelua (the source tree or the install
--- prefix this module was loaded from), or nil when it was not loaded from a file
function file.source_root()
  local src = debug.getinfo(1, "S").source
  if src:sub(1, 1) ~= "@" then return nil end
  return src:sub(2):match("^(.*)/lua/tunelua/[^/]*$")
end

return file
