-- engine_spec.lua -- running plans from stock Lua: obelus.engine on luv's default loop,
-- tools loaded from files, runs driven by uv.run() or run:wait(), their statuses,
-- outputs, events, validation problems, stalls, cancelling, two engines side by side,
-- and garbage collection of engines and runs in the middle of a run.
local obelus = require "obelus"
local uv = require "luv"
local fs = require "support.fs"
local tmpdir, exists = fs.tmpdir, fs.exists

local encode, null = obelus.encode, obelus.null

local write, slurp, fails = fs.write, fs.slurp, fs.fails

-- Tools for the cases the example plans do not cover: a call that waits for nothing,
-- one that leaves a libuv timer open, and one that sleeps.
local TOOLS = [[
local obelus = require "obelus"
local uv = obelus.uv
return {
  { name = "stall", run = function() obelus.await(function() end) end },
  { name = "kaput", run = function() error("kaput") end },
  { name = "nap", run = function(call) obelus.sleep(call.ms); return call.ms end },
  { name = "leaky", run = function(call)
      local t = uv.new_timer() -- never closed: closing the engine must deal with it
      obelus.await(function(resume) t:start(call.ms, 0, function() resume() end) end)
      return call.ms
    end },
  { name = "marker", schema = { type = "object", required = { "file" } },
    run = function(call)
      local f = assert(io.open(call.file, "w")); f:write("ran\n"); f:close()
      return true
    end },
}
]]

local dir, tools

setup(function()
  dir = tmpdir()
  tools = dir .. "/tools.lua"
  write(tools, TOOLS)
end)

teardown(function()
  fs.rmtree(dir)
  collectgarbage()
  collectgarbage()
end)

-- Turns the loop until it has nothing left to do.
local function drain()
  uv.run()
end

describe("obelus.engine", function()
  it("refuses a file name holding a NUL byte (not the name cut short: t.lua\\0x is not t.lua)", function()
    local e = obelus.engine {}
    for _, f in ipairs { e.load_tools, e.load_script, e.resume } do
      assert.matches("a file name holds no NUL byte", fails(f, e, "plans/refund/tools/refund.lua\0x"), 1, true)
    end
    assert.are.equal("obelus.engine (0 tools)", tostring(e))
    e:close()
  end)

  it("loads tool files and folders, from options or load_tools, and says how many", function()
    local e = obelus.engine { tools = { "plans/weather/tools" } }
    assert.are.equal("obelus.engine (4 tools)", tostring(e))
    assert.are.equal(e, e:load_tools("plans/refund/tools/refund.lua"))
    assert.are.equal("obelus.engine (5 tools)", tostring(e))
    local e2 = obelus.engine { tools = "plans/refund/tools" }
    assert.are.equal("obelus.engine (2 tools)", tostring(e2))
    e:close()
    e2:close()
    assert.are.equal("obelus.engine (closed)", tostring(e))
    assert.matches("the engine is closed", fails(e.run, e, "plans/weather/plan.json"), 1, true)
  end)

  it("raises on tool files that do not load and on unknown options", function()
    assert.matches("no/such/tools: No such file", fails(obelus.engine, { tools = "no/such/tools" }), 1, true)
    local bad = dir .. "/bad.lua"
    write(bad, "return { name = 'x', run = 1 }")
    assert.matches('"run" must be a function', fails(obelus.engine, { tools = { bad } }), 1, true)
    assert.matches("unknown option toolz", fails(obelus.engine, { toolz = "x" }), 1, true)
    local e = obelus.engine()
    assert.matches("unknown option inptu", fails(e.run, e, "plans/weather/plan.json", { inptu = 1 }), 1, true)
    e:close()
  end)
end)

