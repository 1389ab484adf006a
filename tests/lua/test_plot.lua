-- Pictures of tuning runs (tunelua.plot, log_cli.plot): a small log of two tasks with failed
-- trials drawn as PNG and SVG; the files are read back (the PNG through cairo, pixel by pixel;
-- the SVG as XML); bad input gives errors that name it.
local ffi = require "ffi"
local record = require "tunelua.autotvm.record"
local log_cli = require "tunelua.log_cli"
local plot = require "tunelua.plot"

local util = require "tests.lua.lib.util"
local tmpdir = util.tmpdir("plot")
assert(tmpdir:match("^/[%w/._-]+$"), tmpdir)

local function write(path, text)
  local f = assert(io.open(path, "w")); f:write(text); f:close()
end
local function raises(fn, want)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error containing: " .. want)
  assert(tostring(err):find(want, 1, true), "error was: " .. tostring(err) .. "\nexpected: " .. want)
  assert(not tostring(err):find("%.lua:%d+:"), "a Lua position in the message: " .. tostring(err))
end

-- ---- a log: dense (4x32 . 24x32: 6144 FLOPs) and conv2d (231.21 GFLOPS at 1 ms) ------------
local T = "llvm -mcpu=core-avx2"
local dense_args = { { "TENSOR", { 4, 32 }, "float32" }, { "TENSOR", { 24, 32 }, "float32" }, record.null, "float32" }
local conv_args = { { "TENSOR", { 1, 64, 56, 56 }, "float32" }, { "TENSOR", { 64, 64, 3, 3 }, "float32" },
                    { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
local function line(task, args, cost, err)
  return string.format('{"input": [%q, %q, %s, {}], "config": {"index": 0, "code_hash": null, ' ..
    '"entity": [["tile_y", "sp", [-1, 1]]]}, "result": [[%s], %d, 0.5, 1700000000.0], "version": 0.2, ' ..
    '"tvm_version": "0.8.dev0"}', T, task, require("tunelua.json").encode(args), cost, err)
end
local dense, conv = "dense_nopack.x86", "conv2d_NCHWc.x86"
local lines = {
  line(dense, dense_args, "4e-05", 0),         -- trial 1: 0.1536 GFLOPS
  line(conv, conv_args, "0.004", 0),           -- trial 1
  line(dense, dense_args, "1000000000.0", 1),  -- trial 2: failed
  line(dense, dense_args, "2e-05", 0),         -- trial 3: 0.3072
  line(conv, conv_args, "1000000000.0", 6),    -- trial 2: failed
  line(dense, dense_args, "3e-05", 0),         -- trial 4: slower, the best stays
  line(conv, conv_args, "0.001", 0),           -- trial 3: 231.21 GFLOPS
  line(dense, dense_args, "1e-05", 0),         -- trial 5: 0.6144
}
local log = tmpdir .. "/run.log"
write(log, table.concat(lines, "\n") .. "\n")

local png = tmpdir .. "/run.png"
local out, spec = log_cli.plot(log, png)
assert(out == png)
assert(#spec.series == 2, #spec.series)
local s1, s2 = spec.series[1], spec.series[2]
assert(s1.legend:find("T1  dense_nopack.x86 (4x32) (24x32): best 0.61 GFLOPS, 5 trials, 1 failed", 1, true), s1.legend)
assert(s2.legend:find("T2  conv2d_NCHWc.x86 (1x64x56x56) (64x64x3x3): best 231.21 GFLOPS, 3 trials, 1 failed", 1, true), s2.legend)
assert(spec.ylabel:find("GFLOPS", 1, true), spec.ylabel)
assert(spec.subtitle:find("2 tasks, 8 trials, 2 failed", 1, true), spec.subtitle)
-- the failed trials, by each task's trial number
assert(#s1.errors == 1 and s1.errors[1] == 2 and #s2.errors == 1 and s2.errors[1] == 2)
-- the line: the best so far at every successful trial, never going down
local want = { { 1, 0.1536 }, { 3, 0.3072 }, { 4, 0.3072 }, { 5, 0.6144 } }
assert(#s1.line == #want, #s1.line)
for k, p in ipairs(want) do
  assert(s1.line[k][1] == p[1] and math.abs(s1.line[k][2] - p[2]) < 1e-9,
         string.format("point %d: %s %s", k, s1.line[k][1], s1.line[k][2]))
end
assert(#s1.dots == 4 and math.abs(s1.dots[3][2] - 0.2048) < 1e-9)
assert(math.abs(s2.line[#s2.line][2] - 231.211008) < 1e-6, s2.line[#s2.line][2])

-- ---- the PNG: signature, size in the header, and the two series' colours in its pixels ------
local bytes = util.read(png)
assert(bytes:sub(1, 8) == "\137PNG\r\n\26\n", "no PNG signature")
assert(bytes:sub(13, 16) == "IHDR")
local function be32(s, i) local a, b, c, d = s:byte(i, i + 3); return ((a * 256 + b) * 256 + c) * 256 + d end
local w, h = be32(bytes, 17), be32(bytes, 21)
assert(w == 1000 and h > 400 and h < 800, w .. "x" .. h)
local C = plot.cairo()
local img = C.cairo_image_surface_create_from_png(png)
assert(C.cairo_surface_status(img) == 0, "cairo cannot read the PNG back")
assert(C.cairo_image_surface_get_width(img) == w and C.cairo_image_surface_get_height(img) == h)
local function count_colour(rgb)
  local data = ffi.cast("uint32_t *", C.cairo_image_surface_get_data(img))
  local stride = C.cairo_image_surface_get_stride(img) / 4
  local want_px = 0xff000000 + rgb[1] * 65536 + rgb[2] * 256 + rgb[3]
  local n = 0
  for y = 0, h - 1 do
    for x = 0, w - 1 do
      if data[y * stride + x] == want_px then n = n + 1 end
    end
  end
  return n
end
local n1, n2, n3 = count_colour(plot.style(1)), count_colour(plot.style(2)), count_colour(plot.style(3))
assert(n1 > 50 and n2 > 50, string.format("series colours: %d and %d pixels", n1, n2))
assert(n3 == 0, "a third series' colour in a chart of two: " .. n3)
C.cairo_surface_destroy(img)

-- ---- the SVG: well-formed tags, the labels as text -------------------------------------------
local svg = tmpdir .. "/run.svg"
log_cli.plot(log, svg)
local text = util.read(svg)
assert(text:match("^<%?xml "), "no XML declaration")
local stack, ntags = {}, 0
for close, name, selfclose in text:gmatch("<(/?)([%a_][%w:_.-]*)[^>]-(/?)>") do
  ntags = ntags + 1
  if close == "/" then
    assert(stack[#stack] == name, "</" .. name .. "> closes <" .. tostring(stack[#stack]) .. ">")
    stack[#stack] = nil
  elseif selfclose ~= "/" then
    stack[#stack + 1] = name
  end
end
assert(#stack == 0 and ntags > 50, "unclosed: " .. table.concat(stack, " "))
assert(text:find("<title>Tuning run: run.log</title>", 1, true))
assert(text:find("T1  dense_nopack.x86 (4x32) (24x32)", 1, true))
assert(text:find("T2  conv2d_NCHWc.x86 (1x64x56x56) (64x64x3x3)", 1, true))
-- 0.15 to 231 GFLOPS: more than 20x apart, a log axis
assert(text:find("[log scale]", 1, true), "no log scale for lines 1500x apart")
assert(not io.open(svg .. ".tmp"), "the temporary file is left behind")

-- ---- a task whose FLOPs are unknown: times in ms for all, said on the axis ---------------------
local mslog = tmpdir .. "/ms.log"
write(mslog, line(dense, dense_args, "2e-05", 0) .. "\n" ..
             line("no_such_template.x86", dense_args, "0.003", 0) .. "\n" ..
             line("no_such_template.x86", dense_args, "0.002", 0) .. "\n")
local _, ms = log_cli.plot(mslog, tmpdir .. "/ms.png")
assert(ms.ylabel:find("time in ms", 1, true), ms.ylabel)
assert(ms.subtitle:find("FLOPs unknown for T2: times in ms", 1, true), ms.subtitle)
assert(ms.series[2].line[2][2] == 2, ms.series[2].line[2][2])    -- 0.003 s, then 0.002 s: 2 ms

-- ---- ticks -------------------------------------------------------------------------------------
local tk, top = plot.ticks(97, 6)
assert(top == 100 and #tk == 6 and tk[2].text == "20", top .. " " .. #tk)
tk, top = plot.ticks(0.37, 6)
assert(math.abs(top - 0.4) < 1e-12 and tk[2].text == "0.1", top)
tk = plot.ticks(7, 10, true)
assert(#tk == 8 and tk[8].text == "7")
local lt, lo, hi = plot.log_ticks(0.15, 24)     -- few decades: 1, 2, 5 times powers of ten
assert(lo == 0.1 and hi == 50 and lt[1].text == "0.1" and lt[2].text == "0.2" and lt[#lt].text == "50", lo .. " " .. hi)
lt, lo, hi = plot.log_ticks(0.15, 240)           -- more: whole decades
assert(lo == 0.1 and hi == 1000 and #lt == 5 and lt[#lt].text == "1000", lo .. " " .. hi)
lt, lo, hi = plot.log_ticks(3, 40000)
assert(lo == 1 and hi == 100000 and #lt == 6 and lt[6].text == "100000")

-- ---- bad input: errors that name it ------------------------------------------------------------
raises(function() log_cli.plot(tmpdir .. "/missing.log") end, "cannot read '" .. tmpdir .. "/missing.log'")
write(tmpdir .. "/empty.log", "")
raises(function() log_cli.plot(tmpdir .. "/empty.log") end, "'" .. tmpdir .. "/empty.log' is empty")
write(tmpdir .. "/junk.log", "{broken\nnot json at all\n")
raises(function() log_cli.plot(tmpdir .. "/junk.log") end,
       "'" .. tmpdir .. "/junk.log' holds no valid AutoTVM record")
raises(function() log_cli.plot(log, tmpdir .. "/run.jpg") end,
       "cannot write '" .. tmpdir .. "/run.jpg': the picture's name must end in .png or .svg")
raises(function() log_cli.plot(log, tmpdir .. "/no/such/dir/run.png") end,
       "cannot write '" .. tmpdir .. "/no/such/dir/run.png'")
raises(function() plot.chart({ series = {} }, tmpdir .. "/x.png") end, "nothing to draw")
assert(not io.open(tmpdir .. "/run.jpg") and not io.open(tmpdir .. "/x.png"))

util.cleanup(tmpdir)
print("test_plot: ok")
