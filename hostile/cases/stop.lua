-- hostile/cases/stop.lua -- STOP: tools nothing can stop, and children that outlive their
-- call (issue 26, items 3 and 10, and "What to build": Stopping, Children).
--
-- The attacks: a tool that loops forever and fights the slice watchdog (catches the stop
-- with pcall, xpcall or a finaliser; clears or replaces the hook with debug.sethook; hides
-- the loop in coroutines it made or in a libuv callback; spins inside the C of string
-- functions, Lua patterns and cjson); a `_timeout` that has to fire in such a tool; SIGINT
-- and SIGTERM sent to run, resume, loop, check, mcp and worker while a tool (or a planner,
-- an approver, a tool file loading) never yields or blocks in C (once, twice, by
-- timeout(1), under --threads 2, in a delegated plan); the processes a
-- tool starts with obelus.uv.spawn, which must die with the attempt that started them (a
-- timeout, a cancel, a signal, the end of the run), however many there are, whether they
-- ignore SIGTERM or leave a grandchild behind in their process group.
--
-- How a case knows when to signal: the tool writes the file `started` once it runs; the
-- case's command waits for it (at most 15 s), then sends the signal(s), each further one
-- from a process of its own (the same sender within a second is the same request) and only
-- once the one before was taken (no longer pending in /proc/PID/status). How a child that
-- outlived its call is seen: it writes `late` (or `late.PID`) after a delay, or once the
-- case opens a FIFO gate; the command waits that long after obelus exits and the check
-- requires the file to be absent. A tool blocked in C (os.execute) writes its sleep's pid to
-- blocker.pid, and the command kills that pid itself at the end.
local cjson = require "cjson"
local slurp = require("support").slurp

local HERE = debug.getinfo(1, "S").source:sub(2):match("(.*)/") or "."
local ROOT = io.popen("cd '" .. HERE .. "/../..' && pwd"):read("l") -- absolute: cases run in folders of their own

-- the tools every case loads (t.lua)
local TOOLS = [=[
local obelus = require "obelus"

local function mark(call)
  if call.started then
    local f = assert(io.open(call.started, "w"))
    f:write("started\n")
    f:close()
  end
end

local function spin_forever() while true do pcall(function() while true do end end) end end

-- os.execute of a sleep whose pid is kept in blocker.pid (the case kills it at its end)
local function block(seconds)
  os.execute("sh -c 'echo $$ > blocker.pid; exec sleep " .. seconds .. "'")
end

local function tool(name, run) return { name = name, description = name, run = run } end

return {
  tool("bare_spin", function(call) mark(call); while true do end end),
  tool("pcall_spin", function(call) mark(call); spin_forever() end),
  tool("sethook_spin", function(call) mark(call); while true do debug.sethook() end end),
  tool("sethook_pcall_spin", function(call)
    mark(call)
    while true do pcall(function() while true do debug.sethook() end end) end
  end),
  tool("sethook_own", function(call)
    mark(call)
    -- a hook of its own, on itself and through the thread argument, then spin
    pcall(debug.sethook, function() end, "", 100000000)
    pcall(debug.sethook, coroutine.running(), function() end, "l")
    pcall(debug.sethook, coroutine.running())
    spin_forever()
  end),
  tool("gethook", function()
    local ok, h, mask, count = pcall(debug.gethook)
    local ok2, h2 = pcall(debug.gethook, coroutine.running())
    return { seen = (ok and (h ~= nil or (mask or "") ~= "" or (count or 0) ~= 0)) or (ok2 and h2 ~= nil) or false,
             what = tostring(h) .. " " .. tostring(mask) .. " " .. tostring(count) }
  end),
  tool("co_create_spin", function(call)
    mark(call)
    while true do
      coroutine.resume(coroutine.create(function() spin_forever() end))
    end
  end),
  tool("co_wrap_spin", function(call)
    mark(call)
    while true do pcall(coroutine.wrap(function() while true do end end)) end
  end),
  tool("co_deep_spin", function(call)
    mark(call)
    local function nest(n)
      if n == 0 then spin_forever() end
      while true do coroutine.resume(coroutine.create(function() pcall(nest, n - 1) end)) end
    end
    nest(6)
  end),
  tool("co_switch_spin", function(call)
    mark(call)
    -- yields all the time, but only to itself: obelus never gets the coroutine back
    local gen = coroutine.wrap(function() while true do for _ = 1, 1000 do end coroutine.yield(1) end end)
    while true do pcall(gen) end
  end),
  tool("xpcall_spin", function(call)
    mark(call)
    while true do
      xpcall(function() while true do end end, function() while true do end end)
    end
  end),
  tool("gc_spin", function(call)
    mark(call)
    -- finalisers that spin: run by the collector, where an error is only a warning, and
    -- again when the state is closed
    for _ = 1, 10 do setmetatable({}, { __gc = function() while true do end end }) end
    while true do pcall(collectgarbage) end
  end),
  tool("errobj_spin", function(call)
    mark(call)
    local function spin() while true do end end
    error(setmetatable({}, { __tostring = spin, __pairs = spin, __index = spin, __len = spin,
                             __name = "spinner" }))
  end),
  tool("bare_yield", function(call)
    mark(call)
    while true do coroutine.yield() end
  end),
  tool("gsub_spin", function(call)
    mark(call)
    local s = string.rep("a", 100000)
    while true do pcall(string.gsub, s, "a", function() while true do end end) end
  end),
  tool("concat_spin", function(call)
    mark(call)
    local t = {}
    for i = 1, 100000 do t[i] = "xy" end
    while true do pcall(function() while true do local s = table.concat(t) s = s:upper() end end) end
  end),
  tool("rep_spin", function(call)
    mark(call)
    while true do pcall(function() while true do local s = string.rep("x", 1000000) s = s:reverse() end end) end
  end),
  tool("timer_spin", function(call)
    mark(call)
    -- the spin is in a libuv callback of the attempt, on the loop itself, not in the tool
    local t = obelus.uv.new_timer()
    t:start(0, 0, function() while true do pcall(function() while true do end end) end end)
    obelus.sleep(60000)
  end),
  tool("match_bomb", function(call)
    mark(call)
    -- a Lua pattern that backtracks for ages inside one C function (str_find_aux)
    return (string.rep("a", 30)):match(string.rep("a*", 30) .. "b")
  end),
  tool("cjson_big", function(call)
    local cjson = require(call.module or "cjson")
    local s = string.rep("x", 1000000)
    local t = {}
    for i = 1, call.n or 3000 do t[i] = s end -- one string, 3,000 times: 3 GB of JSON
    local text, err = cjson.encode(t)
    if not text then error(err, 0) end
    return #text
  end),
  tool("cjson_dag", function()
    local cjson = require "cjson"
    local x = { 1, 2 }
    for _ = 1, 31 do x = { x, x } end -- a small table that prints as 2^32 numbers
    return #cjson.encode(x)
  end),
  tool("blocked", function(call)
    mark(call)
    block(call.seconds)
    return "woke"
  end),
  tool("spin_once", function(call, ctx)
    mark(call)
    if ctx.attempt == 1 then spin_forever() end
    return "resumed"
  end),
  tool("spawner", function(call, ctx)
    if call.first_only and ctx.attempt > 1 then return "again" end
    local opts = { args = { "-c", (call.cmd:gsub("ATTEMPT", tostring(ctx.attempt))) } }
    if call.detached ~= nil then opts.detached = call.detached end
    for _ = 1, call.n or 1 do
      local h, err = obelus.uv.spawn("sh", opts, function() end)
      assert(h, err)
    end
    mark(call)
    if call.fail then error("failed after spawning", 0) end
    if call.spin then spin_forever() end
    if call.block then block(call.block) end
    if call.wait then obelus.sleep(call.wait) end
    return "spawned"
  end),
  tool("ok", function(call) obelus.sleep(call.ms or 0) return call.value end),
  { name = "think", description = "latent: the handler of latent.lua runs it" },
}
]=]

