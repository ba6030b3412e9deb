-- spec/cli/fleet_spec.lua -- many machines: obelus submit / worker / wait / status /
-- log --redis against a real redis-server started here (a free loopback port, a
-- temporary folder, AOF on), with real SIGKILLs of workers and of Redis itself.
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"
local servers = require "support.servers"

local q = cli.quote
local bin = cli.bin

-- The tests' tools: step (spec/cli/fixtures/fleet/step.lua) writes a mark per run (so
-- that runs can be counted), sleeps, and doubles n; die kills its own process (a
-- worker) with SIGKILL.
local STEP = cli.slurp("spec/cli/fixtures/fleet/step.lua")
local DIE = [[
local obelus = require "obelus"
return {
  name = "die",
  schema = { type = "object" },
  run = function()
    obelus.uv.kill(obelus.uv.os_getpid(), "sigkill")
    obelus.sleep(1000)
  end,
}
]]

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

local lines = cli.lines -- the non-empty lines of a text

local function count_lines(path)
  local s = fs.slurp(path)
  return s and #lines(s) or 0
end

describe("obelus submit / worker / wait (a real redis-server)", function()
  local redis, dir, tools, other

  setup(function()
    redis = assert(servers.redis())
    dir = fs.tmpdir()
    tools = dir .. "/tools"
    other = dir .. "/other"
    sh("mkdir -p " .. q(tools) .. " " .. q(other))
    fs.write(tools .. "/step.lua", STEP)
    fs.write(tools .. "/die.lua", DIE)
    fs.write(other .. "/step.lua", STEP .. "-- another version\n")
    fs.write(other .. "/die.lua", DIE)
  end)
  teardown(function()
    redis.stop()
    sh("rm -rf " .. q(dir))
  end)

  local function plan_file(name, plan)
    local path = dir .. "/" .. name
    fs.write(path, cjson.encode(plan))
    return path
  end

  local function obelus(args, secs) return cli.run_for(secs, args) end

  -- Starts a worker in the background: its pid and log file.
  local function start_worker(queue, args)
    local log = os.tmpname()
    local parts = {}
    for i, a in ipairs(args or {}) do parts[i] = q(a) end
    local p = assert(io.popen(("%s worker --redis %s --queue %s %s >%s 2>&1 & echo $!"):format(
      q(bin), q(redis.url), q(queue), table.concat(parts, " "), log)))
    local pid = p:read("l")
    p:close()
    return pid, log
  end
  local function wait_pid(pid, secs)
    for _ = 1, (secs or 20) * 20 do
      if not sh("kill -0 " .. pid .. " 2>/dev/null") then return true end
      os.execute("sleep 0.05")
    end
    sh("kill -9 " .. pid .. " 2>/dev/null")
    return false
  end

  local simple = { plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.a" } }, output = "†state.a" }

  it("says on the worker's stderr a job's call that failed, as obelus run says it", function()
    local p = plan_file("fails.json", { plan = { { _tool = "step", n = 1, mark = dir .. "/no/such/dir/m",
      _outputPath = "†state.a" } }, output = "†state.a" })
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "fails", "--tools", tools }
    assert.are.equal(0, s.code, s.err)
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "fails", "--tools", tools, "--drain" }, 30)
    assert.are.equal(0, w.code, w.err)
    assert.truthy(w.err:match("obelus: call [^\n]* %(step%) failed %(runtime%): [^\n]*no/such/dir"), w.err)
  end)

  it("queues a batch, runs it on a worker, and wait prints each job's result in order", function()
    local p = plan_file("simple.json", simple)
    local batch = dir .. "/batch.jsonl"
    fs.write(batch, '{"n": 1}\n\n{"n": 2}\n{"n": 3}\n')
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "b1", "--tools", tools, "--batch", batch }
    assert.are.equal(0, s.code, s.err)
    local ids = lines(s.out)
    assert.are.equal(3, #ids)
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "b1", "--tools", tools, "--drain", "--jobs", "2" }, 30)
    assert.are.equal(0, w.code, w.err)
    assert.truthy(w.err:match("3 done"))
    -- in the order given, not the order of the batch
    local r = obelus { "wait", "--redis", redis.url, "--queue", "b1", ids[3], ids[1], ids[2] }
    assert.are.equal(0, r.code, r.err)
    local got = lines(r.out)
    assert.are.same({ job = ids[3], exit = 0, output = 6 }, cjson.decode(got[1]))
    assert.are.same({ job = ids[1], exit = 0, output = 2 }, cjson.decode(got[2]))
    assert.are.same({ job = ids[2], exit = 0, output = 4 }, cjson.decode(got[3]))
    -- the journal, kept in Redis, prints as log prints a journal
    local l = obelus { "log", "--redis", redis.url, "--queue", "b1", ids[2] }
    assert.are.equal(0, l.code, l.err)
    assert.truthy(l.out:match("plan .*simple%.json"))
    assert.truthy(l.out:match("step"))
    local st = obelus { "status", "--redis", redis.url, "--queue", "b1", "--json" }
    assert.are.equal(0, st.code, st.err)
    local j = cjson.decode(st.out)
    assert.are.equal(3, j.done)
    assert.are.equal(0, j.queued)
    assert.are.equal(0, j.running)
    assert.are.equal(3, j.last_minute)
  end)

  it("wait blocks until a job submitted earlier finishes, then prints it", function()
    local p = plan_file("slow.json", { plan = { { _tool = "step", n = 5, ms = 300, _outputPath = "†state.a" } }, output = "†state.a" })
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "b2", "--tools", tools }
    assert.are.equal(0, s.code, s.err)
    local id = s.out:match("%S+")
    local out = os.tmpname()
    sh(("timeout 20 %s wait --redis %s --queue b2 %s > %s 2>&1 &"):format(q(bin), q(redis.url), id, out))
    os.execute("sleep 0.3")
    assert.are.equal("", fs.slurp(out)) -- nothing yet: no worker
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "b2", "--tools", tools, "--drain" }, 30)
    assert.are.equal(0, w.code, w.err)
    for _ = 1, 100 do
      if (fs.slurp(out) or "") ~= "" then break end
      os.execute("sleep 0.05")
    end
    assert.are.same({ job = id, exit = 0, output = 10 }, cjson.decode(fs.slurp(out)))
    os.remove(out)
  end)

  it("wait --timeout prints the jobs not finished with their state, exit 4", function()
    local p = plan_file("simple.json", simple)
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "b3", "--input", '{"n": 1}' }
    local id = s.out:match("%S+")
    local r = obelus { "wait", "--redis", redis.url, "--queue", "b3", id, "--timeout", "200" }
    assert.are.equal(4, r.code, r.err)
    assert.are.same({ job = id, exit = cjson.null, state = "queued" }, cjson.decode(r.out))
    local r2 = obelus { "wait", "--redis", redis.url, "--queue", "b3", "no-such-job" }
    assert.are.equal(2, r2.code)
    assert.truthy(r2.out:match("no such job"))
  end)

  it("refuses an invalid plan before queueing anything (exit 2, with or without --tools)", function()
    local bad = plan_file("bad.json", { plan = { { _tool = "step", n = "†state.b", _outputPath = "†state.a" },
                                                 { _tool = "step", n = "†state.a", _outputPath = "†state.b" } } })
    local r = obelus { "submit", bad, "--redis", redis.url, "--queue", "b4" }
    assert.are.equal(2, r.code)
    assert.truthy(r.err:match("cycle"))
    assert.are.equal("", r.out)
    local unknown = plan_file("unknown.json", { { _tool = "nope", _outputPath = "†state.a" } })
    local r2 = obelus { "submit", unknown, "--redis", redis.url, "--queue", "b4", "--tools", tools }
    assert.are.equal(2, r2.code)
    assert.truthy(r2.err:match("nope"))
    local badin = obelus { "submit", plan_file("simple.json", simple), "--redis", redis.url, "--queue", "b4",
                           "--input", "{not json" }
    assert.are.equal(2, badin.code)
    assert.truthy(redis.cli("xlen 'ob:{b4}:jobs'"):match("^0"))
  end)

  it("a job submitted without --tools is checked by the worker: exit 2 and the messages as its result", function()
    local unknown = plan_file("unknown.json", { { _tool = "nope", _outputPath = "†state.a" } })
    local s = obelus { "submit", unknown, "--redis", redis.url, "--queue", "b5" }
    assert.are.equal(0, s.code, s.err)
    local id = s.out:match("%S+")
    assert.are.equal(0, obelus({ "worker", "--redis", redis.url, "--queue", "b5", "--tools", tools, "--drain" }).code)
    local r = obelus { "wait", "--redis", redis.url, "--queue", "b5", id }
    assert.are.equal(1, r.code)
    local res = cjson.decode(r.out)
    assert.are.equal(2, res.exit)
    assert.truthy(res.output[1]:match("nope"))
  end)

  it("a worker with other tool files leaves the job; status says why; a worker with them runs it", function()
    local p = plan_file("simple.json", simple)
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "b6", "--tools", tools, "--input", '{"n": 4}' }
    local id = s.out:match("%S+")
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "b6", "--tools", other, "--drain" }, 30)
    assert.are.equal(0, w.code, w.err)
    assert.truthy(w.err:match("0 done"))
    local st = obelus { "status", "--redis", redis.url, "--queue", "b6" }
    assert.truthy(st.out:match("1 job wait for a worker with tool files %x+ %(die%.lua, step%.lua%): no live worker has them"), st.out)
    local w2 = obelus({ "worker", "--redis", redis.url, "--queue", "b6", "--tools", tools, "--drain" }, 30)
    assert.are.equal(0, w2.code, w2.err)
    local r = obelus { "wait", "--redis", redis.url, "--queue", "b6", id }
    assert.are.same({ job = id, exit = 0, output = 8 }, cjson.decode(r.out))
  end)

  it("--shard K: parts of K instances run as jobs; wait merges them into what run prints", function()
    local plan = { instances = { "a", "b", "c", "d", "e" },
                   context = { { type = "data", kind = "input", data = { n = 1 } },
                               { type = "data", kind = "input", _instance = "c", data = { n = 7 } } },
                   plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.x" } },
                   output = "†state.x" }
    local p = plan_file("inst.json", plan)
    local run = obelus { "run", p, "--tools", tools }
    assert.are.equal(0, run.code, run.err)
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "b7", "--tools", tools, "--shard", "2" }
    assert.are.equal(0, s.code, s.err)
    assert.are.equal(1, #lines(s.out))
    local id = s.out:match("%S+")
    assert.are.equal(0, obelus({ "worker", "--redis", redis.url, "--queue", "b7", "--tools", tools, "--drain", "--jobs", "3" }).code)
    local r = obelus { "wait", "--redis", redis.url, "--queue", "b7", id }
    assert.are.equal(0, r.code, r.err)
    local res = cjson.decode(r.out)
    assert.are.same(cjson.decode(run.out), res.output)
    assert.are.same({ a = 2, b = 2, c = 14, d = 2, e = 2 }, res.output)
    local st = cjson.decode(obelus({ "status", "--redis", redis.url, "--queue", "b7", "--json" }).out)
    assert.are.equal(3, st.done) -- parts of 2, 2 and 1
    local l = obelus { "log", "--redis", redis.url, "--queue", "b7", id }
    assert.are.equal(0, l.code, l.err)
    assert.truthy(l.out:match("job " .. id .. "%.3"))
  end)

  it("says clearly when Redis cannot be reached, naming the URL (exit 3)", function()
    local port = servers.free_port()
    local url = "redis://127.0.0.1:" .. port
    for _, args in ipairs {
      { "submit", plan_file("simple.json", simple), "--redis", url },
      { "worker", "--redis", url, "--tools", tools },
      { "wait", "--redis", url, "1" },
      { "status", "--redis", url },
      { "log", "--redis", url, "1" },
    } do
      local r = obelus(args, 10)
      assert.are.equal(3, r.code, args[1] .. ": " .. r.err)
      assert.truthy(r.err:find("cannot reach Redis at " .. url, 1, true), r.err)
    end
    local bad = obelus { "status", "--redis", "http://x" }
    assert.are.equal(2, bad.code)
  end)

  it("a worker killed mid-job: another takes the job over and resumes it; completed calls do not run again", function()
    local marks = dir .. "/marks-kill"
    local plan = { plan = {} }
    for i = 1, 6 do
      plan.plan[i] = { _id = "s" .. i, _tool = "step", n = i == 1 and 1 or ("†state.s" .. (i - 1)), ms = 150,
                       mark = marks, _outputPath = "†state.s" .. i }
    end
    plan.output = "†state.s6"
    local p = plan_file("chain.json", plan)
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "k1", "--tools", tools }
    local id = s.out:match("%S+")
    local pid = start_worker("k1", { "--tools", tools, "--claim-idle", "300" })
    for _ = 1, 200 do -- until three calls have run
      if count_lines(marks) >= 3 then break end
      os.execute("sleep 0.02")
    end
    sh("kill -9 " .. pid)
    wait_pid(pid)
    local before = count_lines(marks)
    assert.is_true(before >= 3 and before < 6, "marks: " .. before)
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "k1", "--tools", tools, "--claim-idle", "300", "--drain" }, 30)
    assert.are.equal(0, w.code, w.err)
    assert.truthy(w.err:match("taken over"), w.err)
    local r = obelus { "wait", "--redis", redis.url, "--queue", "k1", id }
    assert.are.same({ job = id, exit = 0, output = 64 }, cjson.decode(r.out))
    -- six calls; at most the one in flight at the kill ran twice
    local total = count_lines(marks)
    assert.is_true(total == 6 or total == 7, "runs: " .. total)
    local st = cjson.decode(obelus({ "status", "--redis", redis.url, "--queue", "k1", "--json" }).out)
    assert.are.equal(1, st.claimed)
  end)

  it("a poison job (it kills its worker every time) is failed after --max-deliveries", function()
    local p = plan_file("poison.json", { { _tool = "die", _outputPath = "†state.a" } })
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "p1", "--tools", tools }
    local id = s.out:match("%S+")
    local runs = 0
    for _ = 1, 6 do
      local w = obelus({ "worker", "--redis", redis.url, "--queue", "p1", "--tools", tools, "--claim-idle", "100",
                         "--max-deliveries", "3", "--drain" }, 20)
      if w.code == 137 then runs = runs + 1 else
        assert.are.equal(0, w.code, w.err)
        assert.truthy(w.err:match("poison"), w.err)
        break
      end
      os.execute("sleep 0.15")
    end
    assert.are.equal(3, runs)
    local r = obelus { "wait", "--redis", redis.url, "--queue", "p1", id }
    local res = cjson.decode(r.out)
    assert.are.equal(1, res.exit)
    assert.truthy(res.error:match("^poison: delivered 3 times"), res.error)
    local st = cjson.decode(obelus({ "status", "--redis", redis.url, "--queue", "p1", "--json" }).out)
    assert.are.equal(1, st.poisoned)
  end)

  it("SIGTERM: the worker finishes its running job, takes no more, exits 0", function()
    local marks = dir .. "/marks-term"
    local p = plan_file("slow2.json", { plan = { { _tool = "step", n = 3, ms = 3000, mark = marks, _outputPath = "†state.a" } },
                                        output = "†state.a" })
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "t1", "--tools", tools, "--batch", (function()
      local b = dir .. "/two.jsonl"
      fs.write(b, "{}\n{}\n")
      return b
    end)() }
    local ids = lines(s.out)
    local pid, log = start_worker("t1", { "--tools", tools })
    -- SIGTERM once the first job's call has started (its mark written; it sleeps 3 s)
    for _ = 1, 3000 do
      if count_lines(marks) >= 1 then break end
      os.execute("sleep 0.02")
    end
    sh("kill -TERM " .. pid)
    assert.is_true(wait_pid(pid, 60))
    local text = fs.slurp(log)
    assert.truthy(text:match("SIGTERM"), text)
    assert.truthy(text:match("1 done"), text)
    local r = obelus { "wait", "--redis", redis.url, "--queue", "t1", ids[1], "--timeout", "300" }
    assert.are.same({ job = ids[1], exit = 0, output = 6 }, cjson.decode(lines(r.out)[1]))
    local r2 = obelus { "wait", "--redis", redis.url, "--queue", "t1", ids[2], "--timeout", "300" }
    assert.are.equal(4, r2.code) -- the second was never taken
  end)

  it("SIGTERM past --grace: the running job is handed back and resumed elsewhere from its journal", function()
    local marks = dir .. "/marks-grace"
    local plan = { plan = {} }
    for i = 1, 5 do
      plan.plan[i] = { _id = "g" .. i, _tool = "step", n = i == 1 and 1 or ("†state.g" .. (i - 1)), ms = 200,
                       mark = marks, _outputPath = "†state.g" .. i }
    end
    plan.output = "†state.g5"
    local p = plan_file("grace.json", plan)
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "g1", "--tools", tools }
    local id = s.out:match("%S+")
    local pid, log = start_worker("g1", { "--tools", tools, "--grace", "100" })
    for _ = 1, 200 do
      if count_lines(marks) >= 2 then break end
      os.execute("sleep 0.02")
    end
    sh("kill -TERM " .. pid)
    assert.is_true(wait_pid(pid, 10))
    local text = fs.slurp(log)
    assert.truthy(text:match("job " .. id .. ": handed back"), text)
    assert.truthy(text:match("0 done"), text)
    local before = count_lines(marks)
    assert.is_true(before < 5, "runs before: " .. before)
    -- handed back: claimable at once, though --claim-idle is the default 30 s
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "g1", "--tools", tools, "--drain" }, 30)
    assert.are.equal(0, w.code, w.err)
    assert.truthy(w.err:match("taken over"), w.err)
    local r = obelus { "wait", "--redis", redis.url, "--queue", "g1", id }
    assert.are.same({ job = id, exit = 0, output = 32 }, cjson.decode(r.out))
    local total = count_lines(marks)
    assert.is_true(total == 5 or total == 6, "runs: " .. total)
  end)

  it("Redis restarted mid-batch: workers and wait reconnect; every job finishes once", function()
    local marks = dir .. "/marks-restart"
    local p = plan_file("r.json", { plan = { { _tool = "step", n = "†input.n", ms = 100, mark = marks, _outputPath = "†state.a" } },
                                   output = "†state.a" })
    local b = dir .. "/many.jsonl"
    local text = {}
    for i = 1, 40 do text[i] = ('{"n": %d}'):format(i) end
    fs.write(b, table.concat(text, "\n"))
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "r1", "--tools", tools, "--batch", b }
    local ids = lines(s.out)
    assert.are.equal(40, #ids)
    local out = os.tmpname()
    local args = {}
    for i, id in ipairs(ids) do args[i] = id end
    sh(("timeout 60 %s wait --redis %s --queue r1 %s > %s 2>%s.err &"):format(q(bin), q(redis.url), table.concat(args, " "), out, out))
    local pid, log = start_worker("r1", { "--tools", tools, "--jobs", "2", "--claim-idle", "1000" })
    for _ = 1, 200 do
      if count_lines(marks) >= 10 then break end
      os.execute("sleep 0.02")
    end
    assert.is_true(redis.restart())
    for _ = 1, 600 do
      if #lines(fs.slurp(out) or "") == 40 then break end
      os.execute("sleep 0.05")
    end
    sh("kill -TERM " .. pid)
    wait_pid(pid)
    local got = lines(fs.slurp(out) or "")
    assert.are.equal(40, #got, (fs.slurp(log) or "") .. (fs.slurp(out .. ".err") or ""))
    for i, l in ipairs(got) do
      assert.are.same({ job = ids[i], exit = 0, output = 2 * i }, cjson.decode(l))
    end
    assert.truthy((fs.slurp(log) or ""):match("again"))
    -- each job ran once, or twice if it was in flight at the restart (2 at a time)
    local runs = count_lines(marks)
    assert.is_true(runs >= 40 and runs <= 44, "runs: " .. runs)
    os.remove(out)
  end)

  -- the demo runs bin/obelus whatever OBELUS_BIN says: once is enough
  local demo_it = bin:match("/asan/") and pending or it
  demo_it("make demo-cluster: a batch on two workers, one killed, every job done", function()
    local p = assert(io.popen("timeout 120 sh plans/cluster/demo.sh 2>&1"))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("40 results, 40 with exit 0", 1, true), out)
    assert.truthy(out:find("kill -9 worker-a", 1, true), out)
    assert.truthy(out:find("taken over", 1, true), out)
    assert.truthy(out:find("done 40, failed 0", 1, true), out)
  end)
end)
