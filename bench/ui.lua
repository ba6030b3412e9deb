-- bench/ui.lua -- `obelus ui` under watch (`sh bench/run ui`; `make bench` ends with it):
--   viewers    a live run of 10,000 calls (50 chains of 200 calls that each wait 1 ms),
--              started from the API in an `obelus ui --tools` server, watched by 0 or by
--              50 viewers of its events (one node process holding 50 streams, as 50
--              browsers' EventSource would); its time is read from its journal (from the
--              gate call's end, when every viewer is watching, to its last call's end),
--              not from a clock around it. 5 rounds, 0 and 50 interleaved; the median of
--              the per-round ratios. Goal: 50 viewers slow the run by under 10%.
--   page       a 100,000-call journal: GET /api/runs/ID?calls=light (what the run page
--              asks first) and GET /api/runs/ID (the run whole), timed by curl, 5 times
--              each, after the list (GET /api/runs) read it once; and the run page in
--              headless Chromium (spec/browser/big.mjs, when the browser driver is in
--              spec/browser/node_modules), from navigation to the page drawn (its
--              "obelus-drawn" mark: the table, the timeline of all 100,000 calls, the
--              graph's note), and its first paint (Chromium's first-contentful-paint), 5
--              times. Medians. Goal: under 1 s. The list's first read of the journal
--              (cold) is said too.
-- OBELUS_UI_ROUNDS (5), OBELUS_UI_VIEWERS (50); OBELUS_UI_NO_PAGE=1: the viewers alone.
package.path = "../spec/?.lua;" .. package.path
local cjson = require "cjson"
local measure = dofile("measure.lua")
local median = measure.median

local BIN = "../bin/obelus"
local ROUNDS = tonumber(os.getenv("OBELUS_UI_ROUNDS") or "5")
local VIEWERS = tonumber(os.getenv("OBELUS_UI_VIEWERS") or "50")

local dir = measure.tmpdir()
local tools = measure.write(dir, "tools.lua", [[
local obelus = require "obelus"
return {
  { name = "wait", run = function(call) obelus.sleep(call.ms) return call.value end },
  { name = "echo", run = function(call) return call.value end },
}
]])
os.execute("mkdir -p " .. dir .. "/runs")

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

