-- customerMessage.lua -- the follower of the refund: it reads
-- "†state.receipt || †state.error", whichever the refund wrote, and words a message
-- for the customer either way.
return {
  name = "customerMessage",
  description = "Writes the customer a message about their refund.",
  schema = {
    type = "object",
    properties = { orderId = { type = "string" }, outcome = { type = "object" } },
    required = { "orderId", "outcome" },
  },
  run = function(call)
    local o = call.outcome
    if o.error ~= nil then
      return string.format("We could not refund order %s (%s). Our team will contact you.",
                           call.orderId, o.error)
    end
    return string.format("Order %s: %.2f %s refunded (reference %s).", o.orderId,
                         o.refunded / 100, o.currency, o.reference)
  end,
}
