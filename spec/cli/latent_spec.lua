-- latent_spec.lua -- tools without run are latent (plan-format §9): the latent handler set with
-- obelus.set_latent answers them; a latent call without _outputPath is a thought.
local cli = require "support.cli"
local cjson = require "cjson"

describe("latent tools", function()
  local marker = os.tmpname() .. ".thoughts"
  local handler = cli.tmpfile(string.format([[
    local obelus = require "obelus"
    obelus.set_latent(function(call, tool, ctx)
      obelus.sleep(5) -- a handler waits like any tool (an LLM client would)
      local f = assert(io.open(%q, "a"))
      f:write(ctx.id, " ", tool.name, "\n")
      f:close()
      return { answer = "latent answer to " .. tostring(call.question), by = tool.name }
    end)
  ]], marker), ".lua")

  it("answers a latent call through the handler and writes the result", function()
    local j = os.tmpname()
    local r = cli.run { "run", cli.tmpfile([[[
      {"_id":"ask","_tool":"latent_thing","question":"why","_outputPath":"†state.reply"},
      {"_id":"think","_tool":"latent_thing","question":"hmm"},
      {"_id":"after","_tool":"echo","value":"†state.reply.answer","_outputPath":"†state.echoed"}
    ]] .. "]", ".json"), "--tools", "spec/cli/tools", "--latent", handler, "--journal", j }
    assert.are.equal(0, r.code)
    local out = cjson.decode(r.out)
    assert.are.same({ answer = "latent answer to why", by = "latent_thing" }, out.reply)
    assert.are.equal("latent answer to why", out.echoed)
    -- the thought ran (and was awaited) but wrote nothing
    local ran = cli.slurp(marker)
    assert.matches("think latent_thing", ran, 1, true)
    assert.matches("ask latent_thing", ran, 1, true)
    local outputs = 0
    for line in io.lines(j) do
      local m = cjson.decode(line)
      if m._call then
        outputs = outputs + 1
        assert.are_not.equal("think", m._call._id)
      end
    end
    assert.are.equal(2, outputs)
  end)

  it("is a validation error (exit 2) without a handler", function()
    local r = cli.run { "check", cli.tmpfile('[{"_tool":"latent_thing"}]', ".json"), "--tools", "spec/cli/tools" }
    assert.are.equal(2, r.code)
    assert.matches("latent tool", r.err, 1, true)
  end)
end)
