-- ui_browser_spec.lua -- the web app of `obelus ui` (ui/app.js, built into the binary) in a
-- real headless Chromium (Debian's /usr/bin/chromium, driven by puppeteer-core, installed
-- here with npm into spec/browser/node_modules, not committed): the runs of a folder
-- (done, failed, and one killed with a real SIGKILL), a run started beside the page
-- followed live, a call's side panel, the slider over the log, markup from a plan and a
-- tool shown as text, paths outside the app answered 404, a token, and `obelus report`'s
-- page opened from disk. Each spec/browser/*.mjs script prints one JSON report.
local cjson = require "cjson"
local cli = require "support.cli"

local TOOLS = "spec/cli/tools"
local q, sh = cli.quote, cli.sh

local function abs(path)
  return path:sub(1, 1) == "/" and path or (os.getenv("PWD") .. "/" .. path)
end

local function have_chromium()
  return os.execute("test -x /usr/bin/chromium && command -v node >/dev/null 2>&1") == true
end

local ui = require "support.ui"
local serve, stop = ui.serve, ui.stop

local browse = ui.browse

local get = ui.req

local function runs_of(url)
  local _, body = get(url .. "api/runs")
  local by = {}
  for _, r in ipairs(cjson.decode(body).runs) do by[r.source] = r end
  return by
end

local function plan(json) return cli.tmpfile(json, ".json") end

describe("obelus ui in a browser", function()
  if not have_chromium() then
    it("needs chromium and node", function() pending("chromium or node is not installed (make deps installs them)") end)
    return
  end
  local dir
  setup(function()
    -- once, under a lock: make test may run this spec in two processes at the same time
    local out = sh("cd spec/browser && flock .npm-install.lock sh -c " ..
      "'[ -f node_modules/puppeteer-core/package.json ] || " ..
      "timeout 300 npm install --no-audit --no-fund' 2>&1; echo \"rc=$?\"")
    assert(out:match("rc=0\n$"), "npm install of puppeteer-core failed: " .. out)
    dir = (sh("mktemp -d"):gsub("%s+$", ""))
    assert(cli.run({ "run", "plans/weather/plan.json", "--tools", "plans/weather/tools", "--input",
      '{"city":"Paris"}', "--journal", dir .. "/weather.jsonl" }).code == 0)
    local bad = plan([=[[{"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"b","_tool":"fail","message":"†state.a","_outputPath":"†state.b"}]]=])
    assert(cli.run({ "run", bad, "--tools", TOOLS, "--journal", dir .. "/failed.jsonl" }).code == 1)
    -- killed: a real SIGKILL while its second call sleeps
    local slow = plan([=[[{"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"s","_tool":"sleepy","ms":20000,"value":"†state.a","_outputPath":"†state.s"}]]=])
    local pid = sh(("%s run %s --tools %s --journal %s >/dev/null 2>&1 & echo $!"):format(
      q(cli.bin), q(slow), TOOLS, q(dir .. "/killed.jsonl"))):gsub("%s+$", "")
    for _ = 1, 500 do
      if cli.slurp(dir .. "/killed.jsonl"):match('"journal":"start","id":"s"') then break end
      os.execute("sleep 0.02")
    end
    os.execute("kill -KILL " .. pid .. "; wait " .. pid .. " 2>/dev/null")
  end)
  teardown(function() if dir then os.execute("rm -rf " .. q(dir)) end end)

  it("lists the runs of the folder with their states; filters; a row opens from the keyboard", function()
    local url, pid = serve(dir)
    local r = browse("runs.mjs", { url = url })
    stop(pid)
    local by = {}
    for _, row in ipairs(r.rows) do by[row.source] = row.state end
    assert.are.same({ ["weather.jsonl"] = "done", ["failed.jsonl"] = "failed",
                      ["killed.jsonl"] = "killed-resumable" }, by)
    assert.are.equal(1, #r.failed)
    assert.are.equal("failed.jsonl", r.failed[1].source)
    assert.are.equal(1, #r.text)
    assert.are.equal("killed.jsonl", r.text[1].source)
    assert.are.equal(r.rows[1].source, r.opened) -- newest first, opened with Enter
    assert.are.same({}, r.errors) -- but for the graph.svg requests not served yet (404)
  end)

  it("shows a call's params in the side panel (from the table, graph, timeline, keys); the slider changes the documents", function()
    local url, pid = serve(dir)
    local id = runs_of(url)["weather.jsonl"].id
    local r = browse("run.mjs", { url = url, id = id, call = "movie" })
    stop(pid)
    assert.are.same({ { "weather", "done" }, { "park", "skipped" }, { "movie", "done" }, { "suggest", "done" } }, r.calls)
    assert.are.same(r.calls, r.nodes)
    assert.are.equal("4", r.timelineRows)
    assert.are.equal("movie", r.panel)
    assert.are.same({ _tool = "movie", _id = "movie", weather = "†state.rainy", markerDir = "†input.markerDir",
                      _outputPath = "†state.suggestion.movie" }, r.params)
    assert.truthy(r.output:find("a film at the cinema", 1, true))
    assert.are.equal("weather", r.fromGraph)
    assert.are.equal("suggest", r.fromTimeline)
    assert.are.equal("movie", r.fromKeys)
    assert.is_true(r.closed)
    -- the slider: at the end, the answer; at message 2, the input only
    assert.are.equal(r.atEnd.max, r.atEnd.at)
    assert.truthy(r.atEnd.text:find('"answer"', 1, true))
    assert.are.equal("2 of " .. r.atEnd.max, r.at2.label)
    assert.is_nil(r.at2.text:find('"state"', 1, true))
    assert.truthy(r.at2.text:find('"input"', 1, true))
    assert.are.same({}, r.errors)
    assert.are.same({}, r.dialogs)
  end)

  -- with GET /api/runs/ID/events the page follows the run from the stream; without it
  -- (the endpoint not served yet), by asking for the run again every 1.5 s
  it("shows a run started beside it, and follows its page live to its end", function()
    local url, pid = serve(dir)
    local p = plan([=[[{"_id":"first","_tool":"sleepy","ms":2500,"value":1,"_outputPath":"†state.a"},
      {"_id":"second","_tool":"sleepy","ms":2500,"value":"†state.a","_outputPath":"†state.b"}]]=])
    local r = browse("live.mjs", { url = url, bin = abs(cli.bin), plan = abs(p), tools = abs(TOOLS),
      journal = dir .. "/live.jsonl", source = "live.jsonl" })
    stop(pid)
    os.remove(dir .. "/live.jsonl")
    assert.are.equal("running", r.listed)
    assert.are.equal(0, r.exit)
    assert.are.equal("done", r.runState)
    assert.is_true(r.samePage)
    assert.is_true(r.events, "the page followed the run through its events stream")
    -- the second call was seen waiting or running, then done, on the same page
    local second = r.seen.second
    assert.are.equal("done", second[#second])
    assert.is_true(#second >= 2, cjson.encode(r.seen))
    assert.are.equal("done", r.seen.first[#r.seen.first])
    assert.are.same({}, r.dialogs)
  end)

  it("shows markup from a plan and a tool as text: no dialog, no element made of it, the graph's SVG sanitized", function()
    local xdir = (sh("mktemp -d"):gsub("%s+$", ""))
    local p = plan(cjson.encode({ {
      _id = "<img src=x onerror=alert(1)>", _tool = "echo",
      value = "<script>alert(2)</script><img src=y onerror=alert(3)>", _outputPath = "†state.x" } }))
    assert(cli.run({ "run", p, "--tools", TOOLS, "--journal", xdir .. "/x.jsonl" }).code == 0)
    local url, pid = serve(xdir)
    local id = runs_of(url)["x.jsonl"].id
    local r = browse("xss.mjs", { url = url, id = id })
    stop(pid)
    os.execute("rm -rf " .. q(xdir))
    assert.are.same({}, r.dialogs)
    assert.are.equal(0, r.imgs)
    assert.are.same({ url .. "app.js" }, r.scripts)
    assert.are.same({}, r.handlers)
    assert.are.same({ "<img src=x onerror=alert(1)>" }, r.cells)
    assert.truthy(r.bodyText:find("<img src=x onerror=alert(1)>", 1, true))
    assert.truthy(r.output:find("<script>alert(2)</script><img src=y onerror=alert(3)>", 1, true))
    -- of the hostile SVG: the drawing, its node coloured by the call's state
    assert.are.same({ "a", "g", "polygon", "svg", "text", "title" }, r.svgKept)
    assert.are.equal("done", r.nodeState)
  end)

  it("answers paths outside the app and its API 404, serving nothing", function()
    local url, pid = serve(dir)
    local page_code, page = get(url)
    local results = {}
    for _, path in ipairs({ "../../etc/passwd", "..%2f..%2fetc%2fpasswd", "%2e%2e/%2e%2e/etc/passwd",
                            "app.js/../../../etc/passwd", "etc/passwd", "%2fetc%2fpasswd", "ui/app.js",
                            "app.js.bak", "index.html%00.js", "api/../../etc/passwd" }) do
      local code, body = get(url .. path)
      results[#results + 1] = { path = path, code = code, body = body }
    end
    local head = sh(("curl -s -D - -o /dev/null %s"):format(q(url .. "app.js")))
    stop(pid)
    assert.are.equal(200, page_code)
    assert.truthy(page:find('<script src="/app.js" defer>', 1, true))
    for _, x in ipairs(results) do
      -- (a NUL byte: the server library drops the connection, code 0)
      assert.is_true(x.code == 404 or x.code == 400 or x.code == 0, x.path .. ": " .. tostring(x.code))
      assert.is_nil(x.body:find("root:", 1, true), x.path)
      assert.is_nil(x.body:find("use strict", 1, true), x.path)
    end
    assert.truthy(head:lower():find("content-type: text/javascript", 1, true))
    assert.truthy(head:lower():find("content-security-policy: default-src 'self'", 1, true))
  end)

  it("with --bind 0.0.0.0 --token: 401 without the token; the page opened with ?token= works", function()
    local url, pid = serve(dir, "--bind 0.0.0.0 --token s3cret-T")
    local r = browse("token.mjs", { url = url, token = "s3cret-T" })
    stop(pid)
    assert.are.equal(401, r.apiBare)
    assert.are.equal(401, r.pageBare)
    assert.are.equal(401, r.appBare)
    assert.are.equal(401, r.wrong)
    assert.are.equal(200, r.pageStatus)
    assert.truthy(r.csp:find("default-src 'self'", 1, true))
    assert.are.equal(3, r.rows)
    assert.is_nil(r.address:find("token", 1, true))
    assert.are.equal("", r.cookieVisible)
    assert.are.equal(200, r.apiFromPage)
    assert.are.same({}, r.errors)
  end)

  it("opens `obelus report`'s page from disk: the run drawn, sub-plan calls nested, no button, no console error", function()
    local pdir = (sh("mktemp -d"):gsub("%s+$", ""))
    local f = assert(io.open(pdir .. "/sub.json", "w"))
    f:write([=[[{"_id":"x","_tool":"echo","value":[1,2],"_outputPath":"†state.x"},
      {"_id":"y","_tool":"echo","value":"†state.x","_outputPath":"†state.y"}]]=])
    f:close()
    f = assert(io.open(pdir .. "/main.json", "w"))
    f:write([=[{"plan":[{"_id":"d","_delegate":"sub.json","_outputPath":"†state.d"},
      {"_id":"e","_tool":"echo","_each":"†state.d.y","value":"†each.value","_outputPath":"†state.e"},
      {"_id":"h","_tool":"fail","_outputPath":"†state.ok || †state.bad"}],"output":"†state"}]=])
    f:close()
    local rr = cli.run({ "run", pdir .. "/main.json", "--tools", TOOLS, "--journal", pdir .. "/j.jsonl" })
    assert.are.equal(0, rr.code, rr.err)
    local html = pdir .. "/run.html"
    assert.are.equal(0, cli.run({ "report", pdir .. "/j.jsonl", "-o", html }).code)
    local r = browse("report.mjs", { file = html, call = "d" })
    os.execute("rm -rf " .. q(pdir))
    local names = {}
    for _, c in ipairs(r.calls) do names[#names + 1] = c[1] end
    -- each call, in the journal's order of top-level calls, sub-plan and _each calls
    -- right under theirs, indented
    assert.are.same({ "d", "d › x", "d › y", "h", "e", "e › e[0]", "e › e[1]" }, names)
    assert.are.same({ "", "24px", "24px", "", "", "24px", "24px" }, r.depths)
    assert.are.equal(7, r.nodes) -- Graphviz's: the sub-plan's calls and the copies too
    assert.are.equal("7", r.timelineRows)
    assert.are.equal("d", r.panel)
    for _, b in ipairs(r.buttons) do error("a button in the report: " .. b) end
    for _, b in ipairs(r.panelButtons) do
      assert.is_nil(b:match("^Fork") or b:match("^Approve") or b:match("^Cancel"), b)
    end
    assert.is_not_nil(r.slider)
    assert.are.same({}, r.requests)
    assert.are.same({}, r.errors)
  end)
end)
