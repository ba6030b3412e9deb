-- plans_spec.lua -- the example plans under plans/ (plans/README.md), run through
-- `obelus run` and `obelus check`: their exact output documents, exit codes, journals,
-- which branch ran, and that fire-and-forget work is drained before exit.
local cli = require "support.cli"
local cjson = require "cjson"
local fs = require "support.fs"
local tmpdir, exists = fs.tmpdir, fs.exists

local null = cjson.null

-- run(name, extra args...) runs plans/<name>/plan.json with its tools folder.
local function run(name, ...)
  local args = { "run", "plans/" .. name .. "/plan.json", "--tools", "plans/" .. name .. "/tools" }
  for _, a in ipairs({ ... }) do args[#args + 1] = a end
  return cli.run(args)
end

local function decode(text)
  local ok, v = pcall(cjson.decode, text)
  assert(ok, "stdout is not one JSON document: " .. tostring(text))
  return v
end

-- Reads a JSON Lines file into a list of decoded values.
local function lines(path)
  local out = {}
  for line in cli.slurp(path):gmatch("[^\n]+") do
    local m = decode(line)
    if not m.journal then out[#out + 1] = m end -- the journal's records are not messages
  end
  return out
end

-- Drops each output message's _date after checking it is RFC 3339 UTC, milliseconds.
local function undate(messages)
  for _, m in ipairs(messages) do
    if m._call ~= nil then
      assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$", m._date)
      m._date = nil
    end
  end
  return messages
end

-- The events of a run (--events FILE): { {event=, call=, ...}, ... } and the position
-- of the first event matching (event, call).
local function position(events, event, call)
  for i, e in ipairs(events) do
    if e.event == event and e.call == call then return i end
  end
  error("no event " .. event .. " for " .. tostring(call))
end

local PLANS = { "user-status", "weather", "refund", "translate", "fanout-summary", "notify", "cluster" }

describe("example plans", function()
  it("all pass obelus check", function()
    for _, name in ipairs(PLANS) do
      local r = cli.run { "check", "plans/" .. name .. "/plan.json", "--tools", "plans/" .. name .. "/tools" }
      assert.are.equal(0, r.code, name .. ": " .. r.err .. r.out)
      assert.matches("plans/" .. name .. "/plan.json: ok", r.out .. r.err, 1, true)
    end
  end)

  describe("user-status", function()
    it("composes the seeds' update with the context: newest wins, older keys show through", function()
      local r = run("user-status")
      assert.are.equal(0, r.code, r.err)
      assert.are.equal([[
{
  "user": {
    "name": "Alex",
    "status": "inactive"
  },
  "name": "Alex",
  "status": "inactive"
}
]], r.out)
    end)

    it("journals the plan, the context, and the seeds' output message", function()
      local j = os.tmpname()
      local r = run("user-status", "--journal", j)
      assert.are.equal(0, r.code, r.err)
      local msgs = undate(lines(j))
      assert.are.equal(3, #msgs)
      assert.are.equal("plan", msgs[1].type)
      assert.are.same(decode(cli.slurp("plans/user-status/plan.json")), msgs[1].plan)
      assert.are.same({ type = "data", data = { user = { name = "Alex", status = "active" } } }, msgs[2])
      assert.are.same({
        type = "data", kind = "data", data = { user = { status = "inactive" } },
        _path = "user.status", _outputMethod = "set",
        _call = { _tool = "updateUserStatus", newStatus = "inactive", _outputPath = "†data.user.status" },
      }, msgs[3])
      os.remove(j)
    end)
  end)

  describe("weather", function()
    local function weather(city)
      local dir = tmpdir()
      local ev = os.tmpname()
      local r = run("weather", "--input", cjson.encode { city = city, markerDir = dir }, "--events", ev)
      return r, dir, lines(ev)
    end

    it("takes the sunny branch: park runs, movie never runs, the join runs", function()
      local r, dir, events = weather("Lisbon")
      assert.are.equal(0, r.code, r.err)
      assert.are.same({
        city = "Lisbon",
        weather = { city = "Lisbon", sky = "sunny", celsius = 24 },
        suggestion = "Today: sunny in Lisbon, 24°C: a picnic in the park.",
      }, decode(r.out))
      assert.is_true(exists(dir .. "/park.ran"))
      assert.is_false(exists(dir .. "/movie.ran"))
      local skipped = events[position(events, "skipped", "movie")]
      assert.matches("†state.rainy", skipped.reason, 1, true)
      assert.is_true(position(events, "done", "suggest") > position(events, "done", "park"))
      os.execute("rm -rf " .. cli.quote(dir))
    end)

    it("takes the rainy branch: movie runs, park never runs, the join runs", function()
      local r, dir, events = weather("London")
      assert.are.equal(0, r.code, r.err)
      assert.are.same({
        city = "London",
        weather = { city = "London", sky = "rainy", celsius = 12 },
        suggestion = "Today: rainy in London, 12°C: a film at the cinema.",
      }, decode(r.out))
      assert.is_true(exists(dir .. "/movie.ran"))
      assert.is_false(exists(dir .. "/park.ran"))
      local skipped = events[position(events, "skipped", "park")]
      assert.matches("†state.sunny", skipped.reason, 1, true)
      position(events, "done", "suggest")
      os.execute("rm -rf " .. cli.quote(dir))
    end)

    it("treats a city it does not know as rainy", function()
      local r = run("weather", "--input", '{"city":"Tokyo"}')
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("Today: rainy in Tokyo, 14°C: a film at the cinema.", decode(r.out).suggestion)
    end)

    it("fails with exit 1 when no city is given (absent, and nothing writes it)", function()
      local r = run("weather")
      assert.are.equal(1, r.code)
      assert.are.same({ city = null, weather = null, suggestion = null }, decode(r.out))
      assert.matches("†input.city is absent", r.err, 1, true)
    end)
  end)

  describe("refund", function()
    it("writes a receipt and a confirmation when the refund succeeds", function()
      local r = run("refund", "--input", '{"orderId":"A-100","amount":1999}')
      assert.are.equal(0, r.code, r.err)
      assert.are.same({
        receipt = { orderId = "A-100", refunded = 1999, currency = "EUR", reference = "RF-A-100-1999" },
        error = null,
        message = "Order A-100: 19.99 EUR refunded (reference RF-A-100-1999).",
      }, decode(r.out))
    end)

    it("routes the tool's Lua error to †state.error, handled: exit 0, journalled as an output", function()
      local j = os.tmpname()
      local r = run("refund", "--input", '{"orderId":"A-101","amount":5000}', "--journal", j)
      assert.are.equal(0, r.code, r.err)
      local err = { error = "refund of 5000 exceeds the 1250 paid for A-101", tool = "refund", call = "refund" }
      assert.are.same({
        receipt = null,
        error = err,
        message = "We could not refund order A-101 (refund of 5000 exceeds the 1250 paid for A-101). "
          .. "Our team will contact you.",
      }, decode(r.out))
      assert.matches("the error goes to †state.error", r.err, 1, true)

      local plan = decode(cli.slurp("plans/refund/plan.json"))
      local msgs = undate(lines(j))
      assert.are.equal(4, #msgs)
      assert.are.equal("plan", msgs[1].type)
      assert.are.same(plan, msgs[1].plan)
      assert.are.same({ type = "data", kind = "input", data = { orderId = "A-101", amount = 5000 } }, msgs[2])
      assert.are.same({
        type = "data", kind = "state", data = { error = err },
        _path = "error", _outputMethod = "set", _call = plan.plan[1],
      }, msgs[3])
      assert.are.same({
        type = "data", kind = "state", data = { message = decode(r.out).message },
        _path = "message", _outputMethod = "set", _call = plan.plan[2],
      }, msgs[4])
      os.remove(j)
    end)

    it("routes an unknown order the same way", function()
      local r = run("refund", "--input", '{"orderId":"Z-9","amount":5}')
      assert.are.equal(0, r.code, r.err)
      local out = decode(r.out)
      assert.are.same({ error = "unknown order Z-9", tool = "refund", call = "refund" }, out.error)
      assert.are.equal(null, out.receipt)
    end)

    it("fails (exit 1, nothing routed) when a resolved param breaks the tool's schema", function()
      local r = run("refund", "--input", '{"orderId":"A-100","amount":0}')
      assert.are.equal(1, r.code)
      assert.are.same({ receipt = null, error = null, message = null }, decode(r.out))
      assert.matches("structural", r.err, 1, true)
    end)
  end)

  describe("translate", function()
    it("writes every translation the state schema allows", function()
      local r = run("translate", "--input", '{"text":"good morning my friend"}')
      assert.are.equal(0, r.code, r.err)
      assert.are.same({
        text = "good morning my friend",
        translations = { fr = "bon matin mon ami", de = "guten Morgen mein Freund", es = "buenos días mi amigo" },
      }, decode(r.out))
    end)

    it("refuses a write that breaks the state schema: structural error, exit 1, the rest written", function()
      local j = os.tmpname()
      local r = run("translate", "--input", '{"text":"hello my friend the cat sleeps"}', "--journal", j)
      assert.are.equal(1, r.code)
      assert.are.same({
        text = "hello my friend the cat sleeps",
        translations = { fr = "bonjour mon ami le chat dort", es = "hola mi amigo el gato duerme" },
      }, decode(r.out))
      assert.matches("call de (translate) failed (structural)", r.err, 1, true)
      assert.matches("maxLength", r.err, 1, true)
      local errors = {}
      for _, m in ipairs(lines(j)) do
        if m.kind == "error" then errors[#errors + 1] = m.data end
      end
      assert.are.equal(1, #errors)
      assert.are.equal("de", errors[1].id)
      assert.are.equal("structural", errors[1].phase)
      os.remove(j)
    end)
  end)

  describe("fanout-summary", function()
    it("maps summarize over the fetched list (_each), in the list's order, and joins them", function()
      local ev = os.tmpname()
      local r = run("fanout-summary", "--input", '{"topic":"Harbour City"}', "--events", ev)
      assert.are.equal(0, r.code, r.err)
      local bridge = "Harbour City: New bridge opens -- The city opened its new cycling bridge."
      local rail = "Harbour City: Rail strike ends -- Unions and the operator signed a deal overnight."
      local ports = "Harbour City: Ports reopen -- After the storm the harbour authority reopened all ports."
      assert.are.same({
        digest = { count = 3, text = "1. " .. ports .. "\n2. " .. rail .. "\n3. " .. bridge },
        summaries = { ports, rail, bridge },
      }, decode(r.out))
      -- the three copies run at once: all start before any ends; the join waits for all
      local events = lines(ev)
      local first_done = math.min(position(events, "done", "sum[0]"), position(events, "done", "sum[1]"),
                                  position(events, "done", "sum[2]"))
      for _, id in ipairs { "sum[0]", "sum[1]", "sum[2]" } do
        assert.is_true(position(events, "started", id) < first_done)
        assert.is_true(position(events, "started", id) > position(events, "done", "fetch"))
        assert.is_true(position(events, "started", "digest") > position(events, "done", id))
      end
      -- the copies finish shortest article first; their results keep the list's order
      assert.is_true(position(events, "done", "sum[2]") < position(events, "done", "sum[0]"))
      os.remove(ev)
    end)
  end)

  describe("notify", function()
    it("prints the result without waiting for the notification, then drains it before exit", function()
      local dir = tmpdir()
      local file = dir .. "/notify.txt"
      local ev = os.tmpname()
      local j = os.tmpname()
      local r = run("notify", "--input", cjson.encode { item = "lamp", notifyFile = file },
                    "--events", ev, "--journal", j)
      assert.are.equal(0, r.code, r.err)
      assert.are.same({
        order = { id = "ORD-LAMP", item = "lamp", price = 4500,
                  confirmation = "order ORD-LAMP confirmed: one lamp" },
        invoice = { order = "ORD-LAMP", total = 4500, currency = "EUR" },
      }, decode(r.out))
      assert.are.equal("notified: order ORD-LAMP confirmed: one lamp\n", cli.slurp(file))
      -- the run was done (its result ready) before the notification ended
      local events = lines(ev)
      assert.is_true(position(events, "run_done") < position(events, "done", "notify"))
      assert.is_true(events[position(events, "run_done")].t_ms < events[position(events, "done", "notify")].t_ms)
      -- a call without _outputPath writes nothing to the log
      for _, m in ipairs(lines(j)) do
        if m._call then assert.are_not.equal("notify", m._call._id) end
      end
      os.remove(ev)
      os.remove(j)
      os.execute("rm -rf " .. cli.quote(dir))
    end)

    it("abandons the notification after --drain-timeout, without changing the exit status", function()
      local dir = tmpdir()
      local file = dir .. "/notify.txt"
      local r = run("notify", "--input", cjson.encode { item = "mug", notifyFile = file },
                    "--drain-timeout", "20")
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("ORD-MUG", decode(r.out).order.id)
      assert.matches("1 fire-and-forget call still running after 20 ms: abandoned", r.err, 1, true)
      assert.is_false(exists(file))
      os.execute("rm -rf " .. cli.quote(dir))
    end)
  end)
end)
