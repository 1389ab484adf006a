-- The C backend's pragma "peel_reread" (core/codegen/c.c): the marked loop runs all but its
-- last iteration, and the last follows it with each contiguous vector load of an argument
-- taking its address through a copy an empty asm statement marks changed (the compiler reads
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
-- in each printed version of the loop (the source holds an AVX-512 and a narrower one) the
-- last iteration reads B's vectors through an address copy; A, read as scalars, directly
local peeled = select(2, src:gsub("const int64_t v = INT64_C%(3%);", ""))
local copies = select(2, src:gsub("__typeof__%(%(B %+ [^;]*; __asm__ __volatile__", ""))
local all = select(2, src:gsub("__asm__ __volatile__", ""))
assert(peeled >= 1 and copies >= peeled and all == copies,
       string.format("expected B's loads in the %d last iterations read through address copies, got %d (%d asm in all):\n%s",
                     peeled, copies, all, src))
assert(not src:find("__typeof__((A", 1, true), "A, read as scalars, keeps its loads:\n" .. src)
assert(not build(false):get_source():find("__asm__", 1, true), "an unmarked loop has no pointer copy")

print("test_peel_reread: ok")
