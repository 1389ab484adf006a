--- tunelua.plot: line charts drawn with cairo (Debian's libcairo2, through the FFI), written
--- as PNG or SVG. It draws what `tunelua log plot` and the flows show of a tuning run: per
--- series a step line (the best value so far against the trial number), faint dots (each
--- trial's own value), and a strip under the axes with one lane per series that marks the
--- trials that failed. Legend rows under the chart name the series.
--
--   local plot = require "tunelua.plot"
--   plot.chart({
--     title = "...", subtitle = "...", xlabel = "trial", ylabel = "GFLOPS",
--     series = { { label = "T1", legend = "T1 conv2d ...",
--                  line = {{x, y}, ...},      -- drawn as steps, in x order
--                  dots = {{x, y}, ...},      -- optional
--                  errors = {x, ...} } },     -- optional: failed trials
--     scale_by_lines = false,                 -- true: the y axis fits the lines; dots beyond
--                                             -- it are cut off
--     ylog = nil,                             -- a log y axis: true, false, or nil: where
--   }, "run.png")                             -- the lines span more than 20x
--   -- the name ends in .png or .svg; -> width, height of the picture
--
-- The file is replaced whole or not at all (drawn into a temporary file beside it, then
-- written durably). Text is
-- drawn with cairo's toy font API in the fontconfig "sans-serif" face; in SVG output cairo
-- draws glyphs as outlines, so the title, axis labels and legend rows are also written into
-- the SVG's <title> and <desc> elements, where text tools and screen readers find them.
-- Errors name the output file and raise without a Lua position.
local ffi = require "ffi"

local plot = {}

ffi.cdef [[
typedef struct _cairo cairo_t;
typedef struct _cairo_surface cairo_surface_t;
typedef struct {
  double x_bearing, y_bearing, width, height, x_advance, y_advance;
} cairo_text_extents_t;
cairo_surface_t *cairo_image_surface_create(int format, int width, int height);
cairo_surface_t *cairo_image_surface_create_from_png(const char *filename);
int cairo_image_surface_get_width(cairo_surface_t *s);
int cairo_image_surface_get_height(cairo_surface_t *s);
int cairo_image_surface_get_stride(cairo_surface_t *s);
unsigned char *cairo_image_surface_get_data(cairo_surface_t *s);
cairo_surface_t *cairo_svg_surface_create(const char *filename, double width, double height);
int cairo_surface_write_to_png(cairo_surface_t *s, const char *filename);
void cairo_surface_flush(cairo_surface_t *s);
void cairo_surface_finish(cairo_surface_t *s);
int cairo_surface_status(cairo_surface_t *s);
void cairo_surface_destroy(cairo_surface_t *s);
void cairo_debug_reset_static_data(void);
cairo_t *cairo_create(cairo_surface_t *target);
void cairo_destroy(cairo_t *cr);
int cairo_status(cairo_t *cr);
const char *cairo_status_to_string(int status);
void cairo_save(cairo_t *cr);
void cairo_restore(cairo_t *cr);
void cairo_set_source_rgba(cairo_t *cr, double r, double g, double b, double a);
void cairo_set_line_width(cairo_t *cr, double w);
void cairo_set_line_join(cairo_t *cr, int join);
void cairo_set_dash(cairo_t *cr, const double *dashes, int n, double offset);
void cairo_paint(cairo_t *cr);
void cairo_new_path(cairo_t *cr);
void cairo_move_to(cairo_t *cr, double x, double y);
void cairo_line_to(cairo_t *cr, double x, double y);
void cairo_rectangle(cairo_t *cr, double x, double y, double w, double h);
void cairo_arc(cairo_t *cr, double xc, double yc, double r, double a1, double a2);
void cairo_fill(cairo_t *cr);
void cairo_stroke(cairo_t *cr);
void cairo_clip(cairo_t *cr);
void cairo_translate(cairo_t *cr, double x, double y);
void cairo_rotate(cairo_t *cr, double a);
void cairo_select_font_face(cairo_t *cr, const char *family, int slant, int weight);
void cairo_set_font_size(cairo_t *cr, double size);
void cairo_text_extents(cairo_t *cr, const char *utf8, cairo_text_extents_t *e);
void cairo_show_text(cairo_t *cr, const char *utf8);
]]

local CAIRO_FORMAT_ARGB32 = 0
local CAIRO_LINE_JOIN_ROUND = 1

local lib
--- plot.cairo() -> the cairo library (loaded on first use; raises naming the Debian package)
function plot.cairo()
  if not lib then
    -- loaded for the rest of the process, as a program linked with cairo has it: cairo and
    -- pixman keep a few static allocations, which the sanitizer build's leak check then
    -- attributes to them (tests/lsan.supp) instead of to an unloaded, unknown module
    pcall(ffi.cdef, "void *dlopen(const char *file, int mode);")
    pcall(function() return ffi.C.dlopen("libcairo.so.2", 0x1002) end)   -- RTLD_NOW | RTLD_NODELETE
    local ok, l = pcall(ffi.load, "libcairo.so.2")
    if not ok then
      error("tunelua.plot: cannot load libcairo.so.2 (" .. tostring(l) .. "): install the " ..
            "Debian package 'libcairo2' (scripts/bootstrap does this)", 0)
    end
    lib = l
  end
  return lib
end

-- With no cairo object left, cairo's font and surface caches (and fontconfig's, which cairo's
-- text fills) are freed: a chart leaves little allocated behind. The next chart fills them
-- again.
local fontconfig
local function release_static_data(C)
  C.cairo_debug_reset_static_data()
  if fontconfig == nil then
    local ok, l = pcall(ffi.load, "libfontconfig.so.1")
    fontconfig = ok and l or false
    if fontconfig then pcall(ffi.cdef, "void FcFini(void);") end
  end
  if fontconfig then fontconfig.FcFini() end
end

-- tab10: ten colours told apart at a glance; past ten, the colours repeat with a dash pattern
local PALETTE = {
  { 0x1f, 0x77, 0xb4 }, { 0xff, 0x7f, 0x0e }, { 0x2c, 0xa0, 0x2c }, { 0xd6, 0x27, 0x28 },
  { 0x94, 0x67, 0xbd }, { 0x8c, 0x56, 0x4b }, { 0xe3, 0x77, 0xc2 }, { 0x7f, 0x7f, 0x7f },
  { 0xbc, 0xbd, 0x22 }, { 0x17, 0xbe, 0xcf },
}
local DASHES = { {}, { 7, 3 }, { 2, 2 }, { 9, 3, 2, 3 } }

--- plot.style(i) -> {r, g, b} (0..255) and the dash list of series i
function plot.style(i)
  local c = PALETTE[(i - 1) % #PALETTE + 1]
  return c, DASHES[math.floor((i - 1) / #PALETTE) % #DASHES + 1]
end

-- ticks over [0, hi]: a step of 1, 2 or 5 times a power of ten giving at most n intervals
local function ticks(hi, n, integer)
  if not (hi > 0) then hi = 1 end
  local raw = hi / n
  local mag = 10 ^ math.floor(math.log10(raw))
  local step
  for _, f in ipairs({ 1, 2, 5, 10 }) do
    if f * mag >= raw then step = f * mag; break end
  end
  if integer and step < 1 then step = 1 end
  local top = math.ceil(hi / step - 1e-9) * step
  local digits = step >= 1 and 0 or math.floor(-math.log10(step) + 0.999)
  local list = {}
  for k = 0, math.floor(top / step + 0.5) do
    list[#list + 1] = { v = k * step, text = string.format("%." .. digits .. "f", k * step) }
  end
  return list, top
end
plot.ticks = ticks

-- ticks of a log axis over [lo, hi]: 1, 2 and 5 times the powers of ten where the range spans
-- few decades (the axis ends at such values), whole decades where it spans more
local function log_ticks(lo, hi)
  local a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
  if b <= a then b = a + 1 end
  local mults = (b - a) <= 3 and { 1, 2, 5 } or { 1 }
  local all = {}
  for e = a, b do
    for _, m in ipairs(mults) do
      if e < b or m == 1 then all[#all + 1] = { v = m * 10 ^ e, e = e } end
    end
  end
  local first, last = 1, #all     -- the tightest pair of ticks around [lo, hi]
  while all[first + 1] and all[first + 1].v <= lo * (1 + 1e-9) do first = first + 1 end
  while all[last - 1] and all[last - 1].v >= hi * (1 - 1e-9) do last = last - 1 end
  local list = {}
  for k = first, last do
    local t = all[k]
    list[#list + 1] = { v = t.v, text = t.e >= 0 and string.format("%.0f", t.v)
                                        or string.format("%." .. -t.e .. "f", t.v) }
  end
  return list, list[1].v, list[#list].v
end
plot.log_ticks = log_ticks

local function xml_escape(s)
  return (s:gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

local W = 1000                 -- image width
local PLOT_H = 340             -- height of the axes' area
local FONT = "sans-serif"

-- the drawing, on a context of a surface of size w x h (both computed by layout)
local function draw(C, cr, spec, L)
  local ext = ffi.new("cairo_text_extents_t")
  local function font(size, bold)
    C.cairo_select_font_face(cr, FONT, 0, bold and 1 or 0)
    C.cairo_set_font_size(cr, size)
  end
  local function width(s) C.cairo_text_extents(cr, s, ext); return ext.x_advance end
  local function rgba(r, g, b, a) C.cairo_set_source_rgba(cr, r / 255, g / 255, b / 255, a or 1) end
  local function text(s, x, y, align)   -- align: "l" (default), "r", "c"; y is the baseline
    local w = width(s)
    if align == "r" then x = x - w elseif align == "c" then x = x - w / 2 end
    C.cairo_move_to(cr, x, y); C.cairo_show_text(cr, s)
  end
  local function fit(s, maxw)           -- s, shortened with "..." to fit maxw
    if width(s) <= maxw then return s end
    while #s > 1 and width(s .. "...") > maxw do s = s:sub(1, -2) end
    return s .. "..."
  end
  local function line(x1, y1, x2, y2) C.cairo_move_to(cr, x1, y1); C.cairo_line_to(cr, x2, y2) end

  rgba(255, 255, 255); C.cairo_paint(cr)

  -- title and subtitle
  rgba(0x20, 0x20, 0x20); font(18, true)
  text(fit(spec.title or "", W - 40), L.left, 30)
  if spec.subtitle then
    rgba(0x50, 0x50, 0x50); font(13)
    text(fit(spec.subtitle, W - 40), L.left, 52)
  end

  local px, py, pw, ph = L.left, L.top, L.pw, PLOT_H
  local sx = function(x) return px + x / L.xmax * pw end
  local sy = function(y) return py + ph - L.yfrac(y) * ph end

  -- grid, through the axes and the error strip
  C.cairo_set_line_width(cr, 1)
  rgba(0xe4, 0xe4, 0xe4)
  for _, t in ipairs(L.yticks) do line(px, math.floor(sy(t.v)) + 0.5, px + pw, math.floor(sy(t.v)) + 0.5) end
  for _, t in ipairs(L.xticks) do
    local x = math.floor(sx(t.v)) + 0.5
    line(x, py, x, L.strip_y + L.strip_h)
  end
  C.cairo_stroke(cr)

  -- error strip: one lane per series, alternate lanes shaded
  for i = 1, #spec.series do
    if i % 2 == 0 then
      rgba(0xf3, 0xf3, 0xf3, 0.8)
      C.cairo_rectangle(cr, px, L.strip_y + (i - 1) * L.lane, pw, L.lane); C.cairo_fill(cr)
    end
  end
  rgba(0x90, 0x90, 0x90)
  C.cairo_rectangle(cr, px + 0.5, L.strip_y + 0.5, pw - 1, L.strip_h - 1); C.cairo_stroke(cr)
  rgba(0x40, 0x40, 0x40); font(12)
  text("errors", px - 8, L.strip_y + L.strip_h / 2 + 4, "r")
  for i, s in ipairs(spec.series) do
    local c = plot.style(i)
    rgba(c[1], c[2], c[3])
    C.cairo_set_line_width(cr, 1.5)
    local y0 = L.strip_y + (i - 1) * L.lane
    local r = math.max(1.5, math.min(4, L.lane / 2 - 1))
    for _, x in ipairs(s.errors or {}) do
      local cx, cy = sx(x), y0 + L.lane / 2
      line(cx - r, cy - r, cx + r, cy + r); line(cx - r, cy + r, cx + r, cy - r)
    end
    C.cairo_stroke(cr)
  end

  -- the series, clipped to the axes
  C.cairo_save(cr)
  C.cairo_rectangle(cr, px, py - 5, pw + 6, ph + 5); C.cairo_clip(cr)
  for i, s in ipairs(spec.series) do
    local c = plot.style(i)
    rgba(c[1], c[2], c[3], 0.35)
    for _, p in ipairs(s.dots or {}) do
      C.cairo_new_path(cr)
      C.cairo_arc(cr, sx(p[1]), sy(p[2]), 2, 0, 2 * math.pi); C.cairo_fill(cr)
    end
  end
  C.cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND)
  for i, s in ipairs(spec.series) do
    local c, dash = plot.style(i)
    local pts = s.line or {}
    if #pts > 0 then
      rgba(c[1], c[2], c[3])
      C.cairo_set_line_width(cr, 2.2)
      C.cairo_set_dash(cr, ffi.new("double[?]", math.max(1, #dash), dash), #dash, 0)
      C.cairo_move_to(cr, sx(pts[1][1]), sy(pts[1][2]))
      for k = 2, #pts do
        C.cairo_line_to(cr, sx(pts[k][1]), sy(pts[k - 1][2]))
        C.cairo_line_to(cr, sx(pts[k][1]), sy(pts[k][2]))
      end
      C.cairo_stroke(cr)
      C.cairo_set_dash(cr, nil, 0, 0)
      -- a point at the series' best, so a series of one trial shows too
      local last = pts[#pts]
      C.cairo_arc(cr, sx(last[1]), sy(last[2]), 3.5, 0, 2 * math.pi); C.cairo_fill(cr)
    end
  end
  C.cairo_restore(cr)

  -- axes, ticks and their labels
  rgba(0x30, 0x30, 0x30); C.cairo_set_line_width(cr, 1)
  line(px + 0.5, py, px + 0.5, py + ph); line(px, py + ph + 0.5, px + pw, py + ph + 0.5)
  for _, t in ipairs(L.yticks) do
    local y = math.floor(sy(t.v)) + 0.5
    line(px - 5, y, px, y)
  end
  for _, t in ipairs(L.xticks) do
    local x = math.floor(sx(t.v)) + 0.5
    line(x, L.strip_y + L.strip_h, x, L.strip_y + L.strip_h + 5)
  end
  C.cairo_stroke(cr)
  font(12)
  for _, t in ipairs(L.yticks) do text(t.text, px - 8, sy(t.v) + 4, "r") end
  local xlab_y = L.strip_y + L.strip_h + 20
  for _, t in ipairs(L.xticks) do text(t.text, sx(t.v), xlab_y, "c") end
  font(13)
  text(spec.xlabel or "", px + pw / 2, xlab_y + 22, "c")
  C.cairo_save(cr)
  C.cairo_translate(cr, 22, py + ph / 2)
  C.cairo_rotate(cr, -math.pi / 2)
  text(fit(L.ylabel, ph + L.strip_h), 0, 0, "c")
  C.cairo_restore(cr)

  -- legend rows: a sample of the line, then the series' text
  font(12)
  for i, s in ipairs(spec.series) do
    local c, dash = plot.style(i)
    local y = L.legend_y + (i - 1) * L.row
    rgba(c[1], c[2], c[3])
    C.cairo_set_line_width(cr, 2.2)
    C.cairo_set_dash(cr, ffi.new("double[?]", math.max(1, #dash), dash), #dash, 0)
    line(px, y - 4, px + 28, y - 4); C.cairo_stroke(cr)
    C.cairo_set_dash(cr, nil, 0, 0)
    rgba(0x20, 0x20, 0x20)
    text(fit(s.legend or s.label or ("series " .. i), W - px - 48), px + 38, y)
  end
end

-- sizes and scales of the chart
local function layout(C, spec)
  local n = #spec.series
  local xmax, ymax = 1, 0
  local lmin, lmax = math.huge, 0          -- the range of the lines' positive values
  for _, s in ipairs(spec.series) do
    for _, p in ipairs(s.line or {}) do
      if p[2] > 0 then lmin = math.min(lmin, p[2]); lmax = math.max(lmax, p[2]) end
    end
    for _, list in ipairs({ s.line or {}, not spec.scale_by_lines and s.dots or {} }) do
      for _, p in ipairs(list) do
        xmax = math.max(xmax, p[1]); ymax = math.max(ymax, p[2])
      end
    end
    for _, x in ipairs(s.errors or {}) do xmax = math.max(xmax, x) end
  end
  local L = {}
  L.xticks, L.xmax = ticks(xmax * 1.02, 10, true)   -- room for the last trial's marks
  local ylog = spec.ylog
  if ylog == nil then ylog = lmax > 0 and lmax / lmin > 20 end
  if ylog and lmax > 0 then
    L.yticks, L.ylo, L.yhi = log_ticks(lmin, lmax * 1.04)
    local a, b = math.log10(L.ylo), math.log10(L.yhi)
    L.yfrac = function(y) return y > 0 and (math.log10(y) - a) / (b - a) or -1 end
  else
    local top
    L.yticks, top = ticks(ymax * 1.04, 6, false)
    L.yfrac = function(y) return y / top end
  end
  L.ylog = ylog
  L.ylabel = (spec.ylabel or "") .. (ylog and " [log scale]" or "")
  -- the left margin fits the widest y tick label beside the rotated y label
  local s = C.cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1)
  local cr = C.cairo_create(s)
  C.cairo_select_font_face(cr, FONT, 0, 0); C.cairo_set_font_size(cr, 12)
  local ext, tw = ffi.new("cairo_text_extents_t"), C.cairo_text_extents
  local wmax = 0
  for _, t in ipairs(L.yticks) do tw(cr, t.text, ext); wmax = math.max(wmax, ext.x_advance) end
  tw(cr, "errors", ext); wmax = math.max(wmax, ext.x_advance)
  C.cairo_destroy(cr); C.cairo_surface_destroy(s)
  L.left = math.ceil(40 + wmax + 10)
  L.pw = W - L.left - 28
  L.top = spec.subtitle and 72 or 52
  L.lane = n <= 8 and 12 or math.max(4, math.floor(96 / n))
  L.strip_y = L.top + PLOT_H + 8
  L.strip_h = n * L.lane
  L.row = 18
  L.legend_y = L.strip_y + L.strip_h + 20 + 22 + 30
  L.h = L.legend_y + (n - 1) * L.row + 18
  return L
end

local function read_all(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a"); f:close()
  return s
end

--- plot.chart(spec, path) -> width, height. path ends in .png or .svg.
function plot.chart(spec, path)
  if type(path) ~= "string" or path == "" then error("tunelua.plot: expected an output file name", 2) end
  local kind = path:lower():match("%.(%a+)$")
  if kind ~= "png" and kind ~= "svg" then
    error(string.format("cannot write '%s': the picture's name must end in .png or .svg", path), 0)
  end
  if type(spec.series) ~= "table" or #spec.series == 0 then
    error(string.format("cannot write '%s': nothing to draw (no series)", path), 0)
  end
  local C = plot.cairo()
  local L = layout(C, spec)
  local tmp = path .. ".tmp"
  local surface = kind == "png" and C.cairo_image_surface_create(CAIRO_FORMAT_ARGB32, W, L.h)
                  or C.cairo_svg_surface_create(tmp, W, L.h)
  local function check(status, what)
    if status ~= 0 then
      C.cairo_surface_destroy(surface)
      os.remove(tmp)
      error(string.format("cannot write '%s': %s: %s", path, what,
                          ffi.string(C.cairo_status_to_string(status))), 0)
    end
  end
  check(C.cairo_surface_status(surface), "cairo surface")
  local cr = C.cairo_create(surface)
  draw(C, cr, spec, L)
  local st = C.cairo_status(cr)
  C.cairo_destroy(cr)
  check(st, "drawing")
  if kind == "png" then
    check(C.cairo_surface_write_to_png(surface, tmp), "PNG")
  else
    C.cairo_surface_finish(surface)
    check(C.cairo_surface_status(surface), "SVG")
  end
  C.cairo_surface_destroy(surface)
  release_static_data(C)
  local content = read_all(tmp)
  os.remove(tmp)
  if not content or content == "" then
    error(string.format("cannot write '%s': cairo wrote nothing to %s", path, tmp), 0)
  end
  if kind == "svg" then
    -- the text, as text: cairo draws glyphs as outlines
    local desc = { spec.subtitle or "", L.ylabel, spec.xlabel or "" }
    for _, s in ipairs(spec.series) do desc[#desc + 1] = s.legend or s.label or "" end
    local head = string.format("\n<title>%s</title>\n<desc>%s</desc>", xml_escape(spec.title or ""),
                               xml_escape(table.concat(desc, "\n")))
    local n
    content, n = content:gsub("(<svg[^>]*>)", "%1" .. head:gsub("%%", "%%%%"), 1)
    if n ~= 1 then error(string.format("cannot write '%s': cairo's SVG has no <svg> element", path), 0) end
  end
  require("tunelua.file").write_all(path, content)
  return W, L.h
end

return plot