local LATENT = [[
local obelus = require "obelus"
obelus.set_latent(function(call)
  local f = io.open("started", "w") f:write("x") f:close()
  while true do pcall(function() while true do end end) end
end)
]]

-- the command's helpers ---------------------------------------------------------------
local WAIT_STARTED = [[i=0; while [ ! -e started ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done]]
-- until the signal sent to $p has been taken (is no longer pending)
local TAKEN = [[i=0; while grep -q 'ShdPnd:.*[1-9a-f]' /proc/$p/status 2>/dev/null && [ $i -lt 300 ]; do sleep 0.01; i=$((i+1)); done]]
local KILL_BLOCKER = [[[ -s blocker.pid ] && kill $(cat blocker.pid) 2>/dev/null]]

-- runs cmd in the background; once `started` exists sends each of sigs (each from a
-- process of its own, once the one before was taken); then `after`; exits with cmd's status
local function signalled(cmd, sigs, after)
  local s = { cmd .. " & p=$!", WAIT_STARTED }
  for i, sig in ipairs(sigs) do
    if i > 1 then s[#s + 1] = TAKEN end
    s[#s + 1] = "sh -c 'kill -" .. sig .. " $0' $p"
  end
  s[#s + 1] = "wait $p; rc=$?"
  s[#s + 1] = KILL_BLOCKER
  if after then s[#s + 1] = after end
  s[#s + 1] = "exit $rc"
  return table.concat(s, "\n")
end

-- runs cmd, waits `secs` (a child that outlived obelus writes its file meanwhile), exits
-- with cmd's status
local function then_wait(cmd, secs)
  return cmd .. "; rc=$?; " .. KILL_BLOCKER .. "; sleep " .. secs .. "; exit $rc"
end


-- the check that no child wrote its marker (late, late1..., late.PID)
local function no_late(dir)
  local p = io.popen("ls " .. dir .. " | grep '^late' | head -5")
  local found = p:read("a")
  p:close()
  if found ~= "" then
    return false, "a child outlived its call and wrote: " .. found:gsub("\n", " ")
  end
  return true
end

-- the check that j.jsonl (j0.jsonl: its copy before a resume) is a whole journal: every
-- line JSON, the plan first, no settled record for the calls named in unsettled (they were
-- abandoned), and `obelus log` read it (log.rc)
local function journal_ok(unsettled)
  return function(dir)
    local text = slurp(dir .. "/j0.jsonl") or slurp(dir .. "/j.jsonl") -- j0: as the signal left it, before a resume
    if not text then return false, "no journal" end
    text = text:gsub("\0+$", "") -- a killed run's file ends in zero bytes
    local first, n = nil, 0
    for line in text:gmatch("[^\n]+") do
      if line:find("%S") then
        local ok, rec = pcall(cjson.decode, line)
        if not ok then return false, "journal line " .. (n + 1) .. " is not JSON: " .. line:sub(1, 120) end
        n = n + 1
        first = first or rec
        for _, id in ipairs(unsettled or {}) do
          if rec.journal == "settled" and rec.id == id then
            return false, "the journal settles " .. id .. ", which was abandoned"
          end
        end
      end
    end
    if not first or first.type ~= "plan" then return false, "the journal does not begin with its plan" end
    local rc = slurp(dir .. "/log.rc")
    if rc and not rc:match("^0") then
      return false, "obelus log refuses the journal: " .. (slurp(dir .. "/log.err") or "")
    end
    return true
  end
end

-- after a signalled run: `obelus log` of the journal
local LOG = "obelus log j.jsonl >/dev/null 2>log.err; echo $? >log.rc"

local function both(a, b)
  return function(dir, r)
    local ok, why = a(dir, r)
    if not ok then return ok, why end
    return b(dir, r)
  end
end

-- the resume that follows a signal: resume.rc 0, "resumed" out, the re-run reported
local function resumed_ok(dir)
  local rc, out, err = slurp(dir .. "/resume.rc") or "", slurp(dir .. "/resume.out") or "", slurp(dir .. "/resume.err") or ""
  if not rc:match("^0") then return false, "resume exited " .. rc:gsub("\n", "") .. ": " .. err:sub(1, 300) end
  if not out:find('"resumed"', 1, true) then return false, "resume printed " .. out:sub(1, 200) end
  if not err:find("call spin (spin_once) had started (attempt 1) and did not settle: it runs again", 1, true) then
    return false, "resume did not report the re-run: " .. err:sub(1, 300)
  end
  return true
end
local RESUME = "cp j.jsonl j0.jsonl; obelus resume j.jsonl >resume.out 2>resume.err; echo $? >resume.rc"

-- a plan file: calls (JSON text of the list) and output (JSON text)
local function plan(calls, output)
  return '{"plan": [' .. calls .. ']' .. (output and (', "output": ' .. output) or "") .. '}'
end

-- one spinning call "spin" (tool), then "ok" writing "after": the run goes on
local function spin_then_after(tool, extra)
  return plan('{"_id": "spin", "_tool": "' .. tool .. '", "started": "started", "_outputPath": "†state.a"' ..
              (extra or "") .. '},\n {"_id": "ok", "_tool": "ok", "value": "after", "_outputPath": "†state.b"}',
              '"†state.b"')
end

local function files(t)
  t["t.lua"] = TOOLS
  return t
end

local cases = {}
local function add(c) cases[#cases + 1] = c end

-- the slice watchdog: "while true do pcall(function() while true do end end) end and while
-- true do debug.sethook() end run forever even with --max-slice 1000" --------------------
local function slice_case(name, tool, extra)
  add { name = name, item = 3,
        files = files { ["p.json"] = spin_then_after(tool) },
        run = "obelus run p.json --tools t.lua --max-slice 500" .. (extra or ""),
        expect = { code = 1, out = '"after"',
                   err = "call spin (" .. tool .. ") failed (runtime): the tool ran 500 ms without yielding" } }
end

slice_case("while true do end under --max-slice", "bare_spin")
slice_case("a pcall that catches the stop, in a loop, under --max-slice", "pcall_spin")
add { name = "while true do debug.sethook() end: the call fails, the run goes on", item = 3,
      files = files { ["p.json"] = spin_then_after("sethook_spin") },
      run = "obelus run p.json --tools t.lua --max-slice 500",
      expect = { code = 1, out = '"after"', err = "call spin (sethook_spin) failed (runtime)" } }
slice_case("debug.sethook() in a loop under pcall (the refusal caught)", "sethook_pcall_spin")
slice_case("a hook of its own set on itself (debug.sethook with a thread), then a spin", "sethook_own")
add { name = "debug.gethook does not show the engine's hook to a tool", item = 3,
      files = files { ["p.json"] = plan('{"_tool": "gethook", "_outputPath": "†state.h"}', '"†state.h"') },
      run = "obelus run p.json --tools t.lua",
      expect = { code = 0, out = function(out)
        local ok, v = pcall(cjson.decode, out)
        if not ok or type(v) ~= "table" then return false, "output is not the tool's object: " .. out end
        if v.seen ~= false then return false, "debug.gethook shows a hook: " .. tostring(v.what) end
        return true
      end } }
slice_case("a spin inside coroutine.create / resume the tool made", "co_create_spin")
slice_case("a spin inside coroutine.wrap under pcall", "co_wrap_spin")
slice_case("a spin six coroutines deep, each level under pcall", "co_deep_spin")
slice_case("yielding all the time to a coroutine of its own, never to obelus", "co_switch_spin")
slice_case("xpcall whose message handler spins too", "xpcall_spin")
-- Lua runs finalisers with hooks off, and cannot stop C: a stop that does not take ends
-- the process, naming the call (exit 5), its journal as a kill leaves it, never a hang
local function stuck_case(name, tool, extra, says)
  add { name = name, item = 3, secs = 12,
        files = files { ["p.json"] = spin_then_after(tool, extra) },
        run = "obelus run p.json --tools t.lua --journal j.jsonl --max-slice 500; rc=$?; " .. LOG .. "; exit $rc",
        expect = { code = 5, err = { "call spin (" .. tool .. ") " .. says, "did not stop",
                                     "where Lua cannot stop it" },
                   check = journal_ok { "spin" } } }
end
stuck_case("finalisers (__gc) that spin, and a collect in a pcall loop: the process ends, naming the call",
           "gc_spin", nil, "ran past --max-slice")
add { name = "an error object whose __tostring/__pairs/__index spin", item = 3,
      files = files { ["p.json"] = spin_then_after("errobj_spin") },
      run = "obelus run p.json --tools t.lua --max-slice 500",
      expect = { code = 1, out = '"after"', err = "call spin (errobj_spin) failed" } }
add { name = "coroutine.yield() to the engine in an endless loop, with _timeout", item = 3,
      files = files { ["p.json"] = spin_then_after("bare_yield", ', "_timeout": 500') },
      run = "obelus run p.json --tools t.lua --max-slice 500",
      expect = { code = 1, out = '"after"', err = "call spin (bare_yield) failed" } }
slice_case("string.gsub whose replacement function spins, in a pcall loop", "gsub_spin")
slice_case("table.concat of 100,000 strings over and over", "concat_spin")
slice_case("string.rep of a megabyte over and over", "rep_spin")
add { name = "a luv timer callback of the attempt spins on the loop, under --max-slice", item = 3,
      files = files { ["p.json"] = spin_then_after("timer_spin") },
      run = "obelus run p.json --tools t.lua --max-slice 500",
      expect = { code = 1, out = '"after"', err = "call spin (timer_spin) failed" } }
stuck_case("a Lua pattern that backtracks for ages inside one C call, under --max-slice: the process ends",
           "match_bomb", nil, "ran past --max-slice")
stuck_case("a Lua pattern that backtracks for ages inside one C call, past its _timeout: the process ends",
           "match_bomb", ', "_timeout": 300', "passed its _timeout")
add { name = "cjson.encode of 3 GB under --max-memory 64: the memory account stops it", item = 3,
      files = files { ["p.json"] = plan('{"_id": "big", "_tool": "cjson_big", "_outputPath": "†state.a"},\n' ..
                                        '{"_tool": "ok", "value": "after", "_outputPath": "†state.b"}', '"†state.b"') },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      expect = { code = 1, out = '"after"',
                 err = { "call big (cjson_big) failed", "memory limit of 64 MB reached" } } }
add { name = "cjson.encode of 3 GB with no --max-memory (the default from ulimit -v)", item = 3,
      files = files { ["p.json"] = plan('{"_id": "big", "_tool": "cjson_big", "_outputPath": "†state.a"},\n' ..
                                        '{"_tool": "ok", "value": "after", "_outputPath": "†state.b"}', '"†state.b"') },
      run = "obelus run p.json --tools t.lua",
      expect = { code = 1, out = '"after"', err = { "call big (cjson_big) failed", "MB reached" } } }
add { name = "cjson.encode of a shared-subtable DAG that prints as 2^32 numbers, --max-memory 64", item = 3,
      files = files { ["p.json"] = plan('{"_id": "dag", "_tool": "cjson_dag", "_outputPath": "†state.a"}') },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      expect = { code = 1, err = { "call dag (cjson_dag) failed", "memory limit of 64 MB reached" } } }
add { name = "--max-slice 0 (a careless 'no limit') is refused", item = 3,
      files = files { ["p.json"] = spin_then_after("pcall_spin") },
      run = "obelus run p.json --tools t.lua --max-slice 0",
      expect = { code = 2, err = "--max-slice" } }
add { name = "a spin in a delegated plan, --max-slice: the delegating call fails", item = 3,
      files = files { ["p.json"] = plan('{"_id": "d", "_delegate": "child.json", "_outputPath": "†state.a"},\n' ..
                                        '{"_tool": "ok", "value": "after", "_outputPath": "†state.b"}', '"†state.b"'),
                      ["child.json"] = plan('{"_id": "spin", "_tool": "pcall_spin", "_outputPath": "†state.x"}', '"†state.x"') },
      run = "obelus run p.json --tools t.lua --max-slice 500",
      expect = { code = 1, out = '"after"', err = { "call d", "the tool ran 500 ms without yielding" } } }
add { name = "spins in every instance under --threads 2, --max-slice", item = 3,
      files = files { ["p.json"] = '{"instances": ["a", "b", "c", "d"], "plan": [' ..
                        '{"_id": "spin", "_tool": "co_wrap_spin", "_outputPath": "†state.x"}]}' },
      run = "obelus run p.json --tools t.lua --threads 2 --max-slice 500",
      expect = { code = 1, err = { "call spin@a (co_wrap_spin) failed (runtime): the tool ran 500 ms without yielding",
                                   "call spin@d (co_wrap_spin) failed (runtime): the tool ran 500 ms without yielding" } } }

-- _timeout: "`_timeout` cannot fire while a tool does not yield" ---------------------------
add { name = "_timeout in a tool that never yields (pcall loop)", item = 3,
      files = files { ["p.json"] = spin_then_after("pcall_spin", ', "_timeout": 300') },
      run = "obelus run p.json --tools t.lua --max-slice 600000",
      expect = { code = 1, out = '"after"', err = "call spin (pcall_spin) failed (runtime): timeout after 300 ms" } }
add { name = "_timeout in a spinning tool with || routes the timeout error", item = 3,
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "sethook_pcall_spin", "_timeout": 300, ' ..
                                        '"_outputPath": "†state.a || †state.failed"}', '"†state.failed"') },
      run = "obelus run p.json --tools t.lua --max-slice 600000",
      expect = { code = 0, out = "timeout after 300 ms" } }
add { name = "_timeout in a spinning tool is retried as a timeout is", item = 3,
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "co_create_spin", "_timeout": 200, ' ..
                                        '"_retry": {"attempts": 2, "delay_ms": 1}, "_outputPath": "†state.a"}') },
      run = "obelus run p.json --tools t.lua --max-slice 600000",
      expect = { code = 1, err = { "attempt 1 of 2 failed: timeout after 200 ms",
                                   "call spin (co_create_spin) failed (runtime): timeout after 200 ms" } } }
add { name = "--call-timeout in a spin inside coroutine.wrap", item = 3,
      files = files { ["p.json"] = spin_then_after("co_wrap_spin") },
      run = "obelus run p.json --tools t.lua --call-timeout 300 --max-slice 600000",
      expect = { code = 1, err = "call spin (co_wrap_spin) failed (runtime): timeout after 300 ms" } }
add { name = "_timeout of a spinning call in a delegated plan", item = 3,
      files = files { ["p.json"] = plan('{"_id": "d", "_delegate": "child.json", "_outputPath": "†state.a"},\n' ..
                                        '{"_tool": "ok", "value": "after", "_outputPath": "†state.b"}', '"†state.b"'),
                      ["child.json"] = plan('{"_id": "spin", "_tool": "pcall_spin", "_timeout": 300, "_outputPath": "†state.x"}',
                                            '"†state.x"') },
      run = "obelus run p.json --tools t.lua --max-slice 600000",
      expect = { code = 1, out = '"after"', err = { "call d", "timeout after 300 ms" } } }
add { name = "_timeout of a tool blocked in os.execute: the late value is not taken", item = 3,
      files = files { ["p.json"] = plan('{"_id": "b", "_tool": "blocked", "seconds": 2, "_timeout": 300, ' ..
                                        '"_outputPath": "†state.a || †state.failed"}', '"†state.failed"') },
      run = "obelus run p.json --tools t.lua; rc=$?; " .. KILL_BLOCKER .. "; exit $rc",
      expect = { code = 0, out = "timeout after 300 ms",
                 check = function(_, r)
                   if r.out:find("woke", 1, true) then return false, "the value of the attempt that timed out was written" end
                   return true
                 end } }
add { name = "_timeout of a latent handler that never yields", item = 3,
      files = files { ["p.json"] = plan('{"_id": "th", "_tool": "think", "_timeout": 300, "_outputPath": "†state.a"}'),
                      ["latent.lua"] = LATENT },
      run = "obelus run p.json --tools t.lua --latent latent.lua --max-slice 600000",
      expect = { code = 1, err = "call th (think) failed (runtime): timeout after 300 ms" } }
add { name = "the Lua module: call_timeout_ms in a tool that never yields", item = 3,
      files = files { ["p.json"] = spin_then_after("pcall_spin"),
                      ["m.lua"] = ([[
package.cpath = "%s/lib/?.so;" .. package.cpath
package.path = "%s/lua/?.lua;%s/lua/?/init.lua;" .. package.path
local obelus = require "obelus"
local engine = obelus.engine { tools = { "t.lua" } }
local run = engine:run("p.json", { call_timeout_ms = 300 })
local status = run:wait()
local said = obelus.encode(run:messages())
print(status, said:find("timeout after 300 ms", 1, true) and "timed out" or said:sub(1, 300))
engine:close()
]]):format(ROOT, ROOT, ROOT) },
      run = "lua5.4 m.lua",
      expect = { code = 0, out = "1\ttimed out" } }

-- SIGINT and SIGTERM: "SIGTERM and SIGINT are ignored (only SIGKILL works)" -----------
local RUN_J = "obelus run p.json --tools t.lua --journal j.jsonl"

add { name = "SIGTERM to a run whose tool spins: 143, journal whole, resume runs it again", item = 3,
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "spin_once", "started": "started", "_outputPath": "†state.a"}',
                                        '"†state.a"') },
      run = signalled(RUN_J, { "TERM" }, LOG .. "; " .. RESUME),
      expect = { code = 143, err = "obelus run: interrupted by SIGTERM; running calls abandoned",
                 check = both(journal_ok { "spin" }, resumed_ok) } }
add { name = "SIGINT to a run whose tool spins: 130, journal whole, resume runs it again", item = 3,
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "spin_once", "started": "started", "_outputPath": "†state.a"}',
                                        '"†state.a"') },
      run = signalled(RUN_J, { "INT" }, LOG .. "; " .. RESUME),
      expect = { code = 130, err = "obelus run: interrupted by SIGINT; running calls abandoned",
                 check = both(journal_ok { "spin" }, resumed_ok) } }
