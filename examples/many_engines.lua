-- examples/many_engines.lua -- the Lua tool of examples/many_engines.c: doubles a
-- number after a short sleep (so every engine's timer and coroutines are exercised).
local obelus = require "obelus"
return {
  name = "double",
  description = "Doubles x, a millisecond later.",
  schema = { type = "object", properties = { x = { type = "integer" } }, required = { "x" } },
  run = function(call)
    obelus.sleep(1)
    return call.x * 2
  end,
}
