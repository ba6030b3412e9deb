-- bench/peers.lua -- `make bench-peers`: obelus against LangGraph.js (@langchain/langgraph)
-- and async (async.auto), installed with npm into bench/peers/node_modules (not committed),
-- on the same workloads, each a whole process timed by GNU time (wall time, peak RSS):
--   chain   N steps, each reading the one before
--   fanout  N independent steps, then one that sums what they wrote
--   sleep   N independent steps that each wait 100 ms, then the join
-- at N = 1,000 and 10,000; LangGraph at 10,000 only where its 1,000 took under 2 s:
-- its cost grows faster than N (one run of 10,000 took 281 s on chain, 110 s on fanout),
-- too slow to wait for in a benchmark run. 3 rounds, interleaved; medians, and each
-- peer's ratio to obelus. Run from bench/ (bench/run peers, or make bench-peers).
local cjson = require "cjson"

local SIZES = { 1000, 10000 }
local ROUNDS = tonumber(os.getenv("OBELUS_PEERS_ROUNDS") or "3")
local BIN = "../bin/obelus"
local measure = dofile("measure.lua")
local median, timed = measure.median, measure.timed
local dir = measure.tmpdir()

local D = "\u{2020}"
local function plan_file(work, n)
  local plan, out = {}
  if work == "chain" then
    for i = 1, n do
      plan[i] = { _id = "n" .. i, _tool = "inc", v = i > 1 and (D .. "state.n" .. (i - 1)) or 0,
                  _outputPath = D .. "state.n" .. i }
    end
    out = D .. "state.n" .. n
  else
    for i = 1, n do
      plan[i] = { _id = "f" .. i, _tool = "val", i = i - 1, ms = work == "sleep" and 100 or nil,
                  _outputPath = D .. "state.f.f" .. (i - 1) }
    end
    plan[n + 1] = { _id = "join", _tool = "sum", f = D .. "state.f", _outputPath = D .. "state.sum" }
    out = D .. "state.sum"
  end
  return measure.write(dir, ("%s-%d.json"):format(work, n), cjson.encode { plan = plan, output = out })
end

local function command(peer, work, n, plan)
  if peer == "obelus" then
    return ("%s run %s --tools peers/tools.lua"):format(BIN, plan)
  end
  return ("node peers/peers.mjs %s %s %d"):format(peer, work, n)
end

local peers = { "obelus", "async", "langgraph" }
local works = { "chain", "fanout", "sleep" }
local secs, rss, skip = {}, {}, {}
local function key(p, w, n) return p .. " " .. w .. " " .. n end
for _, n in ipairs(SIZES) do
  for _, w in ipairs(works) do
    local plan = plan_file(w, n)
    for round = 1, ROUNDS do
      for _, p in ipairs(peers) do
        local k = key(p, w, n)
        if not skip[k] then
          local s, kb, out = timed(command(p, w, n, plan))
          secs[k] = secs[k] or {}
          rss[k] = rss[k] or {}
          table.insert(secs[k], s)
          table.insert(rss[k], kb)
          print(cjson.encode { bench = "peers", peer = p, work = w, n = n, round = round, secs = s,
                               peak_rss_kb = kb, result = out })
          -- LangGraph at 10,000 only when its 1,000 took under 2 s
          if p == "langgraph" and n == SIZES[1] and round == 1 and s >= 2 then
            skip[key(p, w, SIZES[2])] = true
          end
        end
      end
    end
  end
end
os.execute("rm -rf " .. dir)

print("")
print(("peers: whole processes, medians of %d rounds; x obelus = the peer's wall time / obelus's"):format(ROUNDS))
print(("%-8s %6s  %-10s %10s %10s %10s"):format("work", "N", "peer", "wall s", "peak MB", "x obelus"))
for _, n in ipairs(SIZES) do
  for _, w in ipairs(works) do
    local base = median(secs[key("obelus", w, n)])
    for _, p in ipairs(peers) do
      local k = key(p, w, n)
      if secs[k] then
        print(("%-8s %6d  %-10s %10.2f %10.1f %10s"):format(w, n, p, median(secs[k]), median(rss[k]) / 1024,
          p == "obelus" and "" or ("%.1fx"):format(median(secs[k]) / base)))
      else
        print(("%-8s %6d  %-10s %10s %10s %10s"):format(w, n, p, "-", "-", "too slow"))
      end
    end
  end
end
