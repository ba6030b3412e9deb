-- bench/run.lua -- drives obelus-bench: 3 runs per size, medians, ratios.
local cjson = require "cjson"

local function run(args)
  local p = assert(io.popen("./obelus-bench " .. args))
  local line = p:read("l")
  p:close()
  print(line)
  return cjson.decode(line)
end

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
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
