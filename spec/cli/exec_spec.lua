-- exec_spec.lua -- os.execute as tools get it (core/engine/ob_exec.c, issue 26 item 3): Lua's
-- results, but the command runs in a process group of its own and is killed with its
-- call when the call is stopped (_timeout, --max-slice, SIGINT/SIGTERM, a timeout(1)
-- around obelus). Real processes and real signals; nothing here reads a clock: each run
-- is capped by `timeout -s KILL 30` (a cap hit shows as 137), a signal is sent once the
-- command says it runs (a file), and the command's pid (written by it) must be gone when
-- obelus has exited.
local cli = require "support.cli"
local cjson = require "cjson"
local proc = require "support.proc"
local exists, wait_for, plan_file, run, start = proc.exists, proc.wait_for, proc.plan_file, proc.run, proc.start

local TOOLS = "spec/cli/fixtures/exec/tools.lua"




-- the pid the command wrote, and whether it still runs
local function pid_of(pidfile) return cli.slurp(pidfile):match("%d+") end
-- (a zombie is not: killed as obelus exited at once, it waits for init to reap it)
local function alive(pid)
  if not pid then return false end
  local st = cli.slurp("/proc/" .. pid .. "/stat") or ""
  return st ~= "" and not st:match("^%d+ %b() Z")
end
local function kill(pidfile)
  local pid = pid_of(pidfile)
  if pid then os.execute("kill -9 " .. pid .. " 2>/dev/null") end
  os.remove(pidfile)
end



-- the journal's settled records: id -> state
local function settled(journal)
  local t, started = {}, {}
  for line in io.lines(journal) do
    if line:match("%S") then
      local rec = cjson.decode(line)
      if rec.journal == "settled" then t[rec.id] = rec.state end
      if rec.journal == "start" then started[rec.id] = true end
    end
  end
  return t, started
end

-- a file name not there yet
local function fresh()
  local f = os.tmpname()
  os.remove(f)
  return f
end

