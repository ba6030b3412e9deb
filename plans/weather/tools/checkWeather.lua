-- checkWeather.lua -- looks a city up in a fixed table (no network) and branches:
-- the report goes to †state.sunny or to †state.rainy, the tool choosing with
-- obelus.branch (plan-format §3, 9). Only the readers of the branch taken run; the other
-- reader is skipped, as a branch not taken.
local obelus = require "obelus"

-- Deterministic weather: a city not listed is rainy (take an umbrella when unsure).
local WEATHER = {
  Lisbon = { sky = "sunny", celsius = 24 },
  Madrid = { sky = "sunny", celsius = 27 },
  Athens = { sky = "sunny", celsius = 29 },
  London = { sky = "rainy", celsius = 12 },
  Bergen = { sky = "rainy", celsius = 9 },
}

return {
  name = "checkWeather",
  description = "Reports today's weather in a city, on the sunny or the rainy branch.",
  schema = {
    type = "object",
    properties = {
      city = { type = "string", minLength = 1 },
      _outputPath = { const = "†state.sunny || †state.rainy" },
    },
    required = { "city" },
  },
  run = function(call)
    obelus.sleep(20) -- a stand-in for a weather service
    local w = WEATHER[call.city] or { sky = "rainy", celsius = 14 }
    local report = { city = call.city, sky = w.sky, celsius = w.celsius }
    return obelus.branch(w.sky == "sunny" and "†state.sunny" or "†state.rainy", report)
  end,
}