add { name = "SIGTERM to a tool clearing hooks in a loop, six coroutines deep", item = 3,
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "co_deep_spin", "started": "started", "_outputPath": "†state.a"},' ..
                                        '{"_id": "h", "_tool": "sethook_pcall_spin", "_outputPath": "†state.b"}') },
      run = signalled(RUN_J, { "TERM" }, LOG),
      expect = { code = 143, err = "interrupted by SIGTERM", check = journal_ok { "spin", "h" } } }
add { name = "a second SIGTERM while a tool blocks in C (os.execute) exits at once", item = 3, secs = 15,
      files = files { ["p.json"] = plan('{"_id": "b", "_tool": "blocked", "seconds": 30, "started": "started", "_outputPath": "†state.a"}',
                                        '"†state.a"') },
      run = signalled(RUN_J, { "TERM", "TERM" }, LOG),
      expect = { code = 143, out = function(out) return out == "", "stdout: " .. out end,
                 check = journal_ok { "b" } } }
add { name = "a second SIGINT while a tool blocks in C exits at once", item = 3, secs = 15,
      files = files { ["p.json"] = plan('{"_id": "b", "_tool": "blocked", "seconds": 30, "started": "started", "_outputPath": "†state.a"}') },
      run = signalled("obelus run p.json --tools t.lua", { "INT", "INT" }),
      expect = { code = 130 } }
