-- bench/peers/tools.lua -- obelus's side of `make bench-peers`: the same steps the peers
-- run (bench/peers/peers.mjs), as tools.
local obelus = require "obelus"

return {
  { name = "inc", schema = { type = "object" }, run = function(call) return (call.v or 0) + 1 end },
  { name = "val", schema = { type = "object" }, run = function(call)
      if call.ms then obelus.sleep(call.ms) end
      return call.i
    end },
  { name = "sum", schema = { type = "object" }, run = function(call)
      local s = 0
      for _, v in pairs(call.f) do s = s + v end
      return s
    end },
}
