-- bench/http.lua -- the HTTP benchmark (`make bench` ends with it; `sh bench/run http`
-- runs it alone): 10,000 GETs of a 1 KB file from a local nginx (started here, no
-- compression, keep-alive), made three ways, each a whole process timed by GNU time:
--   obelus  a plan of 10,000 calls (a fan-out: all start at once), each tool call a GET
--           through obelus.http, through `bin/obelus run` (at most 100 transfers at once,
--           the default; obelus-1000 is the same at --http-max 1000, curl's parallelism)
--   node    Node's built-in fetch, the 10,000 in a Promise.all
--   curl    curl --parallel --parallel-max 1000 over the 10,000 URLs
-- interleaved (obelus, node, curl, obelus, ...) for 5 rounds; medians of requests/s and
-- peak RSS, and the ratios of each round (goal: obelus >= 2x node, curl <= 1.5x obelus).
package.path = "../spec/?.lua;" .. package.path
local cjson = require "cjson"
local servers = require "support.servers"

local N, ROUNDS = tonumber(os.getenv("OBELUS_HTTP_N") or "10000"), 5

local measure = dofile("measure.lua")
local median, timed = measure.median, measure.timed

local s = assert(servers.nginx { gzip = false })
s.file("1k.bin", ("0123456789abcdef"):rep(64))
local url = s.url("/1k.bin")
local dir = s.dir

local plan = {}
for i = 1, N do plan[i] = { _tool = "fetch", url = url, _outputPath = "†state.n" .. i } end
local pf = assert(io.open(dir .. "/plan.json", "w"))
pf:write(cjson.encode { plan = plan, output = "†state.n" .. N })
pf:close()
local cf = assert(io.open(dir .. "/urls.cfg", "w"))
for _ = 1, N do cf:write(('url = "%s"\noutput = "/dev/null"\n'):format(url)) end
cf:close()

local peers = {
  { name = "obelus", cmd = ("../bin/obelus run %s/plan.json --tools http_tools.lua"):format(dir) },
  { name = "obelus-1000",
    cmd = ("../bin/obelus run %s/plan.json --tools http_tools.lua --http-max 1000"):format(dir) },
  { name = "node", cmd = ("node http_fetch.mjs %s %d"):format(url, N) },
  { name = "curl", cmd = ("curl -s --parallel --parallel-max 1000 -K %s/urls.cfg"):format(dir) },
}
local rps, rss = {}, {}
for _, p in ipairs(peers) do rps[p.name], rss[p.name] = {}, {} end
local vs_node, curl_vs, curl_vs_1000 = {}, {}, {}
for round = 1, ROUNDS do
  local this = {}
  for _, p in ipairs(peers) do
    local secs, kb = timed(p.cmd)
    this[p.name] = N / secs
    table.insert(rps[p.name], N / secs)
    table.insert(rss[p.name], kb)
    print(cjson.encode { bench = "http", round = round, client = p.name, n = N,
                         requests_per_s = math.floor(N / secs), peak_rss_kb = kb })
  end
  table.insert(vs_node, this.obelus / this.node)
  table.insert(curl_vs, this.curl / this.obelus)
  table.insert(curl_vs_1000, this.curl / this["obelus-1000"])
end
s.stop()

print("")
print(("http: %d GETs of 1 KB from a local nginx, whole process, %d rounds interleaved"):format(N, ROUNDS))
print(("%-12s %16s %18s"):format("client", "requests/s (med)", "peak RSS MB (med)"))
for _, p in ipairs(peers) do
  print(("%-12s %16.0f %18.1f"):format(p.name, median(rps[p.name]), median(rss[p.name]) / 1024))
end
print(("obelus / node: %.2fx (goal >= 2x); curl / obelus: %.2fx (goal <= 1.5x); "
  .. "curl / obelus-1000: %.2fx"):format(median(vs_node), median(curl_vs), median(curl_vs_1000)))
