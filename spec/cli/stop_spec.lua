-- stop_spec.lua -- stopping what a tool would not stop (issue 26, items 3 and 10): the
-- slice watchdog cannot be caught, unhooked or escaped into a coroutine; _timeout and
-- SIGINT/SIGTERM take effect in a tool that never yields; a second signal exits at once;
-- the children a tool spawned die with its attempt, and with the run. Real processes and
-- real signals; nothing here reads a clock: each run is capped by `timeout -s KILL` (a
-- cap hit shows as 137), and a signal is sent once the tool says it runs (a file).
local cli = require "support.cli"
local cjson = require "cjson"
local proc = require "support.proc"
local exists, wait_for, plan_file, run, start = proc.exists, proc.wait_for, proc.plan_file, proc.run, proc.start

local TOOLS = "spec/cli/fixtures/stop/tools.lua"
local q = cli.quote

local sh = cli.sh -- what a shell command printed



local function unique() return ("%d%06d"):format(os.time(), math.random(0, 999999)) end

-- the pids of processes whose command line holds pattern (its first letter in brackets,
-- so that the shell running pgrep does not match itself)
local function pids(pattern)
  local t = {}
  local re = "[" .. pattern:sub(1, 1) .. "]" .. pattern:sub(2)
  for p in sh("pgrep -f " .. q(re) .. " || true"):gmatch("%d+") do t[#t + 1] = p end
  return t
end

local function kill_all(pattern)
  for _, p in ipairs(pids(pattern)) do os.execute("kill -9 " .. p .. " 2>/dev/null") end
end




local function records(journal)
  local t = {}
  for line in io.lines(journal) do
    line = line:gsub("%z+$", "") -- a killed run's file ends in zero bytes
    if line:match("%S") then t[#t + 1] = cjson.decode(line) end
  end
  return t
end

describe("the watchdog cannot be defeated from Lua", function()
  local function spins(call)
    call._id = "spin"
    call._outputPath = "†state.a"
    local r = run { "run", plan_file({ call, { _tool = "ok", value = "after", _outputPath = "†state.b" } }, "†state.b"),
                    "--tools", TOOLS, "--max-slice", "200" }
    assert.are.equal(1, r.code, r.err) -- stopped: not the cap's 137
    assert.are.equal("after", cjson.decode(r.out))
    assert.matches("call spin %(" .. call._tool .. "%) failed %(runtime%): the tool ran 200 ms without yielding", r.err)
  end

  it("a spin in a libuv callback of a tool is stopped at the run's --max-slice, and fails its call", function()
    local r = run { "run", plan_file({ { _id = "t", _tool = "timer_spin", _outputPath = "†state.a" },
                                       { _tool = "ok", value = "after", _outputPath = "†state.b" } }, "†state.b"),
                    "--tools", TOOLS, "--max-slice", "200" }
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("after", cjson.decode(r.out))
    assert.matches("call t (timer_spin) failed (runtime): the tool ran 200 ms without yielding", r.err, 1, true)
    assert.is_nil(r.err:find("error in a libuv callback", 1, true))
  end)

  it("an xpcall whose message handler spins too is stopped (the handler is not called for the stop)", function()
    spins { _tool = "xpcall_spin" }
  end)

  it("a pcall that catches the stop is stopped again at once", function()
    spins { _tool = "pcall_spin" }
  end)

  it("a tool cannot clear the hook (debug.sethook() in a loop, under pcall)", function()
    spins { _tool = "sethook_spin" }
  end)

  it("a spin inside a coroutine the tool made (coroutine.create / resume) is stopped", function()
    spins { _tool = "nested_spin" }
  end)

  it("a spin inside coroutine.wrap, under pcall, is stopped", function()
    spins { _tool = "nested_spin", how = "wrap" }
  end)

  it("a spin inside a coroutine is stopped when the watchdog's signal came in ignored", function()
    local r = run { "run", plan_file({ { _id = "spin", _tool = "nested_spin", _outputPath = "†state.a" },
                                       { _tool = "ok", value = "after", _outputPath = "†state.b" } }, "†state.b"),
                    "--tools", TOOLS, "--max-slice", "200", watch_signal_ignored = true }
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("after", cjson.decode(r.out))
    assert.matches("call spin %(nested_spin%) failed %(runtime%): the tool ran 200 ms without yielding", r.err)
  end)

  it("debug.sethook fails in a tool and debug.gethook sees no hook; coroutines work as Lua's", function()
    local r = run { "run", plan_file({ { _tool = "hooks", _outputPath = "†state.h" }, { _tool = "coro", _outputPath = "†state.c" } },
                    { "†state.h", "†state.c" }), "--tools", TOOLS }
    assert.are.equal(0, r.code, r.err)
    local out = cjson.decode(r.out)
    assert.are.same({ set = false, get = true,
                      err = "debug.sethook is not available to tools: obelus stops tools that run too long through hooks" }, out[1])
    assert.are.same({ 2, 20, true, 5, false, true, false, "cannot resume dead coroutine", false, true }, out[2])
  end)
end)

describe("_timeout in a tool that never yields", function()
  it("fails the call with its timeout error; the run goes on and || applies", function()
    local r = run { "run", plan_file({
      { _id = "spin", _tool = "pcall_spin", _timeout = 300, _outputPath = "†state.a || †state.failed" },
      { _tool = "ok", value = "after", _outputPath = "†state.b" } }, { "†state.failed", "†state.b" }),
      "--tools", TOOLS, "--max-slice", "600000" }
    assert.are.equal(0, r.code, r.err) -- routed: not the cap's 137
    local out = cjson.decode(r.out)
    assert.matches("timeout after 300 ms", cjson.encode(out[1]), 1, true)
    assert.are.equal("after", out[2])
  end)

  it("is retried as a timeout is", function()
    local r = run { "run", plan_file({
      { _id = "spin", _tool = "nested_spin", _timeout = 200, _retry = { attempts = 2, delay_ms = 1 }, _outputPath = "†state.a" } }),
      "--tools", TOOLS, "--max-slice", "600000" }
    assert.are.equal(1, r.code, r.err)
    assert.matches("attempt 1 of 2 failed: timeout after 200 ms", r.err, 1, true)
    assert.matches("call spin (nested_spin) failed (runtime): timeout after 200 ms", r.err, 1, true)
  end)
end)

describe("a stop that cannot take (Lua code with hooks off, C that never returns)", function()
  -- the process ends, naming the call, with the journal as a kill leaves it: never a hang
  local function stuck(tool, extra, says)
    local j = os.tmpname()
    os.remove(j)
    local call = { _id = "spin", _tool = tool, _outputPath = "†state.a" }
    for k, v in pairs(extra or {}) do call[k] = v end
    local r = run { "run", plan_file({ call, { _id = "ok", _tool = "ok", value = 1, _outputPath = "†state.b" } }),
                    "--tools", TOOLS, "--max-slice", "200", "--journal", j }
    assert.are.equal(5, r.code, r.err) -- not the cap's 137
    assert.matches("obelus run: call spin (" .. tool .. ") " .. says .. " and did not stop", r.err, 1, true)
    assert.matches("exiting at once (exit 5); the journal is as a kill leaves it", r.err, 1, true)
    assert.are.equal("", r.out)
    local log = run { "log", j }
    assert.are.equal(0, log.code, log.err)
    for _, rec in ipairs(records(j)) do assert.is_false(rec.journal == "settled" and rec.id == "spin") end
    os.remove(j)
  end

  it("finalisers (__gc) that spin under --max-slice: exit 5", function()
    stuck("gc_spin", nil, "ran past --max-slice without yielding")
  end)

  it("a Lua pattern that backtracks inside one C call, past --max-slice: exit 5", function()
    stuck("match_bomb", nil, "ran past --max-slice without yielding")
  end)

  it("the same past its _timeout: exit 5", function()
    stuck("match_bomb", { _timeout = 100 }, "passed its _timeout")
  end)

  it("one SIGTERM: exit 143 at once, naming the call", function()
    local started, j = os.tmpname(), os.tmpname()
    os.remove(started); os.remove(j)
    local h = start { "run", plan_file({ { _id = "m", _tool = "match_bomb", started = started, _outputPath = "†state.a" } }),
                      "--tools", TOOLS, "--max-slice", "600000", "--journal", j }
    assert.is_true(wait_for(function() return exists(started) end))
    h.signal("TERM")
    local r = h.wait()
    assert.are.equal(143, r.code, r.err)
    assert.matches("obelus run: interrupted by SIGTERM; call m (match_bomb) did not stop within", r.err, 1, true)
    local log = run { "log", j }
    assert.are.equal(0, log.code, log.err)
    os.remove(j); os.remove(started)
  end)
end)

describe("SIGINT and SIGTERM in a tool that never yields", function()
  for _, sig in ipairs { "TERM", "INT" } do
    it("SIG" .. sig .. " cancels the run as it does any run: exit 128 + the signal, a journal resume takes", function()
      local started, j = os.tmpname(), os.tmpname()
      os.remove(started)
      local h = start { "run", plan_file({
        { _id = "spin", _tool = "pcall_spin", started = started, _outputPath = "†state.a" },
        { _id = "ok", _tool = "ok", ms = 5, value = 1, _outputPath = "†state.b" } }),
        "--tools", TOOLS, "--max-slice", "600000", "--journal", j }
      assert.is_true(wait_for(function() return exists(started) end))
      h.signal(sig)
      local r = h.wait()
      assert.are.equal(sig == "TERM" and 143 or 130, r.code, r.err) -- not the cap's 137
      assert.matches("obelus run: interrupted by SIG" .. sig .. "; running calls abandoned", r.err, 1, true)
      local recs = records(j)
      assert.are.equal("plan", recs[1].type)
      local settled = {}
      for _, rec in ipairs(recs) do if rec.journal == "settled" then settled[rec.id] = rec.state end end
      assert.is_nil(settled.spin) -- abandoned, not failed: resume runs it again
      local log = run { "log", j }
      assert.are.equal(0, log.code, log.err)
      local res = run { "resume", j, "--tools", TOOLS, "--max-slice", "200" }
      assert.matches("call spin (pcall_spin) had started (attempt 1) and did not settle: it runs again", res.err, 1, true)
      os.remove(j); os.remove(started)
    end)
  end

  it("SIGINT reaches a run on threads whose tools never yield: exit 130", function()
    local started = os.tmpname()
    os.remove(started)
    local file = cli.tmpfile(cjson.encode { instances = { "a", "b", "c", "d" },
      plan = { { _tool = "pcall_spin", started = started, _outputPath = "x" } } }, ".json")
    local h = start { "run", file, "--tools", TOOLS, "--threads", "2", "--max-slice", "600000" }
    assert.is_true(wait_for(function() return exists(started) end))
    h.signal("INT")
    local r = h.wait()
    assert.are.equal(130, r.code, r.err) -- not the cap's 137
    assert.matches("interrupted by SIGINT", r.err, 1, true)
    os.remove(started)
  end)

  it("a second SIGTERM exits at once while a tool blocks in C (os.execute)", function()
    local started, tag = os.tmpname(), "12." .. unique()
    os.remove(started)
    local h = start { "run", plan_file({ { _id = "b", _tool = "blocked", seconds = tag, started = started, _outputPath = "†state.a" } }),
                      "--tools", TOOLS }
    assert.is_true(wait_for(function() return exists(started) end))
    h.signal("TERM") -- os.execute's command is killed for it (ob_exec.c); the run may end first
    h.signal("TERM")
    local r = h.wait()
    kill_all("sleep " .. tag)
    assert.are.equal(143, r.code, r.err)
    assert.are.equal("", r.out) -- the tool never returned
    os.remove(started)
  end)
  it("SIGTERM sent twice by one process (timeout(1) sends it so) is one request, not the second", function()
    local started, j, tag = os.tmpname(), os.tmpname(), "2." .. unique()
    os.remove(started); os.remove(j)
    local h = start { "run", plan_file({ { _id = "b", _tool = "blocked", seconds = tag, started = started, _outputPath = "†state.a" } }),
                      "--tools", TOOLS, "--journal", j }
    assert.is_true(wait_for(function() return exists(started) end))
    -- one shell sends both, the second once the first has been taken (not coalesced)
    os.execute(([[kill -TERM %s; i=0
      while grep -q 'ShdPnd:.*[1-9a-f]' /proc/%s/status 2>/dev/null && [ $i -lt 500 ]; do
        sleep 0.01; i=$((i+1)); done
      kill -TERM %s 2>/dev/null]]):format(h.pid, h.pid, h.pid))
    local r = h.wait()
    kill_all("sleep " .. tag)
    assert.are.equal(143, r.code, r.err)
    -- the run ended as one SIGTERM ends it: said so, journal whole
    assert.matches("obelus run: interrupted by SIGTERM; running calls abandoned", r.err, 1, true)
    local recs = records(j)
    assert.are.equal("plan", recs[1].type)
    os.remove(started); os.remove(j)
  end)
end)

describe("obelus mcp, a tool that never yields", function()
  it("SIGTERM ends the server", function()
    local started, fifo, tag = os.tmpname(), os.tmpname(), "600." .. unique()
    os.remove(started); os.remove(fifo)
    assert.is_true(os.execute("mkfifo " .. q(fifo)))
    local req = cjson.encode { jsonrpc = "2.0", id = 1, method = "tools/call",
                               params = { name = "pcall_spin", arguments = { started = started } } }
    -- the client: one request, then input kept open (the server must not see its end)
    os.execute(("(printf '%%s\\n' %s; exec sleep %s) >%s &"):format(q(req), tag, q(fifo)))
    local h = start { "mcp", "--tools", TOOLS, "--max-slice", "600000", stdin = q(fifo) }
    assert.is_true(wait_for(function() return exists(started) end))
    h.signal("TERM")
    local r = h.wait()
    kill_all("sleep " .. tag)
    assert.are.equal(0, r.code, r.err) -- ended as a signal ends it: not the cap's 137
    os.remove(started); os.remove(fifo)
  end)
end)

describe("obelus worker, a tool that never yields", function()
  it("SIGTERM: the worker takes it, hands the job back after --grace and exits 0", function()
    local servers = require "support.servers"
    local redis, why = servers.redis()
    if not redis then return pending(why) end
    local started = os.tmpname()
    os.remove(started)
    local plan = plan_file({ { _id = "spin", _tool = "pcall_spin", started = started, _outputPath = "†state.a" } })
    local s = run { "submit", plan, "--redis", redis.url, "--queue", "stop1", "--tools", TOOLS }
    assert.are.equal(0, s.code, s.err)
    local h = start { "worker", "--redis", redis.url, "--queue", "stop1", "--tools", TOOLS, "--grace", "200",
                      "--max-slice", "600000" }
    local ok = wait_for(function() return exists(started) end)
    if ok then h.signal("TERM") end
    local r = h.wait()
    redis.stop()
    assert.is_true(ok, r.err)
    assert.are.equal(0, r.code, r.err) -- not the cap's 137
    assert.matches("obelus worker: SIGTERM: taking no more jobs", r.err, 1, true)
    assert.matches("obelus worker: ended", r.err, 1, true)
    os.remove(started)
  end)
end)

describe("children a tool spawned", function()
  it("die with the attempt that timed out: the group is killed, the file is never written", function()
    local tag = unique()
    local file = os.tmpname()
    os.remove(file)
    local r = run { "run", plan_file({ { _id = "s", _tool = "spawner", marker = "obelus-stop-" .. tag,
      cmd = "sleep 600." .. tag .. "; touch " .. file, wait = 60000, _timeout = 300, _outputPath = "†state.a" } }),
      "--tools", TOOLS }
    assert.are.equal(1, r.code, r.err)
    assert.matches("call s (spawner) failed (runtime): timeout after 300 ms", r.err, 1, true)
    -- SIGKILL was sent before obelus exited; the kernel ends them
    local gone = wait_for(function() return #pids("obelus-stop-" .. tag) + #pids("sleep 600." .. tag) == 0 end)
    kill_all("obelus-stop-" .. tag)
    kill_all("sleep 600." .. tag)
    assert.is_true(gone, "a child of the attempt is still running")
    assert.is_false(exists(file))
  end)

  it("die with a run SIGTERM cancels; nothing else is said", function()
    local tag, started = unique(), os.tmpname()
    os.remove(started)
    local h = start { "run", plan_file({ { _id = "s", _tool = "spawner", n = 3, marker = "obelus-stop-" .. tag,
      cmd = "sleep 600." .. tag, wait = 60000, started = started, _outputPath = "†state.a" } }), "--tools", TOOLS }
    assert.is_true(wait_for(function() return exists(started) end))
    h.signal("TERM")
    local r = h.wait()
    local gone = wait_for(function() return #pids("sleep 600." .. tag) == 0 end)
    kill_all("obelus-stop-" .. tag)
    kill_all("sleep 600." .. tag)
    assert.are.equal(143, r.code, r.err)
    assert.are.equal("obelus run: interrupted by SIGTERM; running calls abandoned\n", r.err)
    assert.is_true(gone, "children outlived the cancelled run")
    os.remove(started)
  end)

  it("die when a second SIGTERM exits at once", function()
    local tag, started = unique(), os.tmpname()
    os.remove(started)
    local h = start { "run", plan_file({ { _id = "s", _tool = "spawner", n = 3, marker = "obelus-stop-" .. tag,
      cmd = "sleep 600." .. tag, block = "12." .. tag, started = started, _outputPath = "†state.a" } }), "--tools", TOOLS }
    assert.is_true(wait_for(function() return exists(started) end))
    h.signal("TERM")
    h.signal("TERM")
    local r = h.wait()
    local gone = wait_for(function() return #pids("sleep 600." .. tag) == 0 end)
    kill_all("obelus-stop-" .. tag)
    kill_all("sleep 600." .. tag)
    kill_all("sleep 12." .. tag)
    assert.are.equal(143, r.code, r.err)
    assert.is_true(gone, "children outlived the process")
    os.remove(started)
  end)

  it("left in a child's group after the child exited are killed when the run ends", function()
    local tag = unique()
    -- the child (the group's leader) exits at once, its background sleep stays in the group
    local r = run { "run", plan_file({ { _id = "s", _tool = "spawner", marker = "obelus-stop-" .. tag,
      cmd = "(sleep 600." .. tag .. ") & exit 0", wait = 300, _outputPath = "†state.a" } }, "†state.a"),
      "--tools", TOOLS }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("spawned", cjson.decode(r.out))
    local gone = wait_for(function() return #pids("sleep 600." .. tag) == 0 end)
    kill_all("sleep 600." .. tag)
    assert.is_true(gone, "the grandchild outlived the run")
  end)

  it("still running when the run ends are killed, all of them", function()
    local tag = unique()
    local r = run { "run", plan_file({ { _id = "s", _tool = "spawner", n = 100, marker = "obelus-stop-" .. tag,
      cmd = "sleep 600." .. tag, _outputPath = "†state.a" } }, "†state.a"), "--tools", TOOLS }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("spawned", cjson.decode(r.out))
    local gone = wait_for(function() return #pids("sleep 600." .. tag) == 0 end)
    kill_all("obelus-stop-" .. tag)
    kill_all("sleep 600." .. tag)
    assert.is_true(gone, "children outlived the run")
  end)
end)
