--- networks.reference: a naive interpreter for relay graphs -- the oracle the
--- graph executor is checked against.
--
--   local reference = require "networks.reference"
--   local outs = reference.run(mod, params, {data = x})      -- list of tl.nd arrays
--   local ok, msg = reference.compare(outs[1], expected, {rtol = 1e-4})
--
-- It evaluates the graph as written (no fusion, no pass), node by node, in
-- float32, with kernels written here as plain loops over FFI pointers. It
-- shares no code with topi or the executor on purpose: every kernel is the
-- textbook definition of the op (TVM attribute names and defaults), so that
-- a bug in the compiled path cannot hide in the oracle too. Layouts are
-- handled generically: a layout string names the axes ("NCHW", "NHWC",
-- "OIHW", "HWIO", "HWOI", "NCDHW", "DHWIO", ...) and a kernel reads each
-- axis through its stride. Calls whose op is a relay Function (a fused group
-- after FuseOps) are evaluated by running the function's body.
--
-- Values are tl.nd arrays; a tuple value is a Lua table {tuple = true, ...}.
-- Intermediate values are dropped as soon as their last consumer has run.
local nd = require "tunelua.nd"

local reference = {}
local K = {}                  -- op name -> function(args, attrs, node) -> value
reference.kernels = K

local floor, max, min, exp, sqrt = math.floor, math.max, math.min, math.exp, math.sqrt

-- ---- helpers -------------------------------------------------------------------------

local function fail(fmt, ...)
  error("reference: " .. string.format(fmt, ...), 0)
end

