-- hostile/cases/delegation.lua -- DELEGATION: delegation bombs and deep chains (issue 26,
-- item 5, "What to build": Delegation, and item 11's "--concurrency N allows N²").
--
-- The attacks: a plan that delegates to itself 4 times a level (a bomb), with and without
-- `_retry`, ended by --max-calls, --max-depth, SIGTERM, SIGINT, a `_timeout` or
-- --call-timeout, then its journal read by `log`, `report` and `resume` (and a resume that
-- is itself signalled); two plans delegating to each other; self-delegation 10,000 deep
-- (--max-depth's most) and one past it; a 5,000-deep chain cancelled by SIGTERM, a
-- `_timeout` and the Lua module's run:cancel(), and resumed after SIGTERM; the journal of a
-- deep chain, whose nested messages must be stored once (its size linear in the number of
-- messages, not in depth times messages); --concurrency across delegated runs, which must
-- be one bound for the whole tree (counted by the tools themselves, or by the test server's
-- peak under --threads 2), and must not deadlock a deep chain under --concurrency 1. Each
-- through run, and again through resume, check, graph, log, report, --threads 2 and the Lua
-- module. A user should get: exit 1 with the limit named (or 130/143 for a signal, exit 2
-- for a bad option), a journal every line of which reads, no abort, no hang.
local S = require "support"
local slurp, status, all = S.slurp, S.status, S.all
local cjson = require "cjson"

-- the tools every case loads (t.lua)
local TOOLS = [=[
local obelus = require "obelus"

local function tool(name, run) return { name = name, description = name, run = run } end

local function touch(name)
  local f = assert(io.open(name, "w"))
  f:write("x\n")
  f:close()
end

local function exists(name)
  local f = io.open(name)
  if f then f:close() end
  return f ~= nil
end

-- busy counts the busy calls running at once in the whole engine (every delegated run of
-- an engine shares its Lua state) and returns the most it has seen
local now, most = 0, 0

return {
  tool("dec", function(call)
    if call.n <= 0 then return obelus.branch(2, "liftoff") end
    return call.n - 1
  end),
  tool("busy", function(call)
    now = now + 1
    if now > most then most = now end
    obelus.sleep(call.ms or 20) -- yields: every call that may start starts meanwhile
    now = now - 1
    return most
  end),
  -- says it started (the file `started`), then waits for good
  tool("forever", function()
    touch("started")
    while true do obelus.sleep(60000) end
  end),
  -- says it started, then waits until the file `go` exists
  tool("waitgo", function()
    touch("started")
    while not exists("go") do obelus.sleep(20) end
    return "went"
  end),
  -- a request the test server holds 200 ms, counted under its tag (/peak?tag=)
  tool("slow", function(call)
    return obelus.http.get(os.getenv("HTTP") .. "/slow?ms=200&tag=" .. call.tag).status
  end),
  tool("ok", function(call) obelus.sleep(call.ms or 0) return call.v end),
}
]=]

-- the plans ------------------------------------------------------------------------------
local BOMB = [[{"plan":[{"_delegate":"bomb.json","_outputPath":"a"},{"_delegate":"bomb.json","_outputPath":"b"},
  {"_delegate":"bomb.json","_outputPath":"c"},{"_delegate":"bomb.json","_outputPath":"d"}]}]]
local BOMB_RETRY = [[{"plan":[
  {"_delegate":"bomb_retry.json","_outputPath":"a","_retry":{"attempts":10,"delay_ms":0}},
  {"_delegate":"bomb_retry.json","_outputPath":"b","_retry":{"attempts":10,"delay_ms":0}},
  {"_delegate":"bomb_retry.json","_outputPath":"c","_retry":{"attempts":10,"delay_ms":0}},
  {"_delegate":"bomb_retry.json","_outputPath":"d","_retry":{"attempts":10,"delay_ms":0}}]}]]
-- n levels of self-delegation below the first: the deepest writes "liftoff"
local COUNTDOWN = [[{"plan":[
  {"_id":"step","_tool":"dec","n":"†input.n","_outputPath":"†state.next || †state.done"},
  {"_id":"again","_delegate":"countdown.json","n":"†state.next","_outputPath":"†state.result"}],
 "output":"†state.result || †state.done"}]]
-- the same, whose deepest run waits for good (forever) or for the file `go` (waitgo)
local DEEP_WAIT = [[{"plan":[
  {"_id":"step","_tool":"dec","n":"†input.n","_outputPath":"†state.next || †state.done"},
  {"_id":"again","_delegate":"deep_wait.json","n":"†state.next","_outputPath":"†state.result"},
  {"_id":"wait","_tool":"forever","at":"†state.done","_outputPath":"†state.result"}],
 "output":"†state.result"}]]
local DEEP_GO = [[{"plan":[
  {"_id":"step","_tool":"dec","n":"†input.n","_outputPath":"†state.next || †state.done"},
  {"_id":"again","_delegate":"deep_go.json","n":"†state.next","_outputPath":"†state.result"},
  {"_id":"wait","_tool":"waitgo","at":"†state.done","_outputPath":"†state.result"}],
 "output":"†state.result"}]]
local BUSY3 = [[{"plan":[{"_tool":"busy","_outputPath":"x"},{"_tool":"busy","_outputPath":"y"},
  {"_tool":"busy","_outputPath":"z"}]}]]
-- two delegations of busy3 and a busy call of its own
local MID = [[{"plan":[{"_delegate":"busy3.json","_outputPath":"p"},{"_delegate":"busy3.json","_outputPath":"q"},
  {"_tool":"busy","_outputPath":"r"}]}]]
-- busy before and after a delegation to itself, n levels
local BUSY_DEEP = [[{"plan":[{"_tool":"busy","_outputPath":"here"},
  {"_tool":"dec","n":"†input.n","_outputPath":"†state.next || †state.done"},
  {"_delegate":"busy_deep.json","n":"†state.next","_outputPath":"†state.below"},
  {"_tool":"busy","_outputPath":"there"}]}]]

-- a top plan delegating to file with n (and the calls given after)
local function top(file, n, call_extra, more)
  local call = '{"_id":"top","_delegate":"' .. file .. '","n":' .. n .. ',"_outputPath":"out"' .. (call_extra or "") .. '}'
  return '{"plan":[' .. call .. (more and ("," .. more) or "") .. ']}'
end

local function files(t)
  t["t.lua"] = TOOLS
  return t
end


-- the journal's records, each decoded; nil and why when a line does not read
local function journal(dir, name)
  local text = slurp(dir .. "/" .. (name or "j.jsonl"))
  if not text then return nil, "no journal" end
  text = text:gsub("\0+$", "") -- a killed run's file ends in zero bytes
  if text ~= "" and text:sub(-1) ~= "\n" then return nil, "the journal's last line is torn" end
  local recs, n = {}, 0
  for line in text:gmatch("[^\n]+") do
    n = n + 1
    local ok, rec = pcall(cjson.decode, line)
    if not ok then return nil, "journal line " .. n .. " is not JSON: " .. line:sub(1, 120) end
    recs[n] = rec
  end
  if not recs[1] or recs[1].type ~= "plan" then return nil, "the journal does not begin with its plan" end
  return recs, #text
end

local function count(recs, kind)
  local n = 0
  for _, r in ipairs(recs) do if r.journal == kind then n = n + 1 end end
  return n
end

-- the check that a status file (written by `echo $? >F`) holds want

-- checks in order; the first that fails says why

-- the journal reads whole, and `obelus log` (run by the command: log.rc) reads it
local function journal_whole(dir)
  local recs, why = journal(dir)
  if not recs then return false, why end
  return status(dir, "log.rc", "0")
end

-- the journal has no retry record: a limit's failure is not tried again
local function no_retry(dir)
  local recs, why = journal(dir)
  if not recs then return false, why end
  local n = count(recs, "retry")
  if n > 0 then return false, n .. " retry records: a limit's failure was tried again" end
  return true
end

-- the most busy calls at once any output reports, and how many busy calls reported
-- (the outputs: nested objects whose keys BUSY_KEYS name a busy call's count)
local BUSY_KEYS = { x = true, y = true, z = true, r = true, c = true, here = true, there = true }
local function most_busy(out)
  local ok, v = pcall(cjson.decode, out)
  if not ok then return nil, 0 end
  local most, calls = 0, 0
  local function walk(x)
    for k, y in pairs(x) do
      if type(y) == "table" then
        walk(y)
      elseif BUSY_KEYS[k] and type(y) == "number" then
        calls = calls + 1
        if y > most then most = y end
      end
    end
  end
  if type(v) ~= "table" then return nil, 0 end
  walk(v)
  return most, calls
end

local function busy_out(n, calls)
  return function(out)
    local most, seen = most_busy(out)
    if not most then return false, "stdout is not JSON: " .. out:sub(1, 200) end
    if seen ~= calls then return false, seen .. " busy calls in the output, expected " .. calls .. ": " .. out:sub(1, 300) end
    if most ~= n then return false, most .. " busy calls ran at once, the limit being " .. n .. ": " .. out:sub(1, 300) end
    return true
  end
end

-- the command's helpers ----------------------------------------------------------------
-- until the journal has n "run" records (at most 30 s)
local function wait_runs(n, file)
  file = file or "j.jsonl"
  return ([[i=0; while c=$(grep -c '"journal":"run"' %s 2>/dev/null); [ "${c:-0}" -lt %s ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done]])
    :format(file, tostring(n))
end
local WAIT_STARTED = [[i=0; while [ ! -e started ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done]]
local LOG = "obelus log j.jsonl >/dev/null 2>log.err; echo $? >log.rc"

-- runs cmd in the background, waits (wait: a shell line), sends sig, then `after`; exits
-- with cmd's status
local function signalled(cmd, wait, sig, after)
  return table.concat({ cmd .. " & p=$!", wait, "kill -" .. sig .. " $p", "wait $p; rc=$?",
                        after or ":", "exit $rc" }, "\n")
end

local cases = {}
local function add(c) cases[#cases + 1] = c end

-- "A plan that delegates to itself 4 times writes a 5.8 GB journal and SIGABRTs" ---------
add { name = "a bomb (4 self-delegations a level) ended by --max-calls 2000", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = "obelus run bomb.json --max-calls 2000",
      expect = { code = 1, out = "{}", err = { "call #0 (delegate) failed (runtime)", "more than --max-calls 2000" } } }

add { name = "the bomb ended by --max-calls 2000 under --concurrency 1 (no deadlock)", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = "obelus run bomb.json --max-calls 2000 --concurrency 1",
      expect = { code = 1, out = "{}", err = "more than --max-calls 2000" } }

add { name = "the bomb in two instances over --threads 2, --max-calls 4000", item = 5,
      files = files { ["bomb.json"] = BOMB,
                      ["p.json"] = [[{"instances":["i1","i2"],"plan":[{"_delegate":"bomb.json","_outputPath":"x"}]}]] },
      run = "obelus run p.json --threads 2 --max-calls 4000",
      expect = { code = 1, err = { "call #0@i1 (delegate) failed (runtime)", "--max-calls" } } }

add { name = "two plans delegating to each other, --max-depth 6", item = 5,
      files = files { ["a.json"] = [[{"plan":[{"_delegate":"b.json","_outputPath":"x"}]}]],
                      ["b.json"] = [[{"plan":[{"_delegate":"a.json","_outputPath":"y"}]}]] },
      run = "obelus run a.json --max-depth 6",
      expect = { code = 1, err = "delegation deeper than 6 levels (see --max-depth)" } }

add { name = "check of the bomb follows each delegated plan once: ok, no loop", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = "obelus check bomb.json",
      expect = { code = 0, out = "bomb.json: ok, 4 calls" } }

add { name = "check of two plans delegating to each other: ok, no loop", item = 5,
      files = files { ["a.json"] = [[{"plan":[{"_delegate":"b.json","_outputPath":"x"}]}]],
                      ["b.json"] = [[{"plan":[{"_delegate":"a.json","_outputPath":"y"}]}]] },
      run = "obelus check a.json",
      expect = { code = 0, out = "a.json: ok, 1 call" } }

add { name = "graph of the bomb: its four calls, no loop", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = "obelus graph bomb.json",
      expect = { code = 0, out = function(out)
                   local n = select(2, out:gsub('%[label="[^"]*\\ndelegate"', ""))
                   if n ~= 4 then return false, n .. " delegate nodes: " .. out:sub(1, 300) end
                   return true
                 end } }

-- "with _retry it never ends" ------------------------------------------------------------
add { name = "the bomb with _retry (10 attempts each) ended by --max-depth 4: nothing retried", item = 5,
      files = files { ["bomb_retry.json"] = BOMB_RETRY },
      run = "obelus run bomb_retry.json --max-depth 4 --journal j.jsonl",
      expect = { code = 1, err = "delegation deeper than 4 levels (see --max-depth)", check = no_retry } }

add { name = "the bomb with _retry ended by --max-calls 3000 (default depth): nothing retried", item = 5,
      files = files { ["bomb_retry.json"] = BOMB_RETRY },
      run = "obelus run bomb_retry.json --max-calls 3000 --journal j.jsonl",
      expect = { code = 1, err = "more than --max-calls 3000", check = no_retry } }

-- "ignoring SIGTERM for minutes (delegation runs synchronously inside one scheduler pass)"
local BOMB_RUN = "obelus run bomb.json --journal j.jsonl --max-depth 12 --max-calls 100000000 >/dev/null"

add { name = "SIGTERM during a bomb: exit 143, the journal whole", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = signalled(BOMB_RUN, wait_runs(50), "TERM", LOG),
      secs = 60, vmem_kb = 3000000,
      expect = { code = 143, err = "interrupted by SIGTERM",
                 check = all(journal_whole, function(dir)
                   local recs = journal(dir)
                   if count(recs, "run") < 50 then return false, "the signal came before the bomb was under way" end
                   return true
                 end) } }

add { name = "SIGINT during a bomb: exit 130", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = signalled(BOMB_RUN, wait_runs(50), "INT", LOG),
      secs = 60, vmem_kb = 3000000,
      expect = { code = 130, err = "interrupted by SIGINT", check = journal_whole } }

add { name = "SIGTERM during a bomb with _retry: exit 143", item = 5,
      files = files { ["bomb_retry.json"] = BOMB_RETRY },
      run = signalled("obelus run bomb_retry.json --journal j.jsonl --max-depth 12 --max-calls 100000000 >/dev/null",
                      wait_runs(50), "TERM", LOG),
      secs = 60, vmem_kb = 3000000,
      expect = { code = 143, err = "interrupted by SIGTERM", check = journal_whole } }

add { name = "a _timeout of 300 ms on a call that starts a bomb; the other call goes on", item = 5,
      files = files { ["bomb.json"] = BOMB,
                      ["p.json"] = [[{"plan":[
        {"_id":"bomb","_delegate":"bomb.json","_timeout":300,"_outputPath":"bombed"},
        {"_id":"other","_tool":"ok","ms":50,"v":"done","_outputPath":"other"}],"output":"†state.other"}]] },
      run = "obelus run p.json --tools t.lua --max-depth 12 --max-calls 100000000",
      secs = 60, vmem_kb = 3000000,
      expect = { code = 1, out = '"done"', err = "call bomb (delegate) failed (runtime): timeout after 300 ms" } }

add { name = "--call-timeout 500 over a bomb (every call of it has the timeout)", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = "obelus run bomb.json --call-timeout 500 --max-depth 12 --max-calls 100000000",
      secs = 60, vmem_kb = 3000000,
      expect = { code = 1, err = "failed (runtime): timeout after 500 ms" } }

-- log, report and resume of a bomb's journal ----------------------------------------------
local BOMB_2000 = "obelus run bomb.json --max-calls 2000 --journal j.jsonl >/dev/null 2>run.err; echo $? >run.rc; "

add { name = "log of a bomb's journal (ended by --max-calls)", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = BOMB_2000 .. "obelus log j.jsonl",
      expect = { code = 0, out = function(out)
                   -- each failed call marked, and the delegated runs' calls nested under theirs
                   for _, w in ipairs { "✗ failed (runtime)", "the delegated plan bomb.json failed", "\n    1.1 " } do
                     if not out:find(w, 1, true) then return false, ("log lacks %q: %s"):format(w, out:sub(1, 300)) end
                   end
                   return true
                 end,
                 check = function(dir) return status(dir, "run.rc", "1") end } }

add { name = "report of a bomb's journal", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = BOMB_2000 .. "obelus report j.jsonl -o r.html",
      expect = { code = 0, check = function(dir)
                   local html = slurp(dir .. "/r.html") or ""
                   if not html:find("<html", 1, true) then return false, "no HTML written" end
                   return status(dir, "run.rc", "1")
                 end } }

add { name = "resume of a bomb's ended journal: the same output, nothing runs again", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = BOMB_2000 .. [[n=$(grep -c '"journal":"start"' j.jsonl); obelus resume j.jsonl --max-calls 2000; rc=$?; ]] ..
            [[echo "$n $(grep -c '"journal":"start"' j.jsonl)" >starts; exit $rc]],
      expect = { code = 1, out = "{}", check = function(dir)
                   local a, b = (slurp(dir .. "/starts") or ""):match("(%d+) (%d+)")
                   if not a or a ~= b then return false, "start records before and after resume: " .. tostring(slurp(dir .. "/starts")) end
                   return status(dir, "run.rc", "1")
                 end } }

add { name = "resume of a bomb stopped by SIGTERM, under --max-calls 3000: it ends", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = signalled(BOMB_RUN .. " 2>/dev/null", wait_runs(50), "TERM",
                      "echo $rc >sig.rc; obelus resume j.jsonl --max-depth 12 --max-calls 3000; rc=$?"),
      secs = 60, vmem_kb = 3000000,
      expect = { code = 1, err = "more than --max-calls 3000", check = function(dir) return status(dir, "sig.rc", "143") end } }

add { name = "SIGTERM during the resume of a bomb: exit 143, the journal whole", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = signalled(BOMB_RUN .. " 2>/dev/null", wait_runs(50), "TERM",
                      [[echo $rc >sig.rc; n=$(grep -c '"journal":"run"' j.jsonl)
obelus resume j.jsonl --max-depth 12 --max-calls 100000000 >/dev/null & p=$!
]] .. wait_runs("$((n + 50))") .. [[

kill -TERM $p; wait $p; rc=$?; ]] .. LOG),
      secs = 60, vmem_kb = 3000000,
      expect = { code = 143, err = "interrupted by SIGTERM",
                 check = all(journal_whole, function(dir) return status(dir, "sig.rc", "143") end) } }

add { name = "Lua module: the bomb under max_depth 3, then under max_calls 500: both end", item = 5,
      files = files { ["bomb.json"] = BOMB, ["m.lua"] = [[
local R = assert(os.getenv("R"))
package.cpath = R .. "/lib/?.so;" .. package.cpath
package.path = R .. "/lua/?.lua;" .. R .. "/lua/?/init.lua;" .. package.path
local obelus = require "obelus"
local e = obelus.engine {}
-- the host says what failed (the engine prints nothing itself: its events tell)
local function say(ev) if ev.event == "failed" then io.stderr:write(ev.reason or "", "\n") end end
print(e:run("bomb.json", { max_depth = 3, on_event = say }):wait())
print(e:run("bomb.json", { max_calls = 500, on_event = say }):wait())
e:close()
]] },
      run = [[R=$OBELUS_ROOT lua5.4 m.lua]],
      expect = { code = 0, out = "1\n1\n", err = { "delegation deeper than 3 levels", "more than --max-calls 500" } } }

-- "Deep self-delegation SIGSEGVs from depth ~2,660 though --max-depth allows 10,000" -----
add { name = "self-delegation 10,001 levels deep under --max-depth 10000: the deepest fails cleanly", item = 5,
      files = files { ["countdown.json"] = COUNTDOWN, ["p.json"] = top("countdown.json", 10000) },
      run = "obelus run p.json --tools t.lua --max-depth 10000",
      secs = 60,
      expect = { code = 1, out = "{}", err = "delegation deeper than 10000 levels (see --max-depth)" } }

add { name = "self-delegation 9,999 levels deep under --max-depth 10000 runs to the end", item = 5,
      files = files { ["countdown.json"] = COUNTDOWN, ["p.json"] = top("countdown.json", 9998) },
      run = "obelus run p.json --tools t.lua --max-depth 10000",
      secs = 60,
      expect = { code = 0, out = '"liftoff"' } }

add { name = "--max-depth past its range (10001, 0) is a usage error", item = 5,
      files = files { ["bomb.json"] = BOMB },
      run = "obelus run bomb.json --max-depth 10001; a=$?; obelus run bomb.json --max-depth 0; b=$?; " ..
            "[ $a = 2 ] && exit $b; exit 1",
      expect = { code = 2, out = "", err = "--max-depth needs a number from 1 to 10000" } }

add { name = "10,000 levels under --max-memory 64 and ulimit -v 500 MB: a clear error, no abort", item = 5,
      files = files { ["countdown.json"] = COUNTDOWN, ["p.json"] = top("countdown.json", 10000) },
      run = "obelus run p.json --tools t.lua --max-depth 10000 --max-memory 64",
      secs = 60, vmem_kb = 500000,
      expect = { code = 1, err = "call top (delegate) failed (runtime)" } }

add { name = "self-delegation 500 deep in two instances over --threads 2", item = 5,
      files = files { ["countdown.json"] = COUNTDOWN,
                      ["p.json"] = [[{"instances":["i1","i2"],"plan":[{"_delegate":"countdown.json","n":500,"_outputPath":"out"}]}]] },
      run = "obelus run p.json --tools t.lua --threads 2 --max-depth 1000",
      expect = { code = 0, out = function(out)
                   local ok, v = pcall(cjson.decode, out)
                   if not ok or type(v) ~= "table" or type(v.i1) ~= "table" or type(v.i2) ~= "table"
                      or v.i1.out ~= "liftoff" or v.i2.out ~= "liftoff" then
                     return false, "wanted liftoff in both instances: " .. out:sub(1, 200)
                   end
                   return true
                 end } }

-- cancel of a 5,000-deep chain -------------------------------------------------------------
add { name = "SIGTERM to a chain 5,000 runs deep: exit 143", item = 5,
      files = files { ["deep_wait.json"] = DEEP_WAIT, ["p.json"] = top("deep_wait.json", 5000) },
      run = signalled("obelus run p.json --tools t.lua --max-depth 6000 --journal j.jsonl", WAIT_STARTED, "TERM", LOG),
      secs = 60,
      expect = { code = 143, err = "interrupted by SIGTERM",
                 check = all(journal_whole, function(dir)
                   if not slurp(dir .. "/started") then return false, "the deepest call never started" end
                   return true
                 end) } }

add { name = "a _timeout on the top of a chain 5,000 runs deep cancels all of it", item = 5,
      files = files { ["deep_wait.json"] = DEEP_WAIT,
                      ["p.json"] = top("deep_wait.json", 5000, ',"_timeout":5000',
                                       '{"_id":"other","_tool":"ok","v":"done","_outputPath":"other"}') },
      run = "obelus run p.json --tools t.lua --max-depth 6000",
      secs = 60,
      expect = { code = 1, err = "call top (delegate) failed (runtime): timeout after 5000 ms",
                 out = function(out)
                   local ok, v = pcall(cjson.decode, out)
                   if not ok or type(v) ~= "table" or v.other ~= "done" then return false, "stdout: " .. out:sub(1, 200) end
                   return true
                 end } }

local LUA_CANCEL = [[
local R = assert(os.getenv("R"))
package.cpath = R .. "/lib/?.so;" .. package.cpath
package.path = R .. "/lua/?.lua;" .. R .. "/lua/?/init.lua;" .. package.path
local obelus, uv = require "obelus", require "luv"
local e = obelus.engine { tools = { "t.lua" } }
local run = e:run("p.json", { max_depth = 6000 })
-- the host's timer is stopped, not closed: a handle closed in a loop that never runs
-- again crashes luv itself at lua_close (a plain luv script does), which is not obelus's
local t, n = uv.new_timer(), 0
t:start(50, 50, function()
  n = n + 1
  if io.open("started") or n > 600 then t:stop(); run:cancel() end
end)
print(run:wait())
]]

add { name = "Lua module: run:cancel() of a chain 5,000 runs deep, the loop run to its end", item = 5,
      files = files { ["deep_wait.json"] = DEEP_WAIT, ["p.json"] = top("deep_wait.json", 5000),
                      ["m.lua"] = LUA_CANCEL .. "run:close()\ne:close()\nuv.run()\nprint('closed')\n" },
      run = [[R=$OBELUS_ROOT lua5.4 m.lua]],
      secs = 60,
      expect = { code = 0, out = "nil\tcancelled\nclosed\n" } }

add { name = "Lua module: run:cancel() of the 5,000-deep chain, then the script simply ends", item = 5,
      files = files { ["deep_wait.json"] = DEEP_WAIT, ["p.json"] = top("deep_wait.json", 5000),
                      ["m.lua"] = LUA_CANCEL .. "e:close()\nprint('closed')\n" },
      run = [[R=$OBELUS_ROOT lua5.4 m.lua]],
      secs = 60,
      expect = { code = 0, out = "nil\tcancelled\nclosed\n" } }

add { name = "SIGTERM to a chain 1,000 runs deep, then resume finishes it", item = 5,
      files = files { ["deep_go.json"] = DEEP_GO, ["p.json"] = top("deep_go.json", 1000) },
      run = signalled("obelus run p.json --tools t.lua --max-depth 2000 --journal j.jsonl 2>run.err", WAIT_STARTED, "TERM",
                      "echo $rc >sig.rc; touch go; obelus resume j.jsonl --max-depth 2000; rc=$?"),
      secs = 60,
      expect = { code = 0, out = '"went"', check = function(dir) return status(dir, "sig.rc", "143") end } }

-- "Nested delegation stores each message once per level (depth 8: an 899 MB journal)" ----
add { name = "a chain 8 deep: the deepest write is in the journal once, and log shows it nested", item = 5,
      files = files { ["countdown.json"] = COUNTDOWN, ["p.json"] = top("countdown.json", 8) },
      run = "obelus run p.json --tools t.lua --journal j.jsonl >/dev/null && obelus log j.jsonl",
      expect = { code = 0, out = "1.3.3.3.3.3.3.3.3.2  +", check = function(dir)
                   local text = slurp(dir .. "/j.jsonl") or ""
                   local n = select(2, text:gsub('"_path":"done"', ""))
                   if n ~= 1 then return false, "the deepest write is in the journal " .. n .. " times" end
                   return true
                 end } }

-- the journal of a chain D deep holds about 9 lines a level, each a few hundred bytes: its
-- size must stay within a bound per line (1 KB), whatever the depth
local function linear(dir)
  local recs, bytes = journal(dir)
  if not recs then return false, bytes end
  if bytes > 1024 * #recs then
    return false, ("the journal is %d bytes for %d lines (%d a line): it grows faster than its messages")
      :format(bytes, #recs, bytes // #recs)
  end
  return true
end

add { name = "a chain 1,000 deep: the journal's size is linear in its messages", item = 5,
      files = files { ["countdown.json"] = COUNTDOWN, ["p.json"] = top("countdown.json", 1000) },
      run = "obelus run p.json --tools t.lua --max-depth 2000 --journal j.jsonl",
      secs = 60,
      expect = { code = 0, out = '"liftoff"', check = linear } }

add { name = "a chain 1,000 deep: log, report and resume read its journal", item = 5,
      files = files { ["countdown.json"] = COUNTDOWN, ["p.json"] = top("countdown.json", 1000) },
      run = "obelus run p.json --tools t.lua --max-depth 2000 --journal j.jsonl >/dev/null 2>run.err; echo $? >run.rc; " ..
            "obelus log j.jsonl >log.out 2>log.err; echo $? >log.rc; " ..
            "obelus report j.jsonl -o r.html 2>report.err; echo $? >report.rc; " ..
            "obelus resume j.jsonl --max-depth 2000",
      secs = 60,
      expect = { code = 0, out = '"liftoff"',
                 check = all(function(dir) return status(dir, "run.rc", "0") end,
                             function(dir) return status(dir, "log.rc", "0") end,
                             function(dir) return status(dir, "report.rc", "0") end,
                             function(dir)
                               if not (slurp(dir .. "/log.out") or ""):find("levels deep: not shown", 1, true) then
                                 return false, "log does not say the deepest levels are not shown"
                               end
                               return true
                             end) } }

-- "--concurrency N allows N² (it is per sub-run)" ------------------------------------------
add { name = "--concurrency 2 over three delegated plans of three calls: 2 at once in all", item = 11,
      files = files { ["busy3.json"] = BUSY3, ["p.json"] = [[{"plan":[{"_delegate":"busy3.json","_outputPath":"a"},
        {"_delegate":"busy3.json","_outputPath":"b"},{"_delegate":"busy3.json","_outputPath":"c"}]}]] },
      run = "obelus run p.json --tools t.lua --concurrency 2",
      expect = { code = 0, out = busy_out(2, 9) } }

add { name = "--concurrency 3 over delegations two levels deep", item = 11,
      files = files { ["busy3.json"] = BUSY3, ["mid.json"] = MID, ["p.json"] = [[{"plan":[
        {"_delegate":"mid.json","_outputPath":"a"},{"_delegate":"mid.json","_outputPath":"b"},
        {"_tool":"busy","_outputPath":"c"}]}]] },
      run = "obelus run p.json --tools t.lua --concurrency 3",
      expect = { code = 0, out = busy_out(3, 15) } }

add { name = "--concurrency 1 over a chain 20 deep with a busy call before and after each delegation", item = 11,
      files = files { ["busy_deep.json"] = BUSY_DEEP, ["p.json"] = top("busy_deep.json", 20) },
      run = "obelus run p.json --tools t.lua --concurrency 1 --max-depth 30",
      expect = { code = 0, out = busy_out(1, 42) } }

add { name = "--concurrency 2 with --threads 2: instances' delegated calls, counted by the server", item = 11,
      needs = "http",
      files = files { ["s3.json"] = [[{"plan":[{"_tool":"slow","tag":"†input.tag","_outputPath":"x"},
        {"_tool":"slow","tag":"†input.tag","_outputPath":"y"},{"_tool":"slow","tag":"†input.tag","_outputPath":"z"}]}]],
                      ["p.json"] = [[{"instances":["i1","i2","i3","i4"],
        "plan":[{"_delegate":"s3.json","tag":"hostile-deleg-threads","_outputPath":"a"}]}]] },
      run = "obelus run p.json --tools t.lua --threads 2 --concurrency 2; rc=$?; " ..
            [[curl -s "$HTTP/peak?tag=hostile-deleg-threads" >peak.json; exit $rc]],
      expect = { code = 0, check = function(dir)
                   local ok, v = pcall(cjson.decode, slurp(dir .. "/peak.json") or "")
                   if not ok or type(v) ~= "table" then return false, "no peak from the server" end
                   if v.peak ~= 2 then return false, v.peak .. " requests were waiting at once, the limit being 2" end
                   return true
                 end } }

add { name = "Lua module: concurrency = 2 over three delegated plans", item = 11,
      files = files { ["busy3.json"] = BUSY3, ["p.json"] = [[{"plan":[{"_delegate":"busy3.json","_outputPath":"a"},
        {"_delegate":"busy3.json","_outputPath":"b"},{"_delegate":"busy3.json","_outputPath":"c"}]}]],
                      ["m.lua"] = [[
local R = assert(os.getenv("R"))
package.cpath = R .. "/lib/?.so;" .. package.cpath
package.path = R .. "/lua/?.lua;" .. R .. "/lua/?/init.lua;" .. package.path
local obelus = require "obelus"
local e = obelus.engine { tools = { "t.lua" } }
local run = e:run("p.json", { concurrency = 2 })
run:wait()
print(obelus.encode(run:output()))
e:close()
]] },
      run = [[R=$OBELUS_ROOT lua5.4 m.lua]],
      expect = { code = 0, out = busy_out(2, 9) } }

return cases