add { name = "one SIGTERM while a tool blocks in C: cancelled when it returns, its value dropped", item = 3,
      files = files { ["p.json"] = plan('{"_id": "b", "_tool": "blocked", "seconds": 2, "started": "started", "_outputPath": "†state.a"}',
                                        '"†state.a"') },
      run = signalled(RUN_J, { "TERM" }, LOG),
      expect = { code = 143, err = "obelus run: interrupted by SIGTERM; running calls abandoned",
                 out = function(out) return out == "", "stdout: " .. out end, check = journal_ok { "b" } } }
add { name = "one SIGTERM to a Lua pattern backtracking in C", item = 3, secs = 12,
      files = files { ["p.json"] = plan('{"_id": "m", "_tool": "match_bomb", "started": "started", "_outputPath": "†state.a"}') },
      run = signalled(RUN_J, { "TERM" }),
      expect = { code = 143, err = "interrupted by SIGTERM" } }
add { name = "two SIGTERMs to a Lua pattern backtracking in C: exits at once", item = 3, secs = 12,
      files = files { ["p.json"] = plan('{"_id": "m", "_tool": "match_bomb", "started": "started", "_outputPath": "†state.a"}') },
      run = signalled(RUN_J, { "TERM", "TERM" }),
      expect = { code = 143 } }
