-- log_spec.lua -- `obelus log JOURNAL [--at N]`: a real run's journal read back as a
-- timeline (order, call ids, tools, paths, errors, delegated runs indented), the
-- documents as of message N, malformed journals, and colour only on a terminal.
local cli = require "support.cli"
local cjson = require "cjson"

local WEATHER = "plans/weather/plan.json"
local DAGGER = "\u{2020}"

local function journal_of(path)
  local lines = {}
  for line in io.lines(path) do
    local m = cjson.decode(line)
    if not m.journal then lines[#lines + 1] = m end -- the journal's records are not messages
  end
  return lines
end

-- runs a plan with --journal; returns the journal's file name
local function journal(plan, tools, ...)
  local j = os.tmpname()
  local args = { "run", plan, "--journal", j, ... }
  for _, t in ipairs(tools) do
    args[#args + 1] = "--tools"
    args[#args + 1] = t
  end
  local r = cli.run(args)
  assert(r.code ~= 2, r.err)
  return j
end

-- the lines of text, and for each position ("3", "2.1") the line that shows it
local function timeline(text)
  local lines, at = {}, {}
  for line in text:gmatch("([^\n]*)\n") do
    lines[#lines + 1] = line
    local pos = line:match("^%s*([%d.]+)  ")
    if pos then at[pos] = { text = line, n = #lines } end
  end
  return lines, at
end

local weather_london -- one journal shared by several tests
local function london()
  weather_london = weather_london or journal(WEATHER, { "plans/weather/tools" }, "--input", '{"city":"London"}')
  return weather_london
end

describe("obelus log: the timeline", function()
  it("shows every message of a real run in order, with its call id, tool and path", function()
    local j = london()
    local msgs = journal_of(j)
    local r = cli.run { "log", j }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("", r.err)
    local lines, at = timeline(r.out)
    local last = 0
    for i, m in ipairs(msgs) do
      local row = at[tostring(i - 1)]
      assert(row, "no line for message " .. (i - 1) .. " in\n" .. r.out)
      assert.is_true(row.n > last, "message " .. (i - 1) .. " out of order")
      last = row.n
      if m._call then
        assert.matches("  " .. m._call._id .. "%s+" .. m._call._tool .. "%s+" .. DAGGER .. m.kind .. "%." .. m._path:gsub("%.", "%%."), row.text)
        assert.matches("^%s*%d+  %+%d+%.%d%d%ds  ", row.text) -- time since the first _date
      end
    end
    assert.matches("── plan plans/weather/plan.json · 4 calls", at["0"].text, 1, true) -- the header
    assert.matches(DAGGER .. "input merge  {\"city\":\"London\"}", at["2"].text, 1, true) -- method when not set
    assert.matches('"rainy in London, 12°C: a film at the cinema"', r.out, 1, true) -- the value
    assert.matches("^6 messages · 3 outputs · 0 errors", lines[#lines])
    -- a skipped call writes nothing: no line of the timeline, a line of the calls
    local timeline_part, calls_part = r.out:match("^(.-)\ncalls, from the run's first start:\n(.*)$")
    assert.is_nil(timeline_part:find("park  ", 1, true))
    assert.matches("\n?  park%s+park%s+%-  skipped\n", calls_part)
  end)

  it("lists every call from the journal's records: start, end, how long, attempts, state, fire-and-forget", function()
    -- a call failing twice then handled (its error to †state.err), a fire-and-forget call,
    -- a call that waits 60 ms, a call skipped (it reads what the handled one did not write)
    local plan = cli.tmpfile([=[
[ {"_id": "a", "_tool": "fail", "_outputPath": "†state.a || †state.err", "_retry": {"attempts": 3, "delay_ms": 10}},
  {"_id": "n", "_tool": "echo", "value": "†state.err"},
  {"_id": "s", "_tool": "sleepy", "ms": 60, "value": "†state.err", "_outputPath": "†state.s"},
  {"_id": "k", "_tool": "echo", "value": "†state.a", "_outputPath": "†state.k"} ]
]=], ".json")
    local j = journal(plan, { "spec/cli/tools" })
    local r = cli.run { "log", j }
    assert.are.equal(0, r.code, r.err)
    local calls_part = r.out:match("\ncalls, from the run's first start:\n(.*)$")
    assert(calls_part, r.out)
    local rows = {}
    for line in calls_part:gmatch("([^\n]*)\n") do
      local id, rest = line:match("^  (%S+)%s+%S+%s+(.*)$")
      if id then rows[id] = rest end
    end
    local function times(id)
      local s, e, ms = rows[id]:match("^([%d.]+)s → ([%d.]+)s  ([%d.]+) ms")
      return tonumber(s), tonumber(e), tonumber(ms)
    end
    assert.matches("  3 attempts  handled$", rows.a)
    assert.matches("  done  fire%-and%-forget$", rows.n)
    assert.matches("^%-  skipped$", rows.k)
    local as, ae = times("a")
    local ss, se, sms = times("s")
    assert.are.equal(0, as) -- the run's first start
    assert.is_true(ae > 0, rows.a) -- three attempts, waits between them
    assert.is_true(ss >= ae, "s starts once a has settled")
    assert.is_true(sms >= 60 and math.abs((se - ss) * 1000 - sms) < 1.5, rows.s)
    -- the messages' times count from the run's first start too: a's output is not at 0
    local _, at = timeline(r.out)
    local written = tonumber(at["1"].text:match("%+([%d.]+)s")) -- its _date: to the ms
    -- after the run's start (its retries waited) and no later than a settled (to the ms):
    -- an order, which a loaded machine cannot upset, where a bound on the gap could
    assert.is_true(written > 0.001 and written <= ae + 0.001, at["1"].text .. " / " .. rows.a)
    assert.matches("^3 messages · 2 outputs", r.out:match("([^\n]*)\n$"))
  end)

  it("marks error messages, and names calls without _id as the run did", function()
    local plan = cli.tmpfile([=[{"instances":["a","b"],"plan":[
      {"_id":"bad","_tool":"fail","message":"nope","_outputPath":"†state.v","_instance":"a"},
      {"_tool":"echo","value":"plain","_outputPath":"†state.w"},
      {"_id":"h","_tool":"fail","message":"caught","_outputPath":"†state.ok || †state.err"}
    ]}]=], ".json")
    local j = journal(plan, { "spec/cli/tools" })
    local r = cli.run { "log", j }
    assert.are.equal(0, r.code, r.err)
    local _, at = timeline(r.out)
    local err
    for _, row in pairs(at) do
      if row.text:find("✗", 1, true) then err = row.text end
    end
    assert(err, "no error line in\n" .. r.out)
    assert.matches("bad%s+fail%s+✗ failed %(runtime%)  spec/cli/tools/testtools.lua:%d+: nope", err)
    assert.matches("#1@a%s+echo%s+" .. DAGGER .. "state.w  \"plain\"", r.out)
    assert.matches("#1@b%s+echo%s+" .. DAGGER .. "state.w  \"plain\"", r.out)
    -- an error a || alternative received is an output, marked as handled
    assert.matches("h@a%s+fail%s+" .. DAGGER .. "state.err ⚠ handled error  {\"error\":", r.out)
    assert.matches("· 1 error", r.out, 1, true)
  end)

  it("shows a delegated run's messages indented under its call, level by level", function()
    local parent = "spec/cli/fixtures/delegate/parent-log-" .. tostring(math.random(1e9)) .. ".json"
    local f = assert(io.open(parent, "w"))
    f:write([[{"context":[{"type":"input","data":{"n":2}}],
      "plan":[{"_id":"count","_delegate":"countdown.json","n":"†input.n","_outputPath":"out"}]}]])
    f:close()
    local j = journal(parent, { "spec/cli/tools", "spec/cli/fixtures/delegate/tools.lua" })
    os.remove(parent)
    local r = cli.run { "log", j }
    assert.are.equal(0, r.code, r.err)
    local lines, at = timeline(r.out)
    assert.matches("^2  %+[%d.]+s  count  delegate  " .. DAGGER .. "state.out  \"liftoff\"$", at["2"].text)
    -- the sub-run follows its call, four columns deeper per level
    assert.are.equal(at["2"].n + 1, at["2.0"].n)
    assert.matches("^    2.0  ── plan [%w/_-]*countdown.json · 2 calls$", at["2.0"].text)
    assert.matches("^    2.1%s+" .. DAGGER .. "input merge  {\"n\":2}$", at["2.1"].text)
    assert.matches("^    2.2  %+[%d.]+s  step   dec%s+" .. DAGGER .. "state.next  1$", at["2.2"].text)
    assert.matches("^    2.3  %+[%d.]+s  again  delegate  " .. DAGGER .. "state.result  \"liftoff\"$", at["2.3"].text)
    assert.matches("^        2.3.2  %+[%d.]+s  step   dec%s+" .. DAGGER .. "state.next  0$", at["2.3.2"].text)
    assert.matches("^            2.3.3.2  %+[%d.]+s  step  dec  " .. DAGGER .. "state.done  \"liftoff\"$", at["2.3.3.2"].text)
    assert.matches("^3 messages · 1 output · 0 errors", lines[#lines])
  end)

  it("cuts long values with … when piped", function()
    local long = string.rep("x", 200)
    local plan = cli.tmpfile(string.format('[{"_id":"big","_tool":"echo","value":"%s","_outputPath":"big"}]', long), ".json")
    local r = cli.run { "log", journal(plan, { "spec/cli/tools" }) }
    local line = r.out:match("[^\n]*big  echo[^\n]*")
    assert.matches('"xxxx+…$', line)
    assert.is_true(utf8.len(line:match('  ("x+…)$')) == 60)
  end)

  it("marks the messages that carry a schema, and only those", function()
    local j = journal("plans/translate/plan.json", { "plans/translate/tools" }, "--input", '{"text":"good morning my friend"}')
    local msgs = journal_of(j)
    local r = cli.run { "log", j }
    assert.are.equal(0, r.code, r.err)
    local _, at = timeline(r.out)
    local marked = 0
    for i, m in ipairs(msgs) do
      local row = at[tostring(i - 1)]
      assert(row, "no line for message " .. (i - 1) .. " in\n" .. r.out)
      local shows = row.text:find(" +schema", 1, true) ~= nil
      assert.are.equal(m.schema ~= nil and m.type ~= "plan", shows, row.text)
      if shows then marked = marked + 1 end
    end
    assert.are.equal(1, marked) -- the plan's state schema, in its context
    os.remove(j)
  end)
end)

describe("obelus log --at N", function()
  it("prints every kind's document as of message N", function()
    local j = london()
    local r = cli.run { "log", j, "--at", "0" }
    assert.are.equal(0, r.code)
    assert.are.equal('{\n  "at": 0,\n  "documents": {}\n}\n', r.out)
    r = cli.run { "log", j, "--at", "3" }
    assert.are.equal('{\n  "at": 3,\n  "documents": {\n    "input": {\n      "markerDir": null,\n'
      .. '      "city": "London"\n    }\n  }\n}\n', r.out)
    r = cli.run { "log", j, "--at", "4" }
    assert.are.same({ at = 4, documents = {
      input = { markerDir = cjson.null, city = "London" },
      state = { rainy = { city = "London", sky = "rainy", celsius = 12 } } } }, cjson.decode(r.out))
    r = cli.run { "log", j, "--at", "6" }
    assert.are.same({ rainy = { city = "London", sky = "rainy", celsius = 12 },
      suggestion = { movie = "rainy in London, 12°C: a film at the cinema" },
      answer = "Today: rainy in London, 12°C: a film at the cinema." }, cjson.decode(r.out).documents.state)
  end)

  it("adds each instance's views when the log has instances", function()
    local log = cli.tmpfile(table.concat({
      '{"type":"state","data":{"lang":"en","n":1}}',
      '{"type":"state","data":{"lang":"fr"},"_instance":"fr"}',
      '{"type":"data","kind":"state","data":{"n":2},"_path":"n"}',
    }, "\n") .. "\n", ".jsonl")
    local r = cli.run { "log", log, "--at", "2" }
    assert.are.same({ at = 2, documents = { state = { lang = "en", n = 1 } },
      instances = { fr = { state = { lang = "fr", n = 1 } } } }, cjson.decode(r.out))
    -- each document and view is what `resolve` reads there
    r = cli.run { "log", log, "--at", "3" }
    local docs = cjson.decode(r.out)
    assert.are.same(cjson.decode(cli.run({ "resolve", log, DAGGER .. "state", "--at", "3" }).out),
      docs.documents.state)
    assert.are.same(cjson.decode(cli.run({ "resolve", log, DAGGER .. "state", "--at", "3", "--instance", "fr" }).out),
      docs.instances.fr.state)
    assert.are.equal(2, docs.documents.state.n)
  end)

  it("refuses a position past the end", function()
    local r = cli.run { "log", london(), "--at", "7" }
    assert.are.equal(2, r.code)
    assert.matches("--at 7: .* holds 6 messages", r.err)
    assert.are.equal("", r.out)
  end)
end)

describe("obelus log: unusable input", function()
  it("names the file and line of a malformed journal, exit 2", function()
    local bad = cli.tmpfile('{"type":"plan","plan":[]}\n{"type":"input","data":{"a":1}}\n{"oops": \n', ".jsonl")
    local r = cli.run { "log", bad }
    assert.are.equal(2, r.code)
    assert.matches("obelus log: " .. bad:gsub("%p", "%%%0") .. ":3: ", r.err)
    assert.are.equal("", r.out)
    local notmsg = cli.tmpfile('{"type":"input","data":{}}\n42\n', ".jsonl")
    r = cli.run { "log", notmsg }
    assert.are.equal(2, r.code)
    assert.matches(":2: a message must be a JSON object", r.err, 1, true)
  end)

  it("says so for a missing file and for bad usage", function()
    local r = cli.run { "log", "/nonexistent/run.jsonl" }
    assert.are.equal(2, r.code)
    assert.matches("/nonexistent/run.jsonl: No such file", r.err, 1, true)
    assert.are.equal(2, cli.run({ "log" }).code)
    assert.are.equal(2, cli.run({ "log", london(), "--at", "x" }).code)
    assert.are.equal(2, cli.run({ "log", london(), "--colour" }).code)
    local h = cli.run { "log", "--help" }
    assert.are.equal(0, h.code)
    assert.matches("usage: obelus log JOURNAL [--at N]", h.out, 1, true)
    assert.matches("examples:", h.out, 1, true)
  end)

  it("is listed by `obelus --help`, and so is resume", function()
    local r = cli.run { "--help" }
    assert.matches("\n  log JOURNAL [--at N] ", r.out, 1, true)
    assert.matches("\n  resume JOURNAL ", r.out, 1, true)
    local p = cli.run { "resume", "no-such-journal.jsonl" }
    assert.are.equal(2, p.code)
    assert.matches("no-such-journal.jsonl", p.err, 1, true)
  end)
end)

describe("obelus log: colour", function()
  local has_script = os.execute("command -v script >/dev/null 2>&1")

  it("writes no escape codes when piped", function()
    local r = cli.run { "log", london() }
    assert.is_nil(r.out:find("\27", 1, true))
  end)

  it("colours a terminal, unless NO_COLOR is set", function()
    if not has_script then return pending("script(1) is not installed") end
    local function on_tty(env)
      local out = os.tmpname()
      os.execute(string.format("%s script -qec %s /dev/null > %s", env,
        cli.quote(cli.quote(cli.bin) .. " log " .. cli.quote(london())), out))
      return cli.slurp(out)
    end
    local coloured = on_tty("TERM=xterm")
    assert.matches("\27[1;35m── plan", coloured, 1, true)
    assert.matches("\27[32m" .. DAGGER .. "state.rainy\27[0m", coloured, 1, true)
    assert.is_nil(on_tty("TERM=xterm NO_COLOR=1"):find("\27", 1, true))
  end)
end)
