-- retry_spec.lua -- per-call _timeout and _retry (issue 10, plan-format §5): a runtime error or a
-- timeout is retried after the delay, each attempt journaled, ctx.attempt counting from 1;
-- a timeout abandons the attempt (its sleeps, luv handles and awaits never run later); the
-- last attempt's error is the call's error, routed to a || alternative; structural errors
-- and schema failures are not retried; bad values are validation errors (exit 2, nothing ran).
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/fixtures/retry"

local function tmp()
  local n = os.tmpname()
  os.remove(n)
  return n
end

local function lines(path)
  local t = {}
  local f = io.open(path)
  if not f then return t end
  for l in f:lines() do t[#t + 1] = l end
  f:close()
  return t
end

-- runs a plan (a Lua table) with the retry tools; extra args after it
local function run(plan, ...)
  local file = cli.tmpfile(cjson.encode(plan), ".json")
  local args = { "run", file, "--tools", TOOLS }
  for _, a in ipairs { ... } do args[#args + 1] = a end
  local r = cli.run(args)
  os.remove(file)
  return r
end

-- a journal line, its numbers as integers where they are whole (cjson reads 1 as 1.0)
local function decode(line)
  local function fix(v)
    if type(v) == "number" then return math.tointeger(v) or v end
    if type(v) == "table" then for k, x in pairs(v) do v[k] = fix(x) end end
    return v
  end
  return fix(cjson.decode(line))
end

local function sleep_ms(ms) os.execute("sleep " .. ms / 1000) end

describe("_retry", function()
  it("runs the call again after a runtime error until an attempt succeeds; ctx.attempt counts", function()
    local m = tmp()
    local r = run({ plan = { { _tool = "flaky", file = m, succeed_on = 3,
                               _retry = { attempts = 3, delay_ms = 5 }, _outputPath = "†state.r" } },
                    output = "†state.r" })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ attempt = 3 }, decode(r.out))
    assert.are.same({ "attempt 1", "attempt 2", "attempt 3" }, lines(m))
    assert.matches("call #0 (flaky): attempt 1 of 3 failed: flaky failure 1; again in", r.err, 1, true)
    assert.matches("attempt 2 of 3 failed: flaky failure 2", r.err, 1, true)
    os.remove(m)
  end)

  it("writes each failed attempt to --events as a note \"retry\", with the text it prints", function()
    local m, ev = tmp(), tmp()
    local r = run({ plan = { { _tool = "flaky", file = m, succeed_on = 2,
                               _retry = { attempts = 2, delay_ms = 5 }, _outputPath = "†state.r" } },
                    output = "†state.r" }, "--events", ev)
    assert.are.equal(0, r.code, r.err)
    local notes = {}
    for _, l in ipairs(lines(ev)) do
      local e = decode(l)
      if e.event == "note" then notes[#notes + 1] = e end
    end
    assert.are.equal(1, #notes)
    assert.are.equal("retry", notes[1].note)
    assert.are.equal("#0", notes[1].call)
    assert.are.equal("flaky", notes[1].tool)
    assert.matches("^call #0 %(flaky%): attempt 1 of 2 failed: flaky failure 1; again in %d+ ms$",
                   notes[1].reason)
    assert.matches("obelus: " .. notes[1].reason .. "\n", r.err, 1, true)
    os.remove(m); os.remove(ev)
  end)

  it("takes a number: the attempts in all, the first included", function()
    local m = tmp()
    local r = run({ plan = { { _tool = "flaky", file = m, succeed_on = 2, _retry = 2,
                               _outputPath = "†state.r" } }, output = "†state.r" })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ attempt = 2 }, decode(r.out))
    assert.are.equal(2, #lines(m))
    os.remove(m)
  end)

  it("without _retry a call runs once", function()
    local m = tmp()
    local r = run({ plan = { { _tool = "flaky", file = m, succeed_on = 2, _outputPath = "†state.r" } } })
    assert.are.equal(1, r.code)
    assert.are.same({ "attempt 1" }, lines(m))
    assert.matches("flaky failure 1", r.err, 1, true)
    assert.not_matches("again in", r.err, 1, true)
    os.remove(m)
  end)

  it("exhausted, the last attempt's error is the call's error", function()
    local m = tmp()
    local r = run({ plan = {
      { _tool = "flaky", file = m, succeed_on = 9, _retry = { attempts = 3, delay_ms = 0 },
        _outputPath = "†state.r" },
    } })
    assert.are.equal(1, r.code) -- a call failed
    assert.are.same({ "attempt 1", "attempt 2", "attempt 3" }, lines(m))
    assert.matches("call #0 (flaky) failed (runtime): flaky failure 3", r.err, 1, true)
    assert.not_matches("failed (runtime): flaky failure 1", r.err, 1, true)
    os.remove(m)
  end)

  it("exhausted, the error goes to a || alternative of _outputPath like any error", function()
    local m = tmp()
    local r = run({ plan = {
      { _id = "f", _tool = "flaky", file = m, succeed_on = 9, _retry = { attempts = 2, delay_ms = 0 },
        _outputPath = "†state.r || †state.failed" },
    }, output = "†state.failed" })
    assert.are.equal(0, r.code, r.err) -- handled
    assert.are.same({ error = "flaky failure 2", tool = "flaky", call = "f" }, decode(r.out))
    assert.are.equal(2, #lines(m))
    os.remove(m)
  end)

  it("waits delay_ms * backoff^(n-1), at most max_delay_ms, without jitter when it is off", function()
    local m, j = tmp(), tmp()
    local r = run({ plan = { { _tool = "flaky", file = m, succeed_on = 4,
      _retry = { attempts = 4, delay_ms = 10, backoff = 3, max_delay_ms = 50, jitter = false },
      _outputPath = "†state.r" } } }, "--journal", j)
    assert.are.equal(0, r.code, r.err)
    local delays = {}
    for _, l in ipairs(lines(j)) do
      local rec = decode(l)
      if rec.journal == "retry" then
        assert.are.equal("#0", rec.id)
        assert.are.equal("flaky failure " .. rec.attempt, rec.error)
        delays[rec.attempt] = rec.delay_ms
      end
    end
    assert.are.same({ 10, 30, 50 }, delays)
    -- each wait at least its delay, from the failure to the next start (by the journal's
    -- clock, in microseconds)
    local failed, waited = {}, {}
    for _, l in ipairs(lines(j)) do
      local rec = decode(l)
      if rec.journal == "retry" then failed[rec.attempt + 1] = rec.t end
      if rec.journal == "start" and failed[rec.attempt] then
        waited[#waited + 1] = rec.t - failed[rec.attempt] >= 1000 * delays[rec.attempt - 1]
      end
    end
    assert.are.same({ true, true, true }, waited)
    os.remove(m); os.remove(j)
  end)

  it("with jitter, waits between half the delay and all of it", function()
    local m, j = tmp(), tmp()
    local r = run({ plan = { { _tool = "flaky", file = m, succeed_on = 6,
      _retry = { attempts = 6, delay_ms = 8, backoff = 1 }, _outputPath = "†state.r" } } }, "--journal", j)
    assert.are.equal(0, r.code, r.err)
    local n = 0
    for _, l in ipairs(lines(j)) do
      local rec = decode(l)
      if rec.journal == "retry" then
        n = n + 1
        assert.is_true(rec.delay_ms >= 4 and rec.delay_ms <= 8, "delay " .. rec.delay_ms)
      end
    end
    assert.are.equal(5, n)
    os.remove(m); os.remove(j)
  end)

  it("journals every attempt: a start record per attempt, a retry record per failed one", function()
    local m, j = tmp(), tmp()
    local r = run({ plan = { { _tool = "flaky", file = m, succeed_on = 3,
      _retry = { attempts = 5, delay_ms = 1 }, _outputPath = "†state.r" } } }, "--journal", j)
    assert.are.equal(0, r.code, r.err)
    local seen = {}
    for _, l in ipairs(lines(j)) do
      local rec = decode(l)
      if rec.journal == "start" or rec.journal == "retry" then
        seen[#seen + 1] = rec.journal .. " " .. rec.attempt
      end
    end
    assert.are.same({ "start 1", "retry 1", "start 2", "retry 2", "start 3" }, seen)
    os.remove(m); os.remove(j)
  end)

  it("does not retry a schema failure: another attempt would meet it again", function()
    local m = tmp()
    local r = run({ plan = {
      { _tool = "flaky", file = m .. ".a", succeed_on = 1, _outputPath = "†state.x" },
      { _tool = "count", file = m, n = "†state.x", _retry = { attempts = 3, delay_ms = 0 },
        _outputPath = "†state.n" },
    } })
    assert.are.equal(1, r.code)
    assert.are.same({}, lines(m))
    assert.matches("schema", r.err, 1, true)
    assert.not_matches("again in", r.err, 1, true)
    os.remove(m .. ".a")
  end)
end)

describe("_timeout", function()
  it("fails an attempt that runs too long with 'timeout after N ms'; its sleep never wakes", function()
    local m = tmp()
    local r = run({ plan = {
      { _tool = "slow", ms = 400, file = m, _timeout = 40, _outputPath = "†state.r" },
      { _tool = "flaky", file = m .. ".b", succeed_on = 1, _outputPath = "†state.b" },
    }, output = "†state.r || †state.b" })
    assert.are.equal(1, r.code)
    assert.matches("call #0 (slow) failed (runtime): timeout after 40 ms", r.err, 1, true)
    assert.are.same({ attempt = 1 }, decode(r.out)) -- the || alternative
    sleep_ms(500)
    assert.are.same({}, lines(m))
    os.remove(m .. ".b")
  end)

  it("counts from the attempt's start: a call started after another held the loop runs its full _timeout", function()
    -- both start in one turn of the loop; the first holds it 600 ms, so the loop's clock is
    -- that old when the second starts, and a _timeout counted from it ended the second
    -- (a 20 ms sleep) before it had run. The 480 ms between the sleep and its limit are
    -- for a loaded machine: the order is what is tested, not a duration
    local m = tmp()
    local r = run({ plan = {
      { _tool = "spin", ms = 600, _outputPath = "†state.s" },
      { _tool = "slow", ms = 20, file = m, _timeout = 500, _outputPath = "†state.r" },
    }, output = "†state.r" })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ attempt = 1 }, decode(r.out))
    assert.are.same({ "woke 1" }, lines(m))
    os.remove(m)
  end)

  it("closes the luv handles and cancels the await of an abandoned attempt", function()
    local m = tmp()
    local r = run({ plan = { { _tool = "slow_luv", ms = 150, file = m, _timeout = 30,
                               _outputPath = "†state.r" },
                             { _tool = "slow", ms = 450, file = m .. ".keep", _outputPath = "†state.k" } } })
    -- the second call keeps the process (and its loop) alive past both of the first's timers
    assert.are.equal(1, r.code)
    assert.matches("timeout after 30 ms", r.err, 1, true)
    assert.are.same({ "woke 1" }, lines(m .. ".keep"))
    assert.are.same({}, lines(m))
    os.remove(m .. ".keep")
  end)

  it("is per attempt: a timed-out attempt is retried, and a fast one succeeds", function()
    local m = tmp()
    local r = run({ plan = { { _tool = "slow", ms = { 400, 1 }, file = m, _timeout = 40,
                               _retry = { attempts = 2, delay_ms = 1 }, _outputPath = "†state.r" } },
                    output = "†state.r" })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ attempt = 2 }, decode(r.out))
    assert.matches("attempt 1 of 2 failed: timeout after 40 ms", r.err, 1, true)
    sleep_ms(450)
    assert.are.same({ "woke 2" }, lines(m)) -- the first attempt never woke
    os.remove(m)
  end)

  it("--call-timeout MS gives every call without one a _timeout; a call's own wins", function()
    local m = tmp()
    local r = run({ plan = {
      { _id = "short", _tool = "slow", ms = 300, file = m, _outputPath = "†state.a" },
      { _id = "own", _tool = "slow", ms = 100, file = m, _timeout = 2000, _outputPath = "†state.b" },
    } }, "--call-timeout", "40")
    assert.are.equal(1, r.code)
    assert.matches("call short (slow) failed (runtime): timeout after 40 ms", r.err, 1, true)
    assert.not_matches("call own", r.err, 1, true)
    assert.are.same({ "woke 1" }, lines(m))
    os.remove(m)
  end)

  it("times out a latent tool's handler too, and retries it", function()
    local m = tmp()
    local handler = cli.tmpfile(([[
      local obelus = require "obelus"
      obelus.set_latent(function(call, tool, ctx)
        obelus.sleep(ctx.attempt == 1 and 400 or 1)
        local f = assert(io.open(%q, "a")); f:write("answered ", ctx.attempt, "\n"); f:close()
        return "answer " .. ctx.attempt
      end)
    ]]):format(m), ".lua")
    local file = cli.tmpfile(cjson.encode { plan = {
      { _tool = "latent_thing", question = "q", _timeout = 40, _retry = { attempts = 2, delay_ms = 1 },
        _outputPath = "†state.a" } }, output = "†state.a" }, ".json")
    local r = cli.run { "run", file, "--tools", "spec/cli/tools", "--latent", handler }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("answer 2", cjson.decode(r.out))
    assert.matches("attempt 1 of 2 failed: timeout after 40 ms", r.err, 1, true)
    sleep_ms(450)
    assert.are.same({ "answered 2" }, lines(m))
    os.remove(m); os.remove(file); os.remove(handler)
  end)

  it("refuses a bad --call-timeout", function()
    for _, v in ipairs { "0", "-3", "soon" } do
      local r = run({ plan = { { _tool = "flaky", file = "/nonexistent/x", succeed_on = 1 } } },
                    "--call-timeout", v)
      assert.are.equal(2, r.code, v)
      assert.matches("--call-timeout", r.err, 1, true)
    end
  end)
end)