add { name = "timeout 3 obelus run (SIGTERM twice from one sender) is one request: resume after", item = 3,
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "spin_once", "_outputPath": "†state.a"}', '"†state.a"') },
      run = "timeout 3 " .. RUN_J .. "; rc=$?; " .. LOG .. "; " .. RESUME .. "; exit $rc",
      expect = { code = 124, err = "obelus run: interrupted by SIGTERM; running calls abandoned",
                 check = both(journal_ok { "spin" }, resumed_ok) } }
add { name = "timeout --preserve-status 2 while a tool blocks in C: one request, not the second", item = 3,
      files = files { ["p.json"] = plan('{"_id": "b", "_tool": "blocked", "seconds": 4, "_outputPath": "†state.a"}') },
      run = "timeout --preserve-status 2 " .. RUN_J .. "; rc=$?; " .. KILL_BLOCKER .. "; " .. LOG .. "; exit $rc",
      expect = { code = 143, err = "obelus run: interrupted by SIGTERM; running calls abandoned",
                 check = journal_ok { "b" } } }
add { name = "timeout -s INT --preserve-status 2 under --threads 2, tools spinning", item = 3,
      files = files { ["p.json"] = '{"instances": ["a", "b", "c"], "plan": [' ..
                        '{"_id": "spin", "_tool": "co_create_spin", "_outputPath": "†state.x"}]}' },
      run = "timeout -s INT --preserve-status 2 " .. RUN_J .. " --threads 2; rc=$?; " .. LOG .. "; exit $rc",
      expect = { code = 130, err = "interrupted by SIGINT", check = journal_ok() } }
add { name = "SIGTERM to a run whose delegated plan's tool spins", item = 3,
      files = files { ["p.json"] = plan('{"_id": "d", "_delegate": "child.json", "_outputPath": "†state.a"}', '"†state.a"'),
                      ["child.json"] = plan('{"_id": "spin", "_tool": "pcall_spin", "started": "started", "_outputPath": "†state.x"}',
                                            '"†state.x"') },
      run = signalled(RUN_J, { "TERM" }, LOG),
      expect = { code = 143, err = "obelus run: interrupted by SIGTERM; running calls abandoned", check = journal_ok { "d" } } }
add { name = "SIGTERM while a luv timer callback of a tool spins on the loop", item = 3,
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "timer_spin", "started": "started", "_outputPath": "†state.a"}') },
      run = signalled(RUN_J, { "TERM" }, LOG),
      expect = { code = 143, err = "obelus run: interrupted by SIGTERM; running calls abandoned", check = journal_ok { "spin" } } }
