-- run_spec.lua -- `obelus run` and `obelus check` against plan-format §5, 9 and 12: dependency
-- order, concurrency, skips, errors, output expressions, fire-and-forget, exit codes.
local cli = require "support.cli"
local cjson = require "cjson"
local fs = require "support.fs"
local exists = fs.exists

local TOOLS = "spec/cli/tools"

local function plan_file(json) return cli.tmpfile(json, ".json") end

-- runs a plan given as JSON text; returns the result plus the decoded output
local function run(json, ...)
  local args = { "run", plan_file(json), "--tools", TOOLS, ... }
  local r = cli.run(args)
  if r.code ~= 2 and r.out ~= "" then
    local ok, v = pcall(cjson.decode, r.out)
    r.output = ok and v or nil
  end
  return r
end

local function journal_of(path)
  local lines = {}
  for line in io.lines(path) do
    local m = cjson.decode(line)
    if not m.journal then lines[#lines + 1] = m end -- the journal's records are not messages
  end
  return lines
end

-- position in the journal of the output message written by call `id`
local function position_of(lines, id)
  for i, m in ipairs(lines) do
    if m._call and m._call._id == id then return i end
  end
end

describe("obelus run: dependencies and order", function()
  it("runs a plan listed in reverse order in dependency order", function()
    local r = run([=[[
      {"_id":"c","_tool":"echo","value":"†state.b","_outputPath":"†state.c"},
      {"_id":"b","_tool":"echo","value":"†state.a","_outputPath":"†state.b"},
      {"_id":"a","_tool":"echo","value":"start","_outputPath":"†state.a"}
    ]]=])
    assert.are.equal(0, r.code)
    assert.are.same({ a = "start", b = "start", c = "start" }, r.output)
  end)

  it("runs calls that sleep concurrently (20 x 200 ms end together)", function()
    local calls = {}
    for i = 1, 20 do
      calls[i] = string.format('{"_id":"s%d","_tool":"sleepy","ms":200,"value":%d,"_outputPath":"†state.s%d"}', i, i, i)
    end
    local j = os.tmpname()
    local r = run("[" .. table.concat(calls, ",") .. "]", "--journal", j)
    assert.are.equal(0, r.code)
    local lines = journal_of(j)
    assert.are.equal(21, #lines) -- the plan, then 20 outputs
    -- run one after the other, consecutive completions would be >= 200 ms apart;
    -- run together, all 20 complete within less than one sleep of each other
    local function ms(date)
      local h, m, s = date:match("T(%d+):(%d+):([%d.]+)Z")
      return (tonumber(h) * 3600 + tonumber(m) * 60 + tonumber(s)) * 1000
    end
    local lo, hi = math.huge, -math.huge
    for i = 2, 21 do
      local t = ms(lines[i]._date)
      lo, hi = math.min(lo, t), math.max(hi, t)
    end
    assert.is_true(hi - lo < 200, "completions spread over " .. (hi - lo) .. " ms")
  end)

  it("starts a fast branch's follower while a slow sibling still runs", function()
    local j = os.tmpname()
    local r = run([=[[
      {"_id":"slow","_tool":"sleepy","ms":400,"value":"slow","_outputPath":"†state.slow"},
      {"_id":"fast","_tool":"sleepy","ms":10,"value":"fast","_outputPath":"†state.fast"},
      {"_id":"follower","_tool":"sleepy","ms":10,"value":"†state.fast","_outputPath":"†state.after_fast"}
    ]]=], "--journal", j)
    assert.are.equal(0, r.code)
    local lines = journal_of(j)
    -- no rounds: the follower's output lands before the slow sibling's
    assert.is_true(position_of(lines, "follower") < position_of(lines, "slow"))
    assert.are.equal("fast", r.output.after_fast)
  end)

  it("lets the call that completes last win when two write one path", function()
    local r = run([=[[
      {"_id":"late","_tool":"sleepy","ms":80,"value":"late","_outputPath":"†state.x"},
      {"_id":"early","_tool":"sleepy","ms":5,"value":"early","_outputPath":"†state.x"}
    ]]=])
    assert.are.equal("late", r.output.x)
  end)

  it("honours --concurrency", function()
    local calls = {}
    for i = 1, 4 do
      calls[i] = string.format('{"_id":"s%d","_tool":"sleepy","ms":60,"value":%d,"_outputPath":"†state.s%d"}', i, i, i)
    end
    local ev = os.tmpname()
    local r = run("[" .. table.concat(calls, ",") .. "]", "--concurrency", "1", "--events", ev)
    assert.are.equal(0, r.code)
    local running, most = 0, 0
    for line in io.lines(ev) do
      local e = cjson.decode(line)
      if e.event == "started" then running = running + 1 end
      if e.event == "done" then running = running - 1 end
      most = math.max(most, running)
    end
    assert.are.equal(1, most)
  end)
end)

describe("obelus run: skips and errors", function()
  it("does not run an untaken branch's tool, and a join with another writer runs", function()
    local dir = os.tmpname()
    local r = run(string.format([=[[
      {"_id":"check","_tool":"pick","which":2,"value":"wet","_outputPath":"†state.sunny || †state.rainy"},
      {"_id":"park","_tool":"marker","file":"%s.park","value":"park","_outputPath":"†state.plan.park"},
      {"_id":"parkreader","_tool":"echo","value":"†state.sunny","_outputPath":"†state.plan.park"},
      {"_id":"movie","_tool":"echo","value":"†state.rainy","_outputPath":"†state.plan.movie"},
      {"_id":"join","_tool":"echo","value":"†state.plan.park || †state.plan.movie","_outputPath":"†state.suggestion"}
    ]]=], dir))
    assert.are.equal(0, r.code)
    assert.are.equal("wet", r.output.rainy)
    assert.is_nil(r.output.sunny)
    assert.are.equal("wet", r.output.plan.movie)
    -- park itself has no input from the branch: it runs; its sibling reader is skipped
    assert.is_true(exists(dir .. ".park"))
  end)

  it("skips a reader of an untaken branch without running it", function()
    local marker = os.tmpname() .. ".m"
    local r = run(string.format([=[[
      {"_id":"check","_tool":"pick","which":1,"value":"yes","_outputPath":"†state.a || †state.b"},
      {"_id":"onb","_tool":"marker","file":"%s","value":"†state.b","_outputPath":"†state.after_b"}
    ]]=], marker))
    assert.are.equal(0, r.code)
    assert.is_false(exists(marker))
    assert.is_nil(r.output.after_b)
  end)

  it("fails with a structural error when nothing writes a referenced path", function()
    local r = run([=[[{"_id":"x","_tool":"echo","value":"†state.nowhere","_outputPath":"†state.out"}]]=])
    assert.are.equal(1, r.code)
    assert.matches("no call in the plan writes it", r.err, 1, true)
    assert.are.same({}, r.output)
  end)

  it("skips every call downstream of a failure, even where older values exist", function()
    local marker = os.tmpname() .. ".m"
    local r = run(string.format([[{
      "context":[{"type":"state","data":{"v":"old"}}],
      "plan":[
        {"_id":"bad","_tool":"fail","_outputPath":"†state.v"},
        {"_id":"mid","_tool":"echo","value":"†state.v","_outputPath":"†state.w"},
        {"_id":"end","_tool":"marker","file":"%s","value":"†state.w","_outputPath":"†state.z"}
      ]}]], marker))
    assert.are.equal(1, r.code)
    assert.is_false(exists(marker))
    assert.are.same({ v = "old" }, r.output)
  end)

  it("never lets a crashing tool take the engine down", function()
    local r = run([=[[
      {"_id":"t1","_tool":"fail_table","_outputPath":"†state.a"},
      {"_id":"t2","_tool":"recurse","_outputPath":"†state.b"},
      {"_id":"t3","_tool":"yielder","_outputPath":"†state.c"},
      {"_id":"ok","_tool":"echo","value":1,"_outputPath":"†state.d"}
    ]]=])
    assert.are.equal(1, r.code)
    assert.are.same({ d = 1 }, r.output)
    assert.matches([[failed (runtime): {"code":7}]], r.err, 1, true) -- a table error reads as its JSON
    assert.matches("stack overflow", r.err, 1, true)
    assert.matches("yielded its coroutine", r.err, 1, true)
    assert.matches("stack traceback", r.err, 1, true)
  end)

  it("fails a call whose wait can never end instead of hanging", function()
    local r = run([=[[{"_id":"s","_tool":"stall","_outputPath":"†state.s"},
                     {"_id":"ok","_tool":"echo","value":1,"_outputPath":"†state.ok"}]]=])
    assert.are.equal(1, r.code)
    assert.matches("stalled", r.err, 1, true)
    assert.are.same({ ok = 1 }, r.output)
  end)

  it("records error messages in the log with phase, id and call", function()
    local j = os.tmpname()
    run([=[[{"_id":"x","_tool":"fail","message":"nope","_outputPath":"†state.out"}]]=], "--journal", j)
    local lines = journal_of(j)
    local e = lines[#lines]
    assert.are.equal("error", e.kind)
    assert.are.equal("x", e.data.id)
    assert.are.equal("runtime", e.data.phase)
    assert.matches("nope", e.data.error, 1, true)
    assert.are.equal("fail", e.data.call._tool)
  end)
end)

describe("obelus run: output expressions", function()
  it("fans out with && (one output message per path)", function()
    local j = os.tmpname()
    local r = run([=[[{"_tool":"echo","value":5,"_outputPath":"†state.a && †state.b && c.d"}]]=], "--journal", j)
    assert.are.same({ a = 5, b = 5, c = { d = 5 } }, r.output)
    assert.are.equal(4, #journal_of(j))
  end)

  it("writes to the first || alternative by default, or the one the tool picks", function()
    assert.are.same({ a = 1 }, run([=[[{"_tool":"echo","value":1,"_outputPath":"†state.a || †state.b"}]]=]).output)
    assert.are.same({ b = 2 }, run([=[[{"_tool":"pick","which":2,"value":2,"_outputPath":"†state.a || †state.b"}]]=]).output)
    assert.are.same({ b = 3 }, run([=[[{"_tool":"pick","which":"††state.b","value":3,"_outputPath":"†state.a || †state.b"}]]=]).output)
    assert.are.same({ b = 4 }, run([=[[{"_tool":"pick","which":"b","value":4,"_outputPath":"a || b"}]]=]).output)
  end)

  it("makes naming a missing alternative a runtime error", function()
    local r = run([=[[{"_tool":"pick","which":3,"value":1,"_outputPath":"†state.a || †state.b"}]]=])
    assert.are.equal(1, r.code)
    assert.matches("has 2 alternatives", r.err, 1, true)
  end)

  it("routes a raised error to the last alternative as handled", function()
    local r = run([=[[{"_id":"f","_tool":"fail","message":"boom","_outputPath":"†state.ok || †state.err"}]]=])
    assert.are.equal(0, r.code)
    assert.are.equal("fail", r.output.err.tool)
    assert.are.equal("f", r.output.err.call)
    assert.matches("boom", r.output.err.error, 1, true)
  end)

  it("applies _outputMethod and reports a method error as a runtime error", function()
    local r = run([[{"context":[{"type":"state","data":{"l":[1],"s":"x"}}],"plan":[
      {"_tool":"echo","value":2,"_outputPath":"l","_outputMethod":"push"},
      {"_tool":"echo","value":[3,4],"_outputPath":"l2","_outputMethod":"concat"},
      {"_tool":"echo","value":1,"_outputPath":"s","_outputMethod":"push"}]}]])
    assert.are.equal(1, r.code)
    assert.are.same({ 1, 2 }, r.output.l)
    assert.are.same({ 3, 4 }, r.output.l2)
    assert.are.equal("x", r.output.s)
    assert.matches("push onto string", r.err, 1, true)
  end)

  it("lets a tool place its own outputs with obelus.message, only on declared paths", function()
    local r = run([=[[{"_tool":"messages","list":[{"path":"a.x","value":1},{"path":"a.y","value":[2],"method":"set"}],
                      "_outputPath":"†state.a"}]]=])
    assert.are.equal(0, r.code)
    assert.are.same({ a = { x = 1, y = { 2 } } }, r.output)
    local bad = run([=[[{"_tool":"messages","list":[{"path":"elsewhere","value":1}],"_outputPath":"†state.a"}]]=])
    assert.are.equal(1, bad.code)
    assert.matches("not on the call's _outputPath", bad.err, 1, true)
  end)
end)

describe("obelus run: the collector during a burst of waiting calls", function()
  -- gcnap: makes `kb` KB of garbage, notes whether the engine's collector runs and the
  -- heap's size, then sleeps in rounds until gcmid has seen the collector run (at least
  -- two rounds when `rounds` allows, at most `rounds`). A round's first nap fixes its
  -- end (a loop time every nap sleeps until, so that they wake in one timer callback
  -- however their starts were spread) and, as it wakes, whether it is the last: the naps
  -- stay in step. gcsee: whether the collector runs, once all have slept; gcmid: polls
  -- until it sees the collector run, and says whether the naps were still waiting then.
  -- Nothing depends on how long anything takes.
  local GC_TOOLS = [[
local obelus = require "obelus"
local seen, done, decided, due = false, false, {}, {}
return {
  { name = "gcnap", run = function(call)
      for _ = 1, call.kb // 100 do local _ = string.rep("x", 100000 + call.kb) end
      local running, kb = collectgarbage("isrunning"), collectgarbage("count")
      for round = 1, call.rounds do
        local now = obelus.uv.now()
        due[round] = due[round] or now + call.ms
        obelus.sleep(math.max(1, due[round] - now))
        if decided[round] == nil then
          decided[round] = (seen and round >= 2) or round == call.rounds
        end
        if decided[round] then break end
      end
      done = true
      return { running = running, kb = math.floor(kb) }
    end },
  { name = "gcsee", run = function() return collectgarbage("isrunning") end },
  { name = "gcmid", run = function(call)
      obelus.sleep(call.ms)
      while not collectgarbage("isrunning") do obelus.sleep(5) end
      seen = true
      return not done
    end },
}
]]

  local function burst(n, kb, ms, rounds)
    local calls = {}
    for i = 1, n do
      calls[i] = string.format('{"_tool":"gcnap","kb":%d,"ms":%d,"rounds":%d,"_outputPath":"†state.naps.n%d"}',
                               kb, ms, rounds, i)
    end
    calls[n + 1] = '{"_tool":"gcsee","all":"†state.naps","_outputPath":"†state.after"}'
    -- woken alone, while the naps wait: no burst then
    calls[n + 2] = string.format('{"_tool":"gcmid","ms":%d,"_outputPath":"†state.mid"}', ms // 2)
    local tools = cli.tmpfile(GC_TOOLS, ".lua")
    return cli.run { "run", plan_file('{"plan":[' .. table.concat(calls, ",") .. '],"output":"†state"}'),
                     "--tools", tools }
  end

  it("holds off while 2,000 calls start and wait, runs once the loop is idle, holds off as they wake", function()
    local r = burst(2000, 0, 300, 60)
    assert.are.equal(0, r.code, r.err)
    local out = cjson.decode(r.out)
    assert.is_true(out.naps.n1.running)     -- before any burst
    assert.is_false(out.naps.n2000.running) -- the last of the burst: held
    assert.is_true(out.mid)                 -- the loop's idle time while they waited caught up
    assert.is_false(out.after)              -- the 2,000 woke at once: a burst again, the
                                            -- join runs before the loop is idle
  end)

  it("lets the heap grow no more than its bound: garbage made in a burst is collected", function()
    -- each call makes ~0.5 MB of garbage before it waits: 500 MB in all without a bound
    local r = burst(1000, 500, 50, 1)
    assert.are.equal(0, r.code, r.err)
    local naps, peak, held = cjson.decode(r.out).naps, 0, 0
    for _, v in pairs(naps) do
      peak = math.max(peak, v.kb)
      held = held + (v.running and 0 or 1)
    end
    assert.is_true(held > 0)                   -- a burst: the collector held off at times
    assert.is_true(peak < 160 * 1024, "the heap reached " .. peak .. " KB")
  end)
end)

describe("obelus run: the tool API", function()
  it("hands every call of a tool the same params, first call or later (cached key list)", function()
    -- calls 1, 2 and 4 share their keys (after the first, a tool's params take a shorter
    -- path); call 3 has other keys in between
    local params = [["num":"†input.n","obj":"†input.o","arr":"†input.a","lit":"††state.x",
      "none":null,"alt":"†state.nope || †input.i"]] -- 8 keys with _tool and _outputPath
    local r = run([=[{"context":[{"type":"input","data":{"n":1.5,"i":2,"a":[1,[2]],"o":{"k":{"z":1,"a":2}}}}],
      "plan":[{"_tool":"identity",]=] .. params .. [=[,"_outputPath":"†state.c1"},
              {"_tool":"identity",]=] .. params .. [=[,"_outputPath":"†state.c2"},
              {"_tool":"identity","other":"†input.i","_outputPath":"†state.c3"},
              {"_tool":"identity",]=] .. params .. [=[,"_outputPath":"†state.c4"}]}]=])
    assert.are.equal(0, r.code)
    local want = { num = 1.5, obj = { k = { z = 1, a = 2 } }, arr = { 1, { 2 } }, lit = "†state.x",
                   none = cjson.null, alt = 2, _tool = "identity" }
    for _, c in ipairs { "c1", "c2", "c4" } do
      want._outputPath = "†state." .. c
      assert.are.same(want, r.output[c])
    end
    assert.are.same({ other = 2, _tool = "identity", _outputPath = "†state.c3" }, r.output.c3)
    -- key order as written, in every copy (the tool returned its call unchanged)
    local c1 = r.out:match('"c1": (%b{})')
    local c4 = r.out:match('"c4": (%b{})')
    assert.are.equal(c1:gsub("c1", "cX"), (c4:gsub("c4", "cX")))
    assert.truthy(c1:find('"num".*"obj".*"arr".*"lit".*"none".*"alt"'))
  end)

  it("hands tools exact JSON and literals with †† unescaped", function()
    local r = run([[{"context":[{"type":"input","data":{"n":1.0,"i":2,"e":[],"o":{}}}],
      "plan":[{"_tool":"identity","num":"†input.n","int":"†input.i","empty":"†input.e","obj":"†input.o",
               "lit":"††state.x","lit3":"†††y","nested":{"deep":["†input.i"]},"_outputPath":"†state.call"}],
      "output":"†state.call"}]])
    assert.are.equal(0, r.code)
    assert.matches('"num": 1.0', r.out, 1, true)
    assert.matches('"int": 2,', r.out, 1, true)
    assert.matches('"empty": []', r.out, 1, true)
    assert.matches('"obj": {}', r.out, 1, true)
    assert.matches('"lit": "†state.x"', r.out, 1, true)
    assert.matches('"lit3": "††y"', r.out, 1, true)
    assert.matches('"_outputPath": "†state.call"', r.out, 1, true)
    assert.are.same({ deep = { 2 } }, r.output.nested)
  end)

  it("refuses a wait from a coroutine the tool made, with a clear error", function()
    local r = run([=[[{"_tool":"nested","how":"sleep","_outputPath":"†state.a"},
                      {"_tool":"nested","how":"await","_outputPath":"†state.b"}]]=])
    assert.are.equal(1, r.code)
    local _, n = r.err:gsub("not from outside a tool or from a coroutine the tool made", "")
    assert.are.equal(4, n) -- each error twice: the traceback, then the failure line
  end)

  it("reads the plan from standard input when PLAN is -", function()
    local r = cli.run { "run", "-", "--tools", TOOLS, stdin = '[{"_tool":"echo","value":"piped","_outputPath":"x"}]' }
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ x = "piped" }, cjson.decode(r.out))
  end)

  it("lets a tool require modules kept beside it (its folder is on package.path)", function()
    local plan = plan_file([=[[{"_tool":"shout","text":"hi","_outputPath":"x"}]]=])
    for _, tools in ipairs { "spec/cli/fixtures/require/tools", "spec/cli/fixtures/require/tools/shout.lua" } do
      local r = cli.run { "run", plan, "--tools", tools }
      assert.are.equal(0, r.code, r.err)
      assert.are.same({ x = "HI!" }, cjson.decode(r.out))
    end
  end)

  it("writes null when a tool returns nothing", function()
    local r = run([=[[{"_tool":"nothing","_outputPath":"†state.n"}]]=])
    assert.are.equal(0, r.code)
    assert.matches('"n": null', r.out, 1, true)
  end)

  it("waits on luv timers through obelus.await, and a synchronous resume works", function()
    local r = run([=[[{"_tool":"uvtimer","ms":20,"value":"v","_outputPath":"†state.t"},
                     {"_tool":"syncawait","value":"now","_outputPath":"†state.s"}]]=])
    assert.are.equal(0, r.code)
    assert.are.same({ got = "fired", value = "v" }, r.output.t)
    assert.are.same({ a = "now", b = 2 }, r.output.s)
  end)
end)

describe("obelus run: fire-and-forget and the final output", function()
  it("does not wait for a call without _outputPath, but drains it before exit", function()
    local marker = os.tmpname() .. ".ff"
    local ev = os.tmpname()
    local r = run(string.format([=[[
      {"_id":"bg","_tool":"sleepy","ms":150,"value":1},
      {"_id":"bgmark","_tool":"marker","file":"%s"},
      {"_id":"main","_tool":"echo","value":"done","_outputPath":"†state.main"}]]=], marker), "--events", ev)
    assert.are.equal(0, r.code)
    assert.are.same({ main = "done" }, r.output)
    assert.is_true(exists(marker))
    local order = {}
    for line in io.lines(ev) do
      local e = cjson.decode(line)
      if e.event == "run_done" or (e.event == "done" and e.call == "bg") then order[#order + 1] = e.event end
    end
    assert.are.same({ "run_done", "done" }, order) -- the result did not wait for bg
  end)

  it("abandons fire-and-forget calls after --drain-timeout", function()
    local r = run([=[[{"_tool":"sleepy","ms":3000},{"_tool":"echo","value":1,"_outputPath":"x"}]]=],
      "--drain-timeout", "50")
    assert.are.equal(0, r.code)
    assert.matches("abandoned", r.err, 1, true)
  end)

  it("ends the journal after the last fire-and-forget call, one listed after the awaited ones too", function()
    -- the awaited call completes at once, before bg has started: the run is finished
    -- then, but bg is not settled, and the end record must wait for it
    local j = os.tmpname()
    local r = run([=[[{"_id":"a","_tool":"echo","value":1,"_outputPath":"x"},
                      {"_id":"bg","_tool":"sleepy","ms":100,"value":2}]]=], "--journal", j)
    assert.are.equal(0, r.code)
    local kinds = {}
    for line in io.lines(j) do
      local m = cjson.decode(line)
      if m.journal == "end" or (m.journal == "settled" and m.id == "bg") then
        kinds[#kinds + 1] = m.journal
      end
    end
    os.remove(j)
    assert.are.same({ "settled", "end" }, kinds)
  end)

  it("reports a fire-and-forget failure as detached without changing the exit status", function()
    local j = os.tmpname()
    local r = run([=[[{"_id":"bgfail","_tool":"fail"},{"_tool":"echo","value":1,"_outputPath":"x"}]]=], "--journal", j)
    assert.are.equal(0, r.code)
    local lines = journal_of(j)
    local found
    for _, m in ipairs(lines) do
      if m.kind == "error" then found = m end
    end
    assert.is_true(found.data.detached)
  end)

  it("resolves the output template (absent is null) or prints the state document", function()
    local r = run([[{"plan":[{"_tool":"echo","value":7,"_outputPath":"†state.x"}],
                     "output":{"x":"†state.x","missing":"†state.nope","lit":"††x","list":["†state.x"]}}]])
    assert.are.equal(0, r.code)
    assert.are.same({ x = 7, missing = cjson.null, lit = "†x", list = { 7 } }, r.output)
    assert.are.same({}, run("[]").output)
  end)

  it("adds --input documents after the context", function()
    local r = run([[{"context":[{"type":"input","data":{"a":1,"b":1}}],
                     "plan":[{"_tool":"echo","value":"†input","_outputPath":"in"}]}]],
      "--input", '{"b":2}', "--input", '{"c":3}')
    assert.are.same({ a = 1, b = 2, c = 3 }, r.output["in"])
  end)
end)

describe("obelus run and check: validation (exit 2, nothing runs)", function()
  it("reports every problem at once as file: call <id> (<tool>): <what>, and runs nothing", function()
    local marker = os.tmpname() .. ".v"
    local f = plan_file(string.format([=[[
      {"_id":"ok","_tool":"marker","file":"%s","_outputPath":"†state.m"},
      {"_id":"bad1","_tool":"nosuchtool"},
      {"_id":"bad2","_tool":"echo","value":"†state..x"},
      {"_id":"bad3","_tool":"echo","_outputPath":"†state.a","_outputMethod":"append"},
      {"_id":"bad4","_tool":"echo","_bogus":1},
      {"_id":"bad5","_tool":"strict","color":"blue","_outputPath":"†state.color"},
      {"_id":"bad6","_tool":"strict","color":"red","_outputPath":"†state.other"},
      {"_id":"bad7","_tool":"sleepy"}
    ]]=], marker))
    local j = os.tmpname() .. ".never"
    local r = cli.run { "run", f, "--tools", TOOLS, "--journal", j }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.is_false(exists(marker))
    assert.is_false(exists(j))
    for _, want in ipairs {
      f .. ": call bad1 (nosuchtool): no tool named",
      f .. ": call bad2 (echo): parameter \"value\": empty path segment",
      f .. ": call bad3 (echo): _outputMethod must be one of",
      f .. ": call bad4 (echo): unknown meta-property _bogus",
      f .. ": call bad5 (strict): parameter \"color\" does not satisfy",
      f .. ": call bad6 (strict): _outputPath does not satisfy",
      f .. ": call bad7 (sleepy): params do not satisfy the tool's schema: required",
    } do
      assert.matches(want, r.err, 1, true)
    end
    local c = cli.run { "check", f, "--tools", TOOLS }
    assert.are.equal(2, c.code)
    assert.matches("7 problems", c.err, 1, true)
  end)

  it("judges params holding references only where literal, then checks the resolved value", function()
    local ok = run([[{"context":[{"type":"input","data":{"c":"red"}}],
      "plan":[{"_tool":"strict","color":"†input.c","_outputPath":"†state.color"}]}]])
    assert.are.equal(0, ok.code)
    local bad = run([[{"context":[{"type":"input","data":{"c":"blue"}}],
      "plan":[{"_tool":"strict","color":"†input.c","_outputPath":"†state.color"}]}]])
    assert.are.equal(1, bad.code)
    assert.matches("structural", bad.err, 1, true)
  end)

  it("names the calls on a dependency cycle", function()
    local r = run([=[[{"_id":"a","_tool":"echo","value":"†state.b","_outputPath":"†state.a"},
                     {"_id":"b","_tool":"echo","value":"†state.a","_outputPath":"†state.b"},
                     {"_id":"self","_tool":"echo","value":"†state.s","_outputPath":"†state.s"}]]=])
    assert.are.equal(2, r.code)
    assert.matches("dependency cycle", r.err, 1, true)
    assert.matches("a (echo) -> b (echo) -> a (echo)", r.err, 1, true)
    assert.is_nil(r.err:find("self (echo) ->", 1, true)) -- reading your own output is no cycle
  end)

  it("refuses duplicate ids, ids with @, bad plan keys and bad context", function()
    local r = run([[{"plan":[{"_id":"x","_tool":"echo"},{"_id":"x","_tool":"echo"},{"_id":"a@b","_tool":"echo"}],
                     "extra":1,"context":[5]}]])
    assert.are.equal(2, r.code)
    assert.matches("already the id of another call", r.err, 1, true)
    assert.matches("without '@'", r.err, 1, true)
    assert.matches('unknown key "extra"', r.err, 1, true)
    assert.matches("context[0]", r.err, 1, true)
  end)

  it("needs a latent handler for a latent tool", function()
    local r = run([=[[{"_tool":"latent_thing","_outputPath":"x"}]]=])
    assert.are.equal(2, r.code)
    assert.matches("latent", r.err, 1, true)
  end)

  it("exits 2 on malformed plan JSON, naming the file and line", function()
    local f = plan_file('[\n{"_tool":"echo",\n')
    local r = cli.run { "run", f, "--tools", TOOLS }
    assert.are.equal(2, r.code)
    assert.matches(f .. ": line 3", r.err, 1, true)
  end)

  it("exits 2 naming the file and line for a tool file with a syntax error or a bad table", function()
    local bad = cli.tmpfile("return { name = 'x', run = function( end }\n", ".lua")
    local r = cli.run { "check", plan_file("[]"), "--tools", bad }
    assert.are.equal(2, r.code)
    assert.matches(bad .. ":1:", r.err, 1, true)
    local notool = cli.tmpfile("return {\n  { name = 7,\n    run = function() end },\n}\n", ".lua")
    local r2 = cli.run { "check", plan_file("[]"), "--tools", notool }
    assert.are.equal(2, r2.code)
    assert.matches(notool .. ":3: tool #1", r2.err, 1, true)
    assert.matches('"name" must be a non-empty string', r2.err, 1, true)
  end)

  it("check prints a summary for a valid plan", function()
    local r = cli.run { "check", plan_file([=[[{"_tool":"echo","value":1,"_outputPath":"a"},
                                                {"_tool":"echo","value":"†state.a","_outputPath":"b"}]]=]), "--tools", TOOLS }
    assert.are.equal(0, r.code)
    assert.matches("ok, 2 calls, 1 dependency", r.out, 1, true)
  end)
end)

describe("obelus run: signals", function()
  for _, sig in ipairs { { "INT", 130 }, { "TERM", 143 } } do
    it("stops cleanly on SIG" .. sig[1] .. " with exit " .. sig[2] .. " and a complete journal", function()
      local f = plan_file([=[[{"_id":"quick","_tool":"echo","value":1,"_outputPath":"a"},
                             {"_id":"long","_tool":"sleepy","ms":3600000,"value":1,"_outputPath":"b"}]]=])
      local j = os.tmpname()
      os.remove(j)
      local status = os.tmpname()
      -- signal once quick has settled (its record is in the journal), long still sleeping
      local cmd = string.format("timeout -s KILL 120 %s run %s --tools %s --journal %s >/dev/null 2>&1 & pid=$!; " ..
        "i=0; until grep -q '\"settled\",\"id\":\"quick\"' %s 2>/dev/null || [ $i -ge 1200 ]; do sleep 0.05; i=$((i+1)); done; " ..
        "kill -%s $pid; wait $pid; echo $? > %s",
        cli.quote(cli.bin), f, TOOLS, j, j, sig[1], status)
      os.execute(cmd)
      assert.are.equal(tostring(sig[2]), cli.slurp(status):match("%d+"))
      local lines = journal_of(j)
      assert.are.equal("plan", lines[1].type)
      assert.are.equal(2, #lines) -- the plan and quick's output: nothing half-written
      assert.are.equal("a", lines[2]._path)
    end)
  end
end)
