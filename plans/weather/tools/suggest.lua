-- suggest.lua -- the join of the weather plan: it reads
-- †state.suggestion.park || †state.suggestion.movie, so it waits for both activities
-- to settle, and runs with whichever one wrote (the other was skipped).
return {
  name = "suggest",
  description = "Turns the day's activity into one suggestion.",
  schema = {
    type = "object",
    properties = { idea = { type = "string" } },
    required = { "idea" },
  },
  run = function(call)
    return "Today: " .. call.idea .. "."
  end,
}
