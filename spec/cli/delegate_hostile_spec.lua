-- delegate_hostile_spec.lua -- delegation as an attacker or a careless plan uses it:
-- deep self-delegation, a plan that delegates to itself over and over (a bomb), with
-- and without _retry, a signal in the middle of one, the journal's size, and
-- --concurrency across delegated runs. Every run is capped (ulimit -v, timeout).
local cli = require "support.cli"
local cjson = require "cjson"

local DIR = "spec/cli/fixtures/delegate"
local ASAN = cli.bin:find("/asan/", 1, true) ~= nil
local LIMIT = ASAN and "" or "ulimit -v 4000000; "

-- a parent plan written next to the fixtures (delegates are relative to it)
local function plan_file(json)
  local f = DIR .. "/hostile-" .. tostring(math.random(1e9)) .. ".json"
  local h = assert(io.open(f, "w"))
  h:write(json)
  h:close()
  return f
end

-- `obelus ARGS...` under the caps, stdout and stderr to files; returns code, out, err
local function capped(args, secs)
  local parts = {}
  for i, a in ipairs(args) do parts[i] = cli.quote(a) end
  local out, err = os.tmpname(), os.tmpname()
  local _, how, code = os.execute(("%stimeout -s KILL %d %s %s >%s 2>%s"):format(
    LIMIT, secs or 60, cli.quote(cli.bin), table.concat(parts, " "), out, err))
  local r = { code = how == "exit" and code or 128 + code, out = cli.slurp(out), err = cli.slurp(err) }
  os.remove(out)
  os.remove(err)
  return r
end

