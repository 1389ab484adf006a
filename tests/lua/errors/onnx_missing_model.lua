-- expect: tunelua: tests/lua/errors/onnx_missing_model.lua:5: cannot open '/nonexistent/model.onnx': No such file or directory
local tl = require "tunelua"

-- a model file that cannot be read is reported at the caller's line
local m = tl.onnx.load_model("/nonexistent/model.onnx")
