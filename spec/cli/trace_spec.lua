-- spec/cli/trace_spec.lua -- `obelus log JOURNAL --format trace|otlp`: a run's journal as
-- the Chrome Trace Event format and as OTLP/JSON spans, each checked against a JSON Schema
-- of its format's rules (with `obelus schema`) and for what it must say: an event per
-- call attempt, instances apart, flow arrows from writers to readers, params, outputs
-- and errors, one trace per run, delegated spans under their call's.
local cjson = require "cjson"
local cli = require "support.cli"

-- The Trace Event Format's rules for the events we write (complete, instant, flow,
-- metadata), from its specification: ts/dur in microseconds, pid/tid integers.
local CHROME = cli.tmpfile(cjson.encode {
  ["$schema"] = "http://json-schema.org/draft-07/schema#",
  type = "object",
  required = { "traceEvents" },
  properties = {
    displayTimeUnit = { enum = { "ms", "ns" } },
    traceEvents = {
      type = "array",
      items = {
        type = "object",
        required = { "name", "ph", "pid" },
        properties = {
          name = { type = "string" }, cat = { type = "string" },
          ph = { enum = { "X", "i", "s", "f", "M" } },
          ts = { type = "number", minimum = 0 }, dur = { type = "number", minimum = 0 },
          pid = { type = "integer" }, tid = { type = "integer" },
          s = { enum = { "g", "p", "t" } }, bp = { const = "e" },
          id = { type = { "integer", "string" } }, args = { type = "object" },
        },
        allOf = {
          { ["if"] = { properties = { ph = { const = "X" } } },
            ["then"] = { required = { "ts", "dur", "tid" } } },
          { ["if"] = { properties = { ph = { enum = { "s", "f" } } } },
            ["then"] = { required = { "ts", "id", "tid" } } },
          { ["if"] = { properties = { ph = { const = "i" } } }, ["then"] = { required = { "ts", "s" } } },
          { ["if"] = { properties = { ph = { const = "M" } } },
            ["then"] = { required = { "args" },
                         properties = { name = { enum = { "process_name", "process_sort_index",
                                                          "thread_name", "thread_sort_index" } } } } },
        },
      },
    },
  },
}, ".json")