describe("a run of plans/weather", function()
  local engine
  before_each(function() engine = obelus.engine { tools = { "plans/weather/tools" } } end)
  after_each(function() engine:close() end)

  it("takes the sunny branch on luv's default loop: status 0, the exact output", function()
    local marks = tmpdir()
    local run = engine:run("plans/weather/plan.json", { input = { city = "Lisbon", markerDir = marks } })
    drain()
    assert.are.equal(0, run:status())
    assert.are.equal('{"city":"Lisbon","weather":{"celsius":24,"city":"Lisbon","sky":"sunny"},' ..
      '"suggestion":"Today: sunny in Lisbon, 24°C: a picnic in the park."}', encode(run:output()))
    assert.is_true(exists(marks .. "/park.ran"))
    assert.is_false(exists(marks .. "/movie.ran"))
    fs.rmtree(marks)
  end)

  it("takes the rainy branch, driven by run:wait()", function()
    local marks = tmpdir()
    local run = engine:run("plans/weather/plan.json", { input = { city = "London", markerDir = marks } })
    assert.are.equal(0, run:wait())
    assert.are.equal('{"city":"London","weather":{"celsius":12,"city":"London","sky":"rainy"},' ..
      '"suggestion":"Today: rainy in London, 12°C: a film at the cinema."}', encode(run:output()))
    assert.is_true(exists(marks .. "/movie.ran"))
    assert.is_false(exists(marks .. "/park.ran"))
    fs.rmtree(marks)
  end)

  it("fails with status 1 when no city is given, and still has an output", function()
    local run = engine:run "plans/weather/plan.json"
    assert.are.equal(1, run:wait())
    assert.are.same({ city = null, weather = null, suggestion = null }, run:output())
  end)

  it("delivers the scheduler's events in order, then on_done", function()
    local seen, times, done_at = {}, {}, nil
    local run = engine:run("plans/weather/plan.json", {
      input = { city = "Lisbon" },
      on_event = function(ev)
        seen[#seen + 1] = ev.event .. (ev.call and " " .. ev.call or "")
        times[#times + 1] = ev.t_ms
        if ev.event == "skipped" then assert.matches("†state.rainy", ev.reason, 1, true) end
        if ev.call then assert.is_string(ev.tool) end
      end,
      on_done = function(r)
        done_at = #seen
        assert.are.equal(0, r:status())
      end,
    })
    drain()
    assert.are.same({
      "ready weather", "started weather", "done weather",
      "ready park", "ready movie", "started park", "skipped movie", "done park",
      "ready suggest", "started suggest", "done suggest", "run_done",
    }, seen)
    assert.are.equal(#seen, done_at)
    for i = 2, #times do assert.is_true(times[i] >= times[i - 1]) end
    assert.are.equal(0, run:status())
  end)

  it("answers nil and why before it has finished; resolve reads the log as it is", function()
    local run = engine:run("plans/weather/plan.json", { input = { city = "Lisbon" } })
    local out, why = run:output()
    assert.is_nil(out)
    assert.are.equal("running", why)
    assert.are.same({ nil, "running" }, { run:status() })
    assert.are.equal("Lisbon", run:resolve("†input.city"))
    assert.is_nil(run:resolve("†state.sunny"))
    assert.matches("obelus.run %(plans/weather/plan.json: running%)", tostring(run))
    assert.are.equal(0, run:wait())
    assert.are.same({ city = "Lisbon", sky = "sunny", celsius = 24 }, run:resolve("†state.sunny"))
    assert.matches("obelus.run %(plans/weather/plan.json: done%)", tostring(run))
  end)

  it("journals its log, which messages() also gives; time_travel reads as of a position", function()
    local j = os.tmpname()
    local run = engine:run("plans/weather/plan.json",
      { input = { city = "London" }, journal = j, time_travel = true })
    run:wait()
    local msgs = run:messages()
    local lines = {}
    for line in slurp(j):gmatch("[^\n]+") do
      if not line:find('^{"journal":') then lines[#lines + 1] = line end -- records aside
    end
    assert.are.equal(#msgs, #lines)
    for i, m in ipairs(msgs) do assert.are.same(obelus.decode(lines[i]), m) end
    assert.are.equal("plan", msgs[1].type)
    assert.is_nil(run:resolve("†state.answer", { at = 3 }))
    assert.is_string(run:resolve("†state.answer", { at = #msgs }))
    local plain = engine:run("plans/weather/plan.json", { input = { city = "London" } })
    plain:wait()
    assert.matches("needs a run started with time_travel", fails(plain.resolve, plain, "†state", { at = 1 }), 1, true)
    os.remove(j)
  end)

  it("takes fsync = never | batch | always for its journal, and refuses anything else", function()
    for _, level in ipairs { "never", "batch", "always" } do
      local j = os.tmpname()
      local run = engine:run("plans/weather/plan.json", { input = { city = "Oslo" }, journal = j, fsync = level })
      assert.are.equal(0, run:wait())
      local messages = #run:messages()
      run:close() -- the journal is closed with its run: its lines are all there
      local n = 0
      for line in slurp(j):gmatch("[^\n]+") do
        if not line:find('^{"journal":') then n = n + 1 end
      end
      assert.are.equal(messages, n)
      os.remove(j)
    end
    assert.matches('"fsync" is never, batch or always, not "rarely"',
      fails(engine.run, engine, "plans/weather/plan.json", { journal = os.tmpname(), fsync = "rarely" }), 1, true)
  end)

  it("runs a plan given as a table", function()
    local run = engine:run({ plan = { { _tool = "suggest", idea = "tea", _outputPath = "†state.s" } } },
      { name = "inline" })
    assert.are.equal(0, run:wait())
    assert.are.equal('{"s":"Today: tea."}', encode(run:output()))
    assert.matches("obelus.run %(inline: done%)", tostring(run))
  end)
end)

describe("a run of plans/refund", function()
  local engine
  before_each(function() engine = obelus.engine { tools = "plans/refund/tools" } end)
  after_each(function() engine:close() end)

  it("writes a receipt and a confirmation: status 0", function()
    local run = engine:run("plans/refund/plan.json", { input = { orderId = "A-100", amount = 1999 } })
    drain()
    assert.are.equal(0, run:status())
    assert.are.equal('{"receipt":{"currency":"EUR","orderId":"A-100","reference":"RF-A-100-1999",' ..
      '"refunded":1999},"error":null,"message":"Order A-100: 19.99 EUR refunded (reference RF-A-100-1999)."}',
      encode(run:output()))
  end)

  it("routes the tool's error to †state.error, handled: status 0", function()
    local run = engine:run("plans/refund/plan.json", { input = { orderId = "A-101", amount = 5000 } })
    assert.are.equal(0, run:wait())
    assert.are.equal('{"receipt":null,"error":{"error":"refund of 5000 exceeds the 1250 paid for A-101",' ..
      '"tool":"refund","call":"refund"},"message":"We could not refund order A-101 (refund of 5000 exceeds ' ..
      'the 1250 paid for A-101). Our team will contact you."}', encode(run:output()))
  end)

  it("fails with status 1 when a resolved param breaks the schema", function()
    local run = engine:run("plans/refund/plan.json", { input = { orderId = "A-100", amount = "lots" } })
    assert.are.equal(1, run:wait())
    assert.are.same({ receipt = null, error = null, message = null }, run:output())
  end)
end)

describe("validation", function()
  local engine
  before_each(function() engine = obelus.engine { tools = { tools, "plans/weather/tools" } } end)
  after_each(function() engine:close() end)

  local function plan(marker)
    return { plan = {
      { _tool = "marker", file = marker, _outputPath = "†state.m" },
      { _tool = "nosuch", _outputPath = "†state.x" },
      { _tool = "suggest", _outputPath = "†state.y" },
      { _tool = "suggest", idea = "x", _timeout = -5, _outputPath = "†state.z" },
    } }
  end

  it("reports every problem as one error and runs nothing", function()
    local marker = dir .. "/validation.ran"
    local err = fails(engine.run, engine, plan(marker), { name = "bad.json" })
    assert.matches('bad.json: call #1 (nosuch): no tool named "nosuch"', err, 1, true)
    assert.matches('bad.json: call #2 (suggest): params do not satisfy the tool\'s schema', err, 1, true)
    assert.matches("bad.json: call #3 (suggest): ", err, 1, true)
    assert.matches("3 problems, nothing ran", err, 1, true)
    drain()
    assert.is_false(exists(marker))
  end)

  it("engine:check answers true, or nil and the list of problems", function()
    local marker = dir .. "/check.ran"
    local ok, problems = engine:check(plan(marker), { name = "bad.json" })
    assert.is_nil(ok)
    assert.are.equal(3, #problems)
    table.sort(problems)
    assert.matches("^bad.json: call #1 %(nosuch%)", problems[1])
    assert.matches("^bad.json: call #2 %(suggest%)", problems[2])
    assert.matches("^bad.json: call #3 %(suggest%): _timeout", problems[3])
    assert.is_true(engine:check("plans/weather/plan.json"))
    assert.is_true(engine:check({ plan = { { _tool = "marker", file = marker, _outputPath = "m" } } }))
    drain()
    assert.is_false(exists(marker))
  end)

  it("reports a plan file that does not parse, and an input that is not JSON", function()
    assert.matches("no/plan.json", fails(engine.run, engine, "no/plan.json"), 1, true)
    local bad = dir .. "/bad.json"
    write(bad, "[{")
    assert.matches(bad, fails(engine.run, engine, bad), 1, true)
    assert.matches("input: cannot convert a function",
      fails(engine.run, engine, "plans/weather/plan.json", { input = print }), 1, true)
  end)

  it("confines _delegate to plans_root: the plan file's folder, the cwd for a table", function()
    os.execute("mkdir -p '" .. dir .. "/plans'")
    local marker = dir .. "/delegated.ran"
    write(dir .. "/leaf.json", encode { plan = { { _tool = "marker", file = marker, _outputPath = "†state.m" } } })
    local top = dir .. "/plans/top.json"
    write(top, encode { plan = { { _id = "up", _delegate = "../leaf.json", _outputPath = "†state.out" } } })
    local ok, problems = engine:check(top)
    assert.is_nil(ok)
    assert.matches('call up %(delegate%): _delegate "../leaf.json" is outside the plans root .*/plans: ', problems[1])
    -- a table: delegates are relative to its name's folder, the root is the cwd (not /tmp)
    local inline = { plan = { { _id = "d", _delegate = "leaf.json", _outputPath = "†state.out" } } }
    ok, problems = engine:check(inline, { name = dir .. "/inline.json" })
    assert.is_nil(ok)
    assert.matches("is outside the plans root", problems[1], 1, true)
    ok, problems = engine:check({ plan = { { _id = "pw", _delegate = "/etc/passwd", _outputPath = "†state.x" } } })
    assert.is_nil(ok)
    assert.matches("call pw (delegate): _delegate \"/etc/passwd\" is outside", problems[1], 1, true)
    assert.is_nil(problems[1]:find("root:x:0", 1, true))
    drain()
    assert.is_false(exists(marker))
    -- plans_root widens it, for a file and a table alike
    assert.is_true(engine:check(inline, { name = dir .. "/inline.json", plans_root = dir }))
    local run = engine:run(top, { plans_root = dir })
    assert.are.equal(0, run:wait())
    assert.is_true(exists(marker))
    assert.matches("the plans root " .. dir .. "/nowhere",
      fails(engine.run, engine, top, { plans_root = dir .. "/nowhere" }), 1, true)
  end)
end)

describe("stalls, cancelling, callbacks", function()
  local engine
  before_each(function() engine = obelus.engine { tools = tools } end)
  after_each(function() engine:close() end)

  it("fails a call that waits for nothing once the loop runs dry: uv.run() and wait()", function()
    local calls = { { _tool = "stall", _outputPath = "a" }, { _tool = "nap", ms = 5, _outputPath = "b" } }
    local run = engine:run { plan = calls }
    drain()
    assert.are.equal(1, run:status())
    assert.are.equal('{"b":5}', encode(run:output()))
    local again = engine:run { plan = calls }
    assert.are.equal(1, again:wait())
    local msgs = again:messages()
    local errors = 0
    for _, m in ipairs(msgs) do
      if m.kind == "error" then
        errors = errors + 1
        assert.matches("stalled", m.data.error, 1, true)
      end
    end
    assert.are.equal(1, errors)
  end)

  it("delivers notes as events: a retry, then the traceback of the last attempt", function()
    local notes = {}
    local run = engine:run({ plan = {
      { _tool = "kaput", _id = "k", _outputPath = "k", _retry = { attempts = 2, delay_ms = 1 } },
    } }, { on_event = function(ev)
      if ev.event == "note" then
        notes[#notes + 1] = ev.note .. " " .. ev.call .. ": " .. ev.reason:match("^[^\n]*")
      else
        assert.is_nil(ev.note)
      end
    end })
    assert.are.equal(1, run:wait())
    assert.are.equal(2, #notes)
    assert.matches("^retry k: call k %(kaput%): attempt 1 of 2 failed: .*kaput; again in %d+ ms$",
                   notes[1])
    assert.are.equal("traceback k: call k (kaput) raised an error:", notes[2])
  end)

  it("hands the engine's notes to on_note(kind, call, msg); unknown options are refused", function()
    local notes = {}
    local cbtools = dir .. "/cb_tools.lua"
    write(cbtools, [[
local obelus = require "obelus"
return { name = "cb", run = function()
  local t = obelus.uv.new_timer()
  t:start(1, 0, function() t:close(); error("cb boom", 0) end)
  obelus.sleep(30)
  return 1
end }
]])
    local eng = obelus.engine { tools = cbtools, on_note = function(kind, call, msg)
      notes[#notes + 1] = { kind, call, msg }
    end }
    local run = eng:run({ plan = { { _tool = "cb", _outputPath = "a" } } })
    assert.are.equal(0, run:wait())
    assert.are.equal(1, #notes)
    assert.are.equal("callback_error", notes[1][1])
    assert.is_nil(notes[1][2])
    assert.matches("^error in a libuv callback of a tool: cb boom", notes[1][3])
    eng:close()
    assert.matches("on_note must be a function", fails(obelus.engine, { on_note = 1 }), 1, true)
  end)

  it("cancels: nothing more runs, the status says so", function()
    local started = {}
    local run = engine:run({ plan = {
      { _tool = "nap", ms = 5, _outputPath = "a", _id = "a" },
      { _tool = "nap", ms = "†state.a", _outputPath = "b", _id = "b" },
    } }, { on_event = function(ev) if ev.event == "started" then started[#started + 1] = ev.call end end })
    run:cancel()
    drain()
    assert.are.same({ nil, "cancelled" }, { run:status() })
    assert.are.same({ nil, "cancelled" }, { run:output() })
    assert.are.same({ "a" }, started)
  end)

  it("cancel and close from inside a callback take effect at the next turn of the loop", function()
    local run
    run = engine:run({ plan = {
      { _tool = "nap", ms = 1, _outputPath = "a", _id = "a" },
      { _tool = "nap", ms = 20, _outputPath = "b", _id = "b" },
    } }, { on_event = function(ev)
      if ev.event == "done" and ev.call == "a" then run:cancel() end
    end })
    assert.are.same({ nil, "cancelled" }, { run:wait() })
    assert.is_nil(run:resolve("†state.b"))
    local closed
    closed = engine:run({ plan = { { _tool = "nap", ms = 1, _outputPath = "a" } } },
      { on_done = function() closed:close() end })
    assert.are.same({ nil, "closed" }, { closed:wait() })
    assert.matches("the run is closed", fails(closed.messages, closed), 1, true)
  end)

  it("refuses run:wait() inside the loop, reports errors of callbacks and goes on", function()
    local inside
    local run = engine:run({ plan = { { _tool = "nap", ms = 1, _outputPath = "a" } } }, {
      on_event = function(ev)
        if ev.event == "done" then error("a callback's own error") end
      end,
      on_done = function(r) inside = select(2, pcall(r.wait, r)) end,
    })
    assert.are.equal(0, run:wait())
    assert.matches("inside a callback of its engine", inside, 1, true)
    local t = uv.new_timer()
    local in_timer
    local r2 = engine:run { plan = { { _tool = "nap", ms = 20, _outputPath = "a" } } }
    t:start(1, 0, function() in_timer = select(2, pcall(r2.wait, r2)); t:close() end)
    drain()
    assert.matches("while uv.run%(%) is running", in_timer)
    assert.are.equal(0, r2:status())
  end)
end)

describe("two engines", function()
  it("are independent: their own tools, runs side by side, closing one leaves the other", function()
    local weather = obelus.engine { tools = "plans/weather/tools" }
    local refund = obelus.engine { tools = "plans/refund/tools" }
    local ok, problems = weather:check("plans/refund/plan.json")
    assert.is_nil(ok)
    assert.matches('no tool named "refund"', problems[1], 1, true)
    local a = weather:run("plans/weather/plan.json", { input = { city = "Lisbon" } })
    local b = refund:run("plans/refund/plan.json", { input = { orderId = "A-100", amount = 1 } })
    local c = weather:run("plans/weather/plan.json", { input = { city = "Bergen" } })
    weather:close()
    assert.are.same({ nil, "closed" }, { a:status() })
    drain()
    assert.are.same({ nil, "closed" }, { c:status() })
    assert.are.equal(0, b:status())
    assert.are.equal("Order A-100: 0.01 EUR refunded (reference RF-A-100-1).", b:output().message)
    refund:close()
  end)
end)

describe("obelus.sleep", function()
  -- each call sleeps call.ms, then takes the next place in the order of waking
  local SLEEP_TOOLS = [[
local obelus = require "obelus"
return { name = "queue", run = function(call)
  obelus.sleep(call.ms)
  WOKEN = (WOKEN or 0) + 1
  return WOKEN
end }
]]

  local function engine_with_queue()
    local file = dir .. "/queue_tools.lua"
    write(file, SLEEP_TOOLS)
    return obelus.engine { tools = file }
  end

  -- a plan of one call a duration: <prefix><i> sleeps list[i] ms, writes †state.<prefix><i>
  local function plan(prefix, list)
    local p = {}
    for i, m in ipairs(list) do
      p[i] = { _id = prefix .. i, _tool = "queue", ms = m, _outputPath = "†state." .. prefix .. i }
    end
    return { plan = p }
  end

  it("wakes calls by due time, then in the order they fell asleep, in order or not", function()
    local engine = engine_with_queue()
    -- due times out of order (they go to the heap) and in order (the queue), mixed
    local ms = { 40, 10, 30, 10, 60, 0, 20, 10, 60, 45 }
    local run = engine:run(plan("c", ms))
    drain()
    assert.are.equal(0, run:status())
    local order = {}
    for i = 1, #ms do order[i] = i end
    table.sort(order, function(a, b) return ms[a] < ms[b] or (ms[a] == ms[b] and a < b) end)
    local out, woke = run:output(), {}
    for place, i in ipairs(order) do woke[place] = out["c" .. i] end
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, woke)
    engine:close()
  end)

  it("lasts at least its ms by the monotonic clock, though another call keeps waking the loop", function()
    -- the loop's clock is whole ms from the iteration's start: a due time in it woke a call
    -- up to 2 ms early whenever something else woke the loop (here, a call that sleeps 0
    -- over and over); each measured call starts at another fraction of a millisecond
    local file = dir .. "/measured_tools.lua"
    write(file, [[
local obelus = require "obelus"
local uv = obelus.uv
local function busy(ms) local t = uv.hrtime(); while uv.hrtime() - t < ms * 1e6 do end end
return {
  { name = "measured", run = function(call)
      busy(call.lead)
      local t0 = uv.hrtime()
      obelus.sleep(call.ms)
      return (uv.hrtime() - t0) / 1e6
    end },
  { name = "spin", run = function(call)
      local t0 = uv.hrtime()
      while uv.hrtime() - t0 < call.ms * 1e6 do obelus.sleep(0) end
      return true
    end },
}
]])
    local engine = obelus.engine { tools = file }
    local p = { { _id = "spin", _tool = "spin", ms = 60, _outputPath = "†state.spin" } }
    for i = 1, 24 do
      p[#p + 1] = { _id = "m" .. i, _tool = "measured", ms = 1 + i % 6, lead = (i % 7) * 0.13,
                    _outputPath = "†state.m" .. i }
    end
    local run = engine:run({ plan = p })
    drain()
    assert.are.equal(0, run:status())
    local out = run:output()
    for i = 1, 24 do
      local want = 1 + i % 6
      assert.is_true(out["m" .. i] >= want, ("m%d slept %.3f ms of %d"):format(i, out["m" .. i], want))
    end
    engine:close()
  end)

  it("forgets a cancelled run's sleepers and still wakes another run's", function()
    local engine = engine_with_queue()
    -- interleaved in both the queue (20, 30, 40) and the heap (25, 15)
    local a = engine:run(plan("a", { 20, 30, 40 }))
    local b = engine:run(plan("b", { 25, 15, 50 }))
    a:cancel()
    drain()
    assert.are.same({ nil, "cancelled" }, { a:status() })
    assert.are.equal(0, b:status())
    assert.are.same({ b1 = 2, b2 = 1, b3 = 3 }, b:output())
    engine:close()
  end)
end)

describe("a tool's ctx", function()
  -- keep: notes a field of its own, shows what ctx reads as, and keeps ctx for later;
  -- peek (another run): reads the kept ctx once its run is gone, after a full collection
  local CTX_TOOLS = [[
local obelus = require "obelus"
return {
  { name = "keep", run = function(call, ctx)
      ctx.note = call.note
      ctx.id = ctx.id -- a field set to the value it shows: still that value
      local seen = {}
      for k, v in pairs(ctx) do seen[#seen + 1] = k .. "=" .. tostring(v) end
      table.sort(seen)
      obelus.sleep(1)
      KEPT = ctx
      return { id = ctx.id, tool = ctx.tool, index = ctx.index, attempt = ctx.attempt,
               instance = ctx.instance == nil and obelus.null or ctx.instance,
               note = ctx.note, seen = table.concat(seen, " "), type = type(ctx),
               text = tostring(ctx), other = ctx.other == nil }
    end },
  { name = "peek", run = function()
      collectgarbage() -- the tool's fields are kept by ctx, weakly: a ctx still held keeps them
      collectgarbage()
      return { index = KEPT.index, note = KEPT.note, tool = KEPT.tool == nil,
               instance = KEPT.instance == nil, text = tostring(KEPT) }
    end },
}
]]

  it("reads id, tool, index, instance and attempt, keeps the tool's own fields, and walks with pairs", function()
    local file = dir .. "/ctx_tools.lua"
    write(file, CTX_TOOLS)
    local engine = obelus.engine { tools = file }
    local run = engine:run({
      instances = { "north" },
      plan = {
        { _tool = "keep", note = "shared", _outputPath = "†state.first" },
        { _id = "own", _tool = "keep", note = "solo", _instance = "north", _outputPath = "†state.second" },
      },
    })
    drain()
    assert.are.equal(0, run:status())
    local out = run:output().north
    assert.are.same({ id = "#0@north", tool = "keep", index = 0, instance = "north", note = "shared",
                      attempt = 1,
                      seen = "attempt=1 id=#0@north index=0 instance=north note=shared tool=keep",
                      type = "userdata", text = "obelus.ctx: #0@north", other = true }, out.first)
    assert.are.same({ id = "own", tool = "keep", index = 1, instance = "north", note = "solo",
                      attempt = 1,
                      seen = "attempt=1 id=own index=1 instance=north note=solo tool=keep",
                      type = "userdata", text = "obelus.ctx: own", other = true }, out.second)
    engine:close()
  end)

  it("keeps index and the tool's fields once its run is freed; the rest reads nil", function()
    local file = dir .. "/ctx_tools.lua"
    write(file, CTX_TOOLS)
    local engine = obelus.engine { tools = file }
    local weak = setmetatable({}, { __mode = "v" })
    do
      -- two instances: the kept ctx is of the second copy, 1 in the run's calls, 0 in the plan
      local first = engine:run({ instances = { "x", "y" },
                                 plan = { { _tool = "keep", note = "kept", _outputPath = "†state.a" } } })
      weak.run = first
      drain()
      assert.are.equal(0, first:status())
    end
    collectgarbage()
    collectgarbage()
    assert.is_nil(weak.run) -- freed: its ctx can no longer read the call
    local second = engine:run({ plan = { { _tool = "peek", _outputPath = "†state.b" } } })
    drain()
    assert.are.equal(0, second:status())
    assert.are.same({ index = 0, note = "kept", tool = true, instance = true,
                      text = "obelus.ctx: (run freed)" }, second:output().b)
    engine:close()
  end)
end)

describe("garbage collection", function()
  it("keeps a dropped run going until it has finished, then collects it and its engine", function()
    local weak = setmetatable({}, { __mode = "v" })
    local status, collected_mid_run
    do
      local engine = obelus.engine { tools = "plans/weather/tools" }
      weak.engine = engine
      weak.run = engine:run("plans/weather/plan.json", {
        input = { city = "Lisbon" },
        on_event = function(ev)
          if ev.event == "started" then collectgarbage(); collectgarbage() end
        end,
        on_done = function(r) status = r:status(); collectgarbage() end,
      })
    end
    local t = uv.new_timer()
    t:start(5, 0, function()
      collectgarbage()
      collectgarbage()
      collected_mid_run = weak.run == nil
      t:close()
    end)
    drain()
    assert.is_false(collected_mid_run)
    assert.are.equal(0, status)
    collectgarbage()
    collectgarbage()
    assert.is_nil(weak.run)
    assert.is_nil(weak.engine)
  end)

  it("closes an engine whose tools left a libuv timer open, in the middle of a run", function()
    do
      local engine = obelus.engine { tools = tools }
      local run = engine:run { plan = { { _tool = "leaky", ms = 30, _outputPath = "a" } } }
      local t = uv.new_timer()
      t:start(5, 0, function() engine:close(); t:close() end) -- inside the loop
      drain()
      assert.are.same({ nil, "closed" }, { run:status() })
    end
    do
      local engine = obelus.engine { tools = tools }
      local run = engine:run { plan = { { _tool = "leaky", ms = 10, _outputPath = "a" } } }
      engine:close() -- outside the loop: the engine lets luv finish with its timer first
      assert.are.same({ nil, "closed" }, { run:status() })
    end
    collectgarbage()
    collectgarbage()
    drain() -- the engines' own handles close
    assert.is_false(uv.loop_alive())
  end)

  it("leaks nothing and reads nothing freed under valgrind (a script collecting mid-run)", function()
    if os.execute("command -v valgrind >/dev/null 2>&1") ~= true then
      pending("valgrind is not installed")
      return
    end
    local script = dir .. "/gc.lua"
    write(script, [[
      package.cpath = "lib/?.so;" .. package.cpath
      package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
      local obelus = require "obelus"
      local uv = require "luv"
      local tools = ...
      local ok = 0
      for _ = 1, 3 do
        local engine = obelus.engine { tools = { "plans/weather/tools", tools } }
        engine:run("plans/weather/plan.json", { input = { city = "Lisbon" },
          on_event = function() collectgarbage() end,
          on_done = function(r) if r:status() == 0 then ok = ok + 1 end end })
        engine:run { plan = { { _tool = "leaky", ms = 50, _outputPath = "a" } } }
        engine:run { plan = { { _tool = "stall", _outputPath = "a" } } }
      end
      local t = uv.new_timer()
      t:start(30, 0, function() collectgarbage(); collectgarbage(); t:close() end)
      uv.run()
      local last = obelus.engine { tools = tools } -- a run left unfinished at exit
      last:run { plan = { { _tool = "leaky", ms = 1000, _outputPath = "a" } } }
      io.write(ok, "\n")
    ]])
    local log, out = os.tmpname(), os.tmpname()
    local cmd = string.format("valgrind -q --leak-check=full --show-leak-kinds=definite,indirect " ..
      "--errors-for-leak-kinds=definite,indirect --error-exitcode=99 --log-file=%s lua5.4 %s %s >%s 2>/dev/null",
      log, script, tools, out)
    local _, _, code = os.execute(cmd)
    local report = slurp(log)
    assert.are.equal("", report)
    assert.are.equal(0, code)
    assert.are.equal("3\n", slurp(out))
    os.remove(log)
    os.remove(out)
  end)
end)
