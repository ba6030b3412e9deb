-- ui_spec.lua -- `obelus ui` (issue 29, its API so far): the runs of the journals under a
-- folder, listed with their states (done, failed, killed-resumable, running: a run that
-- holds its journal), one run as the report reads it, ids that name no path, the token
-- (401 without it; a header, a cookie or ?token=), one made for a non-loopback address
-- given none, a body past the bound refused, and SIGTERM ending the server. A real server on a
-- port the system picks, asked with curl.
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/tools"
local q = cli.quote

local sh = cli.sh

local ui = require "support.ui"
local tmpdir, serve, stop, get = ui.tmpdir, ui.serve, ui.stop, ui.req

local function plan(json) return cli.tmpfile(json, ".json") end

describe("obelus ui", function()
  local dir
  setup(function()
    dir = tmpdir()
    os.execute("mkdir -p " .. q(dir .. "/deep/er"))
    local ok = plan([=[[{"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"b","_tool":"echo","value":"†state.a","_outputPath":"†state.b"}]]=])
    local bad = plan([=[[{"_id":"a","_tool":"fail","_outputPath":"†state.a"}]]=])
    assert(cli.run({ "run", ok, "--tools", TOOLS, "--journal", dir .. "/ok.jsonl" }).code == 0)
    assert(cli.run({ "run", bad, "--tools", TOOLS, "--journal", dir .. "/deep/er/bad.jsonl" }).code == 1)
    -- a killed run: its journal cut after the first settled record, no end
    local lines = {}
    for l in io.lines(dir .. "/ok.jsonl") do lines[#lines + 1] = l end
    local f = assert(io.open(dir .. "/killed.jsonl", "w"))
    for _, l in ipairs(lines) do
      f:write(l, "\n")
      if l:match('"journal":"settled"') then break end
    end
    f:close()
    local g = assert(io.open(dir .. "/not-a-journal.jsonl", "w"))
    g:write("hello\n")
    g:close()
  end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("lists every journal under the folder, newest first, with its state", function()
    local url, pid = serve(dir)
    local code, body = get(url .. "api/runs")
    stop(pid)
    assert.are.equal(200, code, body)
    local runs = cjson.decode(body).runs
    local by = {}
    for _, r in ipairs(runs) do by[r.source] = r end
    assert.are.equal(3, #runs) -- not-a-journal.jsonl is not one
    assert.are.equal("done", by["ok.jsonl"].state)
    assert.are.equal(2, by["ok.jsonl"].calls)
    assert.are.equal(0, by["ok.jsonl"].failed)
    assert.are.equal("failed", by["deep/er/bad.jsonl"].state)
    assert.are.equal(1, by["deep/er/bad.jsonl"].failed)
    assert.are.equal("killed-resumable", by["killed.jsonl"].state)
    assert.are.equal(cjson.null, by["killed.jsonl"].ended)
    assert.is_true(by["ok.jsonl"].ended >= by["ok.jsonl"].started)
    for i = 2, #runs do assert.is_true(runs[i - 1].started >= runs[i].started) end
    for _, r in ipairs(runs) do assert.matches("^%x+$", r.id) end
  end)

  it("says a run that holds its journal is running", function()
    local pf = plan([=[[{"_id":"s","_tool":"sleepy","ms":3000,"_outputPath":"†state.s"}]]=])
    local run_pid = sh(("%s run %s --tools %s --journal %s >/dev/null 2>&1 & echo $!"):format(
      q(cli.bin), q(pf), TOOLS, q(dir .. "/live.jsonl"))):gsub("%s+$", "")
    for _ = 1, 200 do
      if cli.slurp(dir .. "/live.jsonl"):match('"journal":"start"') then break end
      os.execute("sleep 0.02")
    end
    local url, pid = serve(dir)
    local _, body = get(url .. "api/runs")
    stop(pid)
    os.execute("kill -TERM " .. run_pid .. " 2>/dev/null; wait " .. run_pid .. " 2>/dev/null")
    local state
    for _, r in ipairs(cjson.decode(body).runs) do
      if r.source == "live.jsonl" then state = r.state end
    end
    os.remove(dir .. "/live.jsonl")
    assert.are.equal("running", state)
  end)

  it("gives one run as the report reads it, by its id; an id names no path", function()
    local url, pid = serve(dir)
    local _, body = get(url .. "api/runs")
    local id
    for _, r in ipairs(cjson.decode(body).runs) do
      if r.source == "ok.jsonl" then id = r.id end
    end
    local code, one = get(url .. "api/runs/" .. id)
    local scode, state = get(url .. "api/runs/" .. id .. "/state?at=3")
    local _, last = get(url .. "api/runs/" .. id .. "/state")
    local past = get(url .. "api/runs/" .. id .. "/state?at=999")
    local c404 = get(url .. "api/runs/0123456789abcdef")
    local trav = get(url .. "api/runs/..%2F..%2Fetc%2Fpasswd")
    local other = get(url .. "nope.html") -- index.html, app.js, app.css: the web app
    local post = get(url .. "api/runs", "-X POST -d '{}'") -- no --tools: it runs nothing
    local put = get(url .. "api/runs", "-X PUT -d '{}'")
    stop(pid)
    assert.are.equal(200, code)
    local run = cjson.decode(one)
    assert.are.equal("ok.jsonl", run.source)
    assert.are.equal(0, run.run.exit)
    local ids = {}
    for _, c in ipairs(run.run.calls) do ids[#ids + 1] = c.id .. "=" .. c.state end
    assert.are.same({ "a=done", "b=done" }, ids)
    assert.are.equal(1, run.run.calls[2].output.b)
    -- the documents as of message 3 (plan, a's output, b's output): as `obelus log --at 3`
    assert.are.equal(200, scode)
    local want = cjson.decode(cli.run({ "log", dir .. "/ok.jsonl", "--at", "3" }).out)
    local got = cjson.decode(state)
    assert.are.equal(3, got.messages)
    got.messages = nil
    assert.are.same(want, got)
    assert.are.same({ a = 1, b = 1 }, cjson.decode(last).documents.state)
    assert.are.equal(400, past)
    assert.are.equal(404, c404)
    assert.are.equal(404, trav)
    assert.are.equal(404, other)
    assert.are.equal(409, post)
    assert.are.equal(405, put)
  end)

  it("gives a run light, one call whole, and reads a journal again once it changed", function()
    local sub = dir .. "/again"
    os.execute("mkdir -p " .. q(sub))
    local three = plan([=[[{"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"b","_tool":"echo","value":"†state.a","_outputPath":"†state.b"},
      {"_id":"c","_tool":"echo","value":"†state.b","_outputPath":"†state.c"}]]=])
    assert(cli.run({ "run", three, "--tools", TOOLS, "--journal", sub .. "/r.jsonl" }).code == 0)
    local url, pid = serve(sub)
    local _, body = get(url .. "api/runs")
    local id = cjson.decode(body).runs[1].id
    local _, whole = get(url .. "api/runs/" .. id)
    local _, light = get(url .. "api/runs/" .. id .. "?calls=light")
    local calls = {}
    for i = 0, 2 do
      local code, one = get(url .. "api/runs/" .. id .. "/calls/" .. i)
      assert.are.equal(200, code)
      calls[i + 1] = cjson.decode(one)
    end
    local past = get(url .. "api/runs/" .. id .. "/calls/3")
    local nan = get(url .. "api/runs/" .. id .. "/calls/x")
    local _, st1 = get(url .. "api/runs/" .. id .. "/state")
    -- the same journal written again by another run: read again, whatever was kept
    local two = plan([=[[{"_id":"z","_tool":"echo","value":7,"_outputPath":"†state.z"}]]=])
    assert(cli.run({ "run", two, "--tools", TOOLS, "--journal", sub .. "/r.jsonl", "--overwrite" }).code == 0)
    local _, again = get(url .. "api/runs/" .. id .. "?calls=light")
    local _, st2 = get(url .. "api/runs/" .. id .. "/state")
    local _, zero = get(url .. "api/runs/" .. id .. "/calls/0")
    stop(pid)
    whole, light = cjson.decode(whole), cjson.decode(light)
    assert.are.same(whole.run.calls, calls) -- each call as the whole run has it
    assert.are.equal(3, #light.run.calls)
    assert.are.equal(whole.state, light.state)
    for i, c in ipairs(light.run.calls) do
      local w = whole.run.calls[i]
      assert.are.equal(w.id, c.id)
      assert.are.equal(w.state, c.state)
      -- its attempts, an error only where there is one; its settled time when it is not
      -- its last attempt's end
      local trimmed = {}
      for k, a in ipairs(w.attempts) do trimmed[k] = { a[1], a[2], a[3] ~= cjson.null and a[3] or nil } end
      assert.are.same(trimmed, c.attempts)
      local last = w.attempts[#w.attempts]
      assert.are.equal(last and last[2] == w.settled and cjson.null or w.settled, c.settled or cjson.null)
      assert.are.same(w.deps, c.deps or {})
      assert.are.equal(w.node, c.node)
      -- what a call read and wrote is left out, and what goes without saying
      assert.is_nil(c.params)
      assert.is_nil(c.resolved)
      assert.is_nil(c.output)
      assert.is_nil(c.scope) -- "" at the top
      assert.is_nil(c.instance) -- null
    end
    assert.are.equal(404, past)
    assert.are.equal(404, nan)
    assert.are.same({ a = 1, b = 1, c = 1 }, cjson.decode(st1).documents.state)
    again = cjson.decode(again)
    assert.are.equal(1, #again.run.calls)
    assert.are.equal("z", again.run.calls[1].id)
    assert.are.same({ z = 7 }, cjson.decode(st2).documents.state)
    assert.are.equal("z", cjson.decode(zero).id)
  end)

  it("wants its token when it has one: a header, ?token= (which sets a cookie), or 401", function()
    local url, pid = serve(dir, "--token s3cret")
    local none = get(url .. "api/runs")
    local wrong = get(url .. "api/runs", "-H 'Authorization: Bearer nope'")
    local hdr = get(url .. "api/runs", "-H 'Authorization: Bearer s3cret'")
    local jar = os.tmpname()
    local link = get(url .. "api/runs?token=s3cret", "-c " .. q(jar))
    local cookie = get(url .. "api/runs", "-b " .. q(jar))
    stop(pid)
    os.remove(jar)
    assert.are.equal(401, none)
    assert.are.equal(401, wrong)
    assert.are.equal(200, hdr)
    assert.are.equal(200, link)
    assert.are.equal(200, cookie)
  end)

  it("makes a token for a non-loopback address given none, and says it", function()
    local err = os.tmpname()
    local pid = sh(("%s ui --journals %s --bind 0.0.0.0 --port 0 2>%s >/dev/null & echo $!"):format(
      q(cli.bin), q(dir), q(err))):gsub("%s+$", "")
    local said
    for _ = 1, 200 do
      said = cli.slurp(err)
      if said:match("needs the token") then break end
      os.execute("sleep 0.02")
    end
    os.remove(err)
    local port, token = said:match("obelus ui: http://0%.0%.0%.0:(%d+)/%?token=(%x+)\n")
    assert.truthy(port, said)
    assert.are.equal(32, #token) -- 128 bits, as hex
    assert.matches("every request needs the token " .. token, said)
    local base = "http://127.0.0.1:" .. port
    local without = get(base .. "/api/runs")
    local with = get(base .. "/api/runs?token=" .. token)
    local other = token:sub(1, 31) .. (token:sub(32) == "0" and "1" or "0") -- one digit off
    local wrong = get(base .. "/api/runs", "-H 'Authorization: Bearer " .. other .. "'")
    stop(pid)
    assert.are.equal(401, without)
    assert.are.equal(200, with)
    assert.are.equal(401, wrong)
  end)

  it("refuses a folder that is not one, an address not this machine's, a port taken", function()
    local r = cli.run({ "ui", "--journals", dir .. "/ok.jsonl", "--port", "0" })
    assert.are.equal(2, r.code)
    assert.matches("not a folder", r.err)
    r = cli.run({ "ui", "--journals", dir, "--bind", "192.0.2.77", "--token", "t", "--port", "0" })
    assert.are.equal(2, r.code) -- TEST-NET-1: never this machine's; nothing listens anywhere
    assert.matches("cannot listen on 192.0.2.77 port 0: not an address of this machine", r.err)
    r = cli.run({ "ui", "--journals", dir, "--bind", "example.com", "--token", "t" })
    assert.are.equal(2, r.code)
    assert.matches("is not an IP address", r.err)
    local url, pid = serve(dir) -- its port, asked for again
    r = cli.run({ "ui", "--journals", dir, "--port", url:match(":(%d+)/$") })
    stop(pid)
    assert.are.equal(2, r.code)
    assert.matches("the port is taken", r.err)
  end)

  it("answers 413 to a client still sending its body, and lets go of one that stops sending", function()
    -- a 3 MB body announced, 1.5 MB of it sent, then nothing: the 413 is read, and the
    -- server closes the connection once it has waited (HTTPD_DRAIN_S, 5 s), within the cap
    local url, pid = serve(dir)
    local port = url:match(":(%d+)/$")
    local big = os.tmpname()
    local f = assert(io.open(big, "w"))
    f:write(("x"):rep(1500 * 1000))
    f:close()
    local out = sh(("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%s; " ..
      "printf \"POST /api/runs HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Length: 3000000\\r\\n\\r\\n\" >&3; " ..
      "cat %s >&3; timeout 20 cat <&3; echo \"[cat $?]\"' 2>/dev/null"):format(port, q(big)))
    os.remove(big)
    -- and a body far past what is read of it (40 MB): the server goes on
    local huge = os.tmpname()
    f = assert(io.open(huge, "w"))
    f:write(("x"):rep(40 * 1024 * 1024))
    f:close()
    get(url .. "api/runs", "-X POST --data-binary @" .. q(huge))
    os.remove(huge)
    local after = get(url .. "api/runs")
    stop(pid)
    assert.matches("^HTTP/1.1 413", out)
    assert.matches("%[cat 0%]", out) -- ended by the server's close, not by the 20 s timeout
    assert.are.equal(200, after)
  end)

  it("answers a body past its bound 413, and ends at SIGTERM with 0", function()
    local url, pid = serve(dir)
    local big = os.tmpname()
    local f = assert(io.open(big, "w"))
    f:write(("x"):rep(2 * 1024 * 1024))
    f:close()
    local code = get(url .. "api/runs", "-X POST --data-binary @" .. q(big))
    os.remove(big)
    stop(pid)
    assert.are.equal(413, code)
    -- its exit status, from the shell that started it
    local err = os.tmpname()
    local status = sh(("%s ui --journals %s --port 0 2>%s & pid=$!; " ..
      "for i in $(seq 1 200); do grep -q http %s && break; sleep 0.02; done; " ..
      "kill -TERM $pid; wait $pid; echo $?"):format(q(cli.bin), q(dir), q(err), q(err)))
    os.remove(err)
    assert.matches("^0", status)
  end)
end)
