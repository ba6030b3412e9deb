-- refund.lua -- pays an order back, from a fixed table of orders (no network).
-- Its _outputPath is "†state.receipt || †state.error": a normal return lands on the
-- first alternative; a Lua error is routed by the engine to the LAST alternative as
-- {"error": <message>, "tool": "refund", "call": <call id>} and counts as handled
-- (plan-format §3), so the run still exits 0 and the follower explains the failure.
local obelus = require "obelus"

-- What each order was paid, in cents.
local ORDERS = {
  ["A-100"] = { paid = 4999, currency = "EUR" },
  ["A-101"] = { paid = 1250, currency = "EUR" },
}

return {
  name = "refund",
  description = "Refunds part or all of an order; fails when the order is unknown "
    .. "or the amount exceeds what was paid.",
  schema = {
    type = "object",
    properties = {
      orderId = { type = "string" },
      amount = { type = "integer", minimum = 1, description = "in cents" },
      _outputPath = { const = "†state.receipt || †state.error" },
    },
    required = { "orderId", "amount" },
  },
  run = function(call)
    obelus.sleep(15) -- a stand-in for the payment provider
    local order = ORDERS[call.orderId]
    -- level 0: the message carries no file:line, so it reads the same however the
    -- tools were loaded
    if not order then error("unknown order " .. call.orderId, 0) end
    if call.amount > order.paid then
      error(string.format("refund of %d exceeds the %d paid for %s", call.amount,
                          order.paid, call.orderId), 0)
    end
    return { orderId = call.orderId, refunded = call.amount, currency = order.currency,
             reference = "RF-" .. call.orderId .. "-" .. call.amount }
  end,
}
