-- expect: tunelua: tests/lua/errors/quantize_qconfig.lua:5: quantize.qconfig: calibrate_mode must be "global_scale", got kl_divergence
local relay = require "tunelua.relay"

-- only the global-scale calibration is built
relay.quantize.qconfig { global_scale = 8.0, calibrate_mode = "kl_divergence" }
