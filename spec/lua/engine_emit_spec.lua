-- engine_emit_spec.lua -- a tool's obelus.emit through the Lua module (issue 28): the
-- run's on_event gets {event = "progress", call, tool, attempt, data = the value as Lua
-- data}, in order and across a retry; every event of a call carries its attempt, and a
-- done event the value written.
local obelus = require "obelus"
local fs = require "support.fs"

local TOOLS = [[
local obelus = require "obelus"
return {
  { name = "steps", run = function(call, ctx)
      for i = 1, call.n do obelus.emit({ step = i, tags = { "a", "b" } }) end
      if ctx.attempt == 1 then error("first attempt fails") end
      return call.n
    end },
}
]]

describe("obelus.emit in the Lua module", function()
  it("reaches on_event with the value and the attempt, in order, across a retry", function()
    local dir = fs.tmpdir()
    fs.write(dir .. "/tools.lua", TOOLS)
    local engine = obelus.engine {}
    engine:load_tools(dir .. "/tools.lua")
    local seen = {}
    local run = engine:run({ plan = { {
      _id = "s", _tool = "steps", n = 2, _retry = { attempts = 2, delay_ms = 1 },
      _outputPath = "†state.s" } } }, {
      on_event = function(ev)
        if ev.event == "progress" then
          assert.are.equal("s", ev.call)
          assert.are.equal("steps", ev.tool)
          assert.are.same({ "a", "b" }, ev.data.tags)
          seen[#seen + 1] = ("%d:%d"):format(ev.attempt, ev.data.step)
        elseif ev.event == "done" then
          assert.are.equal(2, ev.value) -- what it wrote
          assert.is_nil(ev.handled)
          seen[#seen + 1] = ("%s@%d"):format(ev.event, ev.attempt)
        elseif ev.event == "started" then
          seen[#seen + 1] = ("%s@%d"):format(ev.event, ev.attempt)
        end
      end,
    })
    assert.are.equal(0, run:wait())
    assert.are.same({ "started@1", "1:1", "1:2", "2:1", "2:2", "done@2" }, seen)
    assert.are.same({ s = 2 }, run:output())
    run:close()
    engine:close()
    fs.rmtree(dir)
  end)
end)
