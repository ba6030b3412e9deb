-- planner.lua -- a scripted planner for `obelus loop`: it plans a payment, reads
-- the errors of the last step from the log, and replans with the next card,
-- as an LLM planner would, until a receipt exists.
return function(ctx)
  local receipt = ctx:resolve("†state.receipt")
  if receipt then
    return { output = { receipt = receipt, steps = ctx.step - 1 } }
  end
  local declined = {}
  for _, m in ipairs(ctx.messages) do
    if m.kind == "error" and m.data.call and m.data.call._tool == "charge" then
      declined[m.data.call.card] = m.data.error
    end
  end
  for _, card in ipairs(ctx:resolve("†input.cards")) do
    if not declined[card] then
      return {
        calls = {
          { _tool = "charge", card = card, amount = "†input.amount", _outputPath = "†state.payment" },
          { _tool = "receipt", payment = "†state.payment", _outputPath = "†state.receipt" },
        },
      }
    end
  end
  return { output = { error = "every card was declined", declined = declined } }
end
