-- The C backend's pragma "peel_reread" (core/codegen/c.c): the marked loop runs all but its
-- last iteration, and the last follows it with each argument the body reads in vectors
-- reached through a pointer copy an empty asm statement marks changed (the compiler reads
-- those vectors at each use instead of holding them in registers). The output matches the
-- unmarked schedule's; an argument read only as scalars is left alone.
local tl = require "tunelua"
local te = tl.te

local P, V, L = 5, 4, 16
local A = te.placeholder({ P }, "float32", "A")
local B = te.placeholder({ V, L }, "float32", "B")
local Out = te.compute({ P, V, L }, function(p, v, l) return A(p) * B(v, l) end, "Out")

local function build(mark)
  local s = te.create_schedule(Out.op)
  local p, v, l = unpack(s[Out].op.axis)
  s[Out]:unroll(v)
  s[Out]:vectorize(l)
  if mark then s[Out]:pragma(v, "peel_reread") end
  return tl.build(s, { A, B, Out }, "c")
end

local a = tl.nd.random_uniform({ P }, { seed = 3 })
local b = tl.nd.random_uniform({ V, L }, { seed = 4 })
local want, got = tl.nd.empty({ P, V, L }), tl.nd.empty({ P, V, L })
build(false)(a, b, want)
local f = build(true)
f(a, b, got)
tl.testing.assert_allclose(got, want, { rtol = 0, atol = 0 })

local src = f:get_source()
assert(src:find("< INT64_C(3); ++", 1, true), "the marked loop should run its first 3 iterations:\n" .. src)
assert(src:find("= INT64_C(3);", 1, true), "its last iteration should follow it:\n" .. src)
-- one copy per printed version of the loop (the source holds an AVX-512 and a narrower one)
local peeled = select(2, src:gsub("const int64_t v = INT64_C%(3%);", ""))
local asm = select(2, src:gsub("__asm__ __volatile__", ""))
assert(peeled >= 1 and asm == peeled,
       string.format("one argument (B) is read in vectors: expected one pointer copy per last iteration, got %d for %d:\n%s",
                     asm, peeled, src))
assert(src:find("float %*restrict B = [%w_]*tlc_rr"), "B should be re-declared through its copy:\n" .. src)
assert(not src:find("float %*restrict A = [%w_]*tlc_rr"), "A, read as scalars, keeps its pointer:\n" .. src)
assert(not build(false):get_source():find("__asm__", 1, true), "an unmarked loop has no pointer copy")

print("test_peel_reread: ok")
