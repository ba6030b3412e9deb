-- updateUserStatus.lua -- the seeds' worked example (Output chapter): sets a user's
-- status. The call writes only "inactive" to †data.user.status; the engine composes it
-- with the context's {"name":"Alex","status":"active"}, so †data.user reads the whole
-- user with the new status (plan-format §2, "newest wins").
local obelus = require "obelus"

local STATUSES = { "active", "inactive", "suspended" }

return {
  name = "updateUserStatus",
  description = "Sets the status of the current user; returns the new status.",
  schema = {
    type = "object",
    properties = {
      newStatus = { enum = STATUSES },
      -- the seeds' "dynamic path" schema: any reference, the plan picks where it lands
      _outputPath = { type = "string", pattern = "^†" },
    },
    required = { "newStatus" },
  },
  run = function(call)
    obelus.sleep(10) -- a stand-in for the round trip to a user service
    return call.newStatus
  end,
}
