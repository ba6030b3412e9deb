-- bench/threads.lua -- `obelus run --threads`: a plan with instances on every core.
-- `sh bench/run threads` (also the end of `make bench`). Two plans, each run as a whole
-- process with --threads 1 and --threads 2, interleaved for 5 rounds; medians and the
-- median of the paired ratios (each round's 1-thread time / its 2-thread time):
--   compute: 1,000 instances x 3 chained calls, each adding 150,000 numbers in Lua
--            (CPU-bound; goal: 2 threads >= 1.8x 1 thread on this 2-core machine)
--   sleep:   2,000 instances x 3 chained calls, each sleeping 50 ms (I/O-bound;
--            goal: no slower on 2 threads)
local m = dofile("measure.lua")
local bin = "../bin/obelus"
local dir = m.tmpdir()
local function write(name, text) return m.write(dir, name, text) end

local tools = write("tools.lua", [[
local obelus = require "obelus"
return {
  { name = "sum", run = function(call)
      local s = 0
      for i = 1, call.n do s = s + i % 7 end
      return s + (call.x or 0) % 7
    end },
  { name = "nap", run = function(call) obelus.sleep(call.ms); return (call.x or 0) + 1 end },
}]])

local function plan(n, calls)
  local ids = {}
  for i = 1, n do ids[i] = '"i' .. i .. '"' end
  return string.format('{"instances":[%s],"plan":[%s]}', table.concat(ids, ","), calls)
end
local compute = write("compute.json", plan(1000, [[
  {"_id":"a","_tool":"sum","n":150000,"_outputPath":"a"},
  {"_id":"b","_tool":"sum","n":150000,"x":"†state.a","_outputPath":"b"},
  {"_id":"c","_tool":"sum","n":150000,"x":"†state.b","_outputPath":"c"}]]))
local sleep = write("sleep.json", plan(2000, [[
  {"_id":"a","_tool":"nap","ms":50,"_outputPath":"a"},
  {"_id":"b","_tool":"nap","ms":50,"x":"†state.a","_outputPath":"b"},
  {"_id":"c","_tool":"nap","ms":50,"x":"†state.b","_outputPath":"c"}]]))

local cases = { { key = "compute", plan = compute }, { key = "sleep", plan = sleep } }
local t, rss, ratio = {}, {}, {}
for _, c in ipairs(cases) do
  t[c.key], rss[c.key], ratio[c.key] = { [1] = {}, [2] = {} }, { [1] = {}, [2] = {} }, {}
end
local outputs = {}
for _ = 1, 5 do
  for _, c in ipairs(cases) do
    local got = {}
    for _, n in ipairs { 1, 2 } do
      local cmd = string.format("%s run %s --tools %s --threads %d | md5sum", bin, c.plan, tools, n)
      local secs, kb, out = m.timed(cmd)
      got[n] = secs
      table.insert(t[c.key][n], secs)
      table.insert(rss[c.key][n], kb)
      outputs[c.key .. n] = out
    end
    table.insert(ratio[c.key], got[1] / got[2])
  end
end
os.execute("rm -rf " .. dir)

print("")
print(string.format("%-34s %10s %10s %10s %10s", "run --threads (whole process)", "1 thread s", "2 threads s",
  "1 / 2", "RSS MB 1/2"))
for _, c in ipairs(cases) do
  local each = {}
  for i, r in ipairs(ratio[c.key]) do each[i] = string.format("%.2f", r) end
  print(string.format("%-34s %10.2f %10.2f %9.2fx %5d/%d   each round: %s",
    c.key == "compute" and "compute 1,000 inst x 3 calls" or "sleep 2,000 inst x 3 x 50 ms",
    m.median(t[c.key][1]), m.median(t[c.key][2]), m.median(ratio[c.key]),
    m.median(rss[c.key][1]) // 1024, m.median(rss[c.key][2]) // 1024, table.concat(each, " ")))
  if outputs[c.key .. 1] ~= outputs[c.key .. 2] then print("  OUTPUTS DIFFER between 1 and 2 threads") end
end
print(string.format("threads, compute, 2 threads / 1 (paired): %.2fx (goal >= 1.8x)", m.median(ratio.compute)))
print(string.format("threads, sleep, 2 threads / 1 (paired): %.2fx (goal: >= 1, no slower)", m.median(ratio.sleep)))
