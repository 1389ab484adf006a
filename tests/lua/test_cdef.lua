-- Every prototype in the cdef regions of the public header (core/tunelua.h and its parts
-- core/tunelua_*.h) resolves in the library.
local core = require "tunelua.core"
local ffi = require "ffi"

local text = core.cdef:gsub("/%*.-%*/", "")
local names, missing = {}, {}
for name in text:gmatch("([%w_]+)%s*%(") do
  if name:match("^tl_") and not names[name] then
    names[name] = true
    local ok = pcall(function() return core.C[name] end)
    if not ok then missing[#missing + 1] = name end
  end
end
local count = 0
for _ in pairs(names) do count = count + 1 end
assert(count > 20, "too few prototypes found in the cdef: " .. count)
assert(#missing == 0, "declared in the public header but missing from libtunelua: " ..
       table.concat(missing, ", "))
-- the cdef holds no preprocessor lines
assert(not core.cdef:match("\n%s*#"), "the cdef region must not contain preprocessor lines")
print(string.format("cdef: %d functions resolve", count))
