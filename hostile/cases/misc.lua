-- hostile/cases/misc.lua -- issue 26 item 11 ("Smaller") and "What to build: the rest of
-- item 11": the attacks and slips that fit nowhere else.
--   * --concurrency N is N calls in the whole run, delegated plans' calls included (not N
--     per sub-run): by a tool-file counter, the $HTTP server's own count of waiting
--     requests across --threads, the Lua module, a resume.
--   * terminal controls (ANSI, BEL, C1, bytes that are not UTF-8) in an _id, a tool name,
--     an instance, an output path, an error message, a journal's plan name: never raw on
--     run's stderr, in `obelus log`, `check`, `graph`, a resume's report; `report`'s HTML
--     not broken out of by a </script> in an _id.
--   * --max-output bounds error messages too: a 50 MB error (a string, a table, retried,
--     routed to ||, from a delegated plan, through MCP, the Lua module).
--   * `graph` of a 4,000 x 4,000 plan (16 million dependencies) is bounded.
--   * a FIFO as _delegate (check, run, graph, MCP, through a symlink, one level down), as
--     the plan (and the resume of its run), as --tools, in a --tools folder, as --input,
--     as the MCP server's input; a FIFO named on the command line is read, a FIFO a plan
--     or a folder names is refused, nothing waits forever.
--   * the MCP server: a 40 MB line (bounded, and linear under a larger bound), a request
--     without method, an unknown notification, invalid JSON, bytes JSON refuses, a batch
--     (after negotiating 2025-03-26, whose transport must take batches), an empty batch,
--     deep nesting.
--   * output key order is the plan's: a run and its resume byte-identical, after a finished
--     run, a kill, on --threads, through delegation, from the Lua module.
local S = require "support"
local slurp, size = S.slurp, S.size
local cjson = require "cjson"

local DAG = "\xE2\x80\xA0" -- †
local ESC = "\27"

-- the tools: `work` counts the calls running at once in its engine (peak) and sleeps ms;
-- with `marker` it writes that file and sleeps a minute when the file is not there yet
-- (a call to kill the run in; its resume finds the file and goes on); `hslow` waits on
-- $HTTP/slow (the server counts those waiting by tag); `fail` raises msg; `bigerr` raises
-- mb megabytes of text (or, with table = true, a table holding them)
local TOOLS = [==[
local obelus = require "obelus"
running, peak = running or 0, peak or 0
local function exists(p)
  local f = io.open(p)
  if f then f:close() return true end
  return false
end
return {
  { name = "work", run = function(call)
      if call.marker and not exists(call.marker) then
        local f = assert(io.open(call.marker, "w"))
        f:write("started\n")
        f:close()
        obelus.sleep(60000)
      end
      running = running + 1
      if running > peak then peak = running end
      obelus.sleep(call.ms or 50)
      running = running - 1
      return call.n
    end },
  { name = "peak", run = function() return peak end },
  { name = "echo", run = function(call) return call.value end },
  { name = "fail", run = function(call) error(call.msg or "failed on purpose", 0) end },
  { name = "bigerr", run = function(call)
      local s = ("E"):rep(call.mb * 1048576)
      if call.table then error({ big = s }) end
      error(s, 0)
    end },
  { name = "hslow", run = function(call)
      local r = obelus.http.get(call.base .. "/slow?ms=" .. call.ms .. "&tag=" .. call.tag)
      return r.status
    end },
}
]==]

-- a tool whose very name holds a colour sequence
local TOOL_RED = [==[
return { { name = "t\27[31mred", run = function() error("the red tool failed", 0) end } }
]==]

local function decode(s)
  local ok, v = pcall(cjson.decode, s)
  if ok then return v end
end

local function enc(v) return (cjson.encode(v):gsub("\\/", "/")) end



-- no terminal control in text, raw: ESC, BEL, C1 U+009B (C2 9B), a lone 0x9B byte
local function no_controls(text, where)
  for _, bad in ipairs { { ESC, "an ESC" }, { "\7", "a BEL" }, { "\xC2\x9B", "a C1 CSI (U+009B)" } } do
    if text:find(bad[1], 1, true) then return false, where .. " holds " .. bad[2] .. " raw" end
  end
  local i = 1
  while true do
    local s, e = text:find("[\x80-\xff]+", i)
    if not s then break end
    if not utf8.len(text:sub(s, e)) then return false, where .. " holds bytes that are not UTF-8, raw" end
    i = e + 1
  end
  return true
end

local function stderr_clean(dir, r) return no_controls(r.err, "stderr") end
local function stdout_clean(out) return no_controls(out, "stdout") end