-- the journal's lines, each decoded (a line that is not JSON fails the test)
local function journal_lines(j)
  local text = cli.slurp(j)
  assert.are.equal("\n", text:sub(-1)) -- whole lines only
  local lines = {}
  for line in text:gmatch("[^\n]+") do lines[#lines + 1] = cjson.decode(line) end
  return lines
end

describe("delegation, hostile", function()
  it("runs a chain of --max-depth 10000 self-delegations to the limit without a stack overflow", function()
    local f = plan_file([[{"context":[{"type":"input","data":{"n":10000}}],
      "plan":[{"_id":"count","_delegate":"countdown.json","n":"†input.n","_outputPath":"out"}]}]])
    local r = capped({ "run", f, "--tools", DIR .. "/tools.lua", "--max-depth", "10000" }, 120)
    os.remove(f)
    -- 10,001 levels asked for: the deepest fails cleanly, and so each level above it
    assert.are.equal(1, r.code)
    assert.matches("call again: delegation deeper than 10000 levels (see --max-depth)", r.err, 1, true)
    assert.are.same({}, cjson.decode(r.out))
  end)

  it("cancels a chain of 5000 delegated runs on SIGTERM without a stack overflow", function()
    local mark, out, err, rcf = os.tmpname(), os.tmpname(), os.tmpname(), os.tmpname()
    os.remove(mark)
    local f = plan_file(([[{"context":[{"type":"input","data":{"n":5000,"mark":%q}}],
      "plan":[{"_delegate":"deep_wait.json","n":"†input.n","mark":"†input.mark","_outputPath":"out"}]}]]):format(mark))
    -- the deepest run's call waits for good: SIGTERM once it has started (timeout forwards it)
    os.execute(([[%s
      timeout -s KILL 120 %s run %s --tools %s --max-depth 6000 >%s 2>%s &
      P=$!; i=0
      while [ ! -e %s ] && [ $i -lt 2000 ]; do sleep 0.05; i=$((i+1)); done
      kill -TERM $P; wait $P; echo $? >%s]]):format(LIMIT, cli.quote(cli.bin), cli.quote(f),
      cli.quote(DIR .. "/tools.lua"), out, err, cli.quote(mark), rcf))
    os.remove(f)
    local code, stderr, started = tonumber(cli.slurp(rcf)), cli.slurp(err), cli.slurp(mark)
    os.remove(out); os.remove(err); os.remove(rcf); os.remove(mark)
    assert.are.equal("started\n", started) -- the chain was 5001 runs deep
    assert.are.equal(143, code)
    assert.matches("interrupted by SIGTERM", stderr, 1, true)
  end)

  it("ends a delegation bomb on SIGTERM, its journal whole", function()
    local j = os.tmpname()
    os.remove(j)
    local out, err, rcf = os.tmpname(), os.tmpname(), os.tmpname()
    -- 4 self-delegations a level, 12 levels: 4^12 runs, never done in a test's time.
    -- SIGTERM once the journal has grown (the bomb is under way); timeout forwards it to
    -- obelus and then to its process group: obelus gets it twice, one request.
    local script = ([[%s
      timeout -s KILL 120 %s run %s --journal %s --max-depth 12 --max-calls 100000000 >%s 2>%s &
      P=$!; i=0
      while n=$(grep -c '"journal":"run"' %s 2>/dev/null); [ "${n:-0}" -lt 50 ] && [ $i -lt 1200 ]; do
        sleep 0.05; i=$((i+1)); done
      kill -TERM $P; wait $P; echo $? >%s]]):format(LIMIT, cli.quote(cli.bin),
      cli.quote(DIR .. "/bomb.json"), cli.quote(j), out, err, cli.quote(j), rcf)
    os.execute(script)
    local code = tonumber(cli.slurp(rcf))
    local stderr = cli.slurp(err)
    os.remove(out); os.remove(err); os.remove(rcf)
    assert.are.equal(143, code) -- 128 + SIGTERM, not 137 (killed by timeout) nor an abort
    assert.matches("interrupted by SIGTERM", stderr, 1, true)
    local lines = journal_lines(j)
    os.remove(j)
    local runs = 0
    for _, l in ipairs(lines) do if l.journal == "run" then runs = runs + 1 end end
    assert.is_true(runs >= 50) -- the bomb was going when the signal came
  end)

  it("lets a _timeout fire and other calls finish during a delegation bomb", function()
    local f = plan_file([[{"plan":[
      {"_id":"bomb","_delegate":"bomb.json","_timeout":300,"_outputPath":"bombed"},
      {"_id":"other","_tool":"busy","_outputPath":"other"}]}]])
    local r = capped({ "run", f, "--tools", DIR .. "/tools.lua", "--max-depth", "12",
                       "--max-calls", "100000000" }, 30)
    os.remove(f)
    assert.are.equal(1, r.code) -- not 137: the timeout fired inside the bomb
    assert.matches("call bomb (delegate) failed (runtime): timeout after 300 ms", r.err, 1, true)
    assert.are.same({ other = 1 }, cjson.decode(r.out))
  end)

  it("charges delegated runs to the memory account: a bomb under --max-memory fails its calls, no abort", function()
    local out, err = os.tmpname(), os.tmpname()
    local _, how, code = os.execute(("%stimeout -s KILL 60 %s run %s --max-memory 64 --max-calls 100000000 >%s 2>%s"):format(
      ASAN and "" or "ulimit -v 600000; ", cli.quote(cli.bin), DIR .. "/bomb.json", out, err))
    local text = cli.slurp(err)
    os.remove(out)
    os.remove(err)
    assert.are.equal("exit", how, text:sub(-300))
    assert.are.equal(1, code, text:sub(-300))
    assert.matches("memory limit of 64 MB reached (--max-memory)", text, 1, true)
    assert.not_matches("Aborted", text, 1, true)
  end)

  it("bounds a bomb with _retry: a limit's failure is not tried again", function()
    local j = os.tmpname()
    os.remove(j)
    local r = capped({ "run", DIR .. "/bomb_retry.json", "--max-depth", "4", "--journal", j }, 30)
    assert.are.equal(1, r.code)
    assert.matches("delegation deeper than 4 levels", r.err, 1, true)
    local retries = 0
    for _, l in ipairs(journal_lines(j)) do if l.journal == "retry" then retries = retries + 1 end end
    os.remove(j)
    assert.are.equal(0, retries)
  end)

  it("routes a limit's failure to a || alternative, without retrying it", function()
    local f = plan_file([[{"plan":[{"_id":"d","_delegate":"bomb_retry.json",
      "_retry":{"attempts":5,"delay_ms":0},"_outputPath":"ok || err"}]}]])
    local r = capped({ "run", f, "--max-depth", "2" }, 30)
    os.remove(f)
    assert.are.equal(0, r.code)
    local err = cjson.decode(r.out).err
    assert.are.equal("d", err.call)
    assert.matches("delegation deeper than 2 levels", err.error, 1, true)
    assert.is_nil(r.err:find("attempt 1 of 5 failed", 1, true))
  end)

  it("writes each message of nested delegations once in the journal", function()
    local j = os.tmpname()
    os.remove(j)
    local f = plan_file([[{"context":[{"type":"input","data":{"n":8}}],
      "plan":[{"_id":"count","_delegate":"countdown.json","n":"†input.n","_outputPath":"out"}]}]])
    local r = capped({ "run", f, "--tools", DIR .. "/tools.lua", "--journal", j }, 30)
    os.remove(f)
    assert.are.equal(0, r.code)
    -- the deepest plan's dec call writes state.done once; before, each of the 9
    -- levels above it held that message again in its _log
    local text = cli.slurp(j)
    assert.are.equal(1, select(2, text:gsub('"_path":"done"', "")))
    -- and `log` shows it, nested, as before
    local log = cli.run { "log", j }
    assert.are.equal(0, log.code)
    assert.matches("2.3.3.3.3.3.3.3.3.2", log.out, 1, true)
    -- resume of the ended run prints the same output
    local res = cli.run { "resume", j, "--tools", DIR .. "/tools.lua" }
    assert.are.equal(0, res.code)
    assert.are.same({ out = "liftoff" }, cjson.decode(res.out))
    os.remove(j)
  end)

  it("names a delegated run's scope by a number defined once: a line costs the same at any depth", function()
    local j = os.tmpname()
    os.remove(j)
    local f = plan_file([[{"context":[{"type":"input","data":{"n":300}}],
      "plan":[{"_id":"count","_delegate":"countdown.json","n":"†input.n","_outputPath":"out"}]}]])
    local r = capped({ "run", f, "--tools", DIR .. "/tools.lua", "--max-depth", "400", "--journal", j }, 60)
    assert.are.equal(0, r.code, r.err)
    local text = cli.slurp(j)
    local names, defs, lines = {}, 0, {}
    for line in text:gmatch("[^\n]+") do
      lines[#lines + 1] = line
      local m = cjson.decode(line)
      if m.journal == "scope" then
        defs = defs + 1
        assert.is_nil(names[m.n], line) -- one process: each number once
        names[m.n] = m.path or (assert(names[m["in"]], line) .. "/" .. m.call)
      elseif m.journal and m.journal ~= "msg" then
        -- a record is short at any depth: the path ("count/again/again/...", 1.8 KB at
        -- the bottom) is in no line but its scope's definition, and there a step of it
        assert.is_true(#line < 200, line)
        if m.scope then assert.is_string(names[m.scope], line) end
      end
    end
    assert.are.equal(301, defs) -- count, then 300 levels of again
    assert.are.equal("count" .. ("/again"):rep(300), names[301])
    -- a kill half way: resume defines the scopes it writes again, and finishes the chain
    local cut = io.open(j, "w")
    cut:write(table.concat(lines, "\n", 1, #lines // 2), "\n")
    cut:close()
    local res = capped({ "resume", j, "--tools", DIR .. "/tools.lua", "--max-depth", "400" }, 60)
    assert.are.equal(0, res.code, res.err)
    assert.are.same({ out = "liftoff" }, cjson.decode(res.out))
    local log = capped({ "log", j }, 60)
    assert.are.equal(0, log.code, log.err)
    -- a scope number no line before defines: refused, naming the line
    local first_def
    for i, line in ipairs(lines) do
      if line:find('"journal":"scope"', 1, true) then first_def = i break end
    end
    local bad = io.open(j, "w")
    for i, line in ipairs(lines) do
      if i ~= first_def then bad:write(line, "\n") end
    end
    bad:close()
    for _, cmd in ipairs { "log", "resume" } do
      local b = capped({ cmd, j, "--tools", DIR .. "/tools.lua" }, 60)
      if cmd == "log" then b = capped({ "log", j }, 60) end
      assert.are.equal(2, b.code, b.err)
      assert.matches(j .. ":" .. first_def .. ": scope 1 is not defined by a line before it", b.err, 1, true)
    end
    os.remove(j)
    os.remove(f)
  end)

  it("still reads a journal written before, with each _log inline", function()
    -- old_journal.jsonl: old_parent.json run by the engine before this change
    local j = DIR .. "/old_journal.jsonl"
    assert.matches('"_log":[', cli.slurp(j), 1, true)
    local log = cli.run { "log", j }
    assert.are.equal(0, log.code)
    assert.matches("2.3.2", log.out, 1, true)
    local at = cli.run { "log", j, "--at", "3" }
    assert.are.equal(0, at.code)
    assert.are.same("liftoff", cjson.decode(at.out).documents.state.out)
  end)

  it("prints a journal of 10000 nested delegated runs with log, 64 levels of them", function()
    -- written by hand: each scope's output names the next scope's messages as its _log
    local j = os.tmpname()
    local f = assert(io.open(j, "w"))
    f:write('{"type":"plan","file":"top.json","plan":{"plan":[]}}\n')
    for k = 10000, 1, -1 do
      f:write(('{"journal":"msg","scope":"s%d","msg":{"type":"plan","file":"sub.json","plan":{"plan":[]}}}\n'):format(k))
      if k < 10000 then
        f:write(('{"journal":"msg","scope":"s%d","msg":{"type":"state","data":{"level":%d},"_log":{"scope":"s%d"}}}\n')
          :format(k, k, k + 1))
      end
    end
    f:write('{"type":"state","data":{"level":0},"_log":{"scope":"s1"}}\n')
    f:close()
    local r = capped({ "log", j }, 60)
    os.remove(j)
    assert.are.equal(0, r.code)
    assert.matches("2 messages of a delegated run 64 levels deep: not shown", r.out, 1, true)
  end)

  it("bounds --concurrency across delegated runs: N in all, not N per run", function()
    local f = plan_file([[{"plan":[{"_delegate":"busy3.json","_outputPath":"a"},
      {"_delegate":"busy3.json","_outputPath":"b"},{"_delegate":"busy3.json","_outputPath":"c"}]}]])
    local r = capped({ "run", f, "--tools", DIR .. "/tools.lua", "--concurrency", "2" }, 30)
    os.remove(f)
    assert.are.equal(0, r.code)
    local most, calls = 0, 0
    for _, sub in pairs(cjson.decode(r.out)) do
      for _, m in pairs(sub) do
        calls = calls + 1
        most = math.max(most, m)
      end
    end
    assert.are.equal(9, calls)
    assert.are.equal(2, most) -- the most busy calls running at once, counted by the tool
  end)

  it("never deadlocks a deep delegation under --concurrency 1", function()
    local f = plan_file([[{"context":[{"type":"input","data":{"n":20}}],
      "plan":[{"_delegate":"busy_deep.json","n":"†input.n","_outputPath":"out"}]}]])
    local r = capped({ "run", f, "--tools", DIR .. "/tools.lua", "--concurrency", "1", "--max-depth", "30" }, 30)
    os.remove(f)
    assert.are.equal(0, r.code)
    local level, depth = cjson.decode(r.out).out, 0
    while level do
      assert.are.equal(1, level.here)
      assert.are.equal(1, level.there)
      depth = depth + 1
      level = level.below
    end
    assert.are.equal(21, depth)
  end)
end)
