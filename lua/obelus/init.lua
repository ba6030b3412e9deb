-- obelus/init.lua -- the `obelus` module that tools and specs require from stock Lua:
-- JSON values through the C bridge (obelus.core) and the message log.
local core = require "obelus.core"

local obelus = {
  null = core.null,         -- JSON null: the light userdata NULL, same as cjson.null
  array = core.array,       -- array(t): marks t (or a new table) as a JSON array, returns it
  array_mt = core.array_mt, -- the metatable every JSON array carries
  decode = core.decode,     -- decode(text): JSON text -> Lua value
  encode = core.encode,     -- encode(value [, pretty]): Lua value -> JSON text
  log = core.log,           -- log(): a new, empty message log
}

-- Whether t is a JSON array (a table carrying obelus.array_mt).
function obelus.is_array(t)
  return type(t) == "table" and getmetatable(t) == core.array_mt
end

return obelus
