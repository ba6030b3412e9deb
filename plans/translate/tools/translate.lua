-- translate.lua -- word-by-word translation from a small built-in dictionary (no
-- network, no model). Unknown words are kept as they are. The plan's state schema,
-- not this tool, bounds what may be written: a translation longer than
-- translations' maxLength is refused by the engine as a structural error (plan-format §1, 5).
local obelus = require "obelus"

local DICTIONARY = {
  fr = { good = "bon", morning = "matin", evening = "soir", night = "nuit",
         thank = "merci", you = "vous", my = "mon", friend = "ami", hello = "bonjour",
         very = "très", much = "beaucoup", the = "le", cat = "chat", sleeps = "dort" },
  de = { good = "guten", morning = "Morgen", evening = "Abend", night = "Nacht",
         thank = "danke", you = "dir", my = "mein", friend = "Freund", hello = "hallo",
         very = "sehr", much = "viel", the = "die", cat = "Katze", sleeps = "schläft" },
  es = { good = "buenos", morning = "días", evening = "tardes", night = "noches",
         thank = "gracias", you = "usted", my = "mi", friend = "amigo", hello = "hola",
         very = "muy", much = "mucho", the = "el", cat = "gato", sleeps = "duerme" },
}

return {
  name = "translate",
  description = "Translates a short English text into fr, de or es, word by word.",
  schema = {
    type = "object",
    properties = {
      text = { type = "string" },
      lang = { enum = { "fr", "de", "es" } },
      _outputPath = { type = "string", pattern = "^†state\\.translations\\." },
    },
    required = { "text", "lang" },
  },
  run = function(call)
    local words = DICTIONARY[call.lang]
    local out = {}
    for word in call.text:gmatch("%S+") do
      out[#out + 1] = words[word:lower()] or word
    end
    obelus.sleep(5 * #out) -- longer texts take longer; the three calls overlap
    return table.concat(out, " ")
  end,
}
