-- The AutoTVM record parser under mutation: valid log lines (current and legacy format) are
-- mutated at random (bytes flipped, deleted, duplicated, structural characters inserted, lines
-- cut, values swapped for other JSON types, nesting deepened) for a bounded number of rounds
-- with a fixed seed. Every mutant must either decode or be refused with a reason: record.decode
-- never raises, and a file of mutants loads with one warning per refused line, keeping the
-- lines that still decode. A bounded, reproducible fuzz run inside the suite (the tracker's and
-- the session's frame parsers have libFuzzer targets in tests/fuzz).
local record = require "tunelua.autotvm.record"
local file = require "tunelua.file"
local util = require "tests.lua.lib.util"

local seeds = {
  '{"input": ["llvm -mcpu=core-avx2", "conv2d_NCHWc.x86", [["TENSOR", [1, 64, 56, 56], "float32"], ' ..
    '["TENSOR", [64, 64, 3, 3], "float32"], [1, 1], [1, 1, 1, 1], [1, 1], "NCHW", "NCHW", "float32"], {}], ' ..
    '"config": {"index": 188, "code_hash": null, "entity": [["tile_ic", "sp", [-1, 64]], ' ..
    '["tile_oc", "sp", [-1, 32]], ["tile_ow", "sp", [-1, 7]], ["unroll_kw", "ot", true]]}, ' ..
    '"result": [[0.001, 0.0011], 0, 0.5, 1700000000.0], "version": 0.2, "tvm_version": "0.8.dev0"}',
  '{"input": ["opencl -device=mali", "dense.mali", [["TENSOR", [1, 512], "float32"], ' ..
    '["TENSOR", [1000, 512], "float32"], null, "float32"], {}], "config": {"index": 3, ' ..
    '"code_hash": null, "entity": [["tile_y", "sp", [-1, 1]], ["tile_x", "sp", [-1, 4]]]}, ' ..
    '"result": [[1000000000.0], 6, 10.2, 1700000001.5], "version": 0.2, "tvm_version": "0.8.dev0"}',
  '{"i": ["llvm", "topi_nn_dense", [["TENSOR", [4, 32], "float32"], ["TENSOR", [24, 32], "float32"]], ' ..
    '{}, ["dense", [4, 32, "float32"]], {"i": 1, "c": null, "e": [["tile_k", "sp", [-1, 8]]], ' ..
    '"t": "direct"}], "r": [[2e-05], 0, 0.1, 1600000000.0], "v": 0.1}',
}

local seed = 20261126
local function rand(n)   -- deterministic LCG: the same mutants on every run and machine
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end

local inserts = { "{", "}", "[", "]", ",", ":", '"', "\\", "null", "true", "-1", "1e999", "NaN",
                  '"\\u0000"', '"\\ud800"', "0.5", "[]", "{}", "\0", "\255", "  " }
local values = { "null", "true", "false", "0", "-7", "1e308", '"x"', "[]", "{}", "[[]]",
                 '[["TENSOR", "shape", 1]]', '{"a": 1}' }

local function mutate(s)
  for _ = 1, rand(4) do
    local n, i = #s, rand(#s)
    local op = rand(8)
    if op == 1 then                     -- flip a byte
      s = s:sub(1, i - 1) .. string.char(rand(256) - 1) .. s:sub(i + 1)
    elseif op == 2 then                 -- delete a run
      s = s:sub(1, i - 1) .. s:sub(i + rand(12))
    elseif op == 3 then                 -- duplicate a run
      local j = math.min(n, i + rand(40))
      s = s:sub(1, j) .. s:sub(i, j) .. s:sub(j + 1)
    elseif op == 4 then                 -- insert a structural token
      s = s:sub(1, i - 1) .. inserts[rand(#inserts)] .. s:sub(i)
    elseif op == 5 then                 -- cut the line (a torn write)
      s = s:sub(1, i)
    elseif op == 6 then                 -- replace a number or string with another JSON value
      local a, b = s:find('"[^"]*"', i)
      if not a then a, b = s:find("%-?%d+%.?%d*", i) end
      if a then s = s:sub(1, a - 1) .. values[rand(#values)] .. s:sub(b + 1) end
    elseif op == 7 then                 -- deepen the nesting around a value
      local d = rand(3) == 1 and 700 or rand(20)
      s = s:sub(1, i - 1) .. string.rep("[", d) .. "0" .. string.rep("]", d) .. s:sub(i)
    else                                -- swap two halves
      s = s:sub(i) .. s:sub(1, i - 1)
    end
    if #s == 0 then s = "{" end
  end
  return s
end

-- record.decode: a record or a reason, never an error
local decoded, refused = 0, 0
local mutants = {}
for round = 1, 6000 do
  local line = mutate(seeds[(round - 1) % #seeds + 1])
  local ok, inp, why = pcall(record.decode, line)
  assert(ok, string.format("record.decode raised on mutant %d: %s\n%s", round, tostring(inp), line))
  if inp then
    decoded = decoded + 1
    assert(type(inp.task_name) == "string" and type(inp.args) == "table" and type(inp.config) == "table",
           "a decoded mutant lacks its fields: " .. line)
    assert(type(why) == "table" and type(why.costs) == "table", "a decoded mutant lacks its result")
  else
    refused = refused + 1
    assert(type(why) == "string" and #why > 0, "a refused mutant has no reason: " .. line)
  end
  if round <= 1500 then mutants[#mutants + 1] = (line:gsub("\n", " ")) end
end
assert(decoded > 0 and refused > 0, string.format("mutation too weak or too strong: %d decoded, %d refused",
                                                  decoded, refused))

-- the same mutants as a log file, between two valid records: everything valid loads, every
-- other line warns once, nothing raises
local dir = util.tmpdir("record-fuzz")
local path = dir .. "/mutants.log"
local lines = { seeds[1] }
for _, m in ipairs(mutants) do lines[#lines + 1] = m end
lines[#lines + 1] = seeds[2]
file.write_all(path, table.concat(lines, "\n") .. "\n")
local warnings, seen = 0, {}
local ok, recs = pcall(record.load_from_file, path, { warn = function(msg)
  warnings = warnings + 1
  local ln = tonumber(msg:match(":(%d+): "))
  if ln then seen[ln] = true end
end })
assert(ok, "load_from_file raised: " .. tostring(recs))
assert(recs[1].inp.line == 1 and recs[1].inp.config.index == 188,
       "the first valid record was not kept")
assert(recs[#recs].inp.line == #lines and recs[#recs].inp.config.index == 3,
       string.format("the last valid record (line %d) was not kept: the last read is line %d", #lines,
                     recs[#recs].inp.line))
-- every line is accounted for: kept, warned about, or a legacy record (one warning for all)
for _, r in ipairs(recs) do seen[r.inp.line] = true end
for ln, l in ipairs(lines) do
  local inp = record.decode(l)
  assert(seen[ln] or (inp and inp.legacy), string.format("line %d was neither kept nor warned about", ln))
end
util.cleanup(dir)
print(string.format("test_record_fuzz: ok (%d mutants decoded, %d refused with a reason; file: %d records, %d warnings)",
                    decoded, refused, #recs, warnings))
