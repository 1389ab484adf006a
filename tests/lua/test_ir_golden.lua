-- Golden tests of schedules and lowering: every tests/ir/*.txt holds
--
--   # title line(s)
--   --- input        a Lua chunk (te, tl, create_schedule in scope) that
--                    builds a DAG and a schedule and returns s, {args}
--   --- steps        the expected s:steps() JSON
--   --- lowered      the expected tostring(tl.lower(s, args))
--
-- Each file runs in its own tunelua process (tensor names are per process).
-- Besides comparing the two sections, the runner replays the step list on a
-- fresh schedule of the same DAG and checks it lowers to the same text.
-- TUNELUA_UPDATE_GOLDEN=1 rewrites the steps and lowered sections.
local host = require "tunelua.host"

local dir = "tests/ir"

local read = require("tests.lua.lib.util").read

-- header, input, steps, lowered
local function sections(text, path)
  local header, rest = text:match("^(.-)%-%-%- input\n(.*)$")
  assert(header, path .. ": missing '--- input' section")
  local input, rest2 = rest:match("^(.-)%-%-%- steps\n(.*)$")
  assert(input, path .. ": missing '--- steps' section")
  local steps, lowered = rest2:match("^(.-)%-%-%- lowered\n(.*)$")
  assert(steps, path .. ": missing '--- lowered' section")
  return header, input, steps, lowered
end

-- Child mode: run one file, print the two results between markers (and
-- end normally, so that the Lua state is closed and its finalizers run).
local function run_one(path)
  local tl = require "tunelua"
  local te = require "tunelua.te"
  local schedule = require "tunelua.schedule"
  local _, input = sections(read(path), path)
  local env = setmetatable({ tl = tl, te = te, create_schedule = te.create_schedule or schedule.create },
                           { __index = _G })
  local chunk = assert(loadstring(input, "@" .. path))
  setfenv(chunk, env)
  local s, args = chunk()
  local steps = s:steps()
  local lowered = tostring(tl.lower(s, args))
  local replay = s:fresh():apply_steps(steps)
  local relowered = tostring(tl.lower(replay, args))
  if replay:steps() ~= steps then error("replayed steps differ:\n" .. replay:steps()) end
  if relowered ~= lowered then error("the replayed schedule lowers differently:\n" .. relowered) end
  io.write("@@steps\n", steps, "\n@@lowered\n", lowered, "@@end\n")
  io.stdout:flush()
end

-- Runner mode: every file, each in a child process.
local function run_all()
  local update = os.getenv("TUNELUA_UPDATE_GOLDEN") == "1"
  local p = io.popen("ls " .. dir .. "/*.txt 2>/dev/null")
  local files = {}
  for f in p:lines() do files[#files + 1] = f end
  p:close()
  assert(#files > 0, "no golden files in " .. dir)

  local passed, failed = 0, 0
  for _, path in ipairs(files) do
    local text = read(path)
    local header, input, want_steps, want_lowered = sections(text, path)
    local pipe = io.popen(string.format("%s %s --one %s 2>&1", host.exe, arg[0], path))
    local out = pipe:read("*a")
    pipe:close()
    local steps, lowered = out:match("@@steps\n(.-)\n@@lowered\n(.-)@@end\n")
    if not steps then
      failed = failed + 1
      print(string.format("FAIL %s: the input did not run:\n%s", path, out))
    elseif update then
      local f = assert(io.open(path, "wb"))
      f:write(header, "--- input\n", input, "--- steps\n", steps, "\n--- lowered\n", lowered)
      f:close()
      passed = passed + 1
      print("updated " .. path)
    elseif steps .. "\n" ~= want_steps or lowered ~= want_lowered then
      failed = failed + 1
      print(string.format("FAIL %s\n--- expected steps\n%s--- got steps\n%s\n--- expected lowered\n%s--- got lowered\n%s",
                          path, want_steps, steps, want_lowered, lowered))
    else
      passed = passed + 1
    end
  end
  print(string.format("%d passed, %d failed", passed, failed))
  if failed > 0 then error(string.format("%d golden file(s) differ", failed), 0) end
end

if arg[1] == "--one" then run_one(arg[2]) else run_all() end
