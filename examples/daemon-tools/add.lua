-- examples/daemon-tools/add.lua -- a tool for the daemon example: adds numbers.
return {
  name = "add",
  description = "Adds a list of numbers.",
  schema = {
    type = "object",
    properties = { numbers = { type = "array", items = { type = "number" } } },
    required = { "numbers" },
  },
  run = function(call)
    local total = 0
    for _, x in ipairs(call.numbers) do total = total + x end
    return total
  end,
}