-- the server
local errf = dir .. "/ui.err"
-- The server on one core, the viewers on the other (taskset, when there are two): what
-- is measured is what serving them costs the run, not what 50 streams cost the one node
-- process that stands for 50 browsers (about 1.7 s of CPU for a run's 0.3 s: on a
-- 2-core machine, their own core and part of the server's).
local ncpu = tonumber(sh("nproc 2>/dev/null")) or 1
local pin_server, pin_viewers = "", ""
if ncpu >= 2 and os.execute("command -v taskset >/dev/null 2>&1") then
  pin_server, pin_viewers = "taskset -c 0 ", "taskset -c 1 "
end
local pid = sh(("%s%s ui --journals %s/runs --tools %s --port 0 2>%s >/dev/null & echo $!"):format(
  pin_server, BIN, dir, tools, errf)):gsub("%s+$", "")
local base
for _ = 1, 500 do
  local f = io.open(errf)
  base = f and f:read("a"):match("obelus ui: (http://%S+/)")
  if f then f:close() end
  if base then break end
  os.execute("sleep 0.02")
end
assert(base, "obelus ui said no URL")

-- the live plan: a gate, then 50 chains of 200 calls after it
local calls = { { _id = "gate", _tool = "wait", ms = 800, value = 0, _outputPath = "†state.gate" } }
for l = 1, 50 do
  local prev = "†state.gate"
  for k = 1, 200 do
    local id = ("c%d_%d"):format(l, k)
    calls[#calls + 1] = { _id = id, _tool = "wait", ms = 1, value = prev, _outputPath = "†state." .. id }
    prev = "†state." .. id
  end
end
local body = measure.write(dir, "body.json", cjson.encode({ plan = calls }))

local function post_run()
  local out = sh(("curl -s -X POST --data-binary @%s %sapi/runs"):format(body, base))
  return cjson.decode(out)
end

-- the run's time from its journal: the gate's end to the last call's end, in seconds
local function journal_time(path)
  local gate, last, done = nil, nil, 0
  for line in io.lines(path) do
    if line:find('"journal":"settled"', 1, true) then
      local r = cjson.decode(line)
      if r.id == "gate" then gate = r.t end
      last = r.t
      done = done + (r.state == "done" and 1 or 0)
    end
  end
  assert(done == #calls, ("%d calls of %d done (%s)"):format(done, #calls, path))
  return (last - gate) / 1e6
end

local function wait_end(path)
  for _ = 1, 3000 do
    local f = io.open(path)
    local text = f and f:read("a") or ""
    if f then f:close() end
    if text:find('"journal":"end"', 1, true) then return end
    os.execute("sleep 0.05")
  end
  error("the run never ended: " .. path)
end

local function one(viewers)
  local made = post_run()
  local path = dir .. "/runs/" .. made.source
  local p
  if viewers > 0 then
    p = assert(io.popen(("%snode ui/viewers.mjs %s %s %d"):format(pin_viewers, base, made.id, viewers)))
    assert(p:read("l") == "ready", "the viewers did not all get their snapshot")
  end
  wait_end(path)
  local seen
  if p then
    seen = cjson.decode(p:read("l"))
    p:close()
  end
  return journal_time(path), seen
end

print("")
local alone, watched, ratios = {}, {}, {}
for round = 1, ROUNDS do
  local a = one(0)
  local w, seen = one(VIEWERS)
  alone[#alone + 1], watched[#watched + 1], ratios[#ratios + 1] = a, w, w / a
  print(cjson.encode({ bench = "ui-viewers", round = round, alone_s = a, watched_s = w,
                       viewers = VIEWERS, ratio = w / a, viewer_bytes = seen.bytes, viewer_wire = seen.wire,
                       viewer_events = seen.records }))
end

-- the page of a 100,000-call journal
local big = {}
for k = 1, 100000 do
  big[k] = { _id = "n" .. k, _tool = "echo", value = k, _outputPath = "†state.n" .. k }
end
if os.getenv("OBELUS_UI_NO_PAGE") then -- the viewers part alone
  os.execute("kill -TERM " .. pid .. "; rm -rf " .. dir)
  print(("ui: %d viewers, median of per-round ratios %.3f"):format(VIEWERS, median(ratios)))
  os.exit(0)
end
local bigplan = measure.write(dir, "big.json", cjson.encode(big))
assert(os.execute(("%s run %s --tools %s --journal %s/runs/big.jsonl >/dev/null"):format(
  BIN, bigplan, tools, dir)))
local cold = tonumber(sh(("curl -s -o /dev/null -w '%%{time_total}' %sapi/runs"):format(base)))
local list = cjson.decode(sh(("curl -s %sapi/runs"):format(base)))
local bigid
for _, r in ipairs(list.runs) do if r.source == "big.jsonl" then bigid = r.id end end
local page, whole = {}, {}
for _ = 1, 5 do
  page[#page + 1] = tonumber(sh(("curl -s -o /dev/null -w '%%{time_total}' '%sapi/runs/%s?calls=light'"):format(base, bigid)))
  whole[#whole + 1] = tonumber(sh(("curl -s -o /dev/null -w '%%{time_total}' %sapi/runs/%s"):format(base, bigid)))
end
print(cjson.encode({ bench = "ui-page-api", calls = 100000, light_s = page, whole_s = whole, list_cold_s = cold }))
local drawn, painted = {}, {}
if os.execute("test -d ../spec/browser/node_modules/puppeteer-core") then
  for _ = 1, 5 do
    local out = sh(("cd .. && timeout 120 node spec/browser/big.mjs '%s' 2>/dev/null"):format(
      cjson.encode({ url = base, id = bigid, last = "n100000" })))
    local r = out:match("{.*}") and cjson.decode(out:match("{.*}"))
    if r and r.drawnMs then drawn[#drawn + 1] = r.drawnMs / 1000 end
    if r and r.firstPaintMs then painted[#painted + 1] = r.firstPaintMs / 1000 end
  end
  print(cjson.encode({ bench = "ui-page-chromium", calls = 100000, drawn_s = drawn,
                       first_paint_s = painted }))
end

os.execute("kill -TERM " .. pid)
os.execute("rm -rf " .. dir)

print("")
print(("ui: a live 10,000-call run, alone %.3f s, with %d viewers %.3f s (medians): "
  .. "%.1f%% slower (median of per-round ratios %.3f; goal < 10%%)"):format(
  median(alone), VIEWERS, median(watched), (median(ratios) - 1) * 100, median(ratios)))
print(("ui: a 100,000-call journal: GET /api/runs/ID?calls=light %.3f s, whole %.3f s (medians of 5, "
  .. "once the list read it: %.1f s); in Chromium, first paint %s, the page drawn %s (goal < 1 s)"):format(
  median(page), median(whole), cold,
  #painted > 0 and ("%.3f s"):format(median(painted)) or "not measured",
  #drawn > 0 and ("%.3f s (medians of %d)"):format(median(drawn), #drawn)
    or "not measured (no browser driver in spec/browser/node_modules)"))