describe("bad _retry and _timeout values", function()
  local bad = {
    { { _retry = 0 }, "_retry" },
    { { _retry = -2 }, "_retry" },
    { { _retry = 1.5 }, "_retry" },
    { { _retry = "3" }, "_retry" },
    { { _retry = true }, "_retry" },
    { { _retry = { attempts = 0 } }, "_retry.attempts" },
    { { _retry = { attempts = "2" } }, "_retry.attempts" },
    { { _retry = { delay_ms = 10 } }, "_retry.attempts is missing" },
    { { _retry = { attempts = 3, delay_ms = -1 } }, "_retry.delay_ms" },
    { { _retry = { attempts = 3, max_delay_ms = 2.5 } }, "_retry.max_delay_ms" },
    { { _retry = { attempts = 3, backoff = 0.5 } }, "_retry.backoff" },
    { { _retry = { attempts = 3, backoff = "x" } }, "_retry.backoff" },
    { { _retry = { attempts = 3, jitter = "yes" } }, "_retry.jitter" },
    { { _retry = { attempts = 3, tries = 2 } }, '_retry has an unknown key "tries"' },
    { { _timeout = 0 }, "_timeout" },
    { { _timeout = -5 }, "_timeout" },
    { { _timeout = 1.5 }, "_timeout" },
    { { _timeout = "100" }, "_timeout" },
    { { _timeout = { ms = 3 } }, "_timeout" },
  }
  for i, case in ipairs(bad) do
    local meta, key = case[1], case[2]
    it(("#%d %s: exit 2, naming the call and the key, nothing ran"):format(i, cjson.encode(meta)), function()
      local m = tmp()
      local call = { _id = "bad", _tool = "flaky", file = m, succeed_on = 1 }
      for k, v in pairs(meta) do call[k] = v end
      local r = run({ plan = { { _tool = "flaky", file = m, succeed_on = 1 }, call } })
      assert.are.equal(2, r.code)
      assert.are.equal("", r.out)
      assert.matches(": call bad (flaky): " .. key, r.err, 1, true)
      assert.are.same({}, lines(m))
    end)
  end

  it("obelus check reports them too", function()
    local file = cli.tmpfile(cjson.encode { plan = { { _tool = "flaky", _retry = { attempts = 2, wait = 1 } } } },
                             ".json")
    local r = cli.run { "check", file, "--tools", TOOLS }
    assert.are.equal(2, r.code)
    assert.matches('_retry has an unknown key "wait"', r.err, 1, true)
    os.remove(file)
  end)
end)
