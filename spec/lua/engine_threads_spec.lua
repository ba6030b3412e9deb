-- engine_threads_spec.lua -- engine:run(plan, {threads = N}) from stock Lua: a plan's
-- instances over N engines on N threads, with the output, status, events, journal and
-- on_done one engine gives; tool globals per engine; cancel and close mid-run.
local obelus = require "obelus"
local uv = require "luv"
local fs = require "support.fs"

local TOOLS = [[
local obelus = require "obelus"
local n = 0
return {
  { name = "count", run = function() n = n + 1; return n end },
  { name = "twice", run = function(call) obelus.sleep(call.ms or 0); return call.x * 2 end },
}
]]

local dir, tools

setup(function()
  dir = fs.tmpdir()
  tools = dir .. "/tools.lua"
  fs.write(tools, TOOLS)
end)

teardown(function()
  fs.rmtree(dir)
  collectgarbage()
  collectgarbage()
end)

local function plan(n, calls)
  local ids = {}
  for i = 1, n do ids[i] = "i" .. i end
  return { instances = ids, plan = calls }
end

local function lines(path)
  local t = {}
  for l in io.lines(path) do if l:sub(1, 1) == "{" then t[#t + 1] = l end end
  return t
end

describe("engine:run with threads", function()
  it("gives one engine's output, status, events and journal length", function()
    local e = obelus.engine { tools = tools }
    local p = plan(8, {
      { _id = "a", _tool = "twice", x = 1, ms = 5, _outputPath = "a" },
      { _id = "b", _tool = "twice", x = "†state.a", _outputPath = "b" } })
    local results = {}
    for _, t in ipairs { 1, 3 } do
      local ev, done = {}, 0
      local j = dir .. "/j" .. t .. ".jsonl"
      local r = e:run(p, { threads = t, journal = j,
        on_event = function(x) ev[#ev + 1] = x.event end,
        on_done = function() done = done + 1 end })
      assert.are.equal(0, r:wait())
      results[t] = { out = obelus.encode(r:output()), ev = ev, done = done, n = #lines(j),
                     last = lines(j)[#lines(j)] }
      r:close()
    end
    assert.are.equal(results[1].out, results[3].out)
    assert.matches('"i8":{"a":2,"b":4}', results[3].out, 1, true)
    assert.are.equal(#results[1].ev, #results[3].ev)
    assert.are.equal("run_done", results[3].ev[#results[3].ev])
    assert.are.equal(1, results[3].done)
    assert.are.equal(results[1].n, results[3].n)
    assert.are.equal('{"journal":"end","exit":0}', results[3].last)
    e:close()
  end)

  it("gives each thread an engine of its own, driven by uv.run() too", function()
    local e = obelus.engine { tools = tools }
    local out
    local r = e:run(plan(4, { { _tool = "count", _outputPath = "n" } }),
      { threads = 4, on_done = function(run) out = run:output() end })
    uv.run()
    assert.are.same({ i1 = { n = 1 }, i2 = { n = 1 }, i3 = { n = 1 }, i4 = { n = 1 } }, out)
    assert.has_error(function() r:resolve("†state.n") end,
      "a run on threads has a log on each thread, none to read here (read its output)")
    r:close()
    local one = e:run(plan(4, { { _tool = "count", _outputPath = "n" } }), { threads = 1 })
    one:wait()
    local seen = {}
    for _, v in pairs(one:output()) do seen[#seen + 1] = v.n end
    table.sort(seen)
    assert.are.same({ 1, 2, 3, 4 }, seen)
    -- a journal synced at every result keeps a run on one engine, threads asked or not
    local j = dir .. "/always.jsonl"
    local pinned = e:run(plan(4, { { _tool = "count", _outputPath = "n" } }),
      { threads = 4, journal = j, fsync = "always" })
    assert.are.equal(0, pinned:wait())
    seen = {}
    for _, v in pairs(pinned:output()) do seen[#seen + 1] = v.n end
    table.sort(seen)
    assert.are.same({ 5, 6, 7, 8 }, seen)
    pinned:close()
    e:close()
  end)

  it("cancels and closes a run on threads mid-way", function()
    local e = obelus.engine { tools = tools }
    local r
    r = e:run(plan(6, { { _tool = "twice", x = 1, ms = 3600000, _outputPath = "n" } }),
      { threads = 2, on_event = function(x) if x.event == "started" then r:cancel() end end })
    -- the calls would take an hour: the cancel ends the run, not this guard (120 s)
    local guarded = false
    local guard = uv.new_timer()
    guard:start(120000, 0, function() guarded = true; r:cancel() end)
    guard:unref()
    local st, why = r:wait()
    guard:close()
    assert.is_false(guarded, "the run waited for its calls")
    assert.is_nil(st)
    assert.are.equal("cancelled", why)
    r:close()
    local r2 = e:run(plan(6, { { _tool = "twice", x = 1, ms = 10000, _outputPath = "n" } }),
      { threads = 3 })
    r2:close() -- at once: its threads cancelled and joined
    e:close()
  end)

  it("reports an invalid plan's problems as one engine does, and counts max_calls whole", function()
    -- on threads the engine checks one copy of each call, each thread its part; a plan
    -- with problems is read whole again, so every copy's problem is named
    local e = obelus.engine { tools = tools }
    local cycle = plan(3, {
      { _id = "a", _tool = "twice", x = "†state.b", _outputPath = "a" },
      { _id = "b", _tool = "twice", x = "†state.a", _outputPath = "b" } })
    local ok1, e1 = pcall(e.run, e, cycle, { threads = 1 })
    local ok2, e2 = pcall(e.run, e, cycle, { threads = 2 })
    assert.is_false(ok1)
    assert.is_false(ok2)
    assert.are.equal(tostring(e1), tostring(e2))
    for i = 1, 3 do assert.matches("a@i" .. i .. " (twice) -> b@i" .. i, tostring(e2), 1, true) end
    local three = plan(3, { { _tool = "count", _outputPath = "n" } })
    assert.has_error(function() e:run(three, { threads = 2, max_calls = 2 }) end)
    local r = e:run(three, { threads = 2, max_calls = 3 })
    assert.are.equal(0, r:wait())
    r:close()
    e:close()
  end)

  it("refuses a bad threads option", function()
    local e = obelus.engine { tools = tools }
    assert.has_error(function() e:run(plan(2, { { _tool = "count", _outputPath = "n" } }), { threads = 0 }) end)
    e:close()
  end)
end)
