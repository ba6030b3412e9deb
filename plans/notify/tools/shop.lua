-- shop.lua -- the awaited part of the notify plan: place an order, then invoice it.
-- Deterministic: the order id is derived from the item's name.
local obelus = require "obelus"

local PRICES = { book = 1800, lamp = 4500, mug = 900 } -- cents

return {
  {
    name = "placeOrder",
    description = "Places an order for one item.",
    schema = {
      type = "object",
      properties = { item = { enum = { "book", "lamp", "mug" } } },
      required = { "item" },
    },
    run = function(call)
      obelus.sleep(10)
      local id = "ORD-" .. call.item:upper()
      return { id = id, item = call.item, price = PRICES[call.item],
               confirmation = "order " .. id .. " confirmed: one " .. call.item }
    end,
  },
  {
    name = "invoice",
    description = "Issues the invoice of an order.",
    schema = {
      type = "object",
      properties = { order = { type = "object", required = { "id", "price" } } },
      required = { "order" },
    },
    run = function(call)
      obelus.sleep(10)
      return { order = call.order.id, total = call.order.price, currency = "EUR" }
    end,
  },
}
