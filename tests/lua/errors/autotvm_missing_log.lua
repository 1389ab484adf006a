-- expect: tunelua: tests/lua/errors/autotvm_missing_log.lua:4: record.load_from_file: cannot open /nonexistent/tuning.log: No such file or directory
local autotvm = require "tunelua.autotvm"

autotvm.record.load_from_file("/nonexistent/tuning.log")
