-- examples/daemon-tools/greet.lua -- a tool for the daemon example: greets someone
-- after a short wait (the wait lets plans dropped together run side by side).
local obelus = require "obelus"
return {
  name = "greet",
  description = "Says hello to someone.",
  schema = {
    type = "object",
    properties = { name = { type = "string", minLength = 1 } },
    required = { "name" },
  },
  run = function(call)
    obelus.sleep(50)
    return "Hello, " .. call.name .. "!"
  end,
}