local function shape_str(s)
  local p = {}
  for i, d in ipairs(s) do p[i] = tostring(d) end
  return "(" .. table.concat(p, ", ") .. (#p == 1 and ",)" or ")")
end

local function prod(s, from, to)
  local p = 1
  for i = from or 1, to or #s do p = p * s[i] end
  return p
end

local function new(shape)
  return nd.empty(shape, "float32")
end

-- a as float32 on the cpu
local function f32(a)
  if type(a) == "number" then return nd.array(a, "float32") end
  if a:dtype() ~= "float32" then return a:astype("float32") end
  return a
end

local function ptr(a) return a:data_ptr() end

-- a boolean attribute: nil -> default; true or 1 -> true; false or 0 -> false
local function flag(v, default)
  if v == nil then return default end
  return v == true or v == 1
end

-- attribute helpers: v (nil | number | list) -> list of k numbers
local function ntuple(v, k, default)
  if v == nil then v = default end
  if type(v) == "number" then
    local t = {}
    for i = 1, k do t[i] = v end
    return t
  end
  if #v == 1 and k > 1 then return ntuple(v[1], k) end
  local t = {}
  for i = 1, k do t[i] = tonumber(v[i]) end
  return t
end

-- padding for k spatial dims: number | {p} | {p1..pk} | {before1..k, after1..k}
local function padding(v, k)
  if v == nil then v = 0 end
  if type(v) == "number" then v = { v } end
  local b, a = {}, {}
  if #v == 1 then
    for i = 1, k do b[i], a[i] = v[1], v[1] end
  elseif #v == k then
    for i = 1, k do b[i], a[i] = v[i], v[i] end
  elseif #v == 2 * k then
    for i = 1, k do b[i], a[i] = v[i], v[k + i] end
  else
    fail("padding %s does not fit %d spatial dims", shape_str(v), k)
  end
  return b, a
end

-- layout letters -> {size, stride} for a tensor of shape s
local function axes(layout, s, what)
  if #layout ~= #s then
    fail("%s: layout %s does not match shape %s", what, layout, shape_str(s))
  end
  local t, stride = {}, 1
  for i = #s, 1, -1 do
    t[layout:sub(i, i)] = { n = s[i], st = stride }
    stride = stride * s[i]
  end
  return t
end

local function norm_axis(axis, ndim, what)
  axis = axis or 0
  if axis < 0 then axis = axis + ndim end
  if axis < 0 or axis >= ndim then fail("%s: axis %d out of range for rank %d", what, axis, ndim) end
  return axis + 1                       -- 1-based
end

-- ---- convolution -----------------------------------------------------------------------

-- Up to 3 spatial dims; a 2-D conv runs with a unit depth axis.
local function conv(x, w, attrs, nsp, what)
  x, w = f32(x), f32(w)
  local dl = attrs.data_layout or (nsp == 2 and "NCHW" or "NCDHW")
  local kl = attrs.kernel_layout or (nsp == 2 and "OIHW" or "OIDHW")
  local groups = attrs.groups or 1
  local xs, ws = x:shape(), w:shape()
  local X, W = axes(dl, xs, what .. " data"), axes(kl, ws, what .. " weight")
  local strides = ntuple(attrs.strides, nsp, 1)
  local dil = ntuple(attrs.dilation, nsp, 1)
  local pb, pa = padding(attrs.padding, nsp)
  local sp = nsp == 2 and { "H", "W" } or { "D", "H", "W" }
  local N, C, O, I = X.N.n, X.C.n, W.O.n, W.I.n
  if C ~= I * groups or O % groups ~= 0 then
    fail("%s: data %s (%s) and weight %s (%s) do not match with groups=%d", what,
         shape_str(xs), dl, shape_str(ws), kl, groups)
  end
  -- per spatial dim (always 3, depth first): input size/stride, kernel size/stride, out size
  local isz, ist, ksz, kst, osz, s3, d3, p3 = {}, {}, {}, {}, {}, {}, {}, {}
  local off = 3 - nsp
  for d = 1, 3 do
    if d <= off then
      isz[d], ist[d], ksz[d], kst[d], s3[d], d3[d], p3[d] = 1, 0, 1, 0, 1, 1, 0
    else
      local l = sp[d - off]
      isz[d], ist[d] = X[l].n, X[l].st
      ksz[d], kst[d] = W[l].n, W[l].st
      s3[d], d3[d], p3[d] = strides[d - off], dil[d - off], pb[d - off]
    end
    local after = d <= off and 0 or pa[d - off]
    osz[d] = floor((isz[d] + p3[d] + after - d3[d] * (ksz[d] - 1) - 1) / s3[d]) + 1
    if osz[d] < 1 then fail("%s: output would be empty for data %s", what, shape_str(xs)) end
  end
  -- output shape in the data layout
  local oshape, odim = {}, { N = N, C = O }
  for d = off + 1, 3 do odim[sp[d - off]] = osz[d] end
  for i = 1, #dl do oshape[i] = odim[dl:sub(i, i)] end
  local out = new(oshape)
  local Y = axes(dl, oshape, what)
  local xp, wp, yp = ptr(x), ptr(w), ptr(out)
  local og = O / groups
  -- plain locals for the loops below (depth first; a 2-D conv has a unit depth)
  local ID, IH, IW = isz[1], isz[2], isz[3]
  local xsD, xsH, xsW, xsN, xsC = ist[1], ist[2], ist[3], X.N.st, X.C.st
  local KD, KH, KW = ksz[1], ksz[2], ksz[3]
  local wsD, wsH, wsW, wsO, wsI = kst[1], kst[2], kst[3], W.O.st, W.I.st
  local SD, SH, SW, DD, DH, DW = s3[1], s3[2], s3[3], d3[1], d3[2], d3[3]
  local PD, PH, PW = p3[1], p3[2], p3[3]
  local ysD, ysH, ysW = 0, Y[sp[nsp - 1]].st, Y[sp[nsp]].st
  if nsp == 3 then ysD = Y.D.st end
  local ysN, ysC = Y.N.st, Y.C.st
  for n = 0, N - 1 do
    for o = 0, O - 1 do
      local xg = n * xsN + floor(o / og) * I * xsC     -- first input channel of o's group
      local wo = o * wsO
      for od = 0, osz[1] - 1 do
        for oh = 0, osz[2] - 1 do
          for ow = 0, osz[3] - 1 do
            local acc = 0
            for kd = 0, KD - 1 do
              local id = od * SD - PD + kd * DD
              if id >= 0 and id < ID then
                for kh = 0, KH - 1 do
                  local ih = oh * SH - PH + kh * DH
                  if ih >= 0 and ih < IH then
                    for kw = 0, KW - 1 do
                      local iw = ow * SW - PW + kw * DW
                      if iw >= 0 and iw < IW then
                        local xo = xg + id * xsD + ih * xsH + iw * xsW
                        local wk = wo + kd * wsD + kh * wsH + kw * wsW
                        for ic = 0, I - 1 do
                          acc = acc + xp[xo + ic * xsC] * wp[wk + ic * wsI]
                        end
                      end
                    end
                  end
                end
              end
            end
            yp[n * ysN + o * ysC + od * ysD + oh * ysH + ow * ysW] = acc
          end
        end
      end
    end
  end
  return out
end

K["nn.conv2d"] = function(a, attrs) return conv(a[1], a[2], attrs, 2, "nn.conv2d") end
K["nn.conv3d"] = function(a, attrs) return conv(a[1], a[2], attrs, 3, "nn.conv3d") end

-- conv2d_transpose (groups 1): y[n,o,h*s-p+k*d] += x[n,c,h] * w[c,o,k] (kernel IOHW by default)
K["nn.conv2d_transpose"] = function(a, attrs)
  local x, w = f32(a[1]), f32(a[2])
  local dl = attrs.data_layout or "NCHW"
  local kl = attrs.kernel_layout or "IOHW"
  if (attrs.groups or 1) ~= 1 then fail("nn.conv2d_transpose: only groups=1 is supported") end
  local xs, ws = x:shape(), w:shape()
  local X, W = axes(dl, xs, "nn.conv2d_transpose data"), axes(kl, ws, "nn.conv2d_transpose weight")
  local s = ntuple(attrs.strides, 2, 1)
  local dil = ntuple(attrs.dilation, 2, 1)
  local pb, pa = padding(attrs.padding, 2)
  local op = ntuple(attrs.output_padding, 2, 0)
  local N, C, O = X.N.n, X.C.n, W.O.n
  if W.I.n ~= C then fail("nn.conv2d_transpose: data has %d channels, weight expects %d", C, W.I.n) end
  local H, Wd = X.H.n, X.W.n
  local OH = (H - 1) * s[1] - pb[1] - pa[1] + dil[1] * (W.H.n - 1) + op[1] + 1
  local OW = (Wd - 1) * s[2] - pb[2] - pa[2] + dil[2] * (W.W.n - 1) + op[2] + 1
  local odim = { N = N, C = O, H = OH, W = OW }
  local oshape = {}
  for i = 1, 4 do oshape[i] = odim[dl:sub(i, i)] end
  local out = new(oshape)
  local Y = axes(dl, oshape, "nn.conv2d_transpose")
  local xp, wp, yp = ptr(x), ptr(w), ptr(out)
  for n = 0, N - 1 do
    for c = 0, C - 1 do
      for h = 0, H - 1 do
        for ww = 0, Wd - 1 do
          local v = xp[n * X.N.st + c * X.C.st + h * X.H.st + ww * X.W.st]
          for o = 0, O - 1 do
            for kh = 0, W.H.n - 1 do
              local oh = h * s[1] - pb[1] + kh * dil[1]
              if oh >= 0 and oh < OH then
                for kw = 0, W.W.n - 1 do
                  local ow = ww * s[2] - pb[2] + kw * dil[2]
                  if ow >= 0 and ow < OW then
                    local yi = n * Y.N.st + o * Y.C.st + oh * Y.H.st + ow * Y.W.st
                    yp[yi] = yp[yi] + v * wp[c * W.I.st + o * W.O.st + kh * W.H.st + kw * W.W.st]
                  end
                end
              end
            end
          end
        end
      end
    end
  end
  return out
end

-- ---- pooling ---------------------------------------------------------------------------

local function pool(x, attrs, nsp, kind, what, global)
  x = f32(x)
  local layout = attrs.layout or (nsp == 2 and "NCHW" or "NCDHW")
  local xs = x:shape()
  local X = axes(layout, xs, what)
  local sp = nsp == 2 and { "H", "W" } or { "D", "H", "W" }
  local ksz, st, pb, pa
  if global then
    ksz, st, pb, pa = {}, {}, {}, {}
    for i, l in ipairs(sp) do ksz[i], st[i], pb[i], pa[i] = X[l].n, 1, 0, 0 end
  else
    ksz = ntuple(attrs.pool_size, nsp, 1)
    st = ntuple(attrs.strides, nsp, 1)
    pb, pa = padding(attrs.padding, nsp)
  end
  local dil = ntuple(attrs.dilation, nsp, 1)
  local ceil_mode = flag(attrs.ceil_mode, false)
  local cip = flag(attrs.count_include_pad, false)
  -- 3 spatial dims, depth first
  local off = 3 - nsp
  local isz, ist, k3, s3, d3, p3, a3, osz = {}, {}, {}, {}, {}, {}, {}, {}
  for d = 1, 3 do
    if d <= off then
      isz[d], ist[d], k3[d], s3[d], d3[d], p3[d], a3[d], osz[d] = 1, 0, 1, 1, 1, 0, 0, 1
    else
      local i = d - off
      isz[d], ist[d] = X[sp[i]].n, X[sp[i]].st
      k3[d], s3[d], d3[d], p3[d], a3[d] = ksz[i], st[i], dil[i], pb[i], pa[i]
      local span = isz[d] + pb[i] + pa[i] - d3[d] * (k3[d] - 1) - 1
      if ceil_mode then
        osz[d] = floor((span + s3[d] - 1) / s3[d]) + 1
      else
        osz[d] = floor(span / s3[d]) + 1
      end
      if osz[d] < 1 then fail("%s: output would be empty for data %s", what, shape_str(xs)) end
    end
  end
  local odim = { N = X.N.n, C = X.C.n }
  for d = off + 1, 3 do odim[sp[d - off]] = osz[d] end
  local oshape = {}
  for i = 1, #layout do oshape[i] = odim[layout:sub(i, i)] end
  local out = new(oshape)
  local Y = axes(layout, oshape, what)
  local ysp = {}
  for d = 1, 3 do ysp[d] = d <= off and 0 or Y[sp[d - off]].st end
  local xp, yp = ptr(x), ptr(out)
  for n = 0, X.N.n - 1 do
    for c = 0, X.C.n - 1 do
      local xb = n * X.N.st + c * X.C.st
      for od = 0, osz[1] - 1 do
        for oh = 0, osz[2] - 1 do
          for ow = 0, osz[3] - 1 do
            local acc = kind == "max" and -math.huge or 0
            local cnt, cnt_pad = 0, 0
            for kd = 0, k3[1] - 1 do
              local id = od * s3[1] - p3[1] + kd * d3[1]
              for kh = 0, k3[2] - 1 do
                local ih = oh * s3[2] - p3[2] + kh * d3[2]
                for kw = 0, k3[3] - 1 do
                  local iw = ow * s3[3] - p3[3] + kw * d3[3]
                  -- count_include_pad counts the window inside the padded extent
                  if id < isz[1] + a3[1] and ih < isz[2] + a3[2] and iw < isz[3] + a3[3] then
                    cnt_pad = cnt_pad + 1
                  end
                  if id >= 0 and id < isz[1] and ih >= 0 and ih < isz[2] and iw >= 0 and
                     iw < isz[3] then
                    local v = xp[xb + id * ist[1] + ih * ist[2] + iw * ist[3]]
                    if kind == "max" then
                      if v > acc then acc = v end
                    else
                      acc = acc + v
                    end
                    cnt = cnt + 1
                  end
                end
              end
            end
            if kind == "avg" then
              local div = cip and cnt_pad or cnt
              acc = div > 0 and acc / div or 0
            end
            yp[n * Y.N.st + c * Y.C.st + od * ysp[1] + oh * ysp[2] + ow * ysp[3]] = acc
          end
        end
      end
    end
  end
  return out
end

K["nn.max_pool2d"] = function(a, t) return pool(a[1], t, 2, "max", "nn.max_pool2d") end
K["nn.avg_pool2d"] = function(a, t) return pool(a[1], t, 2, "avg", "nn.avg_pool2d") end
K["nn.max_pool3d"] = function(a, t) return pool(a[1], t, 3, "max", "nn.max_pool3d") end
K["nn.avg_pool3d"] = function(a, t) return pool(a[1], t, 3, "avg", "nn.avg_pool3d") end
K["nn.global_avg_pool2d"] = function(a, t) return pool(a[1], t, 2, "avg", "nn.global_avg_pool2d", true) end
K["nn.global_max_pool2d"] = function(a, t) return pool(a[1], t, 2, "max", "nn.global_max_pool2d", true) end
K["nn.global_avg_pool3d"] = function(a, t) return pool(a[1], t, 3, "avg", "nn.global_avg_pool3d", true) end
K["nn.global_max_pool3d"] = function(a, t) return pool(a[1], t, 3, "max", "nn.global_max_pool3d", true) end

-- ---- dense, batch_matmul ---------------------------------------------------------------

K["nn.dense"] = function(a)
  local x, w = f32(a[1]), f32(a[2])
  local xs, ws = x:shape(), w:shape()
  local Kd = xs[#xs]
  if #ws ~= 2 or ws[2] ~= Kd then
    fail("nn.dense: data %s and weight %s do not match", shape_str(xs), shape_str(ws))
  end
  local M, N = prod(xs, 1, #xs - 1), ws[1]
  local oshape = {}
  for i = 1, #xs - 1 do oshape[i] = xs[i] end
  oshape[#xs] = N
  local out = new(oshape)
  local xp, wp, yp = ptr(x), ptr(w), ptr(out)
  for m = 0, M - 1 do
    for n = 0, N - 1 do
      local acc = 0
      for k = 0, Kd - 1 do acc = acc + xp[m * Kd + k] * wp[n * Kd + k] end
      yp[m * N + n] = acc
    end
  end
  return out
end

K["nn.batch_matmul"] = function(a, attrs)
  local x, y = f32(a[1]), f32(a[2])
  local xs, ys = x:shape(), y:shape()
  local ta = flag(attrs.transpose_a, false)
  local tb = flag(attrs.transpose_b, true)
  local B = max(xs[1], ys[1])
  local M, Kx = ta and xs[3] or xs[2], ta and xs[2] or xs[3]
  local N, Ky = tb and ys[2] or ys[3], tb and ys[3] or ys[2]
  if Kx ~= Ky or (xs[1] ~= ys[1] and xs[1] ~= 1 and ys[1] ~= 1) then
    fail("nn.batch_matmul: %s and %s do not match", shape_str(xs), shape_str(ys))
  end
  local out = new({ B, M, N })
  local xp, yp, op = ptr(x), ptr(y), ptr(out)
  for b = 0, B - 1 do
    local xb = (xs[1] == 1 and 0 or b) * xs[2] * xs[3]
    local yb = (ys[1] == 1 and 0 or b) * ys[2] * ys[3]
    for m = 0, M - 1 do
      for n = 0, N - 1 do
        local acc = 0
        for k = 0, Kx - 1 do
          local xv = ta and xp[xb + k * xs[3] + m] or xp[xb + m * xs[3] + k]
          local yv = tb and yp[yb + n * ys[3] + k] or yp[yb + k * ys[3] + n]
          acc = acc + xv * yv
        end
        op[(b * M + m) * N + n] = acc
      end
    end
  end
  return out
end

-- ---- per-channel ops -------------------------------------------------------------------

-- y[i] = f(x[i], c) with c the index along axis
local function per_channel(x, axis, what, f)
  local xs = x:shape()
  local ax = norm_axis(axis, #xs, what)
  local C, inner = xs[ax], prod(xs, ax + 1)
  local out = new(xs)
  local xp, yp = ptr(x), ptr(out)
  for i = 0, x:numel() - 1 do
    yp[i] = f(xp[i], floor(i / inner) % C)
  end
  return out, C
end

K["nn.bias_add"] = function(a, attrs)
  local x, b = f32(a[1]), f32(a[2])
  local bp = ptr(b)
  local axis = attrs.axis == nil and 1 or attrs.axis
  local xs = x:shape()
  local C = xs[norm_axis(axis, #xs, "nn.bias_add")]
  if b:numel() ~= C then
    fail("nn.bias_add: bias %s does not match axis %d of %s", shape_str(b:shape()), axis,
         shape_str(xs))
  end
  local out = per_channel(x, axis, "nn.bias_add", function(v, c) return v + bp[c] end)
  return out
end

K["nn.batch_norm"] = function(a, attrs)
  local x = f32(a[1])
  local g, b, m, v = ptr(f32(a[2])), ptr(f32(a[3])), ptr(f32(a[4])), ptr(f32(a[5]))
  local eps = attrs.epsilon or 1e-5
  local center = flag(attrs.center, true)
  local scale = flag(attrs.scale, true)
  local axis = attrs.axis == nil and 1 or attrs.axis
  local xs = x:shape()
  local C = xs[norm_axis(axis, #xs, "nn.batch_norm")]
  for i = 2, 5 do
    if a[i]:numel() ~= C then
      fail("nn.batch_norm: argument %d has shape %s, expected (%d,) for axis %d of %s", i,
           shape_str(a[i]:shape()), C, axis, shape_str(xs))
    end
  end
  local out = per_channel(x, axis, "nn.batch_norm", function(val, c)
    local y = (val - m[c]) / sqrt(v[c] + eps)
    if scale then y = y * g[c] end
    if center then y = y + b[c] end
    return y
  end)
  return { tuple = true, out, f32(a[4]), f32(a[5]) }
end

-- ---- elementwise -----------------------------------------------------------------------

local function unary(f)
  return function(a)
    local x = f32(a[1])
    local out = new(x:shape())
    local xp, yp = ptr(x), ptr(out)
    for i = 0, x:numel() - 1 do yp[i] = f(xp[i]) end
    return out
  end
end

K["nn.relu"] = unary(function(v) return v > 0 and v or 0 end)
K["sigmoid"] = unary(function(v) return 1 / (1 + exp(-v)) end)
K["tanh"] = unary(math.tanh or function(v)
  local e = exp(2 * v)
  return (e - 1) / (e + 1)
end)
K["exp"] = unary(exp)
K["log"] = unary(math.log)
K["sqrt"] = unary(sqrt)
K["rsqrt"] = unary(function(v) return 1 / sqrt(v) end)
K["negative"] = unary(function(v) return -v end)
K["abs"] = unary(math.abs)
K["copy"] = unary(function(v) return v end)
K["nn.leaky_relu"] = function(a, attrs)
  local alpha = attrs.alpha or 0.01
  return unary(function(v) return v > 0 and v or v * alpha end)(a)
end
K["clip"] = function(a, attrs)
  local lo, hi = attrs.a_min, attrs.a_max
  return unary(function(v) return v < lo and lo or (v > hi and hi or v) end)(a)
end
K["cast"] = function(a, attrs)
  if attrs.dtype and attrs.dtype ~= "float32" then
    fail("cast: the reference computes in float32 only, got dtype %s", tostring(attrs.dtype))
  end
  return f32(a[1])
end

-- numpy broadcasting
local function binary(f, what)
  return function(a)
    local x, y = f32(a[1]), f32(a[2])
    local xs, ys = x:shape(), y:shape()
    local n = max(#xs, #ys)
    local os, xst, yst = {}, {}, {}
    local sx, sy = 1, 1
    for i = n, 1, -1 do
      local dx = xs[i - n + #xs] or 1
      local dy = ys[i - n + #ys] or 1
      if dx ~= dy and dx ~= 1 and dy ~= 1 then
        fail("%s: shapes %s and %s do not broadcast", what, shape_str(xs), shape_str(ys))
      end
      os[i] = max(dx, dy)
      xst[i] = dx == 1 and 0 or sx
      yst[i] = dy == 1 and 0 or sy
      sx, sy = sx * dx, sy * dy
    end
    local out = new(os)
    local xp, yp, op = ptr(x), ptr(y), ptr(out)
    local total = out:numel()
    local idx = {}
    for i = 1, n do idx[i] = 0 end
    local xo, yo = 0, 0
    for i = 0, total - 1 do
      op[i] = f(xp[xo], yp[yo])
      local d = n
      while d >= 1 do
        idx[d] = idx[d] + 1
        xo, yo = xo + xst[d], yo + yst[d]
        if idx[d] < os[d] then break end
        xo, yo = xo - xst[d] * os[d], yo - yst[d] * os[d]
        idx[d] = 0
        d = d - 1
      end
    end
    return out
  end
end

K["add"] = binary(function(p, q) return p + q end, "add")
K["subtract"] = binary(function(p, q) return p - q end, "subtract")
K["multiply"] = binary(function(p, q) return p * q end, "multiply")
K["divide"] = binary(function(p, q) return p / q end, "divide")
K["maximum"] = binary(function(p, q) return p > q and p or q end, "maximum")
K["minimum"] = binary(function(p, q) return p < q and p or q end, "minimum")
K["power"] = binary(function(p, q) return p ^ q end, "power")

-- ---- softmax ---------------------------------------------------------------------------

local function softmax(a, attrs, log)
  local x = f32(a[1])
  local xs = x:shape()
  local ax = norm_axis(attrs.axis == nil and -1 or attrs.axis, #xs, "nn.softmax")
  local outer, n, inner = prod(xs, 1, ax - 1), xs[ax], prod(xs, ax + 1)
  local out = new(xs)
  local xp, yp = ptr(x), ptr(out)
  for o = 0, outer - 1 do
    for i = 0, inner - 1 do
      local base = o * n * inner + i
      local m = -math.huge
      for k = 0, n - 1 do m = max(m, xp[base + k * inner]) end
      local s = 0
      for k = 0, n - 1 do s = s + exp(xp[base + k * inner] - m) end
      for k = 0, n - 1 do
        local v = xp[base + k * inner] - m
        yp[base + k * inner] = log and (v - math.log(s)) or exp(v) / s
      end
    end
  end
  return out
end
K["nn.softmax"] = function(a, t) return softmax(a, t, false) end
K["nn.log_softmax"] = function(a, t) return softmax(a, t, true) end

-- ---- shape ops -------------------------------------------------------------------------

local function reshape_to(x, shape)
  x = f32(x)
  local out = new(shape)
  if out:numel() ~= x:numel() then
    fail("reshape: cannot reshape %s into %s", shape_str(x:shape()), shape_str(shape))
  end
  local xp, yp = ptr(x), ptr(out)
  for i = 0, x:numel() - 1 do yp[i] = xp[i] end
  return out
end

K["nn.batch_flatten"] = function(a)
  local s = a[1]:shape()
  return reshape_to(a[1], { s[1], prod(s, 2) })
end

K["reshape"] = function(a, attrs)
  local xs = a[1]:shape()
  local ns = attrs.newshape or attrs.shape
  local out, infer, known = {}, nil, 1
  for i, d in ipairs(ns) do
    if d == 0 then
      out[i] = xs[i]
    elseif d == -1 then
      infer = i
      out[i] = 1
    elseif d < -1 then
      fail("reshape: special value %d is not supported by the reference", d)
    else
      out[i] = d
    end
    known = known * out[i]
  end
  if infer then out[infer] = prod(xs) / known end
  return reshape_to(a[1], out)
end

K["expand_dims"] = function(a, attrs)
  local xs = a[1]:shape()
  local axis = attrs.axis
  if axis < 0 then axis = axis + #xs + 1 end
  local out = {}
  for i = 1, axis do out[#out + 1] = xs[i] end
  for _ = 1, attrs.num_newaxis or 1 do out[#out + 1] = 1 end
  for i = axis + 1, #xs do out[#out + 1] = xs[i] end
  return reshape_to(a[1], out)
end

K["squeeze"] = function(a, attrs)
  local xs = a[1]:shape()
  local drop = {}
  if attrs.axis then
    for _, ax in ipairs(type(attrs.axis) == "table" and attrs.axis or { attrs.axis }) do
      drop[norm_axis(ax, #xs, "squeeze")] = true
    end
  else
    for i, d in ipairs(xs) do if d == 1 then drop[i] = true end end
  end
  local out = {}
  for i, d in ipairs(xs) do if not drop[i] then out[#out + 1] = d end end
  return reshape_to(a[1], out)
end

-- y[dst index] = x[...] with y's axis k = x's axis perm[k] (1-based)
local function transpose(x, perm)
  x = f32(x)
  local xs = x:shape()
  local n = #xs
  local xst, acc = {}, 1
  for d = n, 1, -1 do
    xst[d] = acc
    acc = acc * xs[d]
  end
  local os, st = {}, {}
  for k = 1, n do
    os[k] = xs[perm[k]]
    st[k] = xst[perm[k]]
  end
  local out = new(os)
  local xp, yp = ptr(x), ptr(out)
  local idx = {}
  for k = 1, n do idx[k] = 0 end
  local off = 0
  for i = 0, out:numel() - 1 do
    yp[i] = xp[off]
    local d = n
    while d >= 1 do
      idx[d] = idx[d] + 1
      off = off + st[d]
      if idx[d] < os[d] then break end
      off = off - st[d] * os[d]
      idx[d] = 0
      d = d - 1
    end
  end
  return out
end

K["transpose"] = function(a, attrs)
  local n = #a[1]:shape()
  local perm = {}
  if attrs.axes and #attrs.axes > 0 then
    for k, ax in ipairs(attrs.axes) do perm[k] = norm_axis(ax, n, "transpose") end
  else
    for k = 1, n do perm[k] = n - k + 1 end
  end
  return transpose(a[1], perm)
end

-- layouts: "NCHW", "NHWC" or blocked ones such as "NCHW8c" (a lower-case axis with its
-- factor is the inner part of the upper-case one)
local function parse_layout(l)
  local t = {}
  for num, letter in l:gmatch("(%d*)(%a)") do
    t[#t + 1] = { letter = letter:upper(), factor = num ~= "" and tonumber(num) or nil,
                  sub = letter:lower() == letter }
  end
  return t
end

K["layout_transform"] = function(a, attrs)
  local x = f32(a[1])
  local src, dst = parse_layout(attrs.src_layout), parse_layout(attrs.dst_layout)
  local xs = x:shape()
  if #src ~= #xs then
    fail("layout_transform: layout %s does not match shape %s", attrs.src_layout, shape_str(xs))
  end
  -- logical extent of each primal axis, and each layout's block factors
  local logical, sfac, dfac = {}, {}, {}
  for i, ax in ipairs(src) do
    if ax.sub then sfac[ax.letter] = xs[i] end
  end
  for i, ax in ipairs(src) do
    if not ax.sub then logical[ax.letter] = xs[i] * (sfac[ax.letter] or 1) end
  end
  for _, ax in ipairs(dst) do if ax.sub then dfac[ax.letter] = ax.factor end end
  local os = {}
  for i, ax in ipairs(dst) do
    if ax.sub then
      os[i] = ax.factor
    else
      local f = dfac[ax.letter] or 1
      if logical[ax.letter] % f ~= 0 then
        fail("layout_transform: axis %s of %d is not divisible by %d", ax.letter,
             logical[ax.letter], f)
      end
      os[i] = logical[ax.letter] / f
    end
  end
  local sst, acc = {}, 1
  for d = #xs, 1, -1 do
    sst[d] = acc
    acc = acc * xs[d]
  end
  local out = new(os)
  local xp, yp = ptr(x), ptr(out)
  local idx = {}
  for d = 1, #os do idx[d] = 0 end
  for i = 0, out:numel() - 1 do
    local L = {}
    for d, ax in ipairs(dst) do
      if not ax.sub then L[ax.letter] = (L[ax.letter] or 0) + idx[d] * (dfac[ax.letter] or 1) end
    end
    for d, ax in ipairs(dst) do
      if ax.sub then L[ax.letter] = (L[ax.letter] or 0) + idx[d] end
    end
    local off = 0
    for d, ax in ipairs(src) do
      local f = sfac[ax.letter]
      local v
      if ax.sub then v = L[ax.letter] % f else v = f and floor(L[ax.letter] / f) or L[ax.letter] end
      off = off + v * sst[d]
    end
    yp[i] = xp[off]
    local d = #os
    while d >= 1 do
      idx[d] = idx[d] + 1
      if idx[d] < os[d] then break end
      idx[d] = 0
      d = d - 1
    end
  end
  return out
end

local function concat_list(list, axis, what)
  local s0 = list[1]:shape()
  local ax = norm_axis(axis, #s0, what)
  local os = {}
  for i, d in ipairs(s0) do os[i] = d end
  os[ax] = 0
  for k, t in ipairs(list) do
    local s = t:shape()
    for i = 1, #s0 do
      if i ~= ax and s[i] ~= s0[i] then
        fail("%s: input %d has shape %s, which does not match %s outside axis %d", what, k,
             shape_str(s), shape_str(s0), axis)
      end
    end
    os[ax] = os[ax] + s[ax]
  end
  local out = new(os)
  local outer, inner = prod(os, 1, ax - 1), prod(os, ax + 1)
  local yp = ptr(out)
  local pos = 0
  for _, t in ipairs(list) do
    local x = f32(t)
    local xp = ptr(x)
    local chunk = x:shape()[ax] * inner
    for o = 0, outer - 1 do
      local yb = o * os[ax] * inner + pos
      for j = 0, chunk - 1 do yp[yb + j] = xp[o * chunk + j] end
    end
    pos = pos + chunk
  end
  return out
end

-- The channel-blocked convolutions (x86's AlterOpLayout): data NCHW[b]c, kernel OIHW[o]o,
-- output NCHW[o]c -- the NCHW conv of the unblocked operands, blocked again.
local function blocked_conv(depthwise)
  return function(a, attrs)
    local xs, ws = a[1]:shape(), a[2]:shape()
    if (#xs ~= 5 and not (#xs == 4 and not depthwise)) or #ws ~= 5 then
      fail("contrib conv2d_NCHWc: expected 5-D (or NCHW) data and a 5-D kernel, got %s and %s",
           shape_str(xs), shape_str(ws))
    end
    local x = #xs == 4 and a[1] or
              K["layout_transform"]({ a[1] }, { src_layout = "NCHW" .. xs[5] .. "c", dst_layout = "NCHW" })
    local w = K["layout_transform"]({ a[2] }, { src_layout = "OIHW" .. ws[5] .. "o", dst_layout = "OIHW" })
    local ca = { strides = attrs.strides, padding = attrs.padding, dilation = attrs.dilation,
                 groups = depthwise and xs[2] * xs[5] or 1, data_layout = "NCHW", kernel_layout = "OIHW" }
    local y = conv(x, w, ca, 2, "contrib conv2d_NCHWc")
    return K["layout_transform"]({ y }, { src_layout = "NCHW", dst_layout = "NCHW" .. ws[5] .. "c" })
  end
end
K["nn.contrib_conv2d_NCHWc"] = blocked_conv(false)
K["nn.contrib_depthwise_conv2d_NCHWc"] = blocked_conv(true)

K["concatenate"] = function(a, attrs)
  local list = a[1]
  if type(list) == "table" and list.tuple then
    local l = {}
    for i = 1, #list do l[i] = list[i] end
    list = l
  else
    list = a                             -- fields given as separate arguments
  end
  return concat_list(list, attrs.axis or 0, "concatenate")
end

K["split"] = function(a, attrs)
  local x = f32(a[1])
  local xs = x:shape()
  local axis = attrs.axis or 0
  local ax = norm_axis(axis, #xs, "split")
  local ios = attrs.indices_or_sections
  local bounds = { 0 }
  if type(ios) == "number" then
    if xs[ax] % ios ~= 0 then fail("split: %d does not divide axis of %d", ios, xs[ax]) end
    for k = 1, ios do bounds[k + 1] = k * xs[ax] / ios end
  else
    for k, v in ipairs(ios) do bounds[k + 1] = v end
    bounds[#bounds + 1] = xs[ax]
  end
  local outer, inner = prod(xs, 1, ax - 1), prod(xs, ax + 1)
  local res = { tuple = true }
  local xp = ptr(x)
  for k = 1, #bounds - 1 do
    local os = {}
    for i, d in ipairs(xs) do os[i] = d end
    os[ax] = bounds[k + 1] - bounds[k]
    local out = new(os)
    local yp = ptr(out)
    local chunk = os[ax] * inner
    for o = 0, outer - 1 do
      for j = 0, chunk - 1 do yp[o * chunk + j] = xp[(o * xs[ax] + bounds[k]) * inner + j] end
    end
    res[k] = out
  end
  return res
end

K["nn.pad"] = function(a, attrs)
  local x = f32(a[1])
  local xs = x:shape()
  local pw = attrs.pad_width
  local pv = attrs.pad_value or 0
  if type(a[2]) == "cdata" then pv = a[2]:flat()[1] end
  local os, before = {}, {}
  for i = 1, #xs do
    before[i] = pw[i][1]
    os[i] = xs[i] + pw[i][1] + pw[i][2]
  end
  local out = nd.full(os, pv, "float32")
  local yst, acc = {}, 1
  for d = #os, 1, -1 do
    yst[d] = acc
    acc = acc * os[d]
  end
  local xp, yp = ptr(x), ptr(out)
  local idx = {}
  for d = 1, #xs do idx[d] = 0 end
  for i = 0, x:numel() - 1 do
    local off = 0
    for d = 1, #xs do off = off + (idx[d] + before[d]) * yst[d] end
    yp[off] = xp[i]
    local d = #xs
    while d >= 1 do
      idx[d] = idx[d] + 1
      if idx[d] < xs[d] then break end
      idx[d] = 0
      d = d - 1
    end
  end
  return out
end

K["nn.dropout"] = function(a, attrs, node)
  local x = f32(a[1])
  if node and node.type and node.type.fields then     -- (output, mask) as in TVM
    return { tuple = true, x, nd.full(x:shape(), 1, "float32") }
  end
  return x
end

-- ---- the interpreter -------------------------------------------------------------------

local function op_name(op)
  if type(op) == "string" then return op end
  if type(op) == "table" and type(op.name) == "string" then return op.name end
  return nil
end

local function is_function(n)
  return type(n) == "table" and (n.kind == "function" or (n.params ~= nil and n.body ~= nil))
end

local function node_label(n)
  local a = n.attrs or {}
  local label = op_name(n.op) or "function"
  if a.name then label = label .. " '" .. tostring(a.name) .. "'" end
  for _, arg in ipairs(n.args or {}) do
    if arg.kind == "var" and arg.name ~= "data" then
      return label .. " (weight " .. arg.name .. ")"
    end
  end
  return label
end

local eval_function
-- TUNELUA_REF_PROFILE=1 prints the time spent per op after each run
local PROFILE = os.getenv("TUNELUA_REF_PROFILE") and {} or nil

-- Evaluate expr with env: var node -> value. Returns the value of expr.
local function evaluate(expr, env)
  -- topological order (iterative post-order), and consumer counts
  local order, state, uses = {}, {}, {}
  local stack = { expr }
  local function children(n)
    if n.kind == "call" then
      return n.args
    elseif n.kind == "tuple" then
      return n.fields
    elseif n.kind == "tuple_get" then
      return { n.tuple }
    end
    return {}
  end
  while #stack > 0 do
    local n = stack[#stack]
    if state[n] == nil then
      state[n] = 1
      local ch = children(n)
      for i = #ch, 1, -1 do
        local c = ch[i]
        uses[c] = (uses[c] or 0) + 1
        if state[c] == nil then stack[#stack + 1] = c end
      end
    else
      stack[#stack] = nil
      if state[n] == 1 then
        state[n] = 2
        order[#order + 1] = n
      end
    end
  end
  local val = {}
  local function release(c)
    uses[c] = uses[c] - 1
    if uses[c] == 0 and c ~= expr then val[c] = nil end
  end
  for _, n in ipairs(order) do
    local k = n.kind
    local v
    if k == "var" then
      v = env[n]
      if v == nil then fail("no value for var '%s'", tostring(n.name)) end
    elseif k == "const" then
      v = n.value
      if type(v) == "number" then v = nd.array(v, "float32") end
    elseif k == "tuple" then
      v = { tuple = true }
      for i, f in ipairs(n.fields) do v[i] = val[f] end
    elseif k == "tuple_get" then
      local t = val[n.tuple]
      if type(t) ~= "table" then fail("tuple_get on a value that is not a tuple") end
      v = t[n.index + 1]
      if v == nil then fail("tuple_get index %d out of range (%d fields)", n.index, #t) end
    elseif k == "call" then
      local args = {}
      for i, c in ipairs(n.args) do args[i] = val[c] end
      if is_function(n.op) then
        v = eval_function(n.op, args)
      else
        local name = op_name(n.op)
        local kern = name and K[name]
        if not kern then
          fail("op '%s' is not supported by the reference interpreter", tostring(name))
        end
        local t0 = PROFILE and os.clock()
        local ok, res = pcall(kern, args, n.attrs or {}, n)
        if PROFILE then PROFILE[name] = (PROFILE[name] or 0) + os.clock() - t0 end
        if not ok then
          local msg = tostring(res):gsub("^reference: ", "")
          fail("%s: %s", node_label(n), msg)
        end
        v = res
      end
    elseif k == "function" then
      fail("a function value (closures are not supported)")
    else
      fail("unknown node kind '%s'", tostring(k))
    end
    val[n] = v
    for _, c in ipairs(children(n)) do release(c) end
  end
  return val[expr]
end

function eval_function(func, args)
  local env = {}
  for i, p in ipairs(func.params) do env[p] = args[i] end
  return evaluate(func.body, env)
end

local function shapes_equal(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if tonumber(a[i]) ~= tonumber(b[i]) then return false end end
  return true
end

--- run(mod, params, inputs) -> list of output arrays (float32). mod: a relay
--- Module (mod.main) or Function; params and inputs: name -> tl.nd array (or a
--- nested table / number for inputs). Every function parameter needs a value.
function reference.run(mod, params, inputs)
  local func = mod
  if type(mod) == "table" and mod.main then func = mod.main end
  if not is_function(func) then
    error("reference.run: expected a relay Module or Function", 2)
  end
  params, inputs = params or {}, inputs or {}
  local env = {}
  for _, p in ipairs(func.params) do
    local v = inputs[p.name]
    if v == nil then v = params[p.name] end
    if v == nil then
      local shape = p.type and p.type.shape
      error(string.format("reference.run: no value for '%s'%s (give it in params or inputs)",
                          tostring(p.name), shape and (" of shape " .. shape_str(shape)) or ""), 2)
    end
    if not nd.is_array(v) then v = nd.array(v, "float32") end
    if p.type and p.type.shape and not shapes_equal(v:shape(), p.type.shape) then
      error(string.format("reference.run: '%s' has shape %s, the graph expects %s", p.name,
                          shape_str(v:shape()), shape_str(p.type.shape)), 2)
    end
    env[p] = v
  end
  local ok, res = pcall(evaluate, func.body, env)
  if not ok then error(tostring(res), 2) end
  if PROFILE then
    for k, v in pairs(PROFILE) do io.stderr:write(string.format("reference: %-24s %8.3f s\n", k, v)) end
    for k in pairs(PROFILE) do PROFILE[k] = nil end
  end
  if type(res) == "table" and res.tuple then
    local list = {}
    for i = 1, #res do list[i] = res[i] end
    return list
  end
  return { res }
end

--- compare(actual, desired, opts) -> ok, message, stats.
--- Passes when every element has |a - d| <= atol + rtol * |d| (rtol 1e-4,
--- atol 1e-6 * max|d| by default); stats = {max_abs, max_rel (elementwise, worst),
--- rel_norm (max|a-d| / max|d|)}. The message names the worst element.
function reference.compare(actual, desired, opts)
  opts = opts or {}
  local a = nd.is_array(actual) and actual or nd.array(actual, "float64")
  local d = nd.is_array(desired) and desired or nd.array(desired, "float64")
  local as, ds = a:shape(), d:shape()
  if not shapes_equal(as, ds) then
    return false, string.format("shape mismatch: actual %s vs desired %s", shape_str(as),
                                shape_str(ds)), nil
  end
  local af, df = a:flat(), d:flat()
  local dmax = 0
  for i = 1, #df do dmax = max(dmax, math.abs(df[i])) end
  local rtol = opts.rtol or 1e-4
  local atol = opts.atol or 1e-6 * dmax
  local max_abs, max_rel, worst, bad = 0, 0, nil, 0
  for i = 1, #af do
    local x, y = af[i], df[i]
    local e = math.abs(x - y)
    if x ~= x or y ~= y then e = math.huge end
    if e > max_abs then max_abs = e end
    local r = e / max(math.abs(y), 1e-30)
    if e > atol + rtol * math.abs(y) then
      bad = bad + 1
      if not worst or r > max_rel then worst, max_rel = i, r end
    end
  end
  local stats = { max_abs = max_abs, max_rel = max_rel, rel_norm = dmax > 0 and max_abs / dmax or max_abs }
  if bad == 0 then return true, nil, stats end
  return false, string.format("%d of %d elements differ (rtol=%g, atol=%g); worst at flat index %d: %.9g vs %.9g",
                              bad, #af, rtol, atol, worst - 1, af[worst], df[worst]), stats
end

--- assert_close(actual, desired, opts): compare, raising the message at the caller.
function reference.assert_close(actual, desired, opts)
  local ok, msg = reference.compare(actual, desired, opts)
  if not ok then error("reference.assert_close: " .. msg, 2) end
end

return reference
