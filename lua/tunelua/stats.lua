--- tunelua.stats: small statistics over Lua lists of numbers (timings).
local stats = {}

--- stats.median(list) -> the median (the mean of the two middle values for an even count), or
--- nil for an empty list. The list is not modified.
function stats.median(t)
  local s = {}
  for i = 1, #t do s[i] = t[i] end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

return stats
