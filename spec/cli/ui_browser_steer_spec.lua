-- ui_browser_steer_spec.lua -- steering runs from the page of `obelus ui` in a real
-- headless Chromium (as ui_browser_spec.lua: Debian's /usr/bin/chromium through
-- puppeteer-core in spec/browser/node_modules): a run started from the "Start a run" form
-- with "ask before" checked, its calls approved from the side panel (one as it is, one
-- with a value edited), followed live to its end; Cancel and Resume on a run's page; Fork
-- from a call with a value set; and the fleet page with a real redis-server and two real
-- workers, a job's row opening its run. Clicks in the page; the API only to set up and
-- to check. Every wait is for a state the page or the server shows, capped.
local cli = require "support.cli"
local servers = require "support.servers"

local TOOLS = "spec/cli/tools"
local q, sh = cli.quote, cli.sh

local function have_chromium()
  return os.execute("test -x /usr/bin/chromium && command -v node >/dev/null 2>&1") == true
end

local ui = require "support.ui"
local serve, stop, browse = ui.serve, ui.stop, ui.browse
local wait_run, count = ui.wait_run, ui.count

local function post(url, body) return ui.json(ui.post(url, body)) end

local function calls_of(r)
  local by = {}
  for _, c in ipairs(r.run.calls) do by[c.id] = c end
  return by
end

