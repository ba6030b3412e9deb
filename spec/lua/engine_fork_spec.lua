-- engine_fork_spec.lua -- engine:fork(journal, opts) from stock Lua (issue 28): a run with
-- a journal, then forked from a call with a value changed (opts.set) and with a new
-- input (opts.input): the fork's output has the change, only the readers of what changed
-- and their dependants ran again (tools append their tag to a marker file), the source
-- journal is untouched; bad points and options raise.
local obelus = require "obelus"
local fs = require "support.fs"

local write, slurp = fs.write, fs.slurp

local TOOLS = [[
return {
  { name = "mark", run = function(c)
      local f = assert(io.open(c.mark, "a")); f:write(c.tag, "\n"); f:close()
      return c.x + 1
    end },
}
]]

local dir, tools, marker

local function plan()
  local function call(id, x)
    return { _id = id, _tool = "mark", tag = id, x = x, mark = marker, _outputPath = "†state." .. id }
  end
  return { plan = { call("a", "†input.n"), call("b", "†state.a"), call("z", 10) },
           output = { b = "†state.b", z = "†state.z" } }
end

local function marks()
  local t = {}
  for tag in slurp(marker):gmatch("[^\n]+") do t[#t + 1] = tag end
  table.sort(t)
  return t
end

setup(function()
  dir = fs.tmpdir()
  tools = dir .. "/tools.lua"
  marker = dir .. "/marker"
  write(tools, TOOLS)
end)

teardown(function()
  fs.rmtree(dir)
  collectgarbage()
  collectgarbage()
end)

describe("engine:fork", function()
  local engine
  before_each(function() engine = obelus.engine { tools = tools } end)
  after_each(function() engine:close() end)

  it("runs from a call with a value changed, keeping the rest", function()
    local j, f = dir .. "/run.jsonl", dir .. "/fork.jsonl"
    local run = engine:run(plan(), { journal = j, input = { n = 1 } })
    assert.are.equal(0, run:wait())
    assert.are.same({ b = 3, z = 11 }, run:output())
    local before = slurp(j)
    os.remove(marker)
    local fork = engine:fork(j, { journal = f, from = "b", set = { ["†state.a"] = 100 } })
    assert.are.equal(0, fork:wait())
    assert.are.same({ b = 101, z = 11 }, fork:output())
    assert.are.same({ "b" }, marks())
    assert.are.equal(before, slurp(j))
    assert.truthy(slurp(f):find('{"journal":"fork","source":"' .. j .. '","from":"b"}', 1, true))
  end)

  it("takes a new input: its readers run again", function()
    local j, f = dir .. "/run2.jsonl", dir .. "/fork2.jsonl"
    assert.are.equal(0, engine:run(plan(), { journal = j, input = { n = 1 } }):wait())
    os.remove(marker)
    local fork = engine:fork(j, { journal = f, at = 2, input = { n = 5 } })
    assert.are.equal(0, fork:wait())
    assert.are.same({ b = 7, z = 11 }, fork:output())
    assert.are.same({ "a", "b", "z" }, marks()) -- at 2: nothing had completed
  end)

  it("raises for a bad point or option", function()
    local j = dir .. "/run3.jsonl"
    assert.are.equal(0, engine:run(plan(), { journal = j, input = { n = 1 } }):wait())
    assert.has_error(function() engine:fork(j, { journal = dir .. "/x.jsonl", from = "nope" }) end)
    assert.has_error(function() engine:fork(j, { from = "b" }) end)
    assert.has_error(function()
      engine:fork(j, { journal = dir .. "/y.jsonl", from = "b", set = { nope = 1 } })
    end)
  end)
end)
