-- examples/game_loop.lua -- the NPC tools of the game-loop host (examples/game_loop.c)
-- written in Lua. Each waits with obelus.sleep, so a frame only pays for resuming them;
-- the host adds `craft`, a tool in C that completes from a libuv timer.
local obelus = require "obelus"

return {
  {
    name = "patrol",
    description = "Walks an NPC along its waypoints, one every stepMs; returns where it ended.",
    schema = {
      type = "object",
      properties = {
        npc = { type = "string" },
        waypoints = { type = "array", items = { type = "string" }, minItems = 1 },
        stepMs = { type = "integer", minimum = 1 },
      },
      required = { "npc", "waypoints", "stepMs" },
    },
    run = function(call)
      for _ = 1, #call.waypoints do obelus.sleep(call.stepMs) end
      return { npc = call.npc, at = call.waypoints[#call.waypoints], steps = #call.waypoints }
    end,
  },
  {
    name = "haggle",
    description = "A buyer haggles for goods where it stands; takes a while.",
    schema = {
      type = "object",
      properties = {
        buyer = { type = "object" },
        goods = { type = "object" },
        rounds = { type = "integer", minimum = 1 },
      },
      required = { "buyer", "goods", "rounds" },
    },
    run = function(call)
      local price = 100
      for _ = 1, call.rounds do
        obelus.sleep(20)
        price = price - 10
      end
      return string.format("%s buys the %s's %s at the %s for %d gold", call.buyer.npc,
        call.goods.npc, call.goods.item, call.buyer.at, price)
    end,
  },
  {
    name = "feast",
    description = "The village gathers once the day's work is done.",
    schema = { type = "object" },
    run = function(call)
      obelus.sleep(30)
      local guests = {}
      for _, g in ipairs(call.guests) do guests[#guests + 1] = g.npc end
      table.sort(guests)
      return { bread = call.bread.item, deal = call.deal, guests = obelus.array(guests),
               crowd = #call.crowd }
    end,
  },
}
