-- bench/fleet_peers.lua -- `make bench-fleet`: obelus's job queue (the fleet) against BullMQ
-- (npm bullmq, installed into bench/peers/node_modules, not committed; its side is
-- bench/peers/fleet_bullmq.mjs), on the same Redis, end to end. Run from bench/.
--
-- Each measurement is one whole batch on a fresh redis-server of its own (a free loopback
-- port, a temporary folder, AOF on with appendfsync everysec: Redis's default): at t0 the
-- workers start (1 or 2 processes) and, at the same moment, the client, which queues the
-- batch and waits for every result; the time ends when the client has them all. So the
-- submission, the workers' start-up (as far as it is on the way) and the waiting client
-- are all counted. The workers are then stopped (SIGTERM, not timed).
--   obelus  `obelus submit PLAN --batch FILE.jsonl` (prints the ids), then one `obelus
--           wait --ids FILE` on them all, which prints each result as its job finishes
--           (matched back to its input by the job's id); workers `obelus worker
--           --jobs J` (not --drain: a worker started before the batch is queued would
--           find the queue empty and leave)
--   BullMQ  one node process: a QueueEvents reading the event stream, Queue.addBulk of
--           the batch, then waiting for our ids' "completed" events (fleet_bullmq.mjs
--           says why that way); workers: node processes, each a Worker with concurrency J
-- The workloads (job i's input is {"n": i}):
--   trivial  N jobs (20,000) of one call doubling n; J = 256
--   cpu      M jobs (2,000) of ~5 ms of CPU each: the same busy loop in Lua (the tool) and
--            in JavaScript, each calibrated here to CPU_MS of CPU time in its own language
--            (os.clock; process.cpuUsage), printed, and each job returns the CPU time its
--            loop took, so that the table says whether the calibration held in the workers;
--            J = 1: "2 workers" is two processes computing side by side
--   steps    M jobs (2,000) of four steps, each doubling the one before's output:
--            obelus, a 4-call plan where each call reads the previous call's output, its
--            journal in Redis (APPENDed at each flush); BullMQ, one job saving each step's
--            output with job.updateData before the next (the "process step jobs" pattern
--            of BullMQ's documentation: the durable form that, like obelus's journal,
--            lets a retried job resume at its last saved step, in one job on one worker
--            as obelus's plan runs); J = 256
--   flow     (BullMQ only; compared with obelus's steps) the same four steps as a
--            FlowProducer chain, four jobs a workflow, each reading its child's value:
--            BullMQ's other idiomatic form, where each step is a job of its own (its own
--            lock and retries, any worker): more work than obelus's plan does, so it is
--            not the headline comparison; jobs/s counts workflows
-- Measured per run, besides the wall time: Redis's memory per finished job (INFO
-- used_memory after the run, workers stopped, minus before, / jobs), Redis's CPU per job
-- (INFO used_cpu_sys + used_cpu_user, after - before, / jobs), the commands Redis ran per
-- job (INFO commandstats after CONFIG RESETSTAT; commands run inside scripts count too,
-- INFO and CONFIG do not), the AOF's bytes per job, and a timeline from t0: when the
-- batch was queued (submitted_s), when a worker took the first job and when the last one
-- finished (first_taken_s, last_finished_s: the jobs' own records in Redis), and the end
-- (secs: the client has every result). Each result is checked (every job
-- finished with the value expected of its input) and a run that fails the check raises.
-- Rounds are interleaved (obelus then BullMQ, per case, per worker count, per round);
-- medians of ROUNDS. No taskset: the machine has 2 cores for Redis, the client and the
-- workers; pinning would decide which of them share a core, a choice that favours one
-- design or the other, and the scheduler treats the two sides alike.
-- Every process runs under ulimit -v (VMEM_MB) and timeout (TIMEOUT seconds).
-- Environment (the defaults in brackets): OBELUS_FLEETP_ROUNDS [3], OBELUS_FLEETP_TRIVIAL
-- [20000], OBELUS_FLEETP_CPU [2000], OBELUS_FLEETP_STEPS [2000], OBELUS_FLEETP_CPU_MS [5],
-- OBELUS_FLEETP_CASES [trivial,cpu,steps,flow], OBELUS_FLEETP_WORKERS [1,2],
-- OBELUS_FLEETP_JOBS (J per case, e.g. "trivial=1,cpu=2"; [trivial=256,cpu=1,steps=256,
-- flow=256]), OBELUS_FLEETP_BULL_WAIT [events|poll|until],
-- OBELUS_FLEETP_TIMEOUT [600], OBELUS_FLEETP_VMEM_MB [4096].
-- Output: one JSON line per measurement, then a table of medians and ratios, the timeline's
-- medians, and the commands per job of each case (1 worker, the last round), both sides.
package.path = "../spec/?.lua;" .. package.path
local cjson = require "cjson"
local servers = require "support.servers"
local measure = dofile("measure.lua")
local median = measure.median

local function env(name, default) return os.getenv("OBELUS_FLEETP_" .. name) or default end
local function list(s)
  local t = {}
  for x in s:gmatch("[^,%s]+") do t[#t + 1] = x end
  return t
end
local ROUNDS = tonumber(env("ROUNDS", "3"))
local SIZE = { trivial = tonumber(env("TRIVIAL", "20000")), cpu = tonumber(env("CPU", "2000")),
               steps = tonumber(env("STEPS", "2000")) }
SIZE.flow = SIZE.steps
local CPU_MS = tonumber(env("CPU_MS", "5"))
local CASES = list(env("CASES", "trivial,cpu,steps,flow"))
local WORKERS = list(env("WORKERS", "1,2"))
local BULL_WAIT = env("BULL_WAIT", "events")
local TIMEOUT = tonumber(env("TIMEOUT", "600"))
local VMEM_KB = tonumber(env("VMEM_MB", "4096")) * 1024
local CONCURRENCY = { trivial = 256, cpu = 1, steps = 256, flow = 256 }
for case, j in env("JOBS", ""):gmatch("(%a+)=(%d+)") do CONCURRENCY[case] = tonumber(j) end

local here = io.popen("pwd"):read("l")
local BIN = here .. "/../bin/obelus"
local NODE_SIDE = here .. "/peers/fleet_bullmq.mjs"
local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end
assert(exists(BIN), "bin/obelus is not built (make bin/obelus)")
assert(exists(here .. "/peers/node_modules/bullmq/package.json"),
  "bullmq is not installed (make bench-fleet installs it into bench/peers/node_modules)")

local function sh_out(cmd)
  local p = assert(io.popen(cmd))
  local s = p:read("a")
  p:close()
  return s
end

local dir = measure.tmpdir()
local function write(name, text) return measure.write(dir, name, text) end
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local LIMIT = ("ulimit -v %d; "):format(VMEM_KB)

-- The tools: the same steps as fleet_bullmq.mjs's processors.
local tools = write("tools.lua", [[
local function burn(loops)
  local x = 0
  for i = 1, loops do x = (x + i * 7) % 1000003 end
  return x
end
local function ms(f)
  local t = os.clock()
  f()
  return (os.clock() - t) * 1000
end
local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end
return {
  { name = "double", schema = { type = "object" }, run = function(call) return call.n * 2 end },
  -- and what the burn took, so that the driver can tell the calibration held in the worker
  { name = "burn", schema = { type = "object" }, run = function(call)
      local x
      local took = ms(function() x = burn(call.loops) end)
      return { x = x, ms = took }
    end },
  -- the loop count that takes call.ms of CPU, and what one burn of it then took (median of 21)
  { name = "calibrate", schema = { type = "object" }, run = function(call)
      local probe, t = 1000000, {}
      for i = 1, 11 do t[i] = ms(function() burn(probe) end) end
      local loops = math.floor(call.ms / (median(t) / probe) + 0.5)
      local took = {}
      for i = 1, 21 do took[i] = ms(function() burn(loops) end) end
      return { loops = loops, ms = median(took) }
    end },
}
]])

local D = "\u{2020}"
local function plan(calls)
  return cjson.encode { plan = calls, output = calls[#calls]._outputPath }
end

-- calibration: the loop count of ~CPU_MS ms in each language
local lua_cal = cjson.decode(sh_out(("%s timeout 120 %s run %s --tools %s"):format(LIMIT, BIN,
  write("calibrate.json", plan { { _tool = "calibrate", ms = CPU_MS, _outputPath = D .. "state.c" } }), tools)))
local js_cal = cjson.decode(sh_out(("%s timeout 120 node %s calibrate %s"):format(LIMIT, NODE_SIDE, CPU_MS)))
print(cjson.encode { bench = "fleet-peers-calibration", target_ms = CPU_MS, lua_loops = lua_cal.loops,
                     lua_ms = lua_cal.ms, js_loops = js_cal.loops, js_ms = js_cal.ms })

local plans = {
  trivial = write("trivial.json", plan { { _tool = "double", n = D .. "input.n", _outputPath = D .. "state.a" } }),
  cpu = write("cpu.json", plan { { _tool = "burn", loops = lua_cal.loops, _outputPath = D .. "state.a" } }),
  steps = write("steps.json", plan {
    { _tool = "double", n = D .. "input.n", _outputPath = D .. "state.a" },
    { _tool = "double", n = D .. "state.a", _outputPath = D .. "state.b" },
    { _tool = "double", n = D .. "state.b", _outputPath = D .. "state.c" },
    { _tool = "double", n = D .. "state.c", _outputPath = D .. "state.d" } }),
}
local batches = {}
local function batch(n)
  if not batches[n] then
    local lines = {}
    for i = 1, n do lines[i] = ('{"n": %d}'):format(i) end
    batches[n] = write(("batch-%d.jsonl"):format(n), table.concat(lines, "\n") .. "\n")
  end
  return batches[n]
end

-- what job i's result must be
local lua_burn = (function()
  local x = 0
  for i = 1, lua_cal.loops do x = (x + i * 7) % 1000003 end
  return x
end)()
local function expected(case, i)
  if case == "trivial" then return i * 2 end
  if case == "cpu" then return lua_burn end
  return i * 16
end

-- INFO's fields as a table (numbers where they are)
local function info(r, section)
  local t = {}
  for k, v in r.cli("info " .. section):gmatch("([%w_|]+):([^\r\n]+)") do t[k] = tonumber(v) or v end
  return t
end
-- INFO commandstats: {name = {calls, usec}} and the total of calls
local function commands(r)
  local t, total = {}, 0
  for name, calls, usec in r.cli("info commandstats"):gmatch("cmdstat_([%w_|]+):calls=(%d+),usec=(%d+)") do
    if name ~= "info" and not name:match("^config") then
      t[name] = { calls = tonumber(calls), usec = tonumber(usec) }
      total = total + tonumber(calls)
    end
  end
  return t, total
end
-- The smallest of field a and the largest of field b over the hashes whose keys match
-- pattern (one script: a bench Redis of its own, KEYS is fine there); nil, nil when none.
local SPAN = [[
local lo, hi = nil, nil
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  if redis.call('TYPE', k).ok == 'hash' then
    local v = redis.call('HMGET', k, ARGV[2], ARGV[3])
    local a, b = tonumber(v[1]), tonumber(v[2])
    if a and (not lo or a < lo) then lo = a end
    if b and (not hi or b > hi) then hi = b end
  end
end
return { tostring(lo or ''), tostring(hi or '') }
]]
local function span(r, pattern, a, b)
  local out = r.cli(("eval %s 0 %s %s %s"):format(q(SPAN), q(pattern), a, b))
  local lo, hi = out:match("^(%d*)\n(%d*)")
  return tonumber(lo), tonumber(hi)
end
local function aof_bytes(r)
  return tonumber(sh_out(("du -sb %s/appendonlydir 2>/dev/null | cut -f1"):format(r.dir))) or 0
end

-- One measurement: a fresh Redis, the workers and the client started together.
local measure_on
local function run(case, side, workers, round)
  local r = assert(servers.redis { fsync = "everysec" })
  -- the server is stopped and its folder removed whatever happens
  local ok, m = pcall(measure_on, r, case, side, workers, round)
  r.stop()
  if not ok then
    os.execute("rm -rf " .. dir)
    error(m, 0)
  end
  local cmds = m._cmds
  m._cmds = nil
  print(cjson.encode(m))
  io.stdout:flush()
  m.cmds = cmds
  return m
end

function measure_on(r, case, side, workers, round)
  local n = SIZE[case]
  local url, port, queue = r.url, r.port, ("%s-%s-%d"):format(case, side, round)
  local run_dir = dir .. "/run"
  os.execute("rm -rf " .. run_dir .. " && mkdir -p " .. run_dir)
  r.cli("config resetstat")
  local mem0 = info(r, "memory").used_memory
  local cpu0 = info(r, "cpu")
  local worker_cmd, client_cmd
  local T = ("timeout -k 5 %d "):format(TIMEOUT)
  if side == "obelus" then
    worker_cmd = ("%s%s worker --redis %s --queue %s --tools %s --jobs %d"):format(T, BIN, url, queue,
      tools, CONCURRENCY[case])
    client_cmd = ("(%s%s submit %s --redis %s --queue %s --tools %s --batch %s > ids && " ..
                  "date +%%s%%N > submitted && %s%s wait --redis %s --queue %s --ids ids > out)"):format(
      T, BIN, plans[case == "flow" and "steps" or case], url, queue, tools, batch(n), T, BIN, url, queue)
  else
    worker_cmd = ("%snode %s worker %d %s %s %d %d"):format(T, NODE_SIDE, port, queue, case,
      CONCURRENCY[case], js_cal.loops)
    client_cmd = ("%snode %s client %d %s %s %d %s %d > client.json"):format(T, NODE_SIDE, port, queue, case,
      n, BULL_WAIT, js_cal.loops)
  end
  local script = { LIMIT, "cd " .. run_dir, "s=$(date +%s%N)", "pids=" }
  for w = 1, workers do
    script[#script + 1] = ("%s > worker%d.log 2>&1 & pids=\"$pids $!\""):format(worker_cmd, w)
  end
  script[#script + 1] = client_cmd .. " 2> client.err; rc=$?"
  script[#script + 1] = "e=$(date +%s%N)"
  script[#script + 1] = "kill -TERM $pids 2>/dev/null; for p in $pids; do wait $p; done"
  script[#script + 1] = "echo $((e - s)) $s $rc"
  local out = sh_out("sh -c " .. q(table.concat(script, "\n")))
  local ns, s0, rc = out:match("(%d+) (%d+) (%d+)")
  local function slurp(name)
    local f = io.open(run_dir .. "/" .. name)
    if not f then return "" end
    local t = f:read("a")
    f:close()
    return t
  end
  if not ns or rc ~= "0" then
    error(("%s %s (%d workers) failed: %s\n%s\n%s"):format(case, side, workers, out, slurp("client.err"),
      slurp("worker1.log")))
  end
  local secs = tonumber(ns) / 1e9
  -- the results, checked
  local ok, extra = 0, {}
  if side == "obelus" then
    local index, k = {}, 0 -- a job's id -> its line of the batch (its input)
    for id in slurp("ids"):gmatch("[^\n]+") do
      k = k + 1
      index[id] = k
    end
    local burns = {}
    for line in slurp("out"):gmatch("[^\n]+") do
      local res = cjson.decode(line)
      local i = index[tostring(res.job)] or -1
      local v = res.output
      if case == "cpu" and type(v) == "table" then
        burns[#burns + 1] = v.ms
        v = v.x
      end
      if res.exit == 0 and v == expected(case, i) then ok = ok + 1 end
    end
    extra.burn_ms = #burns > 0 and median(burns) or nil
    local submitted = tonumber(slurp("submitted"):match("%d+"))
    extra.submitted_s = submitted and (submitted - tonumber(s0)) / 1e9
  else
    local res = cjson.decode(slurp("client.json"))
    ok = res.ok
    extra.submitted_s = (res.submitted_at_ms * 1e6 - tonumber(s0)) / 1e9
    extra.missed_events, extra.burn_ms = res.missed_events, res.burn_ms
  end
  if ok ~= n then
    error(("%s %s (%d workers): %d of %d jobs finished with the expected result"):format(case, side, workers,
      ok, n))
  end
  local mem1 = info(r, "memory").used_memory
  local cpu1 = info(r, "cpu")
  local cmds, total = commands(r)
  local aof = aof_bytes(r)
  -- the workers' timeline, from the jobs' own records: when the first job was taken, when
  -- the last one finished (ms since 1970, the workers' clock, which is this machine's)
  local first, last = span(r, side == "obelus" and ("ob:{%s}:job:*"):format(queue) or ("bull:%s:*"):format(queue),
    side == "obelus" and "started" or "processedOn", side == "obelus" and "finished" or "finishedOn")
  local function since(ms_) return ms_ and (ms_ * 1e6 - tonumber(s0)) / 1e9 end
  local m = {
    bench = "fleet-peers", case = case, side = side, workers = workers, round = round, jobs = n,
    secs = secs, jobs_per_s = n / secs,
    redis_mem_bytes_per_job = (mem1 - mem0) / n,
    redis_cpu_us_per_job = ((cpu1.used_cpu_sys + cpu1.used_cpu_user) - (cpu0.used_cpu_sys + cpu0.used_cpu_user))
                           / n * 1e6,
    redis_cmds_per_job = total / n,
    aof_bytes_per_job = aof / n,
    submitted_s = extra.submitted_s, first_taken_s = since(first), last_finished_s = since(last),
    obelus_waits = extra.waits, missed_events = extra.missed_events, burn_ms = extra.burn_ms,
  }
  m._cmds = cmds
  return m
end

local results = {}
local function key(case, side, workers) return case .. " " .. side .. " " .. workers end
for round = 1, ROUNDS do
  for _, case in ipairs(CASES) do
    for _, w in ipairs(WORKERS) do
      w = tonumber(w)
      for _, side in ipairs(case == "flow" and { "bullmq" } or { "obelus", "bullmq" }) do
        local k = key(case, side, w)
        results[k] = results[k] or {}
        table.insert(results[k], run(case, side, w, round))
      end
    end
  end
end
os.execute("rm -rf " .. dir)

local function med(k, field)
  local xs = {}
  for _, m in ipairs(results[k] or {}) do xs[#xs + 1] = m[field] end
  return #xs > 0 and median(xs) or nil
end

-- the burns' median time inside the workers (cpu runs), over all the runs of a side
local function in_worker(side)
  local xs = {}
  for _, w in ipairs(WORKERS) do
    for _, m in ipairs(results[key("cpu", side, tonumber(w))] or {}) do
      if m.burn_ms then xs[#xs + 1] = m.burn_ms end
    end
  end
  return #xs > 0 and ("%.2f"):format(median(xs)) or "-"
end

print("")
print(("fleet vs BullMQ, end to end (submit + workers' start-up + a waiting client), fresh Redis " ..
       "(AOF everysec) each run, medians of %d rounds"):format(ROUNDS))
print(("cpu: ~%g ms a job, Lua %d loops (%.2f ms), JavaScript %d loops (%.2f ms); in the workers " ..
       "(median of the runs' medians): Lua %s ms, JavaScript %s ms"):format(CPU_MS,
  lua_cal.loops, lua_cal.ms, js_cal.loops, js_cal.ms, in_worker("obelus"), in_worker("bullmq")))
print(("%-8s %2s %7s | %9s %9s %7s | %8s %8s | %8s %8s | %7s %7s"):format("case", "w", "jobs",
  "obelus/s", "BullMQ/s", "ratio", "ob B/job", "bq B/job", "ob us/j", "bq us/j", "ob c/j", "bq c/j"))
for _, case in ipairs(CASES) do
  for _, w in ipairs(WORKERS) do
    w = tonumber(w)
    local ob = key(case == "flow" and "steps" or case, "obelus", w)
    local bq = key(case, "bullmq", w)
    local function f(k, field, fmt)
      local v = med(k, field)
      return v and fmt:format(v) or "-"
    end
    local ro, rb = med(ob, "jobs_per_s"), med(bq, "jobs_per_s")
    print(("%-8s %2d %7d | %9s %9s %7s | %8s %8s | %8s %8s | %7s %7s"):format(case, w, SIZE[case],
      f(ob, "jobs_per_s", "%.0f"), f(bq, "jobs_per_s", "%.0f"), (ro and rb) and ("%.2fx"):format(ro / rb) or "-",
      f(ob, "redis_mem_bytes_per_job", "%.0f"), f(bq, "redis_mem_bytes_per_job", "%.0f"),
      f(ob, "redis_cpu_us_per_job", "%.1f"), f(bq, "redis_cpu_us_per_job", "%.1f"),
      f(ob, "redis_cmds_per_job", "%.1f"), f(bq, "redis_cmds_per_job", "%.1f")))
  end
end
print("ratio: obelus jobs/s / BullMQ jobs/s; B/job: Redis used_memory per finished job; us/j: Redis CPU " ..
      "(user+sys) per job; c/j: commands Redis ran per job (those inside scripts too)")
for _, case in ipairs(CASES) do
  if case == "flow" then
    print("flow: BullMQ's FlowProducer chain (4 jobs a workflow) against obelus's steps figures " ..
          "(obelus's columns are its steps runs)")
  end
end

-- where the time goes: the timeline's medians
print("")
print("timeline, seconds from t0 (medians): the batch queued, the first job taken, the last one finished, " ..
      "the client has every result")
print(("%-8s %2s %-7s %8s %8s %8s %8s"):format("case", "w", "side", "queued", "first", "last", "end"))
for _, case in ipairs(CASES) do
  for _, w in ipairs(WORKERS) do
    for _, side in ipairs(case == "flow" and { "bullmq" } or { "obelus", "bullmq" }) do
      local k = key(case, side, tonumber(w))
      local function f(field)
        local v = med(k, field)
        return v and ("%.2f"):format(v) or "-"
      end
      print(("%-8s %2d %-7s %8s %8s %8s %8s"):format(case, tonumber(w), side, f("submitted_s"), f("first_taken_s"),
        f("last_finished_s"), f("secs")))
    end
  end
end

-- where the commands go: per job, each side, 1 worker (or the first count), the last round
print("")
print("Redis commands per job: calls (and Redis's microseconds in them) a job, INFO commandstats, " ..
      WORKERS[1] .. " worker(s), the last round;")
print("commands run inside scripts count, and their time is also inside the EVAL/EVALSHA's")
for _, case in ipairs(CASES) do
  for _, side in ipairs(case == "flow" and { "bullmq" } or { "obelus", "bullmq" }) do
    local runs = results[key(case, side, tonumber(WORKERS[1]))]
    local m = runs and runs[#runs]
    if m then
      local names = {}
      for name in pairs(m.cmds) do names[#names + 1] = name end
      table.sort(names, function(a, b) return m.cmds[a].calls > m.cmds[b].calls end)
      local parts = {}
      for i, name in ipairs(names) do
        local c = m.cmds[name]
        if c.calls / m.jobs >= 0.01 then
          parts[#parts + 1] = ("%s %.2f (%.1f)"):format(name, c.calls / m.jobs, c.usec / m.jobs)
        end
        if i >= 16 then break end
      end
      print(("  %-8s %-7s %5.1f: %s"):format(case, side, m.redis_cmds_per_job, table.concat(parts, ", ")))
    end
  end
end
