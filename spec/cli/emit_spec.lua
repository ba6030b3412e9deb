-- emit_spec.lua -- tools that stream (issue 28): obelus.emit(value) sends a partial result
-- or progress while the call runs. It is a "progress" event with the call, the attempt
-- and the value (--events), a "progress" record of the journal (which resume reads past),
-- a line of `obelus log` and an instant of the trace; a value larger than --max-output,
-- or an emit from outside a running call, raises in the tool.
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/tools"

local function plan_file(json) return cli.tmpfile(json, ".json") end

local lines_of = cli.jsonl

describe("obelus.emit", function()
  it("is a progress event, in order, with the attempt, across a retry; and in the journal", function()
    local ev, j = os.tmpname(), os.tmpname()
    local r = cli.run({ "run", plan_file([=[[
      {"_id":"s","_tool":"steps","n":3,"fail_first":true,"_retry":{"attempts":2,"delay_ms":1},
       "_outputPath":"†state.s"}]]=]), "--tools", TOOLS, "--events", ev, "--journal", j,
      "--overwrite" })
    assert.are.equal(0, r.code, r.err)
    local seen = {}
    for _, e in ipairs(lines_of(ev)) do
      if e.event == "progress" then
        assert.are.equal("s", e.call)
        assert.are.equal("steps", e.tool)
        assert.are.equal(e.attempt, e.data.attempt) -- the event's attempt is the tool's
        seen[#seen + 1] = ("%d:%d"):format(e.attempt, e.data.step)
      elseif e.event == "started" or e.event == "done" then
        seen[#seen + 1] = ("%s@%d"):format(e.event, e.attempt)
      end
    end
    assert.are.same({ "started@1", "1:1", "1:2", "1:3", "2:1", "2:2", "2:3", "done@2" }, seen)
    local recs = {}
    for _, m in ipairs(lines_of(j)) do
      if m.journal == "progress" then
        assert.are.equal("s", m.id)
        assert.is_true(m.t > 0)
        recs[#recs + 1] = ("%d:%d"):format(m.attempt, m.data.step)
      end
    end
    assert.are.same({ "1:1", "1:2", "1:3", "2:1", "2:2", "2:3" }, recs)
    os.remove(ev)
    os.remove(j)
  end)

  it("is shown by `obelus log`, the report and `log --format trace`; resume reads past it", function()
    local j = os.tmpname()
    local r = cli.run({ "run", plan_file([=[[
      {"_id":"s","_tool":"steps","n":2,"_outputPath":"†state.s"},
      {"_id":"t","_tool":"echo","value":"†state.s","_outputPath":"†state.t"}]]=]),
      "--tools", TOOLS, "--journal", j, "--overwrite" })
    assert.are.equal(0, r.code, r.err)
    local log = cli.run({ "log", j })
    assert.are.equal(0, log.code, log.err)
    local shown = {}
    for line in log.out:gmatch("[^\n]+") do
      if line:match("progress") then shown[#shown + 1] = line end
    end
    assert.are.equal(2, #shown, log.out)
    assert.matches('s', shown[1])
    assert.matches('"step":1', shown[1], 1, true)
    assert.matches('"step":2', shown[2], 1, true)
    -- the report: each call's values, with their attempt and time, in the page's data
    local html = os.tmpname() .. ".html"
    local rep = cli.run({ "report", j, "-o", html })
    assert.are.equal(0, rep.code, rep.err)
    local page = assert(io.open(html)):read("a")
    os.remove(html)
    local run = cjson.decode(page:match('<script type="application/json" id="obelus%-run">(.-)</script>')).run
    local sent
    for _, c in ipairs(run.calls) do if c.id == "s" then sent = c.progress end end
    assert.are.equal(2, #sent)
    for i, p in ipairs(sent) do
      assert.are.equal(1, p[1])         -- the attempt
      assert.is_true(p[2] >= 0)         -- microseconds since the run began
      assert.are.equal(i, p[3].step)    -- the value
    end
    local trace = cli.run({ "log", j, "--format", "trace" })
    assert.are.equal(0, trace.code, trace.err)
    local t = cjson.decode(trace.out)
    local instants = 0
    for _, e in ipairs(t.traceEvents) do
      if e.ph == "i" and e.name == "progress" then
        instants = instants + 1
        assert.are.equal(instants, e.args.data.step)
      end
    end
    assert.are.equal(2, instants)
    -- a journal cut after the first progress record: resume runs the call again
    local cut = os.tmpname()
    local f, n = assert(io.open(cut, "w")), 0
    for line in io.lines(j) do
      f:write(line, "\n")
      if line:match('"journal":"progress"') then break end
      n = n + 1
    end
    f:close()
    local again = cli.run({ "resume", cut, "--tools", TOOLS })
    assert.are.equal(0, again.code, again.err)
    assert.are.same({ s = 2, t = 2 }, cjson.decode(again.out))
    os.remove(j)
    os.remove(cut)
  end)

  it("raises for a value larger than --max-output, which the tool may catch", function()
    local tools = cli.tmpfile([[
      local obelus = require "obelus"
      return { { name = "big", run = function()
        local ok, err = pcall(obelus.emit, string.rep("x", 3000))
        return { ok = ok, err = tostring(err) }
      end } }]], ".lua")
    local r = cli.run({ "run", plan_file([=[[{"_tool":"big","_outputPath":"†state.b"}]]=]),
      "--tools", tools, "--max-output", "1" })
    assert.are.equal(0, r.code, r.err)
    local out = cjson.decode(r.out)
    assert.is_false(out.b.ok)
    assert.matches("larger than the run's --max-output of 1 KB", out.b.err, 1, true)
  end)

  it("raises outside a running call: at load, and in a callback after the attempt ended", function()
    local tools = cli.tmpfile([[
      local obelus = require "obelus"
      local at_load = { pcall(obelus.emit, 1) }
      return { { name = "late", run = function()
        return { ok = at_load[1], err = tostring(at_load[2]) }
      end } }]], ".lua")
    local r = cli.run({ "run", plan_file([=[[{"_tool":"late","_outputPath":"†state.l"}]]=]),
      "--tools", tools })
    assert.are.equal(0, r.code, r.err)
    local out = cjson.decode(r.out)
    assert.is_false(out.l.ok)
    assert.matches("obelus.emit must be called from a tool's own coroutine", out.l.err, 1, true)
  end)

  it("reaches --events from a run on threads, each part's in its order", function()
    local ev = os.tmpname()
    local r = cli.run({ "run", plan_file([=[{"instances":["a","b","c"],
      "plan":[{"_id":"s","_tool":"steps","n":2,"_outputPath":"†state.s"}]}]=]),
      "--tools", TOOLS, "--threads", "2", "--events", ev })
    assert.are.equal(0, r.code, r.err)
    local by = {}
    for _, e in ipairs(lines_of(ev)) do
      if e.event == "progress" then
        by[e.call] = by[e.call] or {}
        table.insert(by[e.call], e.data.step)
      end
    end
    assert.are.same({ ["s@a"] = { 1, 2 }, ["s@b"] = { 1, 2 }, ["s@c"] = { 1, 2 } }, by)
    os.remove(ev)
  end)
end)

describe("--events - and --events stderr", function()
  local PLAN = [=[[{"_id":"s","_tool":"steps","n":2,"_outputPath":"†state.s"}]]=]

  it("- writes the events to stdout, the output as their last line (for jq)", function()
    local r = cli.run({ "run", plan_file(PLAN), "--tools", TOOLS, "--events", "-" })
    assert.are.equal(0, r.code, r.err)
    local lines = {}
    for line in r.out:gmatch("[^\n]+") do lines[#lines + 1] = cjson.decode(line) end
    assert.is_true(#lines >= 6, r.out)
    assert.are.equal("run_done", lines[#lines - 1].event)
    assert.are.same({ event = "output", data = { s = 2 } }, lines[#lines])
    assert.are.equal(2, #(function()
      local p = {}
      for _, e in ipairs(lines) do if e.event == "progress" then p[#p + 1] = e end end
      return p
    end)())
    assert.is_nil(r.err:find('"event"', 1, true))
  end)

  it("stderr keeps the events on stderr and the pretty output on stdout", function()
    local r = cli.run({ "run", plan_file(PLAN), "--tools", TOOLS, "--events", "stderr" })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ s = 2 }, cjson.decode(r.out))
    assert.matches('"event":"progress"', r.err, 1, true)
    assert.matches('"event":"run_done"', r.err, 1, true)
    assert.is_nil(r.err:find('"event":"output"', 1, true))
  end)

  it("- with a failed run: the output line still comes, and the exit is 1", function()
    local r = cli.run({ "run", plan_file([=[[{"_tool":"fail","_outputPath":"†state.f"}]]=]),
      "--tools", TOOLS, "--events", "-" })
    assert.are.equal(1, r.code, r.err)
    local last
    for line in r.out:gmatch("[^\n]+") do last = cjson.decode(line) end
    assert.are.equal("output", last.event)
  end)
end)

-- Every line --events writes is valid against docs/events.schema.json. The check is the
-- engine's own JSON Schema validator: each line becomes a call of a tool whose schema is
-- the events schema, and `obelus check` validates the calls' params against it.
describe("the events schema (docs/events.schema.json)", function()
  -- strings beginning with † are literals in a plan: escaped (††), at any depth
  local function literal(v)
    if type(v) == "string" and v:sub(1, 3) == "†" then return "†" .. v end
    if type(v) ~= "table" then return v end
    local t = {}
    for k, x in pairs(v) do t[k] = literal(x) end
    return setmetatable(t, getmetatable(v))
  end

  local function check_lines(lines)
    local tools = cli.tmpfile([[
      local f = assert(io.open("docs/events.schema.json"))
      local schema = require("cjson").decode(f:read("a"))
      f:close()
      return { { name = "event", schema = schema, run = function() end } }]], ".lua")
    local calls = {}
    for i, line in ipairs(lines) do
      local e = literal(cjson.decode(line))
      e._tool, e._id = "event", "line" .. i
      calls[#calls + 1] = e
    end
    return cli.run({ "check", plan_file(cjson.encode(calls)), "--tools", tools })
  end

  it("holds every line of a run with every kind of event", function()
    local r = cli.run({ "run", plan_file([=[[
      {"_id":"s","_tool":"steps","n":2,"fail_first":true,"_retry":{"attempts":2,"delay_ms":1},
       "_outputPath":"†state.s"},
      {"_id":"h","_tool":"fail","_outputPath":"†state.ok || †state.err"},
      {"_id":"big","_tool":"echo","value":"]=] .. string.rep("x", 5000) .. [=[","_outputPath":"†state.big"},
      {"_id":"f","_tool":"fail","_outputPath":"†state.f"},
      {"_id":"k","_tool":"echo","value":"†state.f","_outputPath":"†state.k"}]]=]),
      "--tools", TOOLS, "--events", "-" })
    assert.are.equal(1, r.code, r.err)
    local lines, kinds = {}, {}
    for line in r.out:gmatch("[^\n]+") do
      lines[#lines + 1] = line
      local e = cjson.decode(line)
      kinds[e.event] = true
      if e.event == "done" and e.call == "h" then
        assert.is_true(e.handled)
        assert.matches("failed on purpose", e.value.error, 1, true)
      elseif e.event == "done" and e.call == "big" then
        assert.is_nil(e.value)
        assert.are.equal(5002, e.size)
      elseif e.event == "done" and e.call == "s" then
        assert.are.equal(2, e.value)
      end
    end
    for _, k in ipairs { "ready", "started", "done", "skipped", "failed", "run_done", "note",
                         "progress", "output" } do
      assert.is_true(kinds[k], k)
    end
    local c = check_lines(lines)
    assert.are.equal(0, c.code, c.err)
  end)

  it("refuses lines that break it: the check can fail", function()
    local c = check_lines({ '{"event":"bogus","t_ms":1}',
                            '{"event":"progress","t_ms":1,"call":"a","tool":"t","attempt":1}',
                            '{"event":"ready","t_ms":1,"call":"a","tool":"t","value":1}' })
    assert.are.equal(2, c.code)
    for i = 1, 3 do assert.matches("call line" .. i, c.err, 1, true) end
  end)
end)

