-- Runs every tests/lua/errors/*.lua with the tunelua executable; each must
-- fail (non-zero exit) and print exactly the message in its header line:
--   -- expect: <message>
-- The message is compared with the first line tunelua writes to stderr.
local exe = arg[1] or "tunelua"
local dir = "tests/lua/errors"
local p = io.popen("ls " .. dir .. "/*.lua 2>/dev/null")
local files = {}
for f in p:lines() do files[#files + 1] = f end
p:close()
assert(#files > 0, "no error cases found in " .. dir)

local passed, failed = 0, 0
for _, f in ipairs(files) do
  local h = assert(io.open(f))
  local src = h:read("*a")
  h:close()
  local expect = src:match("^%-%- expect: ([^\n]*)")
  local args = src:match("\n%-%- args: ([^\n]*)") or ""
  assert(expect, f .. ": missing '-- expect: ' header line")
  local errf = os.tmpname()
  local cmd = string.format("%s %s %s >/dev/null 2>%s", exe, f, args, errf)
  local ok, how, code = os.execute(cmd)
  local status = type(ok) == "number" and ok or (ok and 0 or code or 1)
  local eh = io.open(errf)
  local first = eh:read("*l") or ""
  eh:close()
  os.remove(errf)
  if status ~= 0 and first == expect then
    passed = passed + 1
  else
    failed = failed + 1
    print(string.format("FAIL %s\n  status:   %s\n  expected: %s\n  got:      %s", f,
                        tostring(status), expect, first))
  end
end
print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