add { name = "SIGTERM to obelus resume whose resumed call spins again", item = 3,
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "pcall_spin", "started": "started", "_outputPath": "†state.a"}') },
      -- the run is stopped by SIGTERM first; then its resume, spinning again, by another
      run = table.concat({ RUN_J .. " & p=$!", WAIT_STARTED, "kill -TERM $p; wait $p; rm -f started",
                           signalled("obelus resume j.jsonl --tools t.lua", { "TERM" }, LOG) }, "\n"),
      expect = { code = 143, err = "obelus resume: interrupted by SIGTERM", check = journal_ok { "spin" } } }
add { name = "SIGTERM to obelus loop while a step's call spins", item = 3,
      files = files { ["p.json"] = '{"plan": []}',
                      ["planner.lua"] = [[
return function(ctx)
  if ctx.step == 1 then
    return { calls = { { _id = "spin", _tool = "pcall_spin", started = "started", _outputPath = "†state.a" } } }
  end
  return { output = "done" }
end
]] },
      run = signalled("obelus loop p.json --planner planner.lua --tools t.lua --journal j.jsonl", { "TERM" }, LOG),
      expect = { code = 143, err = "interrupted by SIGTERM", check = journal_ok { "spin" } } }
add { name = "SIGTERM to obelus loop whose planner itself spins", item = 3,
      files = files { ["p.json"] = '{"plan": []}',
                      ["planner.lua"] = [[
return function()
  local f = io.open("started", "w") f:write("x") f:close()
  while true do pcall(function() while true do end end) end
end
]] },
      run = signalled("obelus loop p.json --planner planner.lua --tools t.lua", { "TERM" }),
      expect = { code = 143, err = "interrupted by SIGTERM" } }
add { name = "SIGTERM to a run whose approver spins", item = 3,
      files = files { ["p.json"] = plan('{"_id": "o", "_tool": "ok", "value": 1, "_outputPath": "†state.a"}'),
                      ["approver.lua"] = [[
local obelus = require "obelus"
obelus.set_approver(function()
  local f = io.open("started", "w") f:write("x") f:close()
  while true do pcall(function() while true do end end) end
end)
]] },
      run = signalled("obelus run p.json --tools t.lua --approver approver.lua", { "TERM" }),
      expect = { code = 143, err = "interrupted by SIGTERM" } }
add { name = "SIGTERM to obelus check while a tool file spins as it loads", item = 3,
      files = files { ["p.json"] = plan('{"_tool": "ok", "value": 1}'),
                      ["loads.lua"] = [[
local f = io.open("started", "w") f:write("x") f:close()
while true do pcall(function() while true do end end) end
]] },
      run = signalled("obelus check p.json --tools t.lua --tools loads.lua", { "TERM" }),
      expect = { code = 143 } }

-- the same in obelus mcp and obelus worker ----------------------------------------------
local MCP_REQ = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "%s", "arguments": {"started": "started"%s}}}\n'
-- the client: the request, then its input held open (the server must not see its end)
local MCP_CLIENT = "mkfifo in; (cat req.jsonl; exec sleep 30) >in & w=$!"
add { name = "obelus mcp --max-slice: a spinning tools/call is answered as an error, the server goes on", item = 3,
      files = files { ["req.jsonl"] = MCP_REQ:format("pcall_spin", "") .. '{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n' },
      run = "obelus mcp --tools t.lua --max-slice 500 <req.jsonl",
      expect = { code = 0, out = function(out)
        local one
        for line in out:gmatch("[^\n]+") do
          local ok, m = pcall(cjson.decode, line)
          if ok and m.id == 1 then one = line end
        end
        if not one then return false, "no answer to the spinning tools/call: " .. out:sub(1, 200) end
        if not (one:find('"isError":true', 1, true) and one:find("without yielding", 1, true)) then
          return false, "the answer is not the slice error: " .. one:sub(1, 300)
        end
        return true
      end } }
add { name = "obelus mcp: SIGTERM while a tools/call spins ends the server", item = 3,
      files = files { ["req.jsonl"] = MCP_REQ:format("pcall_spin", "") },
      run = MCP_CLIENT .. "\n" .. signalled("obelus mcp --tools t.lua <in", { "TERM" }, "kill $w"),
      expect = { code = 0 } }
add { name = "obelus mcp under timeout --preserve-status 3, a tools/call spinning", item = 3,
      files = files { ["req.jsonl"] = MCP_REQ:format("co_wrap_spin", "") },
      run = MCP_CLIENT .. "\ntimeout --preserve-status 3 obelus mcp --tools t.lua <in; rc=$?; kill $w; exit $rc",
      expect = { code = 0 } }
add { name = "obelus mcp: a second SIGTERM while a tools/call blocks in C exits at once", item = 3, secs = 15,
      files = files { ["req.jsonl"] = MCP_REQ:format("blocked", ', "seconds": 30') },
      run = MCP_CLIENT .. "\n" .. signalled("obelus mcp --tools t.lua <in", { "TERM", "TERM" }, "kill $w"),
      expect = { code = { 0, 143 } } }

-- a worker on queue Q running the job of p.json, sent sigs once the tool started
local function worker_case(q, sigs, after)
  return ("id=$(obelus submit p.json --tools t.lua --redis $REDIS --queue %s) || exit 99\n"):format(q) ..
    signalled(("obelus worker --redis $REDIS --queue %s --tools t.lua --grace 200 --claim-idle 60000"):format(q),
              sigs, after)
end
add { name = "obelus worker: SIGTERM while a job's tool spins; the job is handed back and resumed", item = 3,
      needs = "redis",
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "spin_once", "started": "started", "_outputPath": "†state.a"}',
                                        '"†state.a"') },
      -- then a worker with --drain takes the job handed back, and `wait` gives its output
      run = worker_case("stop-w1", { "TERM" },
        "obelus worker --redis $REDIS --queue stop-w1 --tools t.lua --drain --claim-idle 100 >/dev/null 2>drain.err\n" ..
        "obelus wait --redis $REDIS --queue stop-w1 --timeout 5000 $id >wait.out 2>&1"),
      expect = { code = 0, err = { "obelus worker: SIGTERM: taking no more jobs", "obelus worker: ended" },
                 check = function(dir)
                   local w = slurp(dir .. "/wait.out") or ""
                   if not w:find('"resumed"', 1, true) then
                     return false, "the job was not handed back and resumed: wait says " .. w:sub(1, 200) ..
                                   " " .. (slurp(dir .. "/drain.err") or ""):sub(1, 200)
                   end
                   return true
                 end } }
