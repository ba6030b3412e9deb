-- payments.lua -- a card charge that can be declined, and a receipt for a payment.
-- Deterministic: a card whose name ends in "-declined" is declined.
local obelus = require "obelus"

return {
  {
    name = "charge",
    description = "Charges an amount to a card; raises an error when the card is declined.",
    schema = {
      type = "object",
      properties = { card = { type = "string" }, amount = { type = "number", exclusiveMinimum = 0 } },
      required = { "card", "amount" },
    },
    run = function(call)
      obelus.sleep(5) -- a bank takes a moment
      if call.card:match("%-declined$") then
        error("card " .. call.card .. " was declined", 0)
      end
      return { card = call.card, amount = call.amount, authorization = "AUTH-" .. #call.card }
    end,
  },
  {
    name = "receipt",
    description = "Writes the receipt of a payment.",
    schema = { type = "object", properties = { payment = { type = "object" } }, required = { "payment" } },
    run = function(call)
      local p = call.payment
      return string.format("Paid %s with %s (%s)", p.amount, p.card, p.authorization)
    end,
  },
}
