-- ui_fleet_spec.lua -- `obelus ui --redis` (issue 29): a fleet over HTTP, with a real
-- redis-server and two real workers: GET /api/fleet lists both workers and the queue's
-- counts, the fleet's jobs are among GET /api/runs, and a job opens as a run (its journal
-- read from Redis). Without --redis, /api/fleet says how to get one.
local cli = require "support.cli"
local cjson = require "cjson"
local servers = require "support.servers"

local TOOLS = "spec/cli/tools"
local q = cli.quote
local sh = cli.sh

local ui = require "support.ui"
local get = ui.req
local function serve(extra) return ui.serve(os.getenv("TMPDIR") or "/tmp", extra) end

describe("obelus ui --redis", function()
  local redis
  setup(function() redis = assert(servers.redis()) end)
  teardown(function() if redis then redis.stop() end end)

  it("shows the fleet's workers and queue, its jobs among the runs, and a job as a run", function()
    local plan = cli.tmpfile([=[[{"_id":"a","_tool":"echo","value":"†input.n","_outputPath":"†state.a"},
      {"_id":"b","_tool":"echo","value":"†state.a","_outputPath":"†state.b"}]]=], ".json")
    for n = 1, 3 do
      assert.are.equal(0, cli.run({ "submit", plan, "--redis", redis.url, "--queue", "uiq",
        "--tools", TOOLS, "--input", ('{"n": %d}'):format(n) }).code)
    end
    local workers = {}
    for k = 1, 2 do
      workers[k] = sh(("%s worker --redis %s --queue uiq --tools %s --name w%d >/dev/null 2>&1 & echo $!")
        :format(q(cli.bin), redis.url, TOOLS, k)):gsub("%s+$", "")
    end
    local url, pid = serve("--redis " .. redis.url .. " --queue uiq")
    local fleet
    for _ = 1, 600 do -- both workers seen, the three jobs done, their memory looked at
      local code, body = get(url .. "api/fleet")
      fleet = code == 200 and cjson.decode(body) or nil
      if fleet and #fleet.workers == 2 and fleet.queues[1] and fleet.queues[1].done == 3 and
         type(fleet.queues[1].job_bytes) == "number" then break end
      os.execute("sleep 0.05")
    end
    local _, list = get(url .. "api/runs")
    local runs = cjson.decode(list).runs
    local job
    for _, r in ipairs(runs) do
      if r.source:match("^job:") then job = job or r end
    end
    local code, one = get(url .. "api/runs/" .. (job and job.id or "job-none"))
    local missing = get(url .. "api/runs/job-999999")
    -- its documents over the log and its graph, read from its journal in Redis too
    local jid = job and job.id or "job-none"
    local scode, state = get(url .. "api/runs/" .. jid .. "/state")
    local _, all = get(url .. "api/runs/" .. jid .. "/state")
    local before = (all:match('"messages":(%d+)') or 1) - 1
    local s1code, first = get(url .. "api/runs/" .. jid .. "/state?at=" .. before)
    local gcode, svg = get(url .. "api/runs/" .. jid .. "/graph.svg")
    local other = get(url .. "api/runs/" .. jid .. "/nope")
    local nostate = get(url .. "api/runs/job-999999/state")
    os.execute("kill -TERM " .. pid .. " " .. table.concat(workers, " ") .. " 2>/dev/null")
    assert.are.equal("ok", fleet.redis)
    assert.are.equal("uiq", fleet.queue)
    local names = {}
    for _, w in ipairs(fleet.workers) do names[#names + 1] = w.name .. ":" .. w.state end
    table.sort(names)
    assert.are.same({ "w1:live", "w2:live" }, names)
    assert.are.equal(3, fleet.queues[1].done)
    assert.are.equal(0, fleet.queues[1].failed)
    -- what a finished job costs Redis, looked at every few samples (ob_queue_memory.h)
    assert.truthy(fleet.queues[1].job_bytes > 0 and fleet.queues[1].job_bytes < 5000, fleet.queues[1].job_bytes)
    assert.truthy(fleet.queues[1].redis_bytes > fleet.queues[1].job_bytes, fleet.queues[1].redis_bytes)
    assert.are.equal(3, #fleet.jobs)
    for _, j in ipairs(fleet.jobs) do assert.are.equal("done", j.state) end
    assert.truthy(job, list)
    assert.matches("^job%-", job.id)
    assert.are.equal(200, code)
    local run = cjson.decode(one)
    assert.are.equal(job.id, run.id)
    local ids = {}
    for _, c in ipairs(run.run.calls) do ids[#ids + 1] = c.id .. ":" .. c.state end
    assert.are.same({ "a:done", "b:done" }, ids)
    assert.are.equal(404, missing)
    assert.are.equal(200, scode)
    state = cjson.decode(state)
    local n = run.run.calls[1].output.a -- the job's input, echoed by a then b
    assert.are.same({ a = n, b = n }, state.documents.state)
    assert.are.equal(200, s1code)
    assert.are.same({ a = n }, cjson.decode(first).documents.state) -- before b's output
    assert.are.equal(200, gcode)
    assert.truthy(svg:match("<svg"), svg)
    assert.truthy(svg:find(">a<", 1, true) and svg:find(">b<", 1, true), svg)
    assert.are.equal(404, other)
    assert.are.equal(404, nostate)
  end)

  it("says how to watch a fleet when it has no --redis", function()
    local url, pid = serve()
    local code, body = get(url .. "api/fleet")
    os.execute("kill -TERM " .. pid)
    assert.are.equal(404, code)
    assert.matches("%-%-redis URL", cjson.decode(body).error)
  end)
end)