-- OTLP/JSON (opentelemetry-proto's trace.proto in the JSON mapping): hex ids of 16 and
-- 8 bytes, 64-bit integers as decimal strings, enums as integers.
local OTLP = cli.tmpfile(cjson.encode {
  ["$schema"] = "http://json-schema.org/draft-07/schema#",
  definitions = {
    attrs = { type = "array", items = {
      type = "object", required = { "key", "value" },
      properties = { key = { type = "string", minLength = 1 },
                     value = { type = "object", minProperties = 1, maxProperties = 1,
                               properties = { stringValue = { type = "string" },
                                              intValue = { type = "string", pattern = "^-?[0-9]+$" },
                                              boolValue = { type = "boolean" },
                                              doubleValue = { type = "number" } },
                               additionalProperties = false } } } },
  },
  type = "object", required = { "resourceSpans" },
  properties = { resourceSpans = { type = "array", minItems = 1, items = {
    type = "object", required = { "resource", "scopeSpans" },
    properties = {
      resource = { type = "object", properties = { attributes = { ["$ref"] = "#/definitions/attrs" } } },
      scopeSpans = { type = "array", items = {
        type = "object", required = { "scope", "spans" },
        properties = {
          scope = { type = "object", required = { "name" } },
          spans = { type = "array", items = {
            type = "object",
            required = { "traceId", "spanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano" },
            properties = {
              traceId = { type = "string", pattern = "^[0-9a-f]{32}$" },
              spanId = { type = "string", pattern = "^[0-9a-f]{16}$" },
              parentSpanId = { type = "string", pattern = "^[0-9a-f]{16}$" },
              name = { type = "string" },
              kind = { type = "integer", minimum = 0, maximum = 5 },
              startTimeUnixNano = { type = "string", pattern = "^[0-9]+$" },
              endTimeUnixNano = { type = "string", pattern = "^[0-9]+$" },
              attributes = { ["$ref"] = "#/definitions/attrs" },
              status = { type = "object", properties = { code = { enum = { 0, 1, 2 } },
                                                         message = { type = "string" } } },
            } } } } } } } } } },
}, ".json")

local journal_of = cli.journal_of

local function as(format, journal)
  local r = cli.run { "log", journal, "--format", format }
  assert.are.equal(0, r.code, r.err)
  local f = cli.tmpfile(r.out, ".json")
  local s = cli.run { "schema", format == "trace" and CHROME or OTLP, f }
  assert.are.equal(0, s.code, format .. " breaks its format's rules: " .. s.out .. s.err)
  os.remove(f)
  return cjson.decode(r.out)
end

local function events(doc, ph)
  local out = {}
  for _, e in ipairs(doc.traceEvents) do
    if e.ph == ph then out[#out + 1] = e end
  end
  return out
end

describe("log --format trace (Chrome Trace Event format)", function()
  it("an X event per call attempt with params and output, flow arrows from writer to readers", function()
    local j = journal_of { "plans/fanout-summary/plan.json", "--tools", "plans/fanout-summary/tools",
                           "--input", '{"topic":"Harbour City"}' }
    local doc = as("trace", j)
    local xs = events(doc, "X")
    assert.are.equal(6, #xs) -- fetch, sum (the _each call), its three copies, digest
    local by = {}
    for _, e in ipairs(xs) do by[e.args.call] = e end
    assert.are.equal("fetchArticles", by.fetch.args.tool)
    assert.are.equal("†input.topic", by.fetch.args.params.topic)
    assert.is_table(by.fetch.args.output.articles)
    assert.are.equal(3, by.digest.args.output.digest.count)
    -- the copies ran after fetch, within their _each call, and digest after them all
    for _, s in ipairs { "sum[0]", "sum[1]", "sum[2]" } do
      assert.is_table(by[s], s)
      assert.is_true(by[s].ts >= by.fetch.ts + by.fetch.dur - 1)
      assert.is_true(by[s].ts >= by.sum.ts - 1)
      assert.is_true(by.digest.ts >= by[s].ts + by[s].dur - 1)
    end
    -- an arrow from fetch to sum, from sum to digest: 2
    local s, f = events(doc, "s"), events(doc, "f")
    assert.are.equal(2, #s)
    assert.are.equal(2, #f)
    for k = 1, 2 do
      assert.are.equal(s[k].id, f[k].id)
      assert.are.equal("e", f[k].bp)
    end
    os.remove(j)
  end)

  it("instances are processes of their own; retries are attempts; errors in args", function()
    local plan = cli.tmpfile(cjson.encode {
      instances = { "a", "b" },
      plan = { { _id = "f", _tool = "flaky", file = os.tmpname(), succeed_on = 2, _retry = { attempts = 3, delay_ms = 1 },
                 _outputPath = "†state.x" },
               { _id = "bad", _tool = "flaky", file = os.tmpname(), succeed_on = 9, _outputPath = "†state.y" } },
    }, ".json")
    local j = journal_of { plan, "--tools", "spec/cli/fixtures/retry/tools.lua" }
    local doc = as("trace", j)
    local xs = events(doc, "X")
    local pids, attempts = {}, {}
    for _, e in ipairs(xs) do
      pids[e.args.call:match("@(.*)$")] = e.pid
      attempts[e.args.call] = (attempts[e.args.call] or 0) + 1
    end
    assert.are_not.equal(pids.a, pids.b)
    assert.are.same({ ["f@a"] = 2, ["f@b"] = 2, ["bad@a"] = 1, ["bad@b"] = 1 }, attempts)
    local names = {}
    for _, e in ipairs(events(doc, "M")) do
      if e.name == "process_name" then names[e.args.name] = true end
    end
    assert.is_true(names["instance a"] and names["instance b"])
    for _, e in ipairs(xs) do
      if e.args.call == "bad@a" then
        assert.are.equal("failed", e.args.state)
        assert.truthy(e.args.error:match("flaky failure"))
      elseif e.args.attempt == 1 and e.args.call:match("^f@") then
        assert.are.equal("retried", e.args.state)
        assert.truthy(e.args.error:match("flaky failure 1"))
      end
    end
    os.remove(j)
    os.remove(plan)
  end)

  it("a skipped call is an instant event", function()
    local j = journal_of { "plans/weather/plan.json", "--tools", "plans/weather/tools", "--input", '{"city":"Lisbon"}' }
    local doc = as("trace", j)
    local skipped = events(doc, "i")
    assert.are.equal(1, #skipped)
    assert.are.equal("skipped", skipped[1].args.state)
    os.remove(j)
  end)
end)

describe("log --format otlp (OpenTelemetry spans, OTLP/JSON)", function()
  it("one trace per run, a span per attempt under the run's, delegated spans under their call's", function()
    local dir = "spec/cli/fixtures/delegate"
    local parent = dir .. "/trace-parent-" .. tostring(math.random(1e9)) .. ".json"
    local h = assert(io.open(parent, "w"))
    h:write([[{"context":[{"type":"input","data":{"n":2}}],
      "plan":[{"_id":"count","_delegate":"countdown.json","n":"†input.n","_outputPath":"†state.out"}]}]])
    h:close()
    local j = journal_of { parent, "--tools", "spec/cli/tools", "--tools", dir .. "/tools.lua" }
    os.remove(parent)
    local doc = as("otlp", j)
    local spans = doc.resourceSpans[1].scopeSpans[1].spans
    local trace, by_name, by_id = spans[1].traceId, {}, {}
    for _, s in ipairs(spans) do
      assert.are.equal(trace, s.traceId)
      by_name[s.name] = s
      by_id[s.spanId] = s
    end
    local run = spans[1]
    assert.is_nil(run.parentSpanId)
    assert.truthy(run.name:match("^run "))
    local count = by_name["count (delegate)"]
    assert.are.equal(run.spanId, count.parentSpanId)
    -- the delegated plan's calls: children of count; the plan it delegates in turn: theirs
    local step = by_name["count › step (dec)"]
    assert.are.equal(count.spanId, step.parentSpanId)
    local again = by_name["count › again (delegate)"]
    assert.are.equal(count.spanId, again.parentSpanId)
    local inner = by_name["count/again › step (dec)"]
    assert.are.equal(again.spanId, inner.parentSpanId)
    for _, s in ipairs(spans) do
      assert.is_true(tonumber(s.endTimeUnixNano) >= tonumber(s.startTimeUnixNano))
      if s.parentSpanId then assert.is_table(by_id[s.parentSpanId], s.name) end
    end
    os.remove(j)
  end)

  it("a failed call's span has an error status with the message", function()
    local j = journal_of { "plans/translate/plan.json", "--tools", "plans/translate/tools",
                           "--input", '{"text":"hello my friend the cat sleeps"}' }
    local doc = as("otlp", j)
    local errors = 0
    for _, s in ipairs(doc.resourceSpans[1].scopeSpans[1].spans) do
      if s.status.code == 2 and s.status.message then errors = errors + 1 end
    end
    assert.is_true(errors >= 1)
    os.remove(j)
  end)

  it("refuses a file that is not a journal, and a bad format", function()
    local f = cli.tmpfile("not json\n")
    assert.are.equal(2, cli.run { "log", f, "--format", "otlp" }.code)
    assert.are.equal(2, cli.run { "log", f, "--format", "svg" }.code)
    os.remove(f)
  end)
end)
