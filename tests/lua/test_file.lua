-- test_file.lua: tunelua.file (core/base/file.c): a failed write names the file and the errno
-- and raises (here on /dev/full, which fails every write with ENOSPC); appends end a torn
-- last line first; a replacement leaves the old file whole until it is committed; mkdir -p
-- and rm -rf without a shell (an apostrophe in a name, links never followed); private temp
-- directories and the removal of those a dead process left.
local file = require "tunelua.file"
local callback = require "tunelua.autotvm.callback"
local record = require "tunelua.autotvm.record"
local ffi = require("tunelua.core").ffi

local dir = os.tmpname()          -- a fresh name; made a directory below
os.remove(dir)
dir = dir .. "-it's"              -- an apostrophe: no shell may see this path
file.mkdirs(dir .. "/a/b")

local read = require("tests.lua.lib.util").read

-- a full disk: the error names the file and the errno, and raises
local ok, err = pcall(function()
  local w = file.append("/dev/full")
  w:write(string.rep("x", 100000), "\n")
  w:close()
end)
assert(not ok and err:find("cannot write '/dev/full': No space left on device (ENOSPC)", 1, true), err)
assert(not err:find("%.lua:%d+:"), "an I/O error carries no Lua position: " .. err)

-- the tuning log callback stops the run on it (nothing swallowed)
local inp = { target = "llvm", task_name = "t", args = {}, config = { index = 0, entity = {} } }
local res = { costs = { 1e-3 }, error_no = 0, all_cost = 0, timestamp = 0 }
ok, err = pcall(callback.log_to_file("/dev/full"), nil, { inp }, { res })
assert(not ok and err:find("'/dev/full'", 1, true) and err:find("ENOSPC", 1, true), tostring(err))
ok, err = pcall(function()
  local w = record.writer("/dev/full")
  w.write(inp, res)
  w.close()
end)
assert(not ok and err:find("ENOSPC", 1, true), tostring(err))

-- a torn last line is ended before the next append; a whole file is left as it is
local log = dir .. "/t.log"
local f = assert(io.open(log, "w"))
f:write('{"input": ["llvm", "to')
f:close()
file.append_lines(log, { "second" })
assert(read(log) == '{"input": ["llvm", "to\nsecond\n', read(log))
file.append_lines(log, { "third" })
assert(read(log) == '{"input": ["llvm", "to\nsecond\nthird\n', read(log))

-- a replacement: the old file stays whole until close; abort drops the new one
local w = file.replace(log)
w:write("new\n")
assert(read(log) == '{"input": ["llvm", "to\nsecond\nthird\n', "replaced before the commit")
w:abort()
assert(read(log) == '{"input": ["llvm", "to\nsecond\nthird\n')
file.write_all(log, { "a", "b" })
assert(read(log) == "a\nb\n")
-- nothing left beside it
for name in io.popen("ls -A '" .. dir:gsub("'", "'\\''") .. "'"):lines() do
  assert(name == "t.log" or name == "a", "left behind: " .. name)
end
-- a replacement that cannot be created names its file
ok, err = pcall(file.write_all, dir .. "/no/such/dir/x.log", { "a" })
assert(not ok and err:find("cannot create '" .. dir .. "/no/such/dir/x.log.part-", 1, true), err)

-- rm -rf never follows a link: the link goes, its target stays
local victim = dir .. "/victim"
file.mkdirs(victim)
assert(io.open(victim .. "/keep", "w")):close()
file.mkdirs(dir .. "/a/b/c")
assert(io.open(dir .. "/a/b/c/f", "w")):close()
ffi.cdef [[ int symlink(const char *target, const char *linkpath); ]]
assert(ffi.C.symlink(victim, dir .. "/a/b/link") == 0)
file.remove(dir .. "/a")
assert(io.open(dir .. "/a/b/c/f") == nil, "the tree is gone")
assert(io.open(victim .. "/keep"), "the link's target survives")
file.remove(dir .. "/a")          -- missing: fine

-- mkdirs on a file is an error naming it
ok, err = pcall(file.mkdirs, victim .. "/keep")
assert(not ok and err:find("'" .. victim .. "/keep'", 1, true) and err:find("ENOTDIR", 1, true), err)

-- private temp directories; a dead process's are removed by the first call, a live one's
-- (ours: pid 1 is alive) and links are not
local base = dir .. "/tmp"
file.mkdirs(base .. "/tl-x-999999999-abcdef/sub")       -- no such pid: dead
file.mkdirs(base .. "/tl-x-1-abcdef")                   -- init: alive
assert(ffi.C.symlink(victim, base .. "/tl-x-999999998-link") == 0)
local t = file.tmpdir(base, "tl-x")
assert(t:find("^" .. base:gsub("%p", "%%%0") .. "/tl%-x%-%d+%-......$"), t)
assert(io.open(base .. "/tl-x-999999999-abcdef/sub") == nil, "a dead process's directory stays")
assert(io.open(base .. "/tl-x-1-abcdef"), "a live process's directory went")
assert(io.open(victim .. "/keep"), "a link's target went")
assert(io.open(t), "the new directory")

file.remove(dir)
assert(io.open(dir) == nil)
print("test_file: ok")
