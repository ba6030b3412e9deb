-- summarize.lua -- "summarises" one article as its title and first sentence. The
-- plan's three copies (one per article, _each) run concurrently; each pretends to need
-- time in proportion to the article's length (words / 10 ms), so they finish shortest
-- first, while their results are gathered in the list's order at †state.summaries.
local obelus = require "obelus"

return {
  name = "summarize",
  description = "Summarises one article in one line.",
  schema = {
    type = "object",
    properties = {
      article = {
        type = "object",
        properties = { title = { type = "string" }, words = { type = "integer" },
                       body = { type = "string" } },
        required = { "title", "words", "body" },
      },
    },
    required = { "article" },
  },
  run = function(call)
    local a = call.article
    obelus.sleep(a.words // 10)
    local first = a.body:match("^(.-%.)") or a.body
    return a.title .. " -- " .. first
  end,
}
