-- spec/cli/fleet_kill_spec.lua -- the fleet's kill harness: a batch of jobs (a chain
-- and a fan-out plan, several inputs each) queued in a real redis-server; workers
-- SIGKILLed at random moments (the first, and sometimes the one that took the jobs
-- over), then a last worker drains the queue. Every job must end with the output a
-- plain `obelus run` gives, and every call must have run once, or twice when it was
-- in flight at a kill (a call's run is a line in a marks file).
-- OBELUS_FLEET_KILL_POINTS kill points (default 4; `make torture` runs 100).
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"
local servers = require "support.servers"

local q = cli.quote
local bin = cli.bin
local POINTS = tonumber(os.getenv("OBELUS_FLEET_KILL_POINTS") or "4")

local TOOLS = [[
local obelus = require "obelus"
return {
  name = "step",
  schema = { type = "object" },
  run = function(call)
    local f = assert(io.open(call.mark, "a"))
    f:write(call.id, "\n")
    f:close()
    obelus.sleep(call.ms)
    local sum = call.n or 0
    for _, v in ipairs(call.xs or {}) do sum = sum + v end
    return sum + 1
  end,
}
]]

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

local lines = cli.lines -- the non-empty lines of a text

describe("the fleet's kill harness (a real redis-server, workers SIGKILLed)", function()
  local redis, dir, tools

  setup(function()
    redis = assert(servers.redis())
    dir = fs.tmpdir()
    tools = dir .. "/tools"
    sh("mkdir -p " .. q(tools))
    fs.write(tools .. "/t.lua", TOOLS)
  end)
  teardown(function()
    redis.stop()
    sh("rm -rf " .. q(dir))
  end)

  local function chain(marks)
    local plan = {}
    for i = 1, 5 do
      plan[i] = { _id = "c" .. i, _tool = "step", id = "†input.job", ms = 60, mark = marks,
                  n = i == 1 and "†input.n" or ("†state.c" .. (i - 1)), _outputPath = "†state.c" .. i }
    end
    return { plan = plan, output = "†state.c5" }
  end
  local function fanout(marks)
    local plan, xs = {}, {}
    for i = 1, 6 do
      plan[i] = { _id = "f" .. i, _tool = "step", id = "†input.job", ms = 40 + i * 20, mark = marks,
                  n = "†input.n", _outputPath = "†state.f" .. i }
      xs[i] = "†state.f" .. i
    end
    plan[7] = { _id = "join", _tool = "step", id = "†input.job", ms = 30, mark = marks, xs = xs,
                _outputPath = "†state.sum" }
    return { plan = plan, output = "†state.sum" }
  end

  local function obelus(args, secs) return cli.run_for(secs, args) end

  -- a worker killed after ms (it may have finished by then: then it drained)
  local function killed_worker(queue, ms, jobs)
    sh(("%s worker --redis %s --queue %s --tools %s --jobs %d --claim-idle 200 --drain >/dev/null 2>&1 & " ..
        "pid=$!; sleep %s; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null"):format(
      q(bin), q(redis.url), queue, q(tools), jobs, ms / 1000))
  end

  for point = 1, POINTS do
    for _, shape in ipairs { "chain", "fanout" } do
      it(("%s: workers killed at random moments (%d): each job's output as run's; no call run twice but in flight"):format(shape, point), function()
        math.randomseed(os.time() + point * 7 + #shape)
        local queue = ("kill-%s-%d"):format(shape, point)
        local marks = ("%s/%s.marks"):format(dir, queue)
        local plan = (shape == "chain" and chain or fanout)(marks)
        local pf = ("%s/%s.json"):format(dir, queue)
        fs.write(pf, cjson.encode(plan))
        local batch, n = {}, 4
        for i = 1, n do batch[i] = cjson.encode { job = "j" .. i, n = i * 10 } end
        local bf = pf .. ".jsonl"
        fs.write(bf, table.concat(batch, "\n"))
        -- what an uninterrupted run gives
        local expect = {}
        for i = 1, n do
          local r = obelus { "run", pf, "--tools", tools, "--input", batch[i] }
          assert.are.equal(0, r.code, r.err)
          expect[i] = cjson.decode(r.out)
        end
        os.remove(marks)
        local s = obelus { "submit", pf, "--redis", redis.url, "--queue", queue, "--tools", tools, "--batch", bf }
        assert.are.equal(0, s.code, s.err)
        local ids = lines(s.out)
        local jobs = math.random(1, 3)
        killed_worker(queue, math.random(0, 700), jobs)
        local kills = 1
        if math.random() < 0.5 then -- the one that takes over is killed too
          os.execute("sleep 0.25")
          killed_worker(queue, math.random(0, 500), jobs)
          kills = 2
        end
        os.execute("sleep 0.25") -- past --claim-idle: the dead workers' jobs are claimable
        local w = obelus({ "worker", "--redis", redis.url, "--queue", queue, "--tools", tools,
                           "--jobs", "4", "--claim-idle", "200", "--drain" }, 120)
        assert.are.equal(0, w.code, w.err)
        local r = obelus { "wait", "--redis", redis.url, "--queue", queue, table.unpack(ids) }
        assert.are.equal(0, r.code, r.err .. r.out)
        local got = lines(r.out)
        for i = 1, n do
          local res = cjson.decode(got[i])
          assert.are.equal(ids[i], res.job)
          assert.are.equal(0, res.exit)
          assert.are.same(expect[i], res.output)
        end
        -- runs per job: every call at least once; at most one extra run per call that
        -- was in flight at a kill (chain: 1 a job a kill; fanout: 7)
        local per = {}
        for _, l in ipairs(lines(fs.slurp(marks))) do per[l] = (per[l] or 0) + 1 end
        local calls = #plan.plan
        local in_flight = shape == "chain" and 1 or #plan.plan
        for i = 1, n do
          local runs = per["j" .. i] or 0
          assert.is_true(runs >= calls, ("job %d: %d runs of %d calls"):format(i, runs, calls))
          assert.is_true(runs <= calls + kills * in_flight,
                         ("job %d: %d runs of %d calls after %d kills"):format(i, runs, calls, kills))
        end
      end)
    end
  end
end)
