-- fetchArticles.lua -- the source of the fan-out: a fixed list of three articles on
-- a topic (no network). The plan's summarize call runs once per item of the list
-- ("_each": "†state.articles"), each copy reading its item as †each.value.
local obelus = require "obelus"

local ARTICLES = {
  { title = "Ports reopen", words = 1200,
    body = "After the storm the harbour authority reopened all ports. Ferries run late today." },
  { title = "Rail strike ends", words = 800,
    body = "Unions and the operator signed a deal overnight. Trains return to the timetable tomorrow." },
  { title = "New bridge opens", words = 400,
    body = "The city opened its new cycling bridge. It links the old town to the station." },
}

return {
  name = "fetchArticles",
  description = "Returns the day's three articles on a topic.",
  schema = {
    type = "object",
    properties = { topic = { type = "string" } },
    required = { "topic" },
  },
  run = function(call)
    obelus.sleep(10)
    local list = obelus.array()
    for i, a in ipairs(ARTICLES) do
      list[i] = { title = call.topic .. ": " .. a.title, words = a.words, body = a.body }
    end
    return list
  end,
}
