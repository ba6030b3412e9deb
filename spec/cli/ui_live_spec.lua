-- ui_live_spec.lua -- `obelus ui` watching and steering runs (issue 29): the events of a
-- run as it goes (Server-Sent Events: a snapshot, the journal's records, the end), runs
-- started from the API and journaled in the folder, approval answered over HTTP (yes, no,
-- yes with params edited), cancel, resume of a cancelled run, fork from a call with a
-- value set, the Origin check on POST, and the errors. A real server and real runs,
-- asked with curl; every wait is for a state the server reports, never a sleep that
-- must be long enough.
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/tools"
local q = cli.quote
local sh = cli.sh

local ui = require "support.ui"
local tmpdir, serve, stop, req = ui.tmpdir, ui.serve, ui.stop, ui.req
local post, json, wait_run, count = ui.post, ui.json, ui.wait_run, ui.count

-- the events of a run, read by curl in the background into a file
local function follow(url, id)
  local out = os.tmpname()
  local pid = sh(("timeout 30 curl -sN %s >%s 2>/dev/null & echo $!"):format(
    q(url .. "api/runs/" .. id .. "/events"), q(out))):gsub("%s+$", "")
  for _ = 1, 250 do -- its snapshot has come: it views the run
    if cli.slurp(out):match("event: snapshot") then break end
    os.execute("sleep 0.02")
  end
  return out, pid
end

-- `obelus run --journal journal` started in the background: its pid, and its run's id
-- once the server lists it (its first record in the file) as source
local function run_listed(url, plan, journal, source)
  local rpid = sh(("%s run %s --tools %s --journal %s >/dev/null 2>&1 & echo $!"):format(
    q(cli.bin), q(plan), TOOLS, q(journal))):gsub("%s+$", "")
  for _ = 1, 500 do
    local _, body = req(url .. "api/runs")
    for _, r in ipairs(cjson.decode(body).runs) do
      if r.source == source then return rpid, r.id end
    end
    os.execute("sleep 0.02")
  end
  error(source .. " was never listed")
end

-- the events in a stream's text, in order: { {name=, data=decoded}... }
local function events(text)
  local list = {}
  for block in (text .. "\n\n"):gmatch("(.-)\n\n") do
    local name, data = block:match("event: (%S+)\ndata: (.*)")
    if name then list[#list + 1] = { name = name, data = cjson.decode(data) } end
  end
  return list
end

local SLOW = [=[[{"_id":"a","_tool":"sleepy","ms":300,"value":1,"_outputPath":"†state.a"},
  {"_id":"b","_tool":"sleepy","ms":300,"value":"†state.a","_outputPath":"†state.b"}]]=]

describe("obelus ui, live", function()
  local dir, url, pid
  setup(function()
    dir = tmpdir()
    url, pid = serve(dir, "--tools " .. TOOLS)
  end)
  teardown(function()
    stop(pid)
    os.execute("rm -rf " .. q(dir))
  end)

  it("streams a run's events as `obelus run --journal` writes it: a snapshot, its records, its end", function()
    local plan = cli.tmpfile(SLOW, ".json")
    local journal = dir .. "/ext.jsonl"
    local rpid, id = run_listed(url, plan, journal, "ext.jsonl")
    local out, cpid = follow(url, id)
    os.execute("wait " .. rpid .. " 2>/dev/null")
    for _ = 1, 500 do -- the stream ends with the run
      if cli.slurp(out):match("event: end") then break end
      os.execute("sleep 0.02")
    end
    os.execute("kill " .. cpid .. " 2>/dev/null")
    local ev = events(cli.slurp(out))
    assert.are.equal("snapshot", ev[1].name)
    assert.are.equal(id, ev[1].data.id)
    assert.are.equal("end", ev[#ev].name)
    assert.are.same({ exit = 0 }, ev[#ev].data)
    -- the snapshot and the records say every call settled, each once at least
    local settled = {}
    for _, c in ipairs(ev[1].data.run.calls) do
      if c.state == "done" then settled[c.id] = true end
    end
    for i = 2, #ev - 1 do
      assert.are.equal("records", ev[i].name)
      for _, rec in ipairs(ev[i].data) do
        if rec.journal == "settled" then
          assert.are.equal("done", rec.state)
          settled[rec.id] = true
        end
      end
    end
    assert.are.same({ a = true, b = true }, settled)
    -- a viewer of a run that has ended gets its snapshot and its end, then the stream ends
    local code, body = req(url .. "api/runs/" .. id .. "/events", "-N --max-time 10")
    assert.are.equal(200, code)
    local after = events(body)
    assert.are.equal(2, #after)
    assert.are.equal("done", after[1].data.state)
    assert.are.same({ name = "end", data = { exit = 0 } }, after[2])
  end)

  it("streams gzip to a client that takes it: each viewer a whole gzip stream, the same events", function()
    -- a gate, then 400 calls at once: batches of records past 16 KB, compressed by the
    -- loop's thread pool, with small events between them compressed on the loop
    local calls = { { _id = "gate", _tool = "sleepy", ms = 700, value = 0, _outputPath = "†state.gate" } }
    for k = 1, 400 do
      calls[#calls + 1] = { _id = "e" .. k, _tool = "echo", value = "†state.gate", _outputPath = "†state.e" .. k }
    end
    local plan = cli.tmpfile(cjson.encode(calls), ".json")
    local journal = dir .. "/gz.jsonl"
    local rpid, id = run_listed(url, plan, journal, "gz.jsonl")
    local ev_url = q(url .. "api/runs/" .. id .. "/events")
    local gz, hdr, plain = os.tmpname(), os.tmpname(), os.tmpname()
    local gpid = sh(("timeout 30 curl -sN -H 'Accept-Encoding: gzip' -D %s %s >%s 2>/dev/null & echo $!"):format(
      q(hdr), ev_url, q(gz))):gsub("%s+$", "")
    local ppid = sh(("timeout 30 curl -sN %s >%s 2>/dev/null & echo $!"):format(ev_url, q(plain))):gsub("%s+$", "")
    os.execute("wait " .. rpid .. " 2>/dev/null")
    for _ = 1, 1000 do -- both streams end with the run (curl has gone)
      if not cli.sh(("kill -0 %s %s 2>/dev/null && echo up"):format(gpid, ppid)):match("up") then break end
      os.execute("sleep 0.02")
    end
    assert.truthy(cli.slurp(hdr):lower():match("content%-encoding: gzip"))
    assert.is_nil(cli.slurp(plain):match("^\31\139")) -- not asked for: as it is
    -- a whole gzip stream (its CRC and length checked by gzip -t), of the same events
    assert.is_true(os.execute("gzip -t " .. q(gz) .. " 2>/dev/null"))
    local text = cli.sh("gzip -dc " .. q(gz))
    local function settled(list)
      local ids, n = {}, 0
      for _, e in ipairs(list) do
        if e.name == "snapshot" then
          for _, c in ipairs(e.data.run.calls) do
            if c.state == "done" and not ids[c.id] then ids[c.id], n = true, n + 1 end
          end
        elseif e.name == "records" then
          for _, r in ipairs(e.data) do
            if r.journal == "settled" and not ids[r.id] then ids[r.id], n = true, n + 1 end
          end
        end
      end
      return n, list[#list]
    end
    local n1, last1 = settled(events(text))
    local n2, last2 = settled(events(cli.slurp(plain)))
    assert.are.equal(401, n1)
    assert.are.equal(401, n2)
    assert.are.same({ name = "end", data = { exit = 0 } }, last1)
    assert.are.same(last1, last2)
    assert.is_true(#cli.slurp(gz) * 4 < #text, "compressed to under a quarter")
    -- one who comes after the end: its snapshot and end, a whole gzip stream too
    local after = os.tmpname()
    sh(("curl -sN --max-time 10 -H 'Accept-Encoding: gzip' %s >%s"):format(ev_url, q(after)))
    assert.is_true(os.execute("gzip -t " .. q(after) .. " 2>/dev/null"))
    local ev = events(cli.sh("gzip -dc " .. q(after)))
    assert.are.equal(2, #ev)
    assert.are.equal("done", ev[1].data.state)
    assert.are.same({ name = "end", data = { exit = 0 } }, ev[2])
    -- and q=0 is a no
    local code, body = req(url .. "api/runs/" .. id .. "/events", "-N --max-time 10 -H 'Accept-Encoding: gzip;q=0, identity'")
    assert.are.equal(200, code)
    assert.truthy(body:match("^retry: 1000\nevent: snapshot"))
  end)

  it("starts a run from a POST, journaled under the folder's ui/, and runs it", function()
    local code, made = json(post(url .. "api/runs",
      '{"plan": ' .. SLOW .. ', "name": "first <b>", "input": {"x": 1}}'))
    assert.are.equal(201, code)
    assert.matches("^ui/firstb%-%d+%-%d+%-%d+%.jsonl$", made.source)
    local r = wait_run(url, made.id, function(x) return x.state == "done" end)
    assert.are.equal(2, r.calls)
    assert.are.same({ a = 1 }, r.run.calls[1].output)
    assert.are.equal(1, count(dir .. "/" .. made.source, '"journal":"end"'))
    -- its input is the run's
    local _, st = json(req(url .. "api/runs/" .. made.id .. "/state"))
    assert.are.same({ x = 1 }, st.documents.input)
  end)

  it("asks before each call, and takes yes, yes with params edited, and no from a POST", function()
    local code, made = json(post(url .. "api/runs", '{"plan": ' .. SLOW .. ', "approve": true}'))
    assert.are.equal(201, code)
    local r = wait_run(url, made.id, function(x) return x.state == "waiting-approval" end)
    assert.are.equal("a", r.waiting[1].call)
    assert.are.equal("sleepy", r.waiting[1].tool)
    assert.are.equal(1, r.waiting[1].params.value)
    local out, cpid = follow(url, made.id)
    -- a call that does not wait, a decision that is neither: refused
    assert.are.equal(409, (post(url .. "api/runs/" .. made.id .. "/approve", '{"call":"b","decision":"yes"}')))
    assert.are.equal(400, (post(url .. "api/runs/" .. made.id .. "/approve", '{"call":"a","decision":"maybe"}')))
    -- yes, with a value edited (a string that looks like a reference stays text)
    assert.are.equal(200, (post(url .. "api/runs/" .. made.id .. "/approve",
      '{"call":"a","decision":"yes","params":{"ms":1,"value":"†state.nothing"}}')))
    r = wait_run(url, made.id, function(x)
      return x.state == "waiting-approval" and x.waiting[1].call == "b"
    end)
    assert.are.equal("†state.nothing", r.waiting[1].params.value)
    assert.are.equal(200, (post(url .. "api/runs/" .. made.id .. "/approve", '{"call":"b","decision":"no"}')))
    r = wait_run(url, made.id, function(x) return x.state == "failed" end)
    local calls = {}
    for _, c in ipairs(r.run.calls) do calls[c.id] = c end
    assert.are.equal("done", calls.a.state)
    assert.are.same({ a = "†state.nothing" }, calls.a.output)
    assert.are.equal("refused", calls.b.error)
    for _ = 1, 500 do
      if cli.slurp(out):match("event: end") then break end
      os.execute("sleep 0.02")
    end
    os.execute("kill " .. cpid .. " 2>/dev/null")
    local told = {}
    for _, e in ipairs(events(cli.slurp(out))) do
      if e.name == "waiting" then told[#told + 1] = #e.data > 0 and e.data[1].call or "-" end
    end
    assert.are.same({ "-", "b", "-" }, told) -- a answered, b asked, b answered
  end)

  it("cancels a run it started, resumes it without running again what completed, and forks it", function()
    local long = [=[[{"_id":"a","_tool":"sleepy","ms":1,"value":1,"_outputPath":"†state.a"},
      {"_id":"b","_tool":"sleepy","ms":60000,"value":"†state.a","_outputPath":"†state.b"},
      {"_id":"c","_tool":"echo","value":"†state.b","_outputPath":"†state.c"}]]=]
    local code, made = json(post(url .. "api/runs", '{"plan": ' .. long .. '}'))
    assert.are.equal(201, code)
    local path = dir .. "/" .. made.source
    wait_run(url, made.id, function()
      return count(path, '"journal":"start","id":"b"') == 1
    end)
    assert.are.equal(409, (post(url .. "api/runs/" .. made.id .. "/resume", "{}")))
    assert.are.equal(200, (post(url .. "api/runs/" .. made.id .. "/cancel", "")))
    wait_run(url, made.id, function(x) return x.state == "killed-resumable" end)
    assert.are.equal(0, count(path, '"journal":"end"'))
    assert.are.equal(409, (post(url .. "api/runs/" .. made.id .. "/cancel", "")))
    -- a fork from b with b's input set: a new run, a kept, b and c run again
    local fcode, forked = json(post(url .. "api/runs/" .. made.id .. "/fork",
      '{"from": "b", "set": {"†state.a": 7}}'))
    assert.are.equal(201, fcode)
    assert.matches("^ui/fork%-", forked.source)
    -- the fork's b sleeps a minute too: it is cancelled, and left resumable
    wait_run(url, forked.id, function()
      return count(dir .. "/" .. forked.source, '"journal":"start","id":"b"') == 1
    end)
    assert.are.equal(200, (post(url .. "api/runs/" .. forked.id .. "/cancel", "")))
    wait_run(url, forked.id, function(x) return x.state == "killed-resumable" end)
    local fj = cli.jsonl(dir .. "/" .. forked.source)
    local set
    for _, l in ipairs(fj) do
      if l.kind == "state" and l.data and l.data.a == 7 then set = true end
    end
    assert.is_true(set)
    -- a's records are the source's, copied: it did not run again
    assert.are.equal(1, count(dir .. "/" .. forked.source, '"journal":"start","id":"a"'))
    -- resume: b runs again (it never finished); a does not
    assert.are.equal(200, (post(url .. "api/runs/" .. made.id .. "/resume", "{}")))
    wait_run(url, made.id, function(x) return x.state == "running" end)
    assert.are.equal(1, count(path, '"journal":"start","id":"a"'))
    assert.are.equal(200, (post(url .. "api/runs/" .. made.id .. "/cancel", "")))
    wait_run(url, made.id, function(x) return x.state == "killed-resumable" end)
  end)

  it("resumes a run killed with SIGKILL to the end", function()
    local plan = cli.tmpfile([=[[{"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"b","_tool":"sleepy","ms":60000,"value":"†state.a","_outputPath":"†state.b"}]]=], ".json")
    local journal = dir .. "/killed.jsonl"
    local rpid = sh(("%s run %s --tools %s --journal %s >/dev/null 2>&1 & echo $!"):format(
      q(cli.bin), q(plan), TOOLS, q(journal))):gsub("%s+$", "")
    for _ = 1, 500 do
      if cli.slurp(journal):match('"journal":"start","id":"b"') then break end
      os.execute("sleep 0.02")
    end
    os.execute("kill -KILL " .. rpid .. "; wait " .. rpid .. " 2>/dev/null")
    local _, body = req(url .. "api/runs")
    local id
    for _, r in ipairs(cjson.decode(body).runs) do
      if r.source == "killed.jsonl" then
        id = r.id
        assert.are.equal("killed-resumable", r.state)
      end
    end
    -- the plan as it ran: b sleeps a minute again; its resume runs here, then is cancelled
    assert.are.equal(200, (post(url .. "api/runs/" .. id .. "/resume", "")))
    wait_run(url, id, function(x) return x.state == "running" end)
    assert.are.equal(1, count(journal, '"journal":"start","id":"a"'))
    assert.are.equal(2, count(journal, '"journal":"start","id":"b"'))
    assert.are.equal(200, (post(url .. "api/runs/" .. id .. "/cancel", "")))
  end)

  it("refuses a POST from another site's page, bad bodies, and what it cannot do", function()
    local port = url:match(":(%d+)/$")
    local code = post(url .. "api/runs", '{"plan": ' .. SLOW .. '}', "-H 'Origin: http://evil.example'")
    assert.are.equal(403, code)
    -- a name that a DNS answer points here (rebinding): refused, though Host agrees
    code = post(url .. "api/runs", '{"plan": ' .. SLOW .. '}',
      "-H 'Origin: http://evil.example:" .. port .. "' -H 'Host: evil.example:" .. port .. "'")
    assert.are.equal(403, code)
    code = post(url .. "api/runs", '{"plan": [{"_tool":"echo","_id":"x","value":1}]}',
      "-H 'Origin: http://127.0.0.1:" .. port .. "'")
    assert.are.equal(201, code)
    local c1, e1 = json(post(url .. "api/runs", "not json"))
    assert.are.equal(400, c1)
    assert.matches("invalid", e1.error)
    local c2, e2 = json(post(url .. "api/runs", '{"plan": [{"_tool":"nosuch","_id":"x"}]}'))
    assert.are.equal(400, c2)
    assert.matches('call x %(nosuch%): no tool named "nosuch"', e2.error)
    local c3 = post(url .. "api/runs", '{"input": {}}')
    assert.are.equal(400, c3)
    -- a journal of a run that ended: nothing to cancel, approve or resume here
    local _, list = json(req(url .. "api/runs"))
    local done
    for _, r in ipairs(list.runs) do if r.state == "done" then done = r.id end end
    assert.are.equal(409, (post(url .. "api/runs/" .. done .. "/cancel", "")))
    assert.are.equal(409, (post(url .. "api/runs/" .. done .. "/approve", '{"call":"a","decision":"yes"}')))
    assert.are.equal(409, (post(url .. "api/runs/" .. done .. "/resume", "")))
    assert.are.equal(404, (post(url .. "api/runs/" .. done .. "/explode", "")))
    local c4, e4 = json(post(url .. "api/runs/" .. done .. "/fork", '{"at": 1, "from": "a"}'))
    assert.are.equal(400, c4)
    assert.matches('"at"', e4.error)
  end)

  it("runs nothing without --tools, and its runs end resumable when it stops", function()
    local d2 = tmpdir()
    local u2, p2 = serve(d2)
    local code = post(u2 .. "api/runs", '{"plan": ' .. SLOW .. '}')
    stop(p2)
    assert.are.equal(409, code)
    local u3, p3 = serve(d2, "--tools " .. TOOLS)
    local _, made = json(post(u3 .. "api/runs", '{"plan": [{"_id":"z","_tool":"sleepy","ms":60000,"value":1,"_outputPath":"†state.z"}]}'))
    local path = d2 .. "/" .. made.source
    wait_run(u3, made.id, function() return count(path, '"journal":"start","id":"z"') == 1 end)
    stop(p3) -- (its exit status at SIGTERM: ui_spec)
    local u4, p4 = serve(d2)
    local r = wait_run(u4, made.id, function() return true end)
    stop(p4)
    assert.are.equal("killed-resumable", r.state)
    os.execute("rm -rf " .. q(d2))
  end)
end)