describe("obelus ui in a browser, steering", function()
  if not have_chromium() then
    it("needs chromium and node", function() pending("chromium or node is not installed (make deps installs them)") end)
    return
  end
  local dir, url, pid
  setup(function()
    local out = sh("cd spec/browser && flock .npm-install.lock sh -c " ..
      "'[ -f node_modules/puppeteer-core/package.json ] || " ..
      "timeout 300 npm install --no-audit --no-fund' 2>&1; echo \"rc=$?\"")
    assert(out:match("rc=0\n$"), "npm install of puppeteer-core failed: " .. out)
    dir = (sh("mktemp -d"):gsub("%s+$", ""))
    url, pid = serve(dir, "--tools " .. TOOLS)
  end)
  teardown(function()
    if pid then stop(pid) end
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  it("starts a run from the form asking before each call; approves one as it is, one edited; follows it to done", function()
    local plan = [=[[{"_id":"first","_tool":"sleepy","ms":100,"value":1,"_outputPath":"†state.a"},
 {"_id":"second","_tool":"sleepy","ms":100,"value":"†state.a","_outputPath":"†state.b"}]]=]
    local r = browse("steer.mjs", { url = url, mode = "approve", plan = plan, edited = "edited-41" })
    assert.is_true(r.checked)
    assert.matches("^%x+$", r.id)
    assert.is_true(r.firstWaited)
    assert.are.equal("waiting-approval", r.runWaiting)
    assert.are.equal("done", r.firstAfter)
    -- the params shown to approve: as the call will read them (†state.a resolved)
    assert.are.equal(1, r.shownParams.value)
    assert.are.equal("done", r.runState)
    assert.are.same({ { "first", "done" }, { "second", "done" } }, r.calls)
    assert.is_true(r.samePage)
    assert.are.same({}, r.dialogs)
    assert.are.same({}, r.errors)
    -- the server's account: started from the page (ui/), the edited value in the output
    local d = wait_run(url, r.id, function(x) return x.state == "done" end)
    assert.matches("^ui/", d.source)
    local calls = calls_of(d)
    assert.are.same({ a = 1 }, calls.first.output)
    assert.are.same({ b = "edited-41" }, calls.second.output)
  end)

  it("cancels a running run from its page, and resumes it: the call cut short starts again, the one done does not", function()
    local long = [=[[{"_id":"a","_tool":"sleepy","ms":1,"value":1,"_outputPath":"†state.a"},
      {"_id":"b","_tool":"sleepy","ms":60000,"value":"†state.a","_outputPath":"†state.b"}]]=]
    local code, made = post(url .. "api/runs", '{"plan": ' .. long .. '}')
    assert.are.equal(201, code)
    local path = dir .. "/" .. made.source
    wait_run(url, made.id, function() return count(path, '"journal":"start","id":"b"') == 1 end)
    local r = browse("steer.mjs", { url = url, mode = "cancel", id = made.id, journal = path })
    assert.are.equal("running", r.before)
    assert.are.equal("killed-resumable", r.cancelled)
    assert.are.equal("running", r.resumed)
    assert.are.equal(2, r.startsB)
    assert.are.equal(1, r.startsA)
    assert.are.same({ "Cancel", "Fork…" }, r.cancelAgain) -- running again: Cancel, no Resume
    assert.is_true(r.samePage)
    assert.are.same({}, r.dialogs)
    assert.are.same({}, r.errors)
    -- running again in this server: cancelled for good, by the API
    assert.are.equal("running", wait_run(url, made.id, function() return true end).state)
    assert.are.equal(200, (post(url .. "api/runs/" .. made.id .. "/cancel", "")))
    wait_run(url, made.id, function(x) return x.state == "killed-resumable" end)
  end)

  it("forks a done run from a call with a value set: the new run's page opens, done, the value in its output", function()
    local p = [=[[{"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"b","_tool":"echo","value":"†state.a","_outputPath":"†state.b"}]]=]
    local code, made = post(url .. "api/runs", '{"plan": ' .. p .. '}')
    assert.are.equal(201, code)
    local before = wait_run(url, made.id, function(x) return x.state == "done" end)
    assert.are.same({ b = 1 }, calls_of(before).b.output)
    local r = browse("steer.mjs", { url = url, mode = "fork", id = made.id, call = "b",
      set = { ["†state.a"] = 73 } })
    assert.are.equal("done", r.source)
    -- typed before the call was read; the panel drawn again as it was read kept it
    assert.are.equal('{"†state.a":73}', r.typed)
    assert.are_not.equal(made.id, r.id)
    assert.are.equal("done", r.runState)
    assert.are.same({}, r.dialogs)
    assert.are.same({}, r.errors)
    local d = wait_run(url, r.id, function(x) return x.state == "done" end)
    assert.matches("^ui/fork%-", d.source)
    assert.are.same({ b = 73 }, calls_of(d).b.output)
    local states = {}
    for _, c in ipairs(r.calls) do states[c[1]] = c[2] end
    assert.are.equal("done", states.b)
  end)
end)

describe("obelus ui --redis in a browser: the fleet page", function()
  if not have_chromium() then
    it("needs chromium and node", function() pending("chromium or node is not installed (make deps installs them)") end)
    return
  end
  local redis, workers, pid, dir = nil, {}, nil, nil
  setup(function()
    redis = assert(servers.redis())
    dir = (sh("mktemp -d"):gsub("%s+$", ""))
  end)
  teardown(function()
    if pid then stop(pid) end
    for _, w in ipairs(workers) do stop(w) end
    if redis then redis.stop() end
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  it("lists both workers live, the queue's 3 done and its jobs; a job's row opens its run with its calls", function()
    local plan = cli.tmpfile([=[[{"_id":"a","_tool":"echo","value":"†input.n","_outputPath":"†state.a"},
      {"_id":"b","_tool":"echo","value":"†state.a","_outputPath":"†state.b"}]]=], ".json")
    for n = 1, 3 do
      assert.are.equal(0, cli.run({ "submit", plan, "--redis", redis.url, "--queue", "steerq",
        "--tools", TOOLS, "--input", ('{"n": %d}'):format(n) }).code)
    end
    for k = 1, 2 do
      workers[k] = sh(("%s worker --redis %s --queue steerq --tools %s --name w%d >/dev/null 2>&1 & echo $!")
        :format(q(cli.bin), redis.url, TOOLS, k)):gsub("%s+$", "")
    end
    local url
    url, pid = serve(dir, "--redis " .. redis.url .. " --queue steerq")
    local r = browse("fleet.mjs", { url = url, workers = { "w1", "w2" }, queue = "steerq", jobs = 3 })
    local names = {}
    for _, w in ipairs(r.workers) do names[#names + 1] = w.name .. ":" .. w.state end
    table.sort(names)
    assert.are.same({ "w1:live", "w2:live" }, names)
    assert.are.equal(1, #r.queues)
    assert.are.equal("steerq", r.queues[1].name)
    assert.are.equal("3", r.queues[1].done)
    assert.are.equal("0", r.queues[1].failed)
    assert.matches("^%d+ B$", r.queues[1]["a finished job"])
    assert.matches("^[%d.]+ [KM]?B$", r.queues[1]["Redis"])
    assert.are.equal(3, #r.jobs)
    local done = 0
    for _, j in ipairs(r.jobs) do
      if j.state == "done" then done = done + 1 end
      assert.truthy(j.worker == "w1" or j.worker == "w2", j.worker)
    end
    assert.are.equal(3, done)
    assert.truthy(r.summary:find("redis: ok", 1, true), r.summary)
    -- the row clicked: the job's run, read from Redis
    assert.are.equal("#/run/job-" .. r.clicked, r.hash)
    assert.are.same({ { "a", "done" }, { "b", "done" } }, r.calls)
    assert.is_true(r.samePage)
    assert.are.same({}, r.dialogs)
    -- the job's documents over the log and its graph too, from its journal in Redis:
    -- nothing the page asked for failed
    assert.are.same({}, r.failed)
    assert.are.same({}, r.errors)
  end)
end)
