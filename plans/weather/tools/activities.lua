-- activities.lua -- one tool per branch of the weather plan. Each reads only its own
-- branch (†state.sunny or †state.rainy), so the engine runs exactly one of them.
-- When the input gives a markerDir, each leaves a file named after itself there:
-- the specs use it to prove the untaken branch's tool never ran.
local obelus = require "obelus"

local function leave_marker(dir, name)
  if dir == obelus.null then return end
  local f = assert(io.open(dir .. "/" .. name .. ".ran", "w"))
  f:write(name, "\n")
  f:close()
end

local function activity(name, branch, idea)
  return {
    name = name,
    description = "Suggests " .. idea .. " on a " .. branch .. " day.",
    schema = {
      type = "object",
      properties = {
        weather = {
          type = "object",
          properties = { city = { type = "string" }, sky = { const = branch },
                         celsius = { type = "integer" } },
          required = { "city", "sky" },
        },
        markerDir = { type = { "string", "null" } },
      },
      required = { "weather", "markerDir" },
    },
    run = function(call)
      leave_marker(call.markerDir, name)
      obelus.sleep(10)
      return string.format("%s in %s, %d°C: %s", branch, call.weather.city,
                           call.weather.celsius, idea)
    end,
  }
end

return {
  activity("park", "sunny", "a picnic in the park"),
  activity("movie", "rainy", "a film at the cinema"),
}