describe("os.execute in a tool", function()
  it("returns what Lua's does: exit 3, kill -9 $$, true, and no command", function()
    local cmds = { "exit 3", "kill -9 $$", "true" }
    local want = {}
    local function say(...) -- this Lua's own os.execute, as the tool says its results
      local t = table.pack(...)
      for i = 1, t.n do t[i] = tostring(t[i]) end
      want[#want + 1] = table.concat(t, " ", 1, t.n)
    end
    for _, c in ipairs(cmds) do say(os.execute(c)) end
    say(os.execute())
    assert.are.same({ "nil exit 3", "nil signal 9", "true exit 0", "true" }, want)
    local r = run { "run", plan_file({ { _tool = "results", cmds = cmds, _outputPath = "†state.a" } }, "†state.a"),
                    "--tools", TOOLS }
    assert.are.equal(0, r.code, r.err)
    assert.are.same(want, cjson.decode(r.out))
  end)

  it("works while a tool file loads (outside any call)", function()
    local r = run { "run", plan_file({ { _tool = "at_load", _outputPath = "†state.a" } }, "†state.a"), "--tools", TOOLS }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("nil exit 5", cjson.decode(r.out))
  end)

  it("runs its command in a process group of its own, every signal default and none blocked", function()
    -- SIGHUP ignored by obelus's parent (nohup): system() left it so in the command
    local r = run({ "run", plan_file({ { _tool = "probe", _outputPath = "†state.a" } }, "†state.a"), "--tools", TOOLS },
                  "bash -c 'trap \"\" HUP; exec \"$0\" \"$@\"'")
    assert.are.equal(0, r.code, r.err)
    local p = cjson.decode(r.out)
    assert.is_not_nil(p.pid, p.raw)
    assert.are.equal(p.pid, p.pgid, p.raw)
    -- glibc's posix_spawn (system()'s too) leaves its own two signals (32, 33) ignored
    assert.are.equal(0, tonumber(p.ignored, 16) & ~0x180000000, p.raw)
    assert.are.equal(0, tonumber(p.blocked, 16), p.raw)
  end)

  it("_timeout fails the call with its timeout error, the command killed; the run goes on", function()
    local pidfile = fresh()
    finally(function() kill(pidfile) end)
    local r = run { "run", plan_file({
      { _id = "b", _tool = "blocked", seconds = 30, pidfile = pidfile, _timeout = 300,
        _outputPath = "†state.a || †state.failed" },
      { _tool = "ok", value = "after", _outputPath = "†state.b" } }, { "†state.failed", "†state.b" }),
      "--tools", TOOLS, "--max-slice", "600000" }
    assert.are.equal(0, r.code, r.err) -- routed: not the cap's 137
    local out = cjson.decode(r.out)
    assert.matches("timeout after 300 ms", cjson.encode(out[1]), 1, true)
    assert.are.equal("after", out[2])
    assert.is_not_nil(pid_of(pidfile))
    assert.is_false(alive(pid_of(pidfile)))
  end)

  it("--max-slice fails the call, the command killed", function()
    local pidfile = fresh()
    finally(function() kill(pidfile) end)
    local r = run { "run", plan_file({ { _id = "b", _tool = "blocked", seconds = 30, pidfile = pidfile,
                                         _outputPath = "†state.a" } }), "--tools", TOOLS, "--max-slice", "300" }
    assert.are.equal(1, r.code, r.err)
    assert.matches("call b (blocked) failed (runtime): the tool ran 300 ms without yielding", r.err, 1, true)
    assert.is_not_nil(pid_of(pidfile))
    assert.is_false(alive(pid_of(pidfile)))
  end)

  it("one SIGTERM: exit 143, the command gone, the call abandoned and run again by resume", function()
    local pidfile, started, once, j = fresh(), fresh(), fresh(), fresh()
    finally(function() kill(pidfile); os.remove(started); os.remove(once); os.remove(j) end)
    local p = plan_file({ { _id = "b", _tool = "blocked", seconds = 30, pidfile = pidfile, started = started,
                            once = once, _outputPath = "†state.a" } }, "†state.a")
    local h = start { "run", p, "--tools", TOOLS, "--journal", j }
    assert.is_true(wait_for(function() return exists(started) end))
    h.signal("TERM")
    local r = h.wait()
    assert.are.equal(143, r.code, r.err) -- not the cap's 137
    assert.matches("obelus run: interrupted by SIGTERM; running calls abandoned", r.err, 1, true)
    assert.are.equal("", r.out)
    assert.is_false(alive(pid_of(pidfile)))
    local done, began = settled(j)
    assert.is_true(began.b)
    assert.is_nil(done.b) -- abandoned, not settled: resume runs it again
    local res = run { "resume", j, "--tools", TOOLS }
    assert.are.equal(0, res.code, res.err)
    assert.are.equal("again", cjson.decode(res.out))
  end)

  it("two SIGINTs from separate processes: exit 130, the command gone", function()
    local pidfile, started = fresh(), fresh()
    finally(function() kill(pidfile); os.remove(started) end)
    local h = start { "run", plan_file({ { _id = "b", _tool = "blocked", seconds = 30, pidfile = pidfile,
                                           started = started, _outputPath = "†state.a" } }), "--tools", TOOLS }
    assert.is_true(wait_for(function() return exists(started) end))
    h.signal("INT")
    h.signal("INT")
    local r = h.wait()
    assert.are.equal(130, r.code, r.err) -- not the cap's 137
    assert.is_false(alive(pid_of(pidfile)))
  end)

  it("timeout --preserve-status 2 obelus run: exit 143, the call abandoned (no settled record)", function()
    local pidfile, started, j = fresh(), fresh(), fresh()
    finally(function() kill(pidfile); os.remove(started); os.remove(j) end)
    -- timeout(1) signals obelus, then obelus's process group: the command, in a group of
    -- its own, is not signalled by it (it was killed so, and its call could settle done
    -- first); obelus kills it, even one that ignores SIGTERM (system() waited for it)
    local r = run({ "run", plan_file({ { _id = "b", _tool = "blocked", seconds = 60, pidfile = pidfile,
                                         started = started, ignore_term = true, _outputPath = "†state.a" } }),
                    "--tools", TOOLS, "--journal", j }, "timeout --preserve-status 2")
    assert.are.equal(143, r.code, r.err)
    assert.matches("obelus run: interrupted by SIGTERM; running calls abandoned", r.err, 1, true)
    assert.is_true(exists(started)) -- the command ran when the signal came
    local done, began = settled(j)
    assert.is_true(began.b)
    assert.is_nil(done.b)
    assert.is_false(alive(pid_of(pidfile)))
  end)
end)
