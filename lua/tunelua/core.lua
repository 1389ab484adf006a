--- tunelua.core: the FFI binding of libtunelua and the error convention.
--
-- The cdef comes from the region of core/tunelua.h between the cdef markers,
-- embedded into the tunelua host at build time. Every C call that returns a
-- status goes through `check`, which turns a non-zero status into a Lua error
-- carrying the context's message, raised at the caller's level: all tunelua
-- modules raise errors (they never return nil, msg) unless documented.
local ffi = require "ffi"

local core = {}

--- core.optional_require(name) -> the module, or nil when no module `name` exists.
-- For modules that really may be absent (those the tunelua host preloads, under a plain
-- luajit); an error raised while loading a module that exists is raised again.
function core.optional_require(name)
  local ok, m = pcall(require, name)
  if ok then return m end
  if type(m) == "string" and m:find("module '" .. name .. "' not found:", 1, true) == 1 then
    return nil
  end
  error(m, 0)
end

local cdef
do
  local text = core.optional_require("tunelua.cdef")
  if not text then
    -- plain luajit: look for the generated file in a build tree
    local path = os.getenv("TUNELUA_CDEF") or "build/generated/cdef.lua"
    text = dofile(path)
  end
  cdef = text
end
ffi.cdef(cdef)
-- libc functions the Lua modules call directly (declared once, here)
pcall(ffi.cdef, "int getpid(void);")
core.cdef = cdef

local C
do
  local ok = pcall(function() return ffi.C.tl_version end)
  if ok then
    C = ffi.C
  else
    C = ffi.load(os.getenv("TUNELUA_LIB") or "tunelua")
  end
end
core.C = C
core.ffi = ffi

local ctx = ffi.gc(C.tl_ctx_new(), C.tl_ctx_free)
core.ctx = ctx

--- The current error message of the shared context ("" if none).
function core.errmsg()
  return ffi.string(C.tl_errmsg(ctx))
end

--- Raise the context's message if rc is non-zero. level as for error().
function core.check(rc, level)
  if rc ~= 0 then
    local msg = ffi.string(C.tl_errmsg(ctx))
    C.tl_clearerr(ctx)
    if msg == "" then msg = "tunelua: error " .. tonumber(rc) end
    error(msg, (level or 1) + 1)
  end
  return rc
end

--- Raise a user error at the caller's caller (for argument checking).
function core.argerror(msg, level)
  error(msg, (level or 1) + 2)
end

--- Gives t submodules and functions that load on first use: t[k] is require(submodules[k]),
-- or, for functions[k] = {module, field}, require(module)[field]; either is then stored in t.
-- The metatable's __lazy = {submodules =, functions =} lists the names not yet loaded
-- (the REPL's printing, help and completion read it).
function core.lazy(t, submodules, functions)
  return setmetatable(t, {
    __lazy = { submodules = submodules, functions = functions },
    __index = function(tt, k)
      local fn = functions[k]
      local v
      if fn then
        v = require(fn[1])[fn[2]]
      elseif submodules[k] then
        v = require(submodules[k])
      else
        return nil
      end
      rawset(tt, k, v)
      return v
    end,
  })
end

return core