add { name = "obelus worker --max-slice: a spinning job fails, the next job runs", item = 3,
      needs = "redis",
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "pcall_spin", "_outputPath": "†state.a"}'),
                      ["q.json"] = plan('{"_tool": "ok", "value": "after", "_outputPath": "†state.b"}', '"†state.b"') },
      run = "a=$(obelus submit p.json --tools t.lua --redis $REDIS --queue stop-w5) || exit 99\n" ..
            "b=$(obelus submit q.json --tools t.lua --redis $REDIS --queue stop-w5) || exit 99\n" ..
            "obelus worker --redis $REDIS --queue stop-w5 --tools t.lua --drain --max-slice 500 || exit $?\n" ..
            "obelus wait --redis $REDIS --queue stop-w5 --timeout 5000 $a $b",
      expect = { code = 1, err = "call spin (pcall_spin) failed (runtime): the tool ran 500 ms without yielding",
                 out = function(out)
        local lines = {}
        for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
        local ok1, j1 = pcall(cjson.decode, lines[1] or "")
        local ok2, j2 = pcall(cjson.decode, lines[2] or "")
        if not (ok1 and ok2) then return false, "wait printed: " .. out:sub(1, 300) end
        if j1.exit ~= 1 then return false, "the spinning job: " .. lines[1]:sub(1, 300) end
        if j2.exit ~= 0 or j2.output ~= "after" then return false, "the next job: " .. lines[2]:sub(1, 300) end
        return true
      end } }
add { name = "obelus worker under timeout --preserve-status 3, a job's tool spinning", item = 3,
      needs = "redis",
      files = files { ["p.json"] = plan('{"_id": "spin", "_tool": "pcall_spin", "_outputPath": "†state.a"}') },
      run = "obelus submit p.json --tools t.lua --redis $REDIS --queue stop-w2 >/dev/null || exit 99\n" ..
            "timeout --preserve-status 3 obelus worker --redis $REDIS --queue stop-w2 --tools t.lua --grace 200",
      expect = { code = 0, err = "obelus worker: ended" } }
add { name = "obelus worker: a third SIGTERM while a job's tool blocks in C exits at once", item = 3,
      needs = "redis", secs = 15,
      files = files { ["p.json"] = plan('{"_id": "b", "_tool": "blocked", "seconds": 30, "started": "started", "_outputPath": "†state.a"}') },
      run = worker_case("stop-w3", { "TERM", "TERM", "TERM" }),
      -- os.execute's command is killed at the first: the second hands the job back and the
      -- worker may end (0) before the third comes, or be ended by it (143)
      expect = { code = { 0, 143 } } }

-- children: "a uv.spawn child of an attempt that timed out writes its file 3 s after
-- obelus exited; 5,000 spawned children are left behind" --------------------------------
local LATE = "sleep 3; echo late >> late"
local function spawn_plan(fields, output)
  return plan('{"_id": "s", "_tool": "spawner", "cmd": "' .. (fields.cmd or LATE) .. '"' .. (fields.more or "") ..
              ', "_outputPath": "†state.a"}' .. (fields.after or ""), output)
end

add { name = "the child of an attempt that timed out (the tool waiting)", item = 10,
      files = files { ["p.json"] = spawn_plan { more = ', "wait": 60000, "_timeout": 300' } },
      run = then_wait("obelus run p.json --tools t.lua", 4),
      expect = { code = 1, err = "call s (spawner) failed (runtime): timeout after 300 ms", check = no_late } }
add { name = "the child of an attempt that timed out while the tool spun", item = 10,
      files = files { ["p.json"] = spawn_plan { more = ', "spin": true, "_timeout": 300' } },
      run = then_wait("obelus run p.json --tools t.lua --max-slice 600000", 4),
      expect = { code = 1, err = "call s (spawner) failed (runtime): timeout after 300 ms", check = no_late } }
add { name = "the child of an attempt that timed out, while the retry keeps obelus running", item = 10,
      -- another call keeps obelus running 5 s: past the moment attempt 1's child would write
      files = files { ["p.json"] = spawn_plan({ more = ', "wait": 60000, "first_only": true, ' ..
                                                      '"_timeout": 300, "_retry": {"attempts": 2, "delay_ms": 1}',
                                                after = ',\n {"_tool": "ok", "ms": 5000, "value": 1, "_outputPath": "†state.b"}' },
                                              '"†state.a"') },
      run = "obelus run p.json --tools t.lua",
      expect = { code = 0, out = '"again"', check = no_late } }
add { name = "the children of a run SIGTERM cancelled", item = 10,
      files = files { ["p.json"] = spawn_plan { more = ', "n": 3, "wait": 60000, "started": "started"' } },
      run = signalled("obelus run p.json --tools t.lua", { "TERM" }, "sleep 4"),
      expect = { code = 143, check = no_late } }
add { name = "the children still running when the run ends", item = 10,
      files = files { ["p.json"] = spawn_plan({ more = ', "n": 3' }, '"†state.a"') },
      run = then_wait("obelus run p.json --tools t.lua", 4),
      expect = { code = 0, out = '"spawned"', check = no_late } }
add { name = "the children when a second SIGTERM exits at once (tool blocked in C)", item = 10, secs = 20,
      files = files { ["p.json"] = spawn_plan { more = ', "n": 3, "block": 30, "started": "started"' } },
      run = signalled("obelus run p.json --tools t.lua", { "TERM", "TERM" }, "sleep 4"),
      expect = { code = 143, check = no_late } }
add { name = "2,000 children still running when the run ends (each waits on a gate)", item = 10, secs = 60,
      setup = "mkfifo gate",
      files = files { ["p.json"] = spawn_plan({ cmd = "read x <gate; : >late.$$", more = ', "n": 2000' }, '"†state.a"') },
      -- once obelus has exited, the gate opens: a child still alive writes late.PID
      run = "obelus run p.json --tools t.lua; rc=$?; exec 3<>gate; i=0; " ..
            "while [ $i -lt 2100 ]; do echo >&3; i=$((i+1)); done; sleep 3; exec 3>&-; exit $rc",
      expect = { code = 0, out = '"spawned"', check = no_late } }
