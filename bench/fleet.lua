-- bench/fleet.lua -- the fleet benchmark (`make bench` ends with it; `sh bench/run fleet`
-- runs it alone), against a redis-server started here (a free loopback port, a temporary
-- folder, AOF on with appendfsync everysec, Redis's default), whole processes timed:
--   jobs/s      N trivial 1-call jobs queued (one submit of a batch), then one
--               `obelus worker --drain --jobs 256` takes them all: its wall time
--   queue cost  the same N calls as instances of one plan in one local `obelus run --threads 1`
--               (one engine, as a worker is):
--               (worker time - run time) / N is what the queue adds per job
--   cpu 1 vs 2  M jobs that each compute for ~25 ms (one call), drained by one worker,
--               then by two at once (each --jobs 1): the speed-up on this 2-core machine
-- 3 rounds of each, interleaved; medians. Goals: >= 5,000 jobs/s; 2 workers >= 1.7x.
package.path = "../spec/?.lua;" .. package.path
local cjson = require "cjson"
local servers = require "support.servers"

local N = tonumber(os.getenv("OBELUS_FLEET_N") or "20000")
local M = tonumber(os.getenv("OBELUS_FLEET_CPU_JOBS") or "100")
local ROUNDS = 3
local BIN = "../bin/obelus"

local measure = dofile("measure.lua")
local median = measure.median

local function sh(cmd)
  local ok = os.execute(cmd)
  if not (ok == true or ok == 0) then error(cmd .. " failed") end
end

-- a command's wall seconds (GNU time's, to 10 ms: these runs take seconds)
local function timed(cmd) return (measure.timed(cmd)) end

local r = assert(servers.redis { fsync = "everysec" })
local dir = r.dir
local function write(name, text) return measure.write(dir, name, text) end

local tools = write("tools.lua", [[
return {
  { name = "double", schema = { type = "object" }, run = function(call) return call.n * 2 end },
  { name = "burn", schema = { type = "object" }, run = function(call)
      local x = 0
      for i = 1, call.loops do x = (x + i * 7) % 1000003 end
      return x
    end },
}
]])
local trivial = write("trivial.json", cjson.encode {
  plan = { { _tool = "double", n = "†input.n", _outputPath = "†state.a" } }, output = "†state.a" })
local lines = {}
for i = 1, N do lines[i] = ('{"n": %d}'):format(i) end
local batch = write("batch.jsonl", table.concat(lines, "\n"))
local inst = {}
for i = 1, N do inst[i] = "i" .. i end
local local_plan = write("local.json", cjson.encode {
  instances = inst,
  context = { { type = "data", kind = "input", data = { n = 1 } } },
  plan = { { _tool = "double", n = "†input.n", _outputPath = "†state.a" } }, output = "†state.a" })
local burn = write("burn.json", cjson.encode {
  plan = { { _tool = "burn", loops = 2000000, _outputPath = "†state.a" } }, output = "†state.a" })
local cpu_lines = {}
for i = 1, M do cpu_lines[i] = "{}" end
local cpu_batch = write("cpu.jsonl", table.concat(cpu_lines, "\n"))

local url = r.url
local function worker(queue, jobs)
  return ("%s worker --redis %s --queue %s --tools %s --drain --jobs %d 2>/dev/null"):format(
    BIN, url, queue, tools, jobs)
end

local rate, per_job, speedup = {}, {}, {}
for round = 1, ROUNDS do
  local q = "bench" .. round
  sh(("%s submit %s --redis %s --queue %s --tools %s --batch %s >/dev/null"):format(
    BIN, trivial, url, q, tools, batch))
  local tw = timed(worker(q, 256))
  local tl = timed(("%s run %s --tools %s --threads 1 >/dev/null"):format(BIN, local_plan, tools))
  table.insert(rate, N / tw)
  table.insert(per_job, (tw - tl) / N * 1e6)
  print(cjson.encode { bench = "fleet", round = round, jobs = N, worker_s = tw, jobs_per_s = math.floor(N / tw),
                       local_run_s = tl, queue_us_per_job = math.floor((tw - tl) / N * 1e6) })

  local c1, c2 = "cpu1-" .. round, "cpu2-" .. round
  for _, cq in ipairs { c1, c2 } do
    sh(("%s submit %s --redis %s --queue %s --tools %s --batch %s >/dev/null"):format(
      BIN, burn, url, cq, tools, cpu_batch))
  end
  local t1 = timed(worker(c1, 1))
  local t2 = timed(("(%s & %s & wait)"):format(worker(c2, 1), worker(c2, 1)))
  table.insert(speedup, t1 / t2)
  print(cjson.encode { bench = "fleet-cpu", round = round, jobs = M, one_worker_s = t1, two_workers_s = t2,
                       speedup = t1 / t2 })
end
r.stop()

print("")
print(("fleet: %d trivial 1-call jobs through Redis Streams, one worker (--jobs 256), %d rounds"):format(N, ROUNDS))
print(("  jobs/s (med): %.0f (goal >= 5,000)"):format(median(rate)))
print(("  the queue's cost per job against the same calls as instances of one local run: %.0f us (med)")
  :format(median(per_job)))
print(("  %d CPU-bound jobs (~25 ms each): 2 workers / 1 worker: %.2fx (goal >= 1.7x)"):format(M, median(speedup)))
