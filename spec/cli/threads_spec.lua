-- threads_spec.lua -- `obelus run --threads N`: a plan's instances shared out over N
-- engines on N threads give the output, exit status and journal one engine gives.
local cli = require "support.cli"
local cjson = require "cjson"

local tools = "spec/cli/tools"

-- A tool whose globals show which engine ran a call: each engine counts its own.
local counter = cli.tmpfile([[
local n = 0
return { name = "count", description = "returns how many calls this engine's Lua state has run",
  run = function(call) n = n + 1; return n end }]], ".lua")

local function lines(path)
  local t = {}
  for l in io.lines(path) do t[#t + 1] = l end
  return t
end

-- a journal's lines with their clocks blanked, and grouped by instance
local function normal(path)
  local all, by = {}, {}
  for _, l in ipairs(lines(path)) do
    local m = cjson.decode(l)
    m.t, m._date = nil, nil
    local s = cjson.encode(m)
    all[#all + 1] = s
    local inst = m._instance or (m.id and m.id:match("@(.*)$")) or "-"
    by[inst] = by[inst] or {}
    table.insert(by[inst], s)
  end
  return all, by
end

local function sorted(t)
  local c = { table.unpack(t) }
  table.sort(c)
  return c
end

local function instances(n)
  local ids, ctx = {}, {}
  for i = 1, n do
    ids[i] = "i" .. i
    ctx[i] = string.format('{"type":"input","data":{"n":%d,"v":"v%d"},"_instance":"i%d"}', i, i, i)
  end
  return ids, table.concat(ctx, ",")
end

-- acceptance-style: reads of global and instance input, a chain, a fan-out and
-- join, a push, a branch taken by an instance's data, a failure skipping a follower
local function plan(n)
  local ids, ctx = instances(n)
  return string.format([[{"instances":%s,
    "context":[{"type":"input","data":{"greeting":"hi","list":["g"]}},%s],
    "plan":[
      {"_id":"a","_tool":"echo","value":"†input.v","_outputPath":"†state.a"},
      {"_id":"b","_tool":"sleepy","ms":5,"value":"†state.a","_outputPath":"†state.b"},
      {"_id":"c1","_tool":"echo","value":["†input.greeting","†state.b"],"_outputPath":"†state.fan.c1"},
      {"_id":"c2","_tool":"echo","value":"†input.n","_outputPath":"†state.fan.c2"},
      {"_id":"p","_tool":"echo","value":"†input.v","_outputPath":"†input.list","_outputMethod":"push"},
      {"_id":"j","_tool":"echo","value":{"fan":"†state.fan","list":"†input.list"},"_outputPath":"†state.j"},
      {"_id":"br","_tool":"pick","which":1,"value":"†input.n","_outputPath":"†state.one || †state.two"},
      {"_id":"after","_tool":"echo","value":"†state.two","_outputPath":"†state.after"}
    ]}]], cjson.encode(ids), ctx)
end

local function run(p, ...)
  local r = cli.run { "run", p, "--tools", tools, ... }
  if r.out ~= "" then r.output = cjson.decode(r.out) end
  return r
end

describe("obelus run --threads", function()
  it("gives one engine's output, exit status and journal, for 1 to 5 threads", function()
    local p = cli.tmpfile(plan(7), ".json")
    local j1 = os.tmpname()
    local one = run(p, "--threads", "1", "--journal", j1)
    assert.are.equal(0, one.code, one.err)
    assert.are.equal(7, #(function() local t = {} for k in pairs(one.output) do t[#t + 1] = k end return t end)())
    assert.are.same({ "g", "v3" }, one.output.i3.j.list)
    local all1, by1 = normal(j1)
    for _, t in ipairs { "2", "3", "5" } do
      local jt = os.tmpname()
      local r = run(p, "--threads", t, "--journal", jt)
      assert.are.equal(0, r.code, r.err)
      assert.are.equal(one.out, r.out) -- the same text: instances in the plan's order
      local allt, byt = normal(jt)
      assert.are.same(sorted(all1), sorted(allt))
      for inst, seq in pairs(by1) do assert.are.same(seq, byt[inst], inst) end
      -- the first lines (plan, context, input, run) and the last (end) are one engine's
      for i = 1, 4 do assert.are.equal(all1[i], allt[i]) end
      assert.are.equal(all1[#all1], allt[#allt])
      os.remove(jt)
    end
    os.remove(j1)
  end)

  it("shares instances out over engines: tool globals are per engine", function()
    local ids = instances(10)
    local p = cli.tmpfile(string.format([[{"instances":%s,
      "plan":[{"_tool":"count","_outputPath":"n"}]}]], cjson.encode(ids)), ".json")
    local function counts(...)
      local r = cli.run { "run", p, "--tools", counter, ... }
      assert.are.equal(0, r.code, r.err)
      local seen = {}
      for _, v in pairs(cjson.decode(r.out)) do seen[#seen + 1] = v.n end
      table.sort(seen)
      return seen
    end
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, counts("--threads", "1"))
    assert.are.same({ 1, 1, 2, 2, 3, 3, 4, 4, 5, 5 }, counts("--threads", "2"))
    assert.are.same({ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, counts("--threads", "10"))
    assert.are.same({ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, counts("--threads", "64")) -- never more than instances
    -- the default: one thread per core for a plan with instances (this machine has 2 or more)
    local cores = tonumber(io.popen("nproc"):read("l"))
    if cores >= 2 then assert.are.equal(1, counts()[2]) end
    -- one engine for what cannot be shared out: --concurrency 1, --approve's terminal
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, counts("--threads", "4", "--concurrency", "1"))
    -- and a journal synced at every result (its promise is one engine's); batch shares out
    local j = os.tmpname()
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 },
      counts("--threads", "4", "--journal", j, "--fsync", "always"))
    os.remove(j)
    assert.are.same({ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 },
      counts("--threads", "10", "--journal", j, "--fsync", "batch"))
    os.remove(j)
    -- a plan without instances runs on one engine
    local flat = cli.tmpfile([[{"plan":[{"_tool":"count","_outputPath":"a"},{"_tool":"count","_outputPath":"b"}]}]], ".json")
    local r = cli.run { "run", flat, "--tools", counter, "--threads", "2" }
    local out = cjson.decode(r.out)
    assert.are.same({ 1, 2 }, sorted { out.a, out.b })
  end)

  it("fails as one engine does: exit 1, each failed copy named, followers skipped", function()
    local ids = instances(4)
    local p = cli.tmpfile(string.format([[{"instances":%s,"plan":[
      {"_id":"boom","_tool":"fail","_outputPath":"x"},
      {"_id":"next","_tool":"echo","value":"†state.x","_outputPath":"y"},
      {"_id":"ok","_tool":"echo","value":1,"_outputPath":"z"}]}]], cjson.encode(ids)), ".json")
    local a, b = run(p, "--threads", "1"), run(p, "--threads", "3")
    assert.are.equal(1, a.code)
    assert.are.equal(1, b.code)
    assert.are.equal(a.out, b.out)
    for i = 1, 4 do assert.matches("call boom@i" .. i .. " (fail) failed", b.err, 1, true) end
  end)

  it("keeps --concurrency across threads, and tells every event", function()
    local ids = instances(6)
    local p = cli.tmpfile(string.format([[{"instances":%s,"plan":[
      {"_tool":"sleepy","ms":30,"value":1,"_outputPath":"x"},
      {"_tool":"sleepy","ms":30,"value":2,"_outputPath":"y"}]}]], cjson.encode(ids)), ".json")
    local ev = os.tmpname()
    local r = run(p, "--threads", "2", "--concurrency", "3", "--events", ev)
    assert.are.equal(0, r.code, r.err)
    local running, most, started, done, run_done = 0, 0, 0, 0, 0
    for _, l in ipairs(lines(ev)) do
      local e = cjson.decode(l)
      if e.event == "run_done" then run_done = run_done + 1 end
      if e.event == "started" then running, started = running + 1, started + 1 end
      if e.event == "done" then running, done = running - 1, done + 1 end
      if running > most then most = running end
    end
    assert.are.equal(12, started)
    assert.are.equal(12, done)
    assert.are.equal(1, run_done) -- one run, one run_done, last
    assert.are.equal("run_done", cjson.decode(lines(ev)[#lines(ev)]).event)
    assert.is_true(most <= 3 and most >= 2, "at most 3 at once, saw " .. most)
    os.remove(ev)
  end)

  it("waits for fire-and-forget calls on every thread", function()
    local ids = instances(4)
    local mark = os.tmpname()
    local p = cli.tmpfile(string.format([[{"instances":%s,"plan":[
      {"_tool":"marker","file":%q},
      {"_tool":"echo","value":1,"_outputPath":"x"}]}]], cjson.encode(ids), mark), ".json")
    local r = run(p, "--threads", "2")
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ "ran", "ran", "ran", "ran" }, lines(mark))
    os.remove(mark)
  end)

  it("writes a journal that resume, log and report read as one engine's", function()
    local ids, ctx = instances(6)
    local p = cli.tmpfile(string.format([[{"instances":%s,"context":[%s],"plan":[
      {"_id":"s","_tool":"sleepy","ms":400,"value":"†input.v","_outputPath":"s"},
      {"_id":"t","_tool":"echo","value":"†state.s","_outputPath":"t"}]}]], cjson.encode(ids), ctx), ".json")
    local want = run(p, "--threads", "1")
    -- killed while every instance sleeps, then resumed (on one engine)
    local j = os.tmpname()
    -- killed once a call has started (its record in the journal), not after a guess
    os.execute(string.format("(%s run %s --tools %s --threads 3 --journal %s >/dev/null 2>&1 & echo $! > %s.pid); " ..
      "for i in $(seq 600); do grep -q '\"journal\":\"start\"' %s 2>/dev/null && break; sleep 0.05; done; kill -9 $(cat %s.pid)",
      cli.bin, p, tools, j, j, j, j))
    os.execute("sleep 0.2")
    local res = cli.run { "resume", j, "--tools", tools }
    assert.are.equal(0, res.code, res.err)
    assert.are.same(want.output, cjson.decode(res.out))
    -- a whole threaded journal: resume runs nothing again; log reads it
    local j2 = os.tmpname()
    assert.are.equal(0, run(p, "--threads", "2", "--journal", j2).code)
    local again = cli.run { "resume", j2, "--tools", tools }
    assert.are.equal(0, again.code, again.err)
    assert.are.same(want.output, cjson.decode(again.out))
    local log = cli.run { "log", j2 }
    assert.are.equal(0, log.code, log.err)
    assert.matches("t@i6", log.out, 1, true)
    os.remove(j)
    os.remove(j2)
  end)

  it("stops every thread on SIGINT: exit 130", function()
    local ids = instances(4)
    local p = cli.tmpfile(string.format([[{"instances":%s,"plan":[
      {"_tool":"sleepy","ms":3600000,"value":1,"_outputPath":"x"}]}]], cjson.encode(ids)), ".json")
    local out, ev = os.tmpname(), os.tmpname()
    -- the signal is sent once a call has started (its event written), not after a guess
    -- at how long starting takes; the calls would take an hour: the
    -- cap's SIGKILL (120 s) would leave no rc line
    os.execute(string.format("timeout -s KILL 120 sh -c '%s run %s --tools %s --threads 2 --events %s >%s 2>&1 & pid=$!; " ..
      "while ! grep -q started %s; do sleep 0.05; done; kill -INT $pid; wait $pid; echo \"rc=$?\" >> %s'",
      cli.bin, p, tools, ev, out, ev, out))
    local text = cli.slurp(out)
    assert.matches("rc=130", text, 1, true)
    assert.matches("interrupted by SIGINT", text, 1, true)
    os.remove(out)
    os.remove(ev)
  end)

  it("writes each call's start to the journal before its tool runs, on every thread", function()
    -- write-ahead, as on one engine: a call killed with the process after its tool
    -- began is known to have started, and resume says it runs again. Each tool reads
    -- the journal file and answers whether its own start line is there yet.
    local j = os.tmpname()
    local seer = cli.tmpfile([[
return { name = "seen", run = function(call)
  local f = assert(io.open(call.journal))
  local text = f:read("a")
  f:close()
  return text:find('"journal":"start","id":"' .. call.me .. '@', 1, true) ~= nil
end }]], ".lua")
    local ids = instances(8)
    local calls = {}
    for i = 1, 3 do
      calls[i] = string.format('{"_id":"c%d","_tool":"seen","me":"c%d","journal":%q,"_outputPath":"s%d"%s}',
        i, i, j, i, i > 1 and string.format(',"after":"†state.s%d"', i - 1) or "")
    end
    local p = cli.tmpfile(string.format('{"instances":%s,"plan":[%s]}', cjson.encode(ids),
      table.concat(calls, ",")), ".json")
    local r = cli.run { "run", p, "--tools", seer, "--threads", "2", "--journal", j }
    assert.are.equal(0, r.code, r.err)
    local out = cjson.decode(r.out)
    for _, id in ipairs(ids) do
      for i = 1, 3 do assert.is_true(out[id]["s" .. i], id .. " c" .. i .. " ran before its start was written") end
    end
    os.remove(j)
  end)

  it("reports an invalid plan's problems as one engine does, each copy's, and runs nothing", function()
    -- the main thread checks one copy of each call before the threads read their parts;
    -- a plan with problems is read whole again, so every copy's problem is named
    local ids = instances(3)
    local plans = {
      [[{"_id":"a","_tool":"echo","value":"†state.b","_outputPath":"a"},
        {"_id":"b","_tool":"echo","value":"†state.a","_outputPath":"b"}]],  -- a cycle in each copy
      [[{"_id":"a","_tool":"nosuch","_outputPath":"a"}]],                  -- no such tool
      [[{"_id":"a","_tool":"strict","mode":"loud","_outputPath":"a"}]],     -- the tool's schema
      [[{"_id":"a","_tool":"echo","value":1,"_outputPath":"a","_bogus":1}]], -- a meta-property
    }
    for _, calls in ipairs(plans) do
      local p = cli.tmpfile(string.format('{"instances":%s,"plan":[%s]}', cjson.encode(ids), calls), ".json")
      local j = os.tmpname()
      os.remove(j)
      local one, two = run(p, "--threads", "1"), run(p, "--threads", "2", "--journal", j)
      assert.are.equal(2, one.code)
      assert.are.equal(2, two.code)
      assert.are.equal("", two.out)
      assert.are.equal(one.err, two.err)
      assert.is_nil(io.open(j)) -- nothing ran: no journal
    end
    -- a cycle is named in every copy
    local p = cli.tmpfile(string.format('{"instances":%s,"plan":[%s]}', cjson.encode(ids), plans[1]), ".json")
    local err = run(p, "--threads", "2").err
    for i = 1, 3 do assert.matches("a@i" .. i .. " (echo) -> b@i" .. i, err, 1, true) end
  end)

  it("shares --max-memory out: each thread's engine has its part, so the run stays within it", function()
    -- each instance keeps 40 MB: two of them pass 64 MB on one engine or on two
    local hog = cli.tmpfile([[
local kept = {}
return { name = "hog", description = "keeps mb megabytes",
  run = function(call)
    for i = 1, call.mb do kept[#kept + 1] = string.rep(string.char(64 + i % 26), 1048576) end
    return #kept
  end }]], ".lua")
    local p = cli.tmpfile([[{"instances":["i1","i2"],"plan":[
      {"_id":"h","_tool":"hog","mb":40,"_outputPath":"†state.n"}]}]], ".json")
    for _, threads in ipairs { "1", "2" } do
      local r = cli.run { "run", p, "--tools", hog, "--threads", threads, "--max-memory", "64" }
      assert.are.equal(1, r.code, r.err)
      assert.matches("memory limit of " .. (threads == "2" and "32" or "64") .. " MB reached", r.err, 1, true)
    end
  end)

  it("counts --max-calls over every thread, and refuses a bad --threads", function()
    local ids = instances(4)
    local p = cli.tmpfile(string.format([[{"instances":%s,"plan":[
      {"_tool":"echo","value":1,"_outputPath":"x"}]}]], cjson.encode(ids)), ".json")
    assert.are.equal(2, run(p, "--threads", "2", "--max-calls", "3").code)
    assert.are.equal(0, run(p, "--threads", "2", "--max-calls", "4").code)
    assert.are.equal(2, run(p, "--threads", "0").code)
    assert.are.equal(2, run(p, "--threads", "x").code)
  end)
end)
