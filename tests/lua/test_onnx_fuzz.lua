-- The ONNX loader and importer on malformed files: truncated copies (every length) and
-- copies with random bits flipped of small models with initializers (libonnx-testdata's
-- pytorch-converted models), each through relay.frontend.from_onnx from a file and from
-- bytes. Nothing may crash; every failure must be a named error ("from_onnx: ..." for a
-- file that does not load, "ONNX node/input ..." for a graph that does not convert). Prints
-- the counts. Seeded: the same mutations every run.
local onnx = require "tunelua.onnx"
local relay = require "tunelua.relay"
local util = require "tests.lua.lib.util"
local file = require "tunelua.file"

local base = onnx.testdata_dir()
if not base then
  print("test_onnx_fuzz: no ONNX test data (libonnx-testdata); nothing to run")
  return
end
base = base:gsub("/node$", "/pytorch-converted")
local MODELS = { "test_Conv2d", "test_BatchNorm2d_eval", "test_Linear", "test_MaxPool2d", "test_PReLU_2d" }

local dir = util.tmpdir("test_onnx_fuzz")
local counts = { ok = 0, named = 0 }
local function try(bytes, as_file, what)
  local ok, err
  if as_file then
    file.write_all(dir .. "/m.onnx", bytes)
    ok, err = pcall(relay.frontend.from_onnx, dir .. "/m.onnx")
  else
    ok, err = pcall(relay.frontend.from_onnx, bytes)
  end
  if ok then counts.ok = counts.ok + 1; return end
  err = tostring(err)
  if not (err:find("^from_onnx: ") or err:find("^ONNX node ") or err:find("^ONNX input ")) then
    error(string.format("%s: an error that names nothing: %s", what, err), 0)
  end
  counts.named = counts.named + 1
  counts[err:match("malformed ModelProto: (%a+)") or err:match("^(from_onnx): ") or "ONNX"] =
    (counts[err:match("malformed ModelProto: (%a+)") or err:match("^(from_onnx): ") or "ONNX"] or 0) + 1
end

local ok, err = pcall(function()
  local seed = 12345
  local function rand(n)   -- a small LCG: the same mutations on every machine
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n
  end
  local used = 0
  for _, name in ipairs(MODELS) do
    local path = base .. "/" .. name .. "/model.onnx"
    local f = io.open(path, "rb")
    if f then
      local bytes = f:read("*a")
      f:close()
      used = used + 1
      relay.frontend.from_onnx(path)   -- the intact model imports
      for len = 0, #bytes - 1 do try(bytes:sub(1, len), len % 16 == 0, name .. " truncated to " .. len) end
      for k = 1, 600 do
        local b = { bytes:byte(1, -1) }
        for _ = 1, 1 + rand(3) do
          local i = 1 + rand(#b)
          b[i] = bit.bxor(b[i], bit.lshift(1, rand(8)))
        end
        local s = string.char(unpack(b))
        try(s, k % 25 == 0, name .. " with bits flipped (copy " .. k .. ")")
      end
    end
  end
  assert(used >= 3, "the pytorch-converted models of libonnx-testdata are there")
end)
util.cleanup(dir)
if not ok then error(err, 0) end
local parts = {}
for k, v in pairs(counts) do parts[#parts + 1] = k .. " " .. v end
table.sort(parts)
print("test_onnx_fuzz: " .. table.concat(parts, ", "))
assert(counts.named > 1000, "malformed copies are refused with named errors")
print("test_onnx_fuzz: ok")
