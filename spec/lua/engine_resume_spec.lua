-- engine_resume_spec.lua -- engine:resume(journal, opts) from stock Lua: a run with a
-- journal killed mid-run (a child lua5.4 SIGKILLs itself inside a tool, as a crash
-- would) is taken up and ends as the uninterrupted run did, without running again the
-- calls that had completed (tools append their tag to a marker file); a journal of a
-- run that ended runs nothing; a cancelled run goes on; a changed tool file is refused
-- unless force; options and files that are not for it are refused.
local obelus = require "obelus"
local uv = require "luv"
local fs = require "support.fs"

local encode, decode = obelus.encode, obelus.decode

local write, slurp, fails = fs.write, fs.slurp, fs.fails

local function lines(path)
  local t = {}
  for line in slurp(path):gmatch("[^\n]+") do t[#t + 1] = line end
  return t
end

-- Each tool appends its tag to the marker file when it does its work; fragile
-- kills the process first when OBELUS_CRASH is set (the child's environment).
local TOOLS = [[
local obelus = require "obelus"
local uv = obelus.uv
local function mark(c) local f = assert(io.open(c.mark, "a")); f:write(c.tag, "\n"); f:close() end
return {
  { name = "step", run = function(c) mark(c); return c.x + 1 end },
  { name = "slow", run = function(c) mark(c); obelus.sleep(c.ms); return c.x * 10 end },
  { name = "fragile", run = function(c)
      if os.getenv("OBELUS_CRASH") then uv.kill(uv.os_getpid(), "sigkill") end
      mark(c)
      return c.x + 100
    end },
  { name = "boom", run = function(c) mark(c); error("boom") end },
}
]]

local CHILD = [[
package.cpath = "lib/?.so;" .. package.cpath
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
local obelus = require "obelus"
local tools, plan, journal = ...
local engine = obelus.engine { tools = tools }
engine:run(plan, { journal = journal }):wait()
os.exit(3) -- not reached: fragile kills the process
]]

local dir, tools, marker, journal

-- a -> b (sleeps) -> c (the crash) -> d; e on its own
local function plan(ms)
  local function call(id, tool, x, extra)
    local t = { _id = id, _tool = tool, x = x, tag = id, mark = marker, _outputPath = "†state." .. id }
    for k, v in pairs(extra or {}) do t[k] = v end
    return t
  end
  return {
    context = { { type = "input", data = { n = 1 } } },
    plan = {
      call("a", "step", "†input.n"),
      call("b", "slow", "†state.a", { ms = ms }),
      call("c", "fragile", "†state.b"),
      call("d", "step", "†state.c"),
      call("e", "step", 41),
    },
    output = { a = "†state.a", b = "†state.b", c = "†state.c", d = "†state.d", e = "†state.e" },
  }
end

local EXPECTED = { a = 2, b = 20, c = 120, d = 121, e = 42 }

-- How many times each tag's tool did its work.
local function marks()
  local n = {}
  for _, tag in ipairs(lines(marker)) do n[tag] = (n[tag] or 0) + 1 end
  return n
end

-- A journal of the plan as a crash leaves it: a child process runs it and dies in c.
local function crashed_journal()
  os.remove(marker)
  os.remove(journal)
  local plan_file = dir .. "/plan.json"
  write(plan_file, encode(plan(5)))
  local child = dir .. "/child.lua"
  write(child, CHILD)
  local ok, how, code = os.execute(string.format("OBELUS_CRASH=1 lua5.4 %s %s %s %s 2>/dev/null",
    child, tools, plan_file, journal))
  assert.is_falsy(ok)
  assert.is_true((how == "signal" and code == 9) or (how == "exit" and code == 137))
  assert.are.same({ a = 1, b = 1, e = 1 }, marks())
  local text = slurp(journal)
  assert.truthy(text:find('{"journal":"start","id":"c"', 1, true))
  assert.falsy(text:find('{"journal":"end"', 1, true))
end

setup(function()
  dir = fs.tmpdir()
  tools = dir .. "/tools.lua"
  marker = dir .. "/marker"
  journal = dir .. "/run.jsonl"
  write(tools, TOOLS)
end)

-- a journal is never truncated (issue 26): each test starts without one
before_each(function()
  if journal then os.remove(journal) end
end)

teardown(function()
  fs.rmtree(dir)
  collectgarbage()
  collectgarbage()
end)

describe("engine:resume", function()
  local engine
  before_each(function()
    write(tools, TOOLS)
    engine = obelus.engine { tools = tools }
  end)
  after_each(function() engine:close() end)

  it("takes up a killed run: the uninterrupted run's status and output, completed calls not run again", function()
    os.remove(marker)
    local whole = engine:run(plan(5))
    assert.are.equal(0, whole:wait())
    assert.are.same(EXPECTED, whole:output())

    crashed_journal()
    local done, events = 0, {}
    local run = engine:resume(journal, {
      on_done = function(r) done = done + 1; assert.are.equal(0, r:status()) end,
      on_event = function(ev) events[#events + 1] = ev.event .. " " .. (ev.call or "") end,
    })
    assert.are.equal(0, run:wait())
    assert.are.equal(1, done)
    assert.are.same(EXPECTED, run:output())
    assert.are.equal(#whole:messages(), #run:messages())
    -- a, b, e settled before the crash; c was in flight: it and d run now
    assert.are.same({ a = 1, b = 1, e = 1, c = 1, d = 1 }, marks())
    assert.truthy(table.concat(events, ","):find("done c", 1, true))
    assert.falsy(table.concat(events, ","):find("started a", 1, true))
    run:close() -- the journal closed with its run
    local j = lines(journal)
    assert.are.equal('{"journal":"end","exit":0}', j[#j])
    assert.truthy(slurp(journal):find('{"journal":"resume"}', 1, true))
  end)

  it("finishes a journal of a run that ended at once, with its status and output, running nothing", function()
    os.remove(marker)
    local run = engine:run(plan(5), { journal = journal })
    assert.are.equal(0, run:wait())
    run:close()
    local j = lines(journal)
    assert.are.equal('{"journal":"end","exit":0}', j[#j])
    local size = #slurp(journal)
    local again = engine:resume(journal)
    assert.are.equal(0, again:wait())
    assert.are.same(EXPECTED, again:output())
    again:close()
    assert.are.same({ a = 1, b = 1, c = 1, d = 1, e = 1 }, marks())
    assert.are.equal(size, #slurp(journal))

    -- a run that failed: its status 1 again
    local failing = engine:run({ plan = { { _id = "z", _tool = "boom", tag = "z", mark = marker,
      _outputPath = "†state.z" } } }, { journal = journal, overwrite = true })
    assert.are.equal(1, failing:wait())
    failing:close()
    local resumed = engine:resume(journal)
    assert.are.equal(1, resumed:wait())
    assert.are.equal(1, marks().z)
    assert.matches("obelus.run %(.*: failed%)", tostring(resumed))
  end)

  it("takes up a cancelled run where it stopped", function()
    os.remove(marker)
    local run = engine:run(plan(400), { journal = journal })
    local t = uv.new_timer()
    t:start(20, 0, function() run:cancel(); t:close() end)
    uv.run()
    assert.are.same({ nil, "cancelled" }, { run:status() })
    run:close()
    assert.falsy(slurp(journal):find('{"journal":"end"', 1, true))
    local again = engine:resume(journal)
    assert.are.equal(0, again:wait())
    assert.are.same(EXPECTED, again:output())
    again:close()
    assert.are.same({ a = 1, e = 1, b = 2, c = 1, d = 1 }, marks()) -- b had started: again
  end)

  it("refuses a journal whose tool file changed, unless force = true", function()
    crashed_journal()
    local size = #slurp(journal)
    engine:close()
    write(tools, TOOLS .. "-- changed since the run\n")
    engine = obelus.engine { tools = tools }
    local err = fails(engine.resume, engine, journal)
    assert.matches("engine:resume: " .. journal .. ": the tool file .*tools.lua changed since the run", err)
    assert.matches("force = true", err, 1, true)
    assert.are.equal(size, #slurp(journal))
    assert.are.same({ a = 1, b = 1, e = 1 }, marks())
    local run = engine:resume(journal, { force = true, fsync = "always" })
    assert.are.equal(0, run:wait())
    assert.are.same(EXPECTED, run:output())
    run:close()
    assert.are.same({ a = 1, b = 1, e = 1, c = 1, d = 1 }, marks())
  end)

  it("refuses options that are not its own, files that are not journals, and obelus loop's", function()
    assert.matches('"input" is the run\'s', fails(engine.resume, engine, journal, { input = {} }), 1, true)
    assert.matches('"journal" is the run\'s', fails(engine.resume, engine, journal, { journal = "x" }), 1, true)
    assert.matches("unknown option forse", fails(engine.resume, engine, journal, { forse = true }), 1, true)
    assert.matches('"fsync" is never, batch or always', fails(engine.resume, engine, journal, { fsync = "x" }), 1, true)
    assert.matches("unknown option force", fails(engine.run, engine, plan(5), { force = true }), 1, true)
    assert.matches("engine:resume: " .. dir .. "/none.jsonl", fails(engine.resume, engine, dir .. "/none.jsonl"), 1, true)
    write(dir .. "/not.jsonl", '{"type":"data","kind":"state","data":{}}\n')
    assert.matches("not a journal", fails(engine.resume, engine, dir .. "/not.jsonl"), 1, true)
    write(dir .. "/loop.jsonl", '{"type":"plan","plan":[],"file":"p.json"}\n' ..
      '{"journal":"run","tools":[],"loop":{"planner":{"file":"planner.lua"},"max_steps":3}}\n')
    assert.matches("resume it with `obelus resume", fails(engine.resume, engine, dir .. "/loop.jsonl"), 1, true)
    -- the plan checked against this engine's tools: every problem, nothing ran
    local run = engine:run(plan(5), { journal = journal })
    run:wait()
    run:close()
    local bare = obelus.engine()
    assert.matches("problems, nothing ran", fails(bare.resume, bare, journal), 1, true)
    bare:close()
    local closed = obelus.engine { tools = tools }
    closed:close()
    assert.matches("the engine is closed", fails(closed.resume, closed, journal), 1, true)
    assert.is_table(decode(lines(journal)[1]).plan)
  end)
end)
