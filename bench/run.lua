-- bench/run.lua -- drives obelus-bench: 3 runs per size (whole runs 5), medians, ratios.
-- `lua5.4 run.lua journal` runs the journal section alone; `lua5.4 run.lua http` the
-- HTTP one (bench/http.lua); `lua5.4 run.lua fleet` the fleet's (bench/fleet.lua); `lua5.4 run.lua
-- fleet-peers` the fleet against BullMQ (bench/fleet_peers.lua, make bench-fleet);
-- `lua5.4 run.lua threads` run --threads's (bench/threads.lua); `lua5.4 run.lua unfold`
-- _each's and fork's (issue 28); `lua5.4 run.lua waiting`
-- the waiting calls' (sleep 10000 and 100000, next to floor and chain); `lua5.4 run.lua
-- views` the views' (onekey and the cut-off); `lua5.4 run.lua ui` obelus ui's (viewers of
-- a live run, the page of a 100,000-call journal: bench/ui.lua).
local cjson = require "cjson"

local function run(args, env)
  local p = assert(io.popen((env or "") .. "./obelus-bench " .. args))
  local line = p:read("l")
  p:close()
  if not line then error("obelus-bench " .. args .. " printed nothing (see its stderr)") end
  print(line)
  return cjson.decode(line)
end

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local function listed(xs, fmt)
  local out = {}
  for i, x in ipairs(xs) do out[i] = string.format(fmt, x) end
  return table.concat(out, " ")
end

-- The journal: chain and fanout of 100,000 calls without one and under each --fsync
-- level, interleaved (none, never, batch, always, none, ...) for 5 rounds. A level's
-- cost is the median of its per-round ratios to that round's run without a journal
-- (time per call, level / none). always on chain makes one fsync a call (each call
-- reads the one before, which must be on disk first): it runs 2,000 calls, not
-- 100,000, and its ratio is its rate against the 100,000-call run's.
local function journal_section()
  local levels = { "none", "never", "batch", "always" }
  local shapes = {
    { key = "chain", n = 100000, always_n = 2000 },
    { key = "fanout", n = 100000 },
  }
  local rate, ratio = {}, {}
  for _, s in ipairs(shapes) do
    rate[s.key], ratio[s.key] = {}, {}
    for _, l in ipairs(levels) do rate[s.key][l], ratio[s.key][l] = {}, {} end
  end
  print("")
  for _ = 1, 5 do
    for _, s in ipairs(shapes) do
      local got = {}
      for _, l in ipairs(levels) do
        local n = l == "always" and s.always_n or s.n
        local env = l == "none" and "" or "OBELUS_BENCH_JOURNAL=" .. l .. " "
        got[l] = run(s.key .. " " .. n, env).calls_per_s
        table.insert(rate[s.key][l], got[l])
      end
      for _, l in ipairs(levels) do table.insert(ratio[s.key][l], got.none / got[l]) end
    end
  end
  os.execute("rm -f obelus-bench-*.jsonl") -- a run that died leaves its journal
  print("")
  print(string.format("%-26s %14s %14s  %s", "journal run", "calls/s (med)", "x none (med)",
    "x none, each round"))
  for _, s in ipairs(shapes) do
    for _, l in ipairs(levels) do
      local n = l == "always" and s.always_n or s.n
      print(string.format("%-26s %14.0f %13.2fx  %s", s.key .. " " .. n .. " " .. l,
        median(rate[s.key][l]), median(ratio[s.key][l]), listed(ratio[s.key][l], "%.2f")))
    end
  end
  for _, s in ipairs(shapes) do
    print(string.format("journal cost, %s, batch / none (paired): %.2fx (goal <= 1.3x)", s.key,
      median(ratio[s.key].batch)))
  end
  print(string.format("always: chain %.0f calls/s (%d calls: an fsync each, as each reads the one "
    .. "before), %.0fx none; fanout %.2fx none (group commit)", median(rate.chain.always),
    shapes[1].always_n, median(ratio.chain.always), median(ratio.fanout.always)))
end

-- Waiting calls (issue 14, part 3): N calls each sleeping 100 ms, then a join reading
-- their outputs; loop_ms runs from the run's start to the join's completion (the 100 ms
-- of sleeping included). 5 interleaved rounds of sleep 10000 and 100000, each next to a
-- floor and a chain of 100,000 (the same moment's speed of the machine, for comparison).
-- Peak RSS is the whole process's: the plan and the join's table too, not only what
-- the calls hold while they wait (bench/obelus-bench with OBELUS_BENCH_ALLOCS=1 counts that).
local function waiting_section()
  local sizes = { 10000, 100000 }
  local goal = { [10000] = { ms = 120, mb = 20 }, [100000] = { ms = 250, mb = 150 } }
  local loop, rss, floor, chain = {}, {}, {}, {}
  for _, n in ipairs(sizes) do loop[n], rss[n] = {}, {} end
  print("")
  for _ = 1, 5 do
    table.insert(floor, run("floor 100000").calls_per_s)
    for _, n in ipairs(sizes) do
      local r = run("sleep " .. n .. " 100")
      table.insert(loop[n], r.loop_ms)
      table.insert(rss[n], r.peak_rss_kb)
    end
    table.insert(chain, run("chain 100000").calls_per_s)
  end
  print("")
  for _, n in ipairs(sizes) do
    print(string.format("sleep %d x 100 ms, run start to the join done: %.1f ms (goal <= %d ms); "
      .. "peak RSS %d MB (goal <= %d MB); each round: %s", n, median(loop[n]), goal[n].ms,
      median(rss[n]) // 1024, goal[n].mb, listed(loop[n], "%.0f")))
  end
  print(string.format("the same rounds: floor 100000 %.0f calls/s, chain 100000 %.0f calls/s (medians)",
    median(floor), median(chain)))
end

-- Views (core/bridge/ob_view.c): 60 calls that each read one key of a 150,000-key input
-- document (10 MB of JSON), the run alone timed; then a value handed over as tables
-- against the same value as a view, by size (the cut-off: OB_VIEW_MIN, 64 entries
-- counted at every depth), as view / table ratios: reading one entry, walking them all.
local function views_section()
  local onekey = {}
  print("")
  for _ = 1, 3 do table.insert(onekey, run("onekey 60").run_ms) end
  print(string.format("60 calls each reading one key of a 150,000-key document (10 MB): %.1f ms in all "
    .. "(goal <= 300 ms); each run: %s", median(onekey), listed(onekey, "%.1f")))
  local p = assert(io.popen("./obelus-bench cutoff"))
  local rows = {}
  for line in p:lines() do
    local r = cjson.decode(line)
    rows[#rows + 1] = r
  end
  p:close()
  print(string.format("%-8s %6s %12s %12s %10s %12s %12s %10s", "shape", "n", "table one ns",
    "view one ns", "view/table", "table all ns", "view all ns", "view/table"))
  for _, r in ipairs(rows) do
    if r.n == 16 or r.n == 64 or r.n == 256 or r.n == 1024 then
      print(string.format("%-8s %6d %12.0f %12.0f %9.2fx %12.0f %12.0f %9.2fx", r.shape, r.n,
        r.table_one_ns, r.view_one_ns, r.view_one_ns / r.table_one_ns, r.table_all_ns,
        r.view_all_ns, r.view_all_ns / r.table_all_ns))
    end
  end
end

-- Whole runs: per-call cost of the engine against the bare Lua floor (one
-- coroutine a call, no engine); waiting calls follow (waiting_section).
-- Each engine run is paired with a floor run just before and just after it, and
-- its ratio is taken against their mean: on a shared host the floor itself moves
-- by 2x from one minute to the next, so a ratio of medians taken minutes apart
-- would mix one moment's engine with another's floor. Reported: the median of the
-- paired ratios (and every one of them), and medians of the rates. `sh bench/run engine`
-- runs this part alone.
local function engine_section()
  local engine = {
    { key = "chain", args = "chain 100000" },
    { key = "fanout", args = "fanout 100000" },
  }
  local rate, rss, ratios = { floor = {} }, { floor = {} }, {}
  for _, b in ipairs(engine) do rate[b.key], rss[b.key], ratios[b.key] = {}, {}, {} end
  local function floor_run()
    local f = run("floor 100000")
    table.insert(rate.floor, f.calls_per_s)
    table.insert(rss.floor, f.peak_rss_kb)
    return f.calls_per_s
  end
  print("")
  -- 9 rounds here: on a shared host these figures move the most (single rounds of one
  -- build went from 1.8x to 3.7x within minutes, 2026-11-26)
  for _ = 1, 9 do
    for _, b in ipairs(engine) do
      local before = floor_run()
      local r = run(b.args)
      local after = floor_run()
      table.insert(rate[b.key], r.calls_per_s)
      table.insert(rss[b.key], r.peak_rss_kb)
      table.insert(ratios[b.key], (before + after) / 2 / r.calls_per_s)
    end
  end

  print("")
  print(string.format("%-26s %14s %14s %12s", "run", "calls/s (med)", "us/call (med)", "peak RSS MB"))
  for _, key in ipairs { "chain", "fanout", "floor" } do
    local m = median(rate[key])
    print(string.format("%-26s %14.0f %14.3f %12d", key .. " 100000", m, 1e6 / m, median(rss[key]) // 1024))
  end
  for _, key in ipairs { "chain", "fanout" } do
    local each = listed(ratios[key], "%.1f")
    print(string.format("per-call cost, %s / floor (paired): %.1fx (goal <= 2.5x); each round: %s", key,
      median(ratios[key]), each))
  end
end

-- Plans that unfold (issue 28): one call mapped over a list of 100,000 made at run time
-- (_each) against the same 100,000 calls written out (fanout: one source, 100,000 readers
-- of it, a join) and a one-call plan run for 100,000 instances, interleaved for 5 rounds,
-- the plan's reading timed too (OBELUS_BENCH_WHOLE: each reads its copies as a plan while
-- it runs). Then a fork of a 100,000-call chain's journal from its middle call.
local function unfold_section()
  local n, rounds = 100000, 5
  local each, fan, inst, r_fan, r_inst = {}, {}, {}, {}, {}
  print("")
  for _ = 1, rounds do
    local e = run("each " .. n, "OBELUS_BENCH_WHOLE=1 ").calls_per_s
    local f = run("fanout " .. n, "OBELUS_BENCH_WHOLE=1 ").calls_per_s
    local i = run("instances " .. n .. " 1", "OBELUS_BENCH_WHOLE=1 ").calls_per_s
    each[#each + 1], fan[#fan + 1], inst[#inst + 1] = e, f, i
    r_fan[#r_fan + 1], r_inst[#r_inst + 1] = f / e, i / e
  end
  print(string.format("_each over %d: %.0f calls/s; fanout %.0f; instances %.0f (medians)", n,
    median(each), median(fan), median(inst)))
  print(string.format("per-copy cost, _each / a fan-out call (paired): %.2fx (goal <= 1.5x); each round: %s",
    median(r_fan), listed(r_fan, "%.2f")))
  print(string.format("per-copy cost, _each / an instance's call (paired): %.2fx; each round: %s",
    median(r_inst), listed(r_inst, "%.2f")))
  local made, first, chain = {}, {}, {}
  for _ = 1, 3 do
    local r = run("fork " .. n)
    made[#made + 1], first[#first + 1], chain[#chain + 1] = r.fork_made_ms, r.first_call_ms, r.chain_ms
  end
  print(string.format("fork of a %d-call chain's journal from its middle: first re-run call after " ..
    "%.0f ms (the fork made in %.0f ms; the chain's own run %.0f ms) (medians)", n, median(first),
    median(made), median(chain)))
end

if arg[1] == "unfold" then
  unfold_section()
  return
end
if arg[1] == "engine" then
  engine_section()
  return
end
if arg[1] == "views" then
  views_section()
  return
end
if arg[1] == "journal" then
  journal_section()
  return
end
if arg[1] == "waiting" then
  waiting_section()
  return
end
if arg[1] == "http" then
  dofile("http.lua")
  return
end
if arg[1] == "fleet" then
  dofile("fleet.lua")
  return
end
if arg[1] == "threads" then
  dofile("threads.lua")
  return
end
if arg[1] == "ui" then
  dofile("ui.lua")
  return
end
if arg[1] == "peers" then
  dofile("peers.lua")
  return
end
if arg[1] == "fleet-peers" then -- BullMQ installed first (make bench-fleet does)
  dofile("fleet_peers.lua")
  return
end

local sizes = { 1000, 10000, 100000, 1000000 }
local reps = 3
local read, append = {}, {}
for _, n in ipairs(sizes) do read[n], append[n] = {}, {} end
for _ = 1, reps do -- interleaved, so that a slow moment hits every size alike
  for _, n in ipairs(sizes) do
    local r = run("resolve " .. n)
    table.insert(read[n], r.ns_per_read)
    table.insert(append[n], r.ns_per_append)
  end
end
local h = run("history 1000000")

print("")
print(string.format("%-10s %14s %16s", "messages", "ns/read (med)", "ns/append (med)"))
for _, n in ipairs(sizes) do
  print(string.format("%-10d %14.1f %16.1f", n, median(read[n]), median(append[n])))
end
local r1k, r1m = median(read[1000]), median(read[1000000])
print(string.format("read cost at 1,000,000 vs 1,000 messages: %.2fx (goal <= 1.5x)", r1m / r1k))
print(string.format("reads per second at 1,000,000 messages: %.2f million (goal >= 2)", 1e3 / r1m))
print(string.format("read as of a random earlier position, 1,000,000 messages: %.1f ns; peak RSS %d MB",
  h.ns_per_read_at, h.peak_rss_kb // 1024))

engine_section()

waiting_section()

-- Instances: a 5-call plan run for 1,000 instances against the same 5,000 calls
-- written without instances (1,000 chains of 5), interleaved.
local inst, plain = {}, {}
print("")
for _ = 1, reps do
  table.insert(inst, run("instances 1000 5").calls_per_s)
  table.insert(plain, run("chains 1000 5").calls_per_s)
end
print(string.format("per-call cost, 1,000 instances x 5 calls / 5,000 plain calls: %.2fx (goal <= 1.5x)",
  median(plain) / median(inst)))

-- A tool that computes (adds 30 million numbers): one call in a run against the
-- same function bare. The engine should cost it nothing: no hook slows the VM.
local ratio = {}
print("")
for _ = 1, reps do
  local r = run("compute 30000000")
  table.insert(ratio, r.engine_ms / r.bare_ms)
end
print(string.format("a tool computing for ~0.3 s, in a run / bare: %.2fx", median(ratio)))

-- A one-call plan as a whole process (`obelus run`: start, load the tool, parse,
-- validate, run, print, exit): 50 runs in a row under GNU time, 5 rounds, the median
-- of the per-run times.
do
  local m = dofile("measure.lua")
  local dir = m.tmpdir()
  local tool = m.write(dir, "t.lua", 'return { name = "inc", run = function(call) return call.x + 1 end }\n')
  local plan = m.write(dir, "p.json", '[{"_tool":"inc","x":1,"_outputPath":"y"}]\n')
  -- a file: measure.timed quotes its command
  m.write(dir, "loop.sh", string.format("for i in $(seq 50); do %s/../bin/obelus run %s --tools %s >/dev/null; done\n",
    os.getenv("PWD") or ".", plan, tool))
  local per = {}
  for _ = 1, 5 do
    local secs = m.timed("sh " .. dir .. "/loop.sh")
    per[#per + 1] = secs / 50 * 1000
  end
  os.execute("rm -rf " .. dir)
  print("")
  print(string.format("a one-call run as a whole process: %.1f ms (goal <= 5 ms); each round: %s",
    median(per), listed(per, "%.1f")))
end

views_section()

unfold_section()

journal_section()

print("")
dofile("http.lua")

print("")
dofile("fleet.lua")

print("")
dofile("threads.lua")

print("")
dofile("ui.lua")