-- the JSON-RPC answers of an `obelus mcp` run, by line
local function answers(out)
  local got = {}
  for l in out:gmatch("[^\n]+") do got[#got + 1] = decode(l) or { raw = l } end
  return got
end

local LUA = [[lua5.4 -e '
package.cpath = os.getenv("OBELUS_ROOT") .. "/lib/?.so;" .. package.cpath
package.path = os.getenv("OBELUS_ROOT") .. "/lua/?.lua;" .. os.getenv("OBELUS_ROOT") .. "/lua/?/init.lua;" .. package.path
local obelus = require "obelus"
%s']]

-- `n` delegations of a sub-plan of four `work` calls, then the peak
local function fanout_plan(n)
  local calls = {}
  for i = 1, n do calls[i] = { _delegate = "sub.json", _id = "s" .. i, _outputPath = DAG .. "state.s" .. i } end
  local after = {}
  for i = 1, n do after[i] = DAG .. "state.s" .. i end
  calls[#calls + 1] = { _tool = "peak", _id = "peak", after = after, _outputPath = DAG .. "state.peak" }
  return enc { plan = calls, output = { peak = DAG .. "state.peak" } }
end
local SUB4 = enc { plan = {
  { _tool = "work", n = 1, ms = 100, _outputPath = DAG .. "state.a" },
  { _tool = "work", n = 2, ms = 100, _outputPath = DAG .. "state.b" },
  { _tool = "work", n = 3, ms = 100, _outputPath = DAG .. "state.c" },
  { _tool = "work", n = 4, ms = 100, _outputPath = DAG .. "state.d" } } }

local function peak_at_most(n)
  return function(out)
    local v = decode(out)
    if type(v) ~= "table" or type(v.peak) ~= "number" then return false, "no peak: " .. out:sub(1, 200) end
    if v.peak > n then return false, ("%d calls ran at once under --concurrency %d"):format(v.peak, n) end
    if v.peak < 1 then return false, "nothing ran" end
    return true
  end
end

-- the 4,000 x 4,000 plan: 4,000 calls write †state.a.kN, 4,000 read †state.a
local BIG_GRAPH = [[lua5.4 -e '
local t = {}
for i = 1, 4000 do t[#t + 1] = ("{\"_id\":\"w%d\",\"_tool\":\"echo\",\"value\":%d,\"_outputPath\":\"\226\128\160state.a.k%d\"}"):format(i, i, i) end
for i = 1, 4000 do t[#t + 1] = ("{\"_id\":\"r%d\",\"_tool\":\"echo\",\"value\":\"\226\128\160state.a\",\"_outputPath\":\"\226\128\160state.r.k%d\"}"):format(i, i) end
local f = assert(io.open("g.json", "w"))
f:write("{\"plan\":[" .. table.concat(t, ",") .. "]}")
f:close()'; true]]

-- key order: k1..k5 sleep so that k5 finishes first; b (in the middle) is the call the
-- run is killed in
local ORDER_PLAN = enc { plan = {
  { _tool = "work", _id = "k1", n = 1, ms = 250, _outputPath = DAG .. "state.out.k1" },
  { _tool = "work", _id = "k2", n = 2, ms = 200, _outputPath = DAG .. "state.out.k2" },
  { _tool = "work", _id = "b", n = 0, ms = 0, marker = "mk", _outputPath = DAG .. "state.out.b" },
  { _tool = "work", _id = "k3", n = 3, ms = 150, _outputPath = DAG .. "state.out.k3" },
  { _tool = "work", _id = "k4", n = 4, ms = 100, _outputPath = DAG .. "state.out.k4" },
  { _tool = "work", _id = "k5", n = 5, ms = 50, _outputPath = DAG .. "state.out.k5" } },
  output = { out = DAG .. "state.out" } }
local function plan_order(keys)
  return function(out)
    local at = 0
    for _, k in ipairs(keys) do
      local p = out:find('"' .. k .. '"', 1, true)
      if not p or p < at then return false, "the keys are not in the plan's order: " .. out:sub(1, 300) end
      at = p
    end
    return true
  end
end
local ORDER_KEYS = { "k1", "k2", "b", "k3", "k4", "k5" }

-- a FIFO writer that gives up after 10 s (never left behind)
local function feed(src, fifo) return ("timeout 10 sh -c 'cat %s > %s' & "):format(src, fifo) end

local MB40 = [[head -c 40000000 /dev/zero | tr '\0' a]]

local cases = {
  -- "--concurrency N allows N² (it is per sub-run)"
  { name = "--concurrency 2 over 4 delegated plans of 4 calls: 2 at once in all", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = fanout_plan(4), ["sub.json"] = SUB4 },
    run = "obelus run p.json --tools m.lua --concurrency 2",
    expect = { code = 0, out = peak_at_most(2) } },
  { name = "--concurrency 1 with delegation 5 deep ends (a waiting delegation holds no slot)", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = enc { plan = { { _delegate = "d1.json", _outputPath = DAG .. "state.x" },
                                          { _tool = "peak", after = DAG .. "state.x", _outputPath = DAG .. "state.peak" } },
                                 output = { peak = DAG .. "state.peak", x = DAG .. "state.x" } },
              ["d1.json"] = enc { plan = { { _delegate = "d2.json", _outputPath = DAG .. "state.x" },
                                           { _tool = "work", n = 1, _outputPath = DAG .. "state.w" } } },
              ["d2.json"] = enc { plan = { { _delegate = "d3.json", _outputPath = DAG .. "state.x" },
                                           { _tool = "work", n = 2, _outputPath = DAG .. "state.w" } } },
              ["d3.json"] = enc { plan = { { _delegate = "d4.json", _outputPath = DAG .. "state.x" },
                                           { _tool = "work", n = 3, _outputPath = DAG .. "state.w" } } },
              ["d4.json"] = enc { plan = { { _delegate = "d5.json", _outputPath = DAG .. "state.x" },
                                           { _tool = "work", n = 4, _outputPath = DAG .. "state.w" } } },
              ["d5.json"] = SUB4 },
    run = "obelus run p.json --tools m.lua --concurrency 1", secs = 20,
    expect = { code = 0, out = peak_at_most(1) } },
  { name = "--concurrency 2 --threads 2: instances and their delegated plans, 2 requests at once in all", item = 11,
    needs = "http",
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = enc { instances = { "i1", "i2", "i3", "i4" }, plan = {
                { _tool = "hslow", base = DAG .. "input.base", ms = 150, tag = "misc-conc-threads", _outputPath = DAG .. "state.a" },
                { _tool = "hslow", base = DAG .. "input.base", ms = 150, tag = "misc-conc-threads", _outputPath = DAG .. "state.b" },
                { _delegate = "sub.json", base = DAG .. "input.base", _outputPath = DAG .. "state.s" } } },
              ["sub.json"] = enc { plan = {
                { _tool = "hslow", base = DAG .. "input.base", ms = 150, tag = "misc-conc-threads", _outputPath = DAG .. "state.c" },
                { _tool = "hslow", base = DAG .. "input.base", ms = 150, tag = "misc-conc-threads", _outputPath = DAG .. "state.d" } } } },
    run = [[obelus run p.json --tools m.lua --threads 2 --concurrency 2 --input "{\"base\":\"$HTTP\"}" >/dev/null && ]] ..
          [[curl -s "$HTTP/peak?tag=misc-conc-threads"]],
    expect = { code = 0, out = peak_at_most(2) } },
  { name = "the Lua module's engine:run{concurrency = 2} over delegated plans: 2 at once in all", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = fanout_plan(4), ["sub.json"] = SUB4 },
    run = LUA:format([[
local run = obelus.engine { tools = { "m.lua" } }:run("p.json", { concurrency = 2 })
run:wait()
io.write(obelus.encode(run:output()), "\n")]]),
    expect = { code = 0, out = peak_at_most(2) } },
  { name = "resume --concurrency 2 of a killed run over delegated plans: 2 at once in all", item = 11,
    files = { ["m.lua"] = TOOLS, ["sub.json"] = SUB4,
              ["p.json"] = enc { plan = {
                { _tool = "work", _id = "first", n = 0, marker = "mk", _outputPath = DAG .. "state.first" },
                { _delegate = "sub.json", _id = "s1", after = DAG .. "state.first", _outputPath = DAG .. "state.s1" },
                { _delegate = "sub.json", _id = "s2", after = DAG .. "state.first", _outputPath = DAG .. "state.s2" },
                { _delegate = "sub.json", _id = "s3", after = DAG .. "state.first", _outputPath = DAG .. "state.s3" },
                { _tool = "peak", after = { DAG .. "state.s1", DAG .. "state.s2", DAG .. "state.s3" },
                  _outputPath = DAG .. "state.peak" } }, output = { peak = DAG .. "state.peak" } } },
    run = [[obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1 & pid=$!
i=0; while [ ! -s mk ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
kill -9 $pid; wait $pid 2>/dev/null; obelus resume j.jsonl --concurrency 2]],
    expect = { code = 0, out = peak_at_most(2) } },

  -- "ANSI escapes in an _id reach the terminal raw (run's stderr, obelus log)"
  { name = "an ANSI sequence in a failing call's _id is escaped on run's stderr", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"a\\u001b[31mRED\\u001b]0;pwned\\u0007","_tool":"fail","_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua",
    expect = { code = 1, err = "a\\x1b[31mRED", check = stderr_clean } },
  { name = "an ANSI sequence in an _id is escaped in obelus log", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"a\\u001b[31mRED","_tool":"fail","_outputPath":"' .. DAG .. 'state.x"},' ..
                           '{"_id":"c\\u009b2J","_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.y"}]}' },
    setup = "obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1; true",
    run = "obelus log j.jsonl",
    expect = { code = 0, out = function(out)
      local ok, why = stdout_clean(out)
      if not ok then return ok, why end
      if not out:find("a\\x1b[31mRED", 1, true) then return false, "log does not show the _id escaped: " .. out:sub(1, 300) end
      return true
    end } },
  { name = "an ANSI sequence in a tool's name is escaped on run's stderr", item = 11,
    files = { ["red.lua"] = TOOL_RED,
              ["p.json"] = '{"plan":[{"_id":"c","_tool":"t\\u001b[31mred","_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools red.lua",
    expect = { code = { 1, 2 }, err = "t\\x1b[31mred", check = stderr_clean } },
  { name = "an error message with ESC, BEL, a C1 CSI and a raw 0x9b byte is escaped on run's stderr", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"e","_tool":"fail","msg":"boom \\u001b[2J\\u0007 \\u009b[31m end","_outputPath":"' ..
                           DAG .. 'state.x"}]}',
              ["raw.lua"] = 'return { { name = "rawfail", run = function() error("raw \\155[2J\\255 end", 0) end } }',
              ["q.json"] = '{"plan":[{"_id":"r","_tool":"rawfail","_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua; obelus run q.json --tools raw.lua",
    expect = { code = 1, err = { "\\x1b[2J", "\\u009b" }, check = stderr_clean } },
  { name = "an error message with ESC and a newline is escaped in obelus log, one line a message", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"e","_tool":"fail","msg":"boom \\u001b[2J\\n3  +0.000s  fake  done","_outputPath":"' ..
                           DAG .. 'state.x"}]}' },
    setup = "obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1; true",
    run = "obelus log j.jsonl",
    expect = { code = 0, out = function(out)
      local ok, why = stdout_clean(out)
      if not ok then return ok, why end
      if out:find("\n3  +0.000s  fake", 1, true) then return false, "the error's newline forged a line: " .. out end
      return true
    end } },
  { name = "an ANSI _id in a plan problem is escaped on check's stderr", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"q\\u001b[31mQ","_tool":"no\\u001b[2Jsuch","_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus check p.json --tools m.lua",
    expect = { code = 2, err = "q\\x1b[31mQ", check = stderr_clean } },
  { name = "an ANSI _id and tool name never reach graph's output raw (dot and mermaid)", item = 11,
    files = { ["red.lua"] = TOOL_RED, ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"a\\u001b[31mRED\\u0007","_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.x"},' ..
                           '{"_id":"b\\u009b2J","_tool":"t\\u001b[31mred","v":"' .. DAG .. 'state.x","_outputPath":"' .. DAG .. 'state.y"}]}' },
    run = "obelus graph p.json --tools m.lua --tools red.lua && obelus graph p.json --tools m.lua --tools red.lua --format mermaid",
    expect = { code = 0, out = stdout_clean } },
  { name = "a journal's plan name with ESC is escaped in graph --journal's warning", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '[{"_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.a"}]',
              ["other.json"] = '[{"_tool":"echo","value":2,"_outputPath":"' .. DAG .. 'state.a"}]' },
    setup = [[obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1; sed -i '1s/"file":"p.json"/"file":"p\\u001b[2Jx.json"/' j.jsonl; true]],
    run = "obelus graph other.json --journal j.jsonl",
    expect = { code = 0, check = stderr_clean } },
  { name = "an ANSI _id in a delegated plan's failing call is escaped on run's stderr", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_delegate":"s.json","_id":"outer\\u001b[5m","_outputPath":"' .. DAG .. 'state.s"}]}',
              ["s.json"] = '{"plan":[{"_id":"inner\\u001b[31m","_tool":"fail","msg":"sub \\u001b[2J","_outputPath":"' ..
                           DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua",
    expect = { code = 1, err = "inner\\x1b[31m", check = stderr_clean } },
  { name = "a retried error message with ESC is escaped on each attempt's report", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"r","_tool":"fail","msg":"re\\u001b[2Jtry","_retry":{"attempts":3,"delay_ms":0},' ..
                           '"_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua",
    expect = { code = 1, err = { "attempt 1 of 3", "re\\x1b[2Jtry" }, check = stderr_clean } },
  { name = "an ANSI instance name (--threads 2) is escaped on run's stderr", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"instances":["i\\u001b[31m1","i2"],"plan":[{"_id":"f","_tool":"fail","_outputPath":"' ..
                           DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua --threads 2",
    expect = { code = 1, err = "i\\x1b[31m1", check = stderr_clean } },
  { name = "an ANSI key (bracketed) in an || output path is escaped on run's stderr", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = enc { plan = { { _id = "f", _tool = "fail",
                                            _outputPath = DAG .. 'state.ok || ' .. DAG .. 'state["e\\u001b[2J"]' } } } },
    run = "obelus run p.json --tools m.lua",
    expect = { code = 0, check = stderr_clean } },
  { name = "resume's report of a call that runs again escapes an ANSI _id", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"x\\u001b[31mRED","_tool":"work","marker":"mk","n":1,"_outputPath":"' ..
                           DAG .. 'state.a"}]}' },
    run = [[obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1 & pid=$!
i=0; while [ ! -s mk ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; sleep 0.2
kill -9 $pid; wait $pid 2>/dev/null; obelus resume j.jsonl]],
    expect = { code = 0, err = { "x\\x1b[31mRED", "runs again" }, check = stderr_clean } },
  { name = "report's HTML is not broken out of by </script> in an _id", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"</script><script>alert(1)</script>","_tool":"fail","msg":"</script><img src=x onerror=alert(2)>",' ..
                           '"_outputPath":"' .. DAG .. 'state.x"}]}' },
    setup = "obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1; true",
    run = "obelus report j.jsonl -o r.html",
    expect = { code = 0, check = function(dir)
      local html = slurp(dir .. "/r.html")
      if not html then return false, "no r.html" end
      if html:find("</script><script>alert(1)", 1, true) then return false, "the _id's </script> is in the HTML raw" end
      if html:find("</script><img src=x onerror", 1, true) then return false, "the error's </script> is in the HTML raw" end
      return true
    end } },
  { name = "report's HTML keeps working with <!--<script> in an _id (no script-data escape)", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"<!--<script>","_tool":"fail","_outputPath":"' .. DAG .. 'state.x"},' ..
                           '{"_id":"other","_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.y"}]}' },
    setup = "obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1; true",
    run = "obelus report j.jsonl -o r.html",
    expect = { code = 0, check = function(dir)
      local html = slurp(dir .. "/r.html")
      if not html then return false, "no r.html" end
      -- inside the inline <script> holding the run's data, "<!--<script>" puts the HTML parser
      -- in its double-escaped state: the real </script> no longer ends the element and the
      -- page's calls table stays empty (seen in headless Chromium)
      if html:find("<!--<script", 1, true) then return false, "the _id's <!--<script> is in the HTML's inline script raw" end
      return true
    end } },

  -- "--max-output does not bound error messages (a 50 MB error → a 52 MB journal and 100
  -- MB of stderr)"
  { name = "a 50 MB error message is cut at 64 KB on stderr and in the journal", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = '{"plan":[{"_id":"big","_tool":"bigerr","mb":50,"_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua --journal j.jsonl",
    expect = { code = 1, err = "(error message cut at 64 KB of 51200 KB)", check = function(dir, r)
      if #r.err > 1000000 then return false, ("stderr is %d bytes"):format(#r.err) end
      local n = size(dir .. "/j.jsonl")
      if not n or n > 1000000 then return false, "the journal is " .. tostring(n) .. " bytes" end
      return true
    end } },
  { name = "--max-output 8 cuts a 50 MB error message at 8 KB", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = '{"plan":[{"_id":"big","_tool":"bigerr","mb":50,"_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua --journal j.jsonl --max-output 8",
    expect = { code = 1, err = "cut at 8 KB", check = function(dir, r)
      if #r.err > 100000 then return false, ("stderr is %d bytes"):format(#r.err) end
      local n = size(dir .. "/j.jsonl")
      if not n or n > 100000 then return false, "the journal is " .. tostring(n) .. " bytes" end
      return true
    end } },
  { name = "a 50 MB error routed to an || alternative is cut in the output", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"big","_tool":"bigerr","mb":50,"_outputPath":"' .. DAG .. 'state.x || ' .. DAG ..
                           'state.err"}],"output":{"err":"' .. DAG .. 'state.err"}}' },
    run = "obelus run p.json --tools m.lua --journal j.jsonl",
    expect = { code = 0, out = function(out, dir)
      if #out > 1000000 then return false, ("stdout is %d bytes"):format(#out) end
      if not out:find("cut at 64 KB", 1, true) then return false, "the error is not marked cut: " .. out:sub(-200) end
      local n = size(dir .. "/j.jsonl")
      if not n or n > 1000000 then return false, "the journal is " .. tostring(n) .. " bytes" end
      return true
    end } },
  { name = "a 50 MB table raised as the error is cut like a string", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"big","_tool":"bigerr","mb":50,"table":true,"_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua --journal j.jsonl",
    expect = { code = 1, err = "cut at 64 KB", check = function(dir, r)
      if #r.err > 1000000 then return false, ("stderr is %d bytes"):format(#r.err) end
      local n = size(dir .. "/j.jsonl")
      if not n or n > 1000000 then return false, "the journal is " .. tostring(n) .. " bytes" end
      return true
    end } },
  { name = "a 50 MB error retried 3 times: each attempt's report is cut", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"big","_tool":"bigerr","mb":50,"_retry":{"attempts":3,"delay_ms":0},"_outputPath":"' ..
                           DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua --journal j.jsonl",
    expect = { code = 1, err = "cut at 64 KB", check = function(dir, r)
      if #r.err > 2000000 then return false, ("stderr is %d bytes"):format(#r.err) end
      local n = size(dir .. "/j.jsonl")
      if not n or n > 2000000 then return false, "the journal is " .. tostring(n) .. " bytes" end
      return true
    end } },
  { name = "a 50 MB error in a delegated plan is cut on stderr and in the journal", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_delegate":"s.json","_id":"outer","_outputPath":"' .. DAG .. 'state.s"}]}',
              ["s.json"] = '{"plan":[{"_id":"big","_tool":"bigerr","mb":50,"_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = "obelus run p.json --tools m.lua --journal j.jsonl",
    expect = { code = 1, err = "cut at 64 KB", check = function(dir, r)
      if #r.err > 1000000 then return false, ("stderr is %d bytes"):format(#r.err) end
      local n = size(dir .. "/j.jsonl")
      if not n or n > 1000000 then return false, "the journal is " .. tostring(n) .. " bytes" end
      return true
    end } },
  { name = "obelus mcp: a tool's 50 MB error is cut in the answer", item = 11,
    files = { ["m.lua"] = TOOLS },
    run = [[printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bigerr","arguments":{"mb":50}}}' | ]] ..
          [[obelus mcp --tools m.lua 2>/dev/null]],
    expect = { code = 0, out = function(out)
      if #out > 1000000 then return false, ("the answer is %d bytes"):format(#out) end
      local v = decode(out)
      if not (v and v.id == 1 and v.result and v.result.isError) then return false, "no error result: " .. out:sub(1, 200) end
      if not out:find("cut at 64 KB", 1, true) then return false, "the error is not marked cut" end
      return true
    end } },
  { name = "the Lua module's max_output_kb = 8 cuts a 50 MB error in the journal", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = '{"plan":[{"_id":"big","_tool":"bigerr","mb":50,"_outputPath":"' .. DAG .. 'state.x"}]}' },
    run = LUA:format([[
local run = obelus.engine { tools = { "m.lua" } }:run("p.json", { journal = "j.jsonl", max_output_kb = 8 })
io.write(tostring(run:wait()), "\n")]]) .. " 2>/dev/null",
    expect = { code = 0, out = "1", check = function(dir)
      local n = size(dir .. "/j.jsonl")
      if not n or n > 100000 then return false, "the journal is " .. tostring(n) .. " bytes" end
      if not slurp(dir .. "/j.jsonl"):find("cut at 8 KB", 1, true) then return false, "the error is not marked cut" end
      return true
    end } },

  -- "`graph` of a 4,000 × 4,000 plan writes 951 MB of DOT at 2 GB RSS"
  { name = "graph of a 4,000 x 4,000 plan is refused at --max-edges, nothing printed, in bounded memory", item = 11,
    files = { ["m.lua"] = TOOLS }, setup = BIG_GRAPH, vmem_kb = 1000000, secs = 20,
    run = "obelus graph g.json --tools m.lua",
    expect = { code = 2, err = "--max-edges", out = function(out)
      if out ~= "" then return false, ("graph printed %d bytes"):format(#out) end
      return true
    end } },
  { name = "graph --format mermaid of a 4,000 x 4,000 plan is refused too", item = 11,
    files = { ["m.lua"] = TOOLS }, setup = BIG_GRAPH, vmem_kb = 1000000, secs = 20,
    run = "obelus graph g.json --tools m.lua --format mermaid",
    expect = { code = 2, err = "--max-edges", out = function(out)
      if out ~= "" then return false, ("graph printed %d bytes"):format(#out) end
      return true
    end } },
  { name = "check of a 4,000 x 4,000 plan answers in bounded memory", item = 11,
    files = { ["m.lua"] = TOOLS }, setup = BIG_GRAPH, vmem_kb = 1000000, secs = 20,
    run = "obelus check g.json --tools m.lua",
    expect = { code = 0 } },

  -- "a FIFO given as _delegate hangs check, run and the MCP server"
  { name = "a FIFO as _delegate: check refuses it at once", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = '{"plan":[{"_delegate":"f.json","_outputPath":"' .. DAG .. 'state.a"}]}' },
    setup = "mkfifo f.json", secs = 15,
    run = "obelus check p.json --tools m.lua",
    expect = { code = 2, err = "f.json: is a FIFO (named pipe), not a regular file" } },
  { name = "a FIFO as _delegate: run refuses it at once, nothing runs", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.b"},' ..
                           '{"_delegate":"f.json","_outputPath":"' .. DAG .. 'state.a"}]}' },
    setup = "mkfifo f.json", secs = 15,
    run = "obelus run p.json --tools m.lua",
    expect = { code = 2, err = "is a FIFO", out = function(out) return out == "", "stdout: " .. out end } },
  { name = "a symlink to a FIFO as _delegate is refused", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = '{"plan":[{"_delegate":"link.json","_outputPath":"' .. DAG .. 'state.a"}]}' },
    setup = "mkfifo f.json && ln -s f.json link.json", secs = 15,
    run = "obelus run p.json --tools m.lua",
    expect = { code = 2, err = "is a FIFO" } },
  { name = "a FIFO as _delegate one plan down is refused by check", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_delegate":"sub/s.json","_outputPath":"' .. DAG .. 'state.a"}]}',
              ["sub/s.json"] = '{"plan":[{"_delegate":"f.json","_outputPath":"' .. DAG .. 'state.a"}]}' },
    setup = "mkfifo sub/f.json", secs = 15,
    run = "obelus check p.json --tools m.lua",
    expect = { code = 2, err = "is a FIFO" } },
  { name = "a FIFO as _delegate: graph ends with an error", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = '{"plan":[{"_delegate":"f.json","_outputPath":"' .. DAG .. 'state.a"}]}' },
    setup = "mkfifo f.json", secs = 15,
    run = "obelus graph p.json --tools m.lua",
    expect = { code = 2, err = "is a FIFO" } },
  { name = "a FIFO as _delegate of an MCP run_plan is an error result; the server goes on", item = 11,
    files = { ["m.lua"] = TOOLS }, setup = "mkfifo f.json", secs = 15,
    run = [[printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_plan","arguments":]] ..
          [[{"plan":{"plan":[{"_delegate":"f.json","_outputPath":"a"}]}}}}' '{"jsonrpc":"2.0","id":2,"method":"ping"}' | ]] ..
          [[obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = {}
      for _, v in ipairs(answers(out)) do if v.id then got[v.id] = v end end
      if not (got[1] and got[1].result and got[1].result.isError) then return false, "id 1: " .. out:sub(1, 300) end
      if not out:find("is a FIFO", 1, true) then return false, "the error does not say FIFO: " .. out:sub(1, 300) end
      if not got[2] then return false, "the ping after it was not answered" end
      return true
    end } },
  { name = "a FIFO as the plan (a writer behind it) is read and run", item = 11,
    files = { ["m.lua"] = TOOLS, ["src.json"] = '[{"_tool":"echo","value":7,"_outputPath":"' .. DAG .. 'state.a"}]' },
    setup = "mkfifo p.json", secs = 15,
    run = feed("src.json", "p.json") .. "obelus run p.json --tools m.lua",
    expect = { code = 0, out = '"a": 7' } },
  { name = "the resume of a run whose plan was a FIFO does not wait on the FIFO", item = 11,
    files = { ["m.lua"] = TOOLS, ["src.json"] = '[{"_tool":"echo","value":7,"_outputPath":"' .. DAG .. 'state.a"}]' },
    setup = "mkfifo p.json", secs = 15,
    run = feed("src.json", "p.json") .. "obelus run p.json --tools m.lua --journal j.jsonl >/dev/null && obelus resume j.jsonl",
    expect = { code = 0, out = '"a": 7' } },
  { name = "a FIFO as --input @FILE (a writer behind it) is read", item = 11,
    files = { ["m.lua"] = TOOLS, ["in.json"] = '{"x":7}',
              ["p.json"] = '[{"_tool":"echo","value":"' .. DAG .. 'input.x","_outputPath":"' .. DAG .. 'state.a"}]' },
    setup = "mkfifo f.json", secs = 15,
    run = feed("in.json", "f.json") .. "obelus run p.json --tools m.lua --input @f.json",
    expect = { code = 0, out = '"a": 7' } },
  { name = "a FIFO as --tools (no writer) is refused, not waited on", item = 11,
    files = { ["p.json"] = '[{"_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.a"}]' },
    setup = "mkfifo t.lua", secs = 15,
    run = "obelus run p.json --tools t.lua",
    expect = { code = 2, err = "t.lua: is a FIFO (named pipe), not a regular file" } },
  { name = "a FIFO in a --tools folder is refused by run and by the MCP server", item = 11,
    files = { ["tools/m.lua"] = TOOLS, ["p.json"] = '[{"_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.a"}]' },
    setup = "mkfifo tools/f.lua", secs = 15,
    run = "obelus run p.json --tools tools; a=$?; obelus mcp --tools tools </dev/null; b=$?; [ $a = 2 ] && exit $b; exit 9",
    expect = { code = 2, err = "tools/f.lua: is a FIFO" } },
  { name = "the MCP server reads its requests from a FIFO", item = 11,
    files = { ["m.lua"] = TOOLS, ["req.txt"] = '{"jsonrpc":"2.0","id":1,"method":"ping"}\n' },
    setup = "mkfifo in.fifo", secs = 15,
    run = feed("req.txt", "in.fifo") .. "obelus mcp --tools m.lua < in.fifo",
    expect = { code = 0, out = '{"jsonrpc":"2.0","id":1,"result":{}}' } },
  { name = "the Lua module's engine:check refuses a FIFO as _delegate", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = '{"plan":[{"_delegate":"f.json","_outputPath":"' .. DAG .. 'state.a"}]}' },
    setup = "mkfifo f.json", secs = 15,
    run = LUA:format([[
local ok, problems = obelus.engine { tools = { "m.lua" } }:check("p.json")
io.write(tostring(ok), " ", table.concat(problems or {}, "; "), "\n")]]),
    expect = { code = 0, out = "is a FIFO" } },

  -- "the MCP server reads a line in O(n²) with no bound (40 MB: 6.8 s; 200 MB: over 40 s),
  -- answers {"jsonrpc":"2.0","id":1} with nothing and an unknown notification with an error"
  { name = "obelus mcp: a 40 MB line is answered -32600 (over 16 MB) and the next is served", item = 11,
    files = { ["m.lua"] = TOOLS }, secs = 20,
    run = [[{ printf '{"jsonrpc":"2.0","id":1,"method":"ping","x":"'; ]] .. MB40 ..
          [[; printf '"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n'; } | obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = answers(out)
      if #got ~= 2 then return false, ("%d lines: %s"):format(#got, out:sub(1, 300)) end
      if not (got[1].error and got[1].error.code == -32600 and got[1].id == cjson.null) then
        return false, "the long line's answer: " .. out:sub(1, 300)
      end
      if got[2].id ~= 2 then return false, "the next request was not answered" end
      return true
    end } },
  { name = "obelus mcp --max-line 50000000: a 40 MB line is answered", item = 11,
    files = { ["m.lua"] = TOOLS }, secs = 20,
    run = [[{ printf '{"jsonrpc":"2.0","id":1,"method":"ping","x":"'; ]] .. MB40 ..
          [[; printf '"}\n'; } | obelus mcp --tools m.lua --max-line 50000000]],
    expect = { code = 0, out = '{"jsonrpc":"2.0","id":1,"result":{}}' } },
  { name = 'obelus mcp: {"jsonrpc":"2.0","id":1} is answered -32600 with its id', item = 11,
    files = { ["m.lua"] = TOOLS },
    run = [[printf '%s\n' '{"jsonrpc":"2.0","id":1}' | obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = answers(out)
      if not (#got == 1 and got[1].id == 1 and got[1].error and got[1].error.code == -32600) then
        return false, "answered: " .. out:sub(1, 300)
      end
      return true
    end } },
  { name = "obelus mcp: an unknown notification is not answered", item = 11,
    files = { ["m.lua"] = TOOLS },
    run = [[printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/hostile"}' '{"jsonrpc":"2.0","method":"no/such/method","params":{}}' ]] ..
          [['{"jsonrpc":"2.0","id":2,"method":"ping"}' | obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = answers(out)
      if not (#got == 1 and got[1].id == 2) then return false, "answered: " .. out:sub(1, 300) end
      return true
    end } },
  { name = "obelus mcp: invalid JSON is answered -32700 with id null; the server goes on", item = 11,
    files = { ["m.lua"] = TOOLS },
    run = [[printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"ping"' 'not json at all' '{"jsonrpc":"2.0","id":2,"method":"ping"}' | ]] ..
          [[obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = answers(out)
      if #got ~= 3 then return false, ("%d answers: %s"):format(#got, out:sub(1, 300)) end
      for i = 1, 2 do
        if not (got[i].error and got[i].error.code == -32700 and got[i].id == cjson.null) then
          return false, "answer " .. i .. ": " .. out:sub(1, 300)
        end
      end
      if got[3].id ~= 2 then return false, "the ping was not answered" end
      return true
    end } },
  { name = "obelus mcp: a NUL and a byte that is not UTF-8 in a line are parse errors; the server goes on", item = 11,
    files = { ["m.lua"] = TOOLS },
    run = [[printf '{"jsonrpc":"2.0","id":1,"method":"ping","x":"a\0b"}\n{"jsonrpc":"2.0","id":3,"method":"ping","x":"\377"}\n]] ..
          [[{"jsonrpc":"2.0","id":2,"method":"ping"}\n' | obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = answers(out)
      if #got ~= 3 or got[3].id ~= 2 then return false, out:sub(1, 300) end
      for i = 1, 2 do
        if not (got[i].error and got[i].error.code == -32700) then return false, "answer " .. i .. ": " .. out:sub(1, 300) end
      end
      return true
    end } },
  { name = "obelus mcp: a batch after initialize at 2025-03-26 is answered with an array", item = 11,
    files = { ["m.lua"] = TOOLS },
    run = [[printf '%s\n' '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26",]] ..
          [["capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}' '{"jsonrpc":"2.0","method":"notifications/initialized"}' ]] ..
          [['[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]' ]] ..
          [['{"jsonrpc":"2.0","id":3,"method":"ping"}' | obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = answers(out)
      local batch, three
      for _, v in ipairs(got) do
        if v[1] ~= nil then batch = v end
        if v.id == 3 then three = v end
      end
      if not three then return false, "the request after the batch was not answered: " .. out:sub(1, 400) end
      if not batch then return false, "the batch was not answered with an array (MCP 2025-03-26 requires batches): " .. out:sub(1, 400) end
      local ids = {}
      for _, v in ipairs(batch) do ids[#ids + 1] = v.id end
      table.sort(ids)
      if #ids ~= 2 or ids[1] ~= 1 or ids[2] ~= 2 then return false, "the batch's answers: " .. enc(batch) end
      return true
    end } },
  { name = "obelus mcp: an empty batch [] is one -32600 error", item = 11,
    files = { ["m.lua"] = TOOLS },
    run = [[printf '%s\n' '[]' '{"jsonrpc":"2.0","id":2,"method":"ping"}' | obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = answers(out)
      if not (#got == 2 and got[1].error and got[1].error.code == -32600 and got[2].id == 2) then return false, out:sub(1, 300) end
      return true
    end } },
  { name = "obelus mcp: 100,000 nested arrays are an error, not a crash", item = 11,
    files = { ["m.lua"] = TOOLS },
    run = [[{ head -c 100000 /dev/zero | tr '\0' '['; printf '\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n'; } | obelus mcp --tools m.lua]],
    expect = { code = 0, out = function(out)
      local got = answers(out)
      if not (#got == 2 and got[1].error and got[1].id == cjson.null and got[2].id == 2) then return false, out:sub(1, 300) end
      return true
    end } },

  -- "the output's key order depends on the order parallel writes landed (41 of 200 resumed
  -- runs not byte-identical though equal as JSON)"
  { name = "a run's output and its finished journal's resume are byte-identical, in the plan's key order", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = ORDER_PLAN },
    setup = "touch mk",
    run = [[obelus run p.json --tools m.lua --journal j.jsonl > out1 && ]] ..
          [[obelus resume j.jsonl > out2 && cmp out1 out2 && cat out2]],
    expect = { code = 0, out = plan_order(ORDER_KEYS) } },
  { name = "a killed run's resume prints the uninterrupted run's output byte for byte", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = ORDER_PLAN },
    run = [[obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1 & pid=$!
i=0; while [ $i -lt 100 ] && ! { [ -s mk ] && grep -q '"settled","id":"k1"' j.jsonl 2>/dev/null; }; do sleep 0.1; i=$((i+1)); done
kill -9 $pid; wait $pid 2>/dev/null
obelus resume j.jsonl > out2 2>/dev/null && obelus run p.json --tools m.lua > out3 && cmp out2 out3 && cat out2]],
    expect = { code = 0, out = plan_order(ORDER_KEYS) } },
  { name = "--threads 2: a run's output and its resume are byte-identical to one engine's", item = 11,
    files = { ["m.lua"] = TOOLS,
              ["p.json"] = enc { instances = { "i1", "i2", "i3", "i4" }, plan = {
                { _tool = "work", _id = "k1", n = 1, ms = 120, _outputPath = DAG .. "state.k1" },
                { _tool = "work", _id = "k2", n = 2, ms = 80, _outputPath = DAG .. "state.k2" },
                { _tool = "work", _id = "k3", n = 3, ms = 40, _outputPath = DAG .. "state.k3" },
                { _tool = "work", _id = "k4", n = 4, ms = 0, _outputPath = DAG .. "state.k4" } } } },
    run = [[obelus run p.json --tools m.lua --threads 2 --journal j.jsonl > out1 && obelus resume j.jsonl > out2 && ]] ..
          [[obelus run p.json --tools m.lua --threads 1 > out3 && cmp out1 out2 && cmp out1 out3 && cat out1]],
    expect = { code = 0, out = plan_order { "i1", "k1", "k2", "k3", "k4", "i2", "i3", "i4" } } },
  { name = "a delegated plan's output keeps its plan's key order through a killed run's resume", item = 11,
    files = { ["m.lua"] = TOOLS, ["s.json"] = ORDER_PLAN,
              ["p.json"] = enc { plan = { { _delegate = "s.json", _id = "d", _outputPath = DAG .. "state.d" } },
                                 output = { d = DAG .. "state.d" } } },
    run = [[obelus run p.json --tools m.lua --journal j.jsonl >/dev/null 2>&1 & pid=$!
i=0; while [ $i -lt 100 ] && ! [ -s mk ]; do sleep 0.1; i=$((i+1)); done; sleep 0.5
kill -9 $pid; wait $pid 2>/dev/null
obelus resume j.jsonl > out2 2>/dev/null && obelus run p.json --tools m.lua > out3 && cmp out2 out3 && cat out2]],
    expect = { code = 0, out = plan_order(ORDER_KEYS) } },
  { name = "the Lua module's run:output() lists keys in the plan's order", item = 11,
    files = { ["m.lua"] = TOOLS, ["p.json"] = ORDER_PLAN },
    setup = "touch mk",
    run = LUA:format([[
local run = obelus.engine { tools = { "m.lua" } }:run("p.json", {})
run:wait()
io.write(obelus.encode(run:output()), "\n")]]),
    expect = { code = 0, out = plan_order(ORDER_KEYS) } },
}

return cases
