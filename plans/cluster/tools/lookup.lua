-- plans/cluster/tools/lookup.lua -- stands in for a CRM's API: 150 to 450 ms per call,
-- a count derived from the customer's name (the same answer wherever it runs).
local obelus = require "obelus"

return {
  name = "lookup",
  description = "Counts a customer's orders or support tickets.",
  schema = {
    type = "object",
    properties = { customer = { type = "string" }, what = { enum = { "orders", "tickets" } } },
    required = { "customer", "what" },
  },
  run = function(call)
    local n = 0
    for c in (call.customer .. call.what):gmatch(".") do n = (n * 31 + c:byte()) % 1000 end
    obelus.sleep(150 + n % 300)
    return { count = n % (call.what == "orders" and 40 or 7) }
  end,
}
