-- plans/cluster/tools/score.lua -- a customer's health from orders and tickets.
return {
  name = "score",
  description = "Scores a customer: orders count up, tickets down.",
  schema = {
    type = "object",
    properties = { orders = { type = "object" }, tickets = { type = "object" } },
    required = { "orders", "tickets" },
  },
  run = function(call)
    local s = 50 + call.orders.count - 5 * call.tickets.count
    return { value = s, band = s >= 60 and "good" or s >= 40 and "fair" or "at risk" }
  end,
}