add { name = "a child that ignores SIGTERM, of an attempt that timed out", item = 10,
      files = files { ["p.json"] = spawn_plan { cmd = "trap '' TERM HUP INT; " .. LATE, more = ', "wait": 60000, "_timeout": 300' } },
      run = then_wait("obelus run p.json --tools t.lua", 4),
      expect = { code = 1, err = "timeout after 300 ms", check = no_late } }
add { name = "a grandchild left in the child's process group after the child exited (timeout)", item = 10,
      files = files { ["p.json"] = spawn_plan { cmd = "(" .. LATE .. ") & exit 0", more = ', "wait": 60000, "_timeout": 500' } },
      run = then_wait("obelus run p.json --tools t.lua", 4),
      expect = { code = 1, err = "timeout after 500 ms", check = no_late } }
add { name = "a grandchild left in the child's process group after the child exited (run's end)", item = 10,
      files = files { ["p.json"] = spawn_plan({ cmd = "(" .. LATE .. ") & exit 0", more = ', "wait": 300' }, '"†state.a"') },
      run = then_wait("obelus run p.json --tools t.lua", 4),
      expect = { code = 0, out = '"spawned"', check = no_late } }
add { name = "a child spawned with detached = false, of an attempt that timed out", item = 10,
      files = files { ["p.json"] = spawn_plan { more = ', "detached": false, "wait": 60000, "_timeout": 300' } },
      run = then_wait("obelus run p.json --tools t.lua", 4),
      expect = { code = 1, err = "call s (spawner) failed (runtime): timeout after 300 ms", check = no_late } }
add { name = "the child of a delegated plan's call, the delegating call timed out", item = 10,
      files = files { ["p.json"] = plan('{"_id": "d", "_delegate": "child.json", "_timeout": 500, "_outputPath": "†state.a"}'),
                      ["child.json"] = spawn_plan({ more = ', "wait": 60000' }, '"†state.a"') },
      run = then_wait("obelus run p.json --tools t.lua", 4),
      expect = { code = 1, err = { "call d", "timeout after 500 ms" }, check = no_late } }
add { name = "the children of instances on --threads 2 when the run ends", item = 10,
      files = files { ["p.json"] = '{"instances": ["a", "b", "c", "d"], "plan": [' ..
                        '{"_id": "s", "_tool": "spawner", "cmd": "' .. LATE .. '", "_outputPath": "†state.x"}]}' },
      run = then_wait("obelus run p.json --tools t.lua --threads 2", 4),
      expect = { code = 0, check = no_late } }
add { name = "the child of a resumed call that timed out", item = 10,
      -- the first run is SIGKILLed (its child, late.1, may outlive it: nothing can stop that)
      files = files { ["p.json"] = spawn_plan { cmd = "sleep 3; echo late >> late.ATTEMPT",
                                                more = ', "started": "started", "wait": 60000, "_timeout": 1500' } },
      run = table.concat({ RUN_J .. " & p=$!", WAIT_STARTED, "kill -9 $p; wait $p",
                           then_wait("obelus resume j.jsonl --tools t.lua", 4) }, "\n"),
      expect = { code = 1, err = { "had started (attempt 1) and did not settle", "timeout after 1500 ms" },
                 check = function(dir)
                   if slurp(dir .. "/late.2") then return false, "the resumed attempt's child wrote late.2" end
                   return true
                 end } }
add { name = "obelus mcp: a tools/call's child when the server reaches the end of its input", item = 10,
      files = files { ["req.jsonl"] = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "spawner", ' ..
                                      '"arguments": {"cmd": "' .. LATE .. '"}}}\n' },
      run = then_wait("obelus mcp --tools t.lua <req.jsonl", 4),
      expect = { code = 0, out = "spawned", check = no_late } }
add { name = "obelus mcp: a tools/call's child while the server reads on (its input open 4 s more)", item = 10,
      -- the call answers at once; its child would write 3 s later, while the server still
      -- waits for its next request: each tools/call is a run, and its children end with it
      files = files { ["req.jsonl"] = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "spawner", ' ..
                                      '"arguments": {"cmd": "' .. LATE .. '"}}}\n',
                      ["ping.jsonl"] = '{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n' },
      run = "{ cat req.jsonl; sleep 4; cat ping.jsonl; } | obelus mcp --tools t.lua",
      expect = { code = 0, check = no_late, out = function(out)
        if not (out:find("spawned", 1, true) and out:find('{"jsonrpc":"2.0","id":2,"result":{}}', 1, true)) then
          return false, "both requests were not answered: " .. out:sub(1, 300)
        end
        return true
      end } }
add { name = "obelus worker --drain: a job's child when the worker exits", item = 10, needs = "redis",
      files = files { ["p.json"] = spawn_plan({}, '"†state.a"') },
      run = "obelus submit p.json --tools t.lua --redis $REDIS --queue stop-w4 >/dev/null || exit 99\n" ..
            then_wait("obelus worker --redis $REDIS --queue stop-w4 --tools t.lua --drain", 4),
      expect = { code = 0, check = no_late } }
add { name = "the Lua module: run:cancel() kills the children while the host lives on", item = 10,
      files = files { ["p.json"] = spawn_plan { more = ', "wait": 60000, "started": "started"' },
                      ["m.lua"] = ([[
package.cpath = "%s/lib/?.so;" .. package.cpath
package.path = "%s/lua/?.lua;%s/lua/?/init.lua;" .. package.path
local obelus, uv = require "obelus", require "luv"
local engine = obelus.engine { tools = { "t.lua" } }
local run = engine:run("p.json")
local timer = uv.new_timer()
timer:start(20, 20, function()
  if io.open("started") then timer:stop() timer:close() run:cancel() end
end)
while run:status() == nil and uv.run("once") do end
for _ = 1, 10 do uv.run("nowait") end
os.execute("sleep 4")                    -- the host lives on: the child must be gone already
print(io.open("late") and "late" or "none")
engine:close()
]]):format(ROOT, ROOT, ROOT) },
      run = "lua5.4 m.lua",
      expect = { code = 0, out = "none", check = no_late } }

for _, c in ipairs(cases) do c.secs = c.secs or 15 end -- each ends in seconds when obelus does right

return cases
