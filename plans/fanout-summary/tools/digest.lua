-- digest.lua -- the join of the fan-out: it reads †state.summaries, which every
-- summarize call writes, so it starts only when all three have settled.
return {
  name = "digest",
  description = "Joins the summaries into a numbered digest.",
  schema = {
    type = "object",
    properties = { summaries = { type = "array", items = { type = "string" } } },
    required = { "summaries" },
  },
  run = function(call)
    local lines = {}
    for i, s in ipairs(call.summaries) do lines[i] = i .. ". " .. s end
    return { count = #call.summaries, text = table.concat(lines, "\n") }
  end,
}
