-- The PyTorch CPU peer of the conv benchmarks (conv_x86.lua, winograd_x86.lua): one Python
-- subprocess times torch.nn.functional.conv2d on every layer, NCHW fp32 batch 1, with
-- torch.set_num_threads(threads); a repeat is as many back-to-back calls as fill 20 ms, the
-- time of a layer the median over the repeats (seconds per call).
--
--   local torch_conv = dofile(<bench dir> .. "/torch_conv_cpu.lua")
--   torch_conv(python, threads, repeats, layers) -> {seconds, ...} or nil
--
-- layers: {C, H(=W), O, K, stride, pad[, groups]} each. nil when TUNELUA_NO_PEER is set or
-- the interpreter gave no time for every layer (no PyTorch, a crash).
return function(python, threads, repeats, layers)
  if os.getenv("TUNELUA_NO_PEER") then return nil end
  local specs = {}
  for i, L in ipairs(layers) do
    specs[i] = string.format("(%d,%d,%d,%d,%d,%d,%d)", L[1], L[2], L[3], L[4], L[5], L[6], L[7] or 1)
  end
  local py = string.format([[
import torch, time, statistics, json
torch.set_num_threads(%d)
out = []
with torch.no_grad():
    for (C, H, O, K, S, P, g) in [%s]:
        x = torch.rand(1, C, H, H); w = torch.rand(O, C // g, K, K)
        f = lambda: torch.nn.functional.conv2d(x, w, None, S, P, 1, g)
        for _ in range(3): f()
        ts = []
        for _ in range(%d):
            n = 0; t0 = time.perf_counter()
            while True:
                f(); n += 1
                if time.perf_counter() - t0 > 0.02: break
            ts.append((time.perf_counter() - t0) / n)
        out.append(statistics.median(ts))
print(json.dumps(out))
]], threads, table.concat(specs, ","), repeats)
  local path = os.tmpname()
  local fh = assert(io.open(path, "w"))
  fh:write(py)
  fh:close()
  local p = io.popen(python .. " " .. path .. " 2>/dev/null")
  local txt = p:read("*a")
  p:close()
  os.remove(path)
  local t = {}
  for v in txt:gmatch("[%d%.eE%-]+") do t[#t + 1] = tonumber(v) end
  return #t == #layers and t or nil
end
