-- each_spec.lua -- _each (issue 28): a call run once per element of a list a call
-- produces. Copies are "<id>[i]", each its own call in the journal and the events; the
-- results are gathered in the list's order at the call's output path; a failed copy
-- fails the call (or goes to its || alternative); _retry, _timeout and _instance are
-- each copy's; _eachConcurrency bounds the copies running at once; resume after a real
-- SIGKILL runs only the copies that had not completed. All asserted from the output,
-- the events and the journal's records, never from the clock.
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/tools"

local function plan_file(json) return cli.tmpfile(json, ".json") end

local lines_of = cli.jsonl

local function run(plan, ...)
  local j = os.tmpname()
  local args = { "run", plan_file(plan), "--tools", TOOLS, "--journal", j, "--overwrite", ... }
  local r = cli.run(args)
  r.journal = j
  return r
end

-- the journal's records of the copies' run (scoped), in order
local function scoped(j)
  local scopes, out = {}, {}
  for _, m in ipairs(lines_of(j)) do
    if m.journal == "scope" then scopes[m.n] = m.path or (scopes[m["in"]] .. "/" .. m.call) end
    if m.scope then
      m.scope_path = scopes[m.scope]
      out[#out + 1] = m
    end
  end
  return out
end

-- a list of n numbers, as JSON
local function numbers(n)
  local t = {}
  for i = 1, n do t[i] = tostring(i * 10) end
  return "[" .. table.concat(t, ",") .. "]"
end

describe("_each", function()
  for _, n in ipairs({ 0, 1, 1000 }) do
    it(("maps a call over a list of %d made at run time, in the list's order"):format(n), function()
      local r = run(([=[{"plan":[
        {"_id":"list","_tool":"echo","value":%s,"_outputPath":"†state.items"},
        {"_id":"sq","_tool":"echo","_each":"†state.items",
         "value":{"n":"†each.value","i":"†each.index"},"_outputPath":"†state.out"},
        {"_id":"after","_tool":"echo","value":"†state.out","_outputPath":"†state.after"}],
        "output":"†state.after"}]=]):format(numbers(n)))
      assert.are.equal(0, r.code, r.err)
      local out = cjson.decode(r.out)
      assert.are.equal(n, #out)
      for i = 1, n do
        assert.are.equal(i * 10, out[i].n)
        assert.are.equal(i - 1, out[i].i)
      end
      -- each copy is its own call in the journal, "sq[i]", settled done once
      local done = {}
      for _, m in ipairs(scoped(r.journal)) do
        if m.journal == "settled" then
          assert.are.equal("sq", m.scope_path)
          assert.are.equal("done", m.state)
          assert.is_nil(done[m.id])
          done[m.id] = true
        end
      end
      for i = 0, n - 1 do assert.is_true(done[("sq[%d]"):format(i)], "sq[" .. i .. "]") end
      os.remove(r.journal)
    end)
  end

  it("holds _eachConcurrency (from the journal's start and settled records)", function()
    local marks = os.tmpname()
    local r = run(([=[{"plan":[
      {"_id":"list","_tool":"echo","value":%s,"_outputPath":"†state.items"},
      {"_id":"w","_tool":"slowmark","_each":"†state.items","_eachConcurrency":3,
       "file":%q,"tag":"†each.index","ms":2,"value":"†each.value","_outputPath":"†state.out"}],
      "output":"†state.out"}]=]):format(numbers(40), marks))
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(40, #cjson.decode(r.out))
    local running, most = 0, 0
    for _, m in ipairs(scoped(r.journal)) do
      if m.journal == "start" then running = running + 1 end
      if m.journal == "settled" then running = running - 1 end
      if running > most then most = running end
    end
    assert.are.equal(3, most) -- reached, never passed
    os.remove(r.journal)
    os.remove(marks)
  end)

  it("tells each copy's events, with ids <id>[i]", function()
    local ev = os.tmpname()
    local r = run([=[{"plan":[
      {"_id":"list","_tool":"echo","value":["a","b"],"_outputPath":"†state.items"},
      {"_id":"up","_tool":"echo","_each":"†state.items","value":"†each.value",
       "_outputPath":"†state.out"}],"output":"†state.out"}]=], "--events", ev)
    assert.are.equal(0, r.code, r.err)
    local seen = {}
    for _, e in ipairs(lines_of(ev)) do
      if e.call and e.call:match("^up%[") then assert.are.equal("up", e.each) end
      if e.call and e.call:match("^up%[") and e.event == "done" then seen[e.call] = e.value end
      if e.call == "up" then assert.is_nil(e.each) end
    end
    assert.are.same({ ["up[0]"] = "a", ["up[1]"] = "b" }, seen)
    os.remove(ev)
    os.remove(r.journal)
  end)

  it("fails as one call when a copy fails, once the others settled; dependants skipped", function()
    local r = run([=[{"plan":[
      {"_id":"list","_tool":"echo","value":[false,true,false],"_outputPath":"†state.items"},
      {"_id":"f","_tool":"failif","_each":"†state.items","fail":"†each.value",
       "message":"bad element","value":"†each.index","_outputPath":"†state.out"},
      {"_id":"after","_tool":"echo","value":"†state.out","_outputPath":"†state.after"}]}]=])
    assert.are.equal(1, r.code, r.err)
    assert.matches("copy f%[1%] failed: .*bad element", r.err)
    local states = {}
    for _, m in ipairs(lines_of(r.journal)) do
      if m.journal == "settled" then states[(m.scope and "c:" or "") .. m.id] = m.state end
    end
    assert.are.same({ list = "done", f = "failed", after = "skipped",
                      ["c:f[0]"] = "done", ["c:f[1]"] = "failed", ["c:f[2]"] = "done" }, states)
    os.remove(r.journal)
  end)

  it("draws the copies with their outcomes in `graph --journal`, the rest counted", function()
    local pf = plan_file(([=[{"plan":[
      {"_id":"list","_tool":"echo","value":%s,"_outputPath":"†state.items"},
      {"_id":"f","_tool":"failif","_each":"†state.items","fail":"†each.value",
       "value":"†each.index","_outputPath":"†state.out"}]}]=]):format(
      "[false,true" .. (",false"):rep(28) .. "]"))
    local j = os.tmpname()
    local r = cli.run({ "run", pf, "--tools", TOOLS, "--journal", j, "--overwrite" })
    assert.are.equal(1, r.code, r.err)
    local g = cli.run({ "graph", pf, "--journal", j })
    assert.are.equal(0, g.code, g.err)
    assert.matches('subgraph cluster_n1', g.out, 1, true)
    assert.matches('n1c0 [label="f[0]\\nfailif\\ndone", style="rounded,filled", fillcolor="#c6efce"]',
                   g.out, 1, true)
    assert.matches('n1c1 [label="f[1]\\nfailif\\nfailed", style="rounded,filled", fillcolor="#ffc7ce"]',
                   g.out, 1, true)
    assert.matches('... 6 more copies', g.out, 1, true)
    assert.matches('each †state.items', g.out, 1, true)
    local m = cli.run({ "graph", pf, "--journal", j, "--format", "mermaid" })
    assert.are.equal(0, m.code, m.err)
    assert.matches('subgraph each_n1', m.out, 1, true)
    assert.matches('style n1c1 fill:#ffc7ce', m.out, 1, true)
    os.remove(j)
  end)

  it("shows what copies sent (obelus.emit) under their call in `obelus log`", function()
    local r = run([=[{"plan":[
      {"_id":"l","_tool":"echo","value":[2,1],"_outputPath":"†state.l"},
      {"_id":"s","_tool":"steps","_each":"†state.l","n":"†each.value","_outputPath":"†state.s"}],
      "output":"†state.s"}]=])
    assert.are.equal(0, r.code, r.err)
    local log = cli.run({ "log", r.journal })
    assert.are.equal(0, log.code, log.err)
    local lines = {}
    local timeline = log.out:match("^(.-)\ncalls, from the run's first start:") -- not the calls
    for line in timeline:gmatch("[^\n]+") do
      if line:match("progress") or line:match("s%[%d%]  steps") then lines[#lines + 1] = line end
    end
    -- each copy's progress lines come before its output, indented under the call
    assert.are.equal(5, #lines, log.out)
    assert.matches('^%s+%+[%d.]+s%s+s%[0%]%s+progress%s+{"attempt":1,"step":1}', lines[1])
    assert.matches('^%s+%+[%d.]+s%s+s%[0%]%s+progress%s+{"attempt":1,"step":2}', lines[2])
    assert.matches("2%.1%s+%+[%d.]+s%s+s%[0%]%s+steps", lines[3])
    assert.matches('s%[1%]%s+progress%s+{"attempt":1,"step":1}', lines[4])
    assert.matches("2%.2%s+%+[%d.]+s%s+s%[1%]%s+steps", lines[5])
    os.remove(r.journal)
  end)

  it("hands a failed copy's error to the call's || alternative", function()
    local r = run([=[{"plan":[
      {"_id":"list","_tool":"echo","value":[false,true],"_outputPath":"†state.items"},
      {"_id":"f","_tool":"failif","_each":"†state.items","fail":"†each.value",
       "value":"†each.index","_outputPath":"†state.out || †state.err"}],
      "output":{"out":"†state.out","err":"†state.err"}}]=])
    assert.are.equal(0, r.code, r.err)
    local out = cjson.decode(r.out)
    assert.are.equal(cjson.null, out.out)
    assert.matches("copy f%[1%] failed", out.err.error)
    os.remove(r.journal)
  end)

  it("retries each copy on its own (_retry)", function()
    local r = run([=[{"plan":[
      {"_id":"list","_tool":"echo","value":[1,2,3],"_outputPath":"†state.items"},
      {"_id":"s","_tool":"steps","_each":"†state.items","n":"†each.value","fail_first":true,
       "_retry":{"attempts":2,"delay_ms":1},"_outputPath":"†state.out"}],
      "output":"†state.out"}]=])
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ 1, 2, 3 }, cjson.decode(r.out))
    local attempts, top = {}, 0
    for _, m in ipairs(lines_of(r.journal)) do
      if m.journal == "start" and m.scope then attempts[m.id] = m.attempt end
      if m.journal == "start" and not m.scope and m.id == "s" then top = top + 1 end
    end
    assert.are.same({ ["s[0]"] = 2, ["s[1]"] = 2, ["s[2]"] = 2 }, attempts)
    assert.are.equal(1, top) -- the call itself started once
    os.remove(r.journal)
  end)

  it("runs per instance on threads (run --threads), every copy's event told", function()
    local ev = os.tmpname()
    local r = run([=[{"instances":["a","b","c","d"],"context":[
        {"type":"data","kind":"input","_instance":"a","data":{"items":[1,2]}},
        {"type":"data","kind":"input","_instance":"b","data":{"items":[3]}},
        {"type":"data","kind":"input","_instance":"c","data":{"items":[]}},
        {"type":"data","kind":"input","_instance":"d","data":{"items":[4,5,6]}}],
      "plan":[{"_id":"m","_tool":"echo","_each":"†input.items","value":"†each.value",
               "_outputPath":"†state.out"}],"output":"†state.out"}]=],
      "--threads", "2", "--events", ev)
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ a = { 1, 2 }, b = { 3 }, c = {}, d = { 4, 5, 6 } }, cjson.decode(r.out))
    local done = {}
    for _, e in ipairs(lines_of(ev)) do
      if e.event == "done" and e.each then done[#done + 1] = ("%s=%d"):format(e.call, e.value) end
    end
    table.sort(done)
    assert.are.same({ "m@a[0]=1", "m@a[1]=2", "m@b[0]=3", "m@d[0]=4", "m@d[1]=5", "m@d[2]=6" }, done)
    os.remove(ev)
    os.remove(r.journal)
  end)

  it("runs per instance, each copy in its call's instance (ids <id>@<instance>[i])", function()
    local ev, marks = os.tmpname(), os.tmpname()
    local r = run(([=[{"instances":["a","b"],"context":[
        {"type":"data","kind":"input","_instance":"a","data":{"items":[1,2]}},
        {"type":"data","kind":"input","_instance":"b","data":{"items":[3]}}],
      "plan":[
      {"_id":"m","_tool":"slowmark","_each":"†input.items","file":%q,"tag":"†each.value",
       "show_instance":true,"value":"†each.value","_outputPath":"†state.out"}],
      "output":"†state.out"}]=]):format(marks), "--events", ev)
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ a = { { value = 1, instance = "a" }, { value = 2, instance = "a" } },
                      b = { { value = 3, instance = "b" } } }, cjson.decode(r.out))
    local ids = {}
    for _, e in ipairs(lines_of(ev)) do
      if e.event == "done" and e.call:match("%[") then ids[#ids + 1] = e.call end
    end
    table.sort(ids)
    assert.are.same({ "m@a[0]", "m@a[1]", "m@b[0]" }, ids)
    os.remove(ev)
    os.remove(marks)
    os.remove(r.journal)
  end)

  it("works inside a delegated plan", function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. cli.quote(dir))
    local f = assert(io.open(dir .. "/sub.json", "w"))
    f:write([=[{"plan":[{"_id":"e","_tool":"echo","_each":"†input.xs",
      "value":{"x":"†each.value"},"_outputPath":"†state.out"}],"output":"†state.out"}]=])
    f:close()
    f = assert(io.open(dir .. "/main.json", "w"))
    f:write([=[[{"_id":"d","_delegate":"sub.json","xs":[5,6],"_outputPath":"†state.r"}]]=])
    f:close()
    local j = os.tmpname()
    local r = cli.run({ "run", dir .. "/main.json", "--tools", TOOLS, "--journal", j,
                        "--overwrite" })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ r = { { x = 5 }, { x = 6 } } }, cjson.decode(r.out))
    local paths = {}
    for _, m in ipairs(scoped(j)) do
      if m.journal == "settled" then paths[#paths + 1] = m.scope_path .. " " .. m.id end
    end
    table.sort(paths)
    assert.are.same({ "d e", "d/e e[0]", "d/e e[1]" }, paths)
    os.execute("rm -rf " .. cli.quote(dir))
    os.remove(j)
  end)

  it("counts copies against --max-calls", function()
    local r = run(([=[{"plan":[
      {"_id":"list","_tool":"echo","value":%s,"_outputPath":"†state.items"},
      {"_id":"e","_tool":"echo","_each":"†state.items","value":"†each.value",
       "_outputPath":"†state.out"}]}]=]):format(numbers(20)), "--max-calls", "10")
    assert.are.equal(1, r.code, r.err)
    assert.matches("_each: its 20 copies would make 22 calls in all, more than %-%-max%-calls 10", r.err)
    -- none was made: no copy's record in the journal
    for _, m in ipairs(lines_of(r.journal)) do assert.is_nil(m.scope) end
    os.remove(r.journal)
  end)

  it("is refused when _each is not a reference, or †each is used outside it", function()
    local r = cli.run({ "check", plan_file([=[[
      {"_id":"a","_tool":"echo","_each":[1,2],"value":1},
      {"_id":"b","_tool":"echo","value":"†each.value"},
      {"_id":"c","_tool":"echo","_each":"†state.x","value":"†each.nothing"},
      {"_id":"d","_tool":"echo","_eachConcurrency":2,"value":1},
      {"_id":"e","_tool":"echo","_each":"†state.x","_eachConcurrency":0,"value":1}]]=]),
      "--tools", TOOLS })
    assert.are.equal(2, r.code)
    assert.matches("call a %(echo%): _each must be a reference", r.err)
    assert.matches("call b %(echo%): parameter \"value\": †each.value is only for a call with _each", r.err)
    assert.matches("call c %(echo%): parameter \"value\": †each.nothing", r.err)
    assert.matches("call d %(echo%): _eachConcurrency only applies to a call with _each", r.err)
    assert.matches("call e %(echo%): _eachConcurrency must be a whole number", r.err)
  end)

  it("fails the call at run time when the list is not an array", function()
    local r = run([=[{"plan":[
      {"_id":"list","_tool":"echo","value":{"not":"a list"},"_outputPath":"†state.items"},
      {"_id":"e","_tool":"echo","_each":"†state.items","value":"†each.value",
       "_outputPath":"†state.out"}]}]=])
    assert.are.equal(1, r.code)
    assert.matches("call e %(echo%) failed %(runtime%): _each: †state.items is object, not a list", r.err)
    os.remove(r.journal)
  end)

  it("after a SIGKILL, resume runs only the copies that had not completed", function()
    local marks = os.tmpname()
    local pf = plan_file(([=[{"plan":[
      {"_id":"list","_tool":"echo","value":%s,"_outputPath":"†state.items"},
      {"_id":"w","_tool":"slowmark","_each":"†state.items","_eachConcurrency":2,
       "file":%q,"tag":"†each.index","ms":40,"value":"†each.value","_outputPath":"†state.out"}],
      "output":"†state.out"}]=]):format(numbers(30), marks))
    local j = os.tmpname()
    os.remove(j)
    -- killed once a few copies have run (their marks say so), not at a time
    local cmd = ("%s run %s --tools %s --journal %s --fsync always >/dev/null 2>&1 & pid=$!; " ..
      "for i in $(seq 1 500); do n=$(wc -l < %s); [ \"$n\" -ge 8 ] && break; sleep 0.02; done; " ..
      "kill -9 $pid; wait $pid 2>/dev/null"):format(cli.quote(cli.bin), cli.quote(pf), TOOLS,
      cli.quote(j), cli.quote(marks))
    os.execute(cmd)
    local done_before = {}
    for _, m in ipairs(lines_of(j)) do
      if m.journal == "settled" and m.scope and m.state == "done" then done_before[m.id] = true end
    end
    local ndone = 0
    for _ in pairs(done_before) do ndone = ndone + 1 end
    assert.is_true(ndone >= 4 and ndone < 30, "copies done before the kill: " .. ndone)
    local r = cli.run({ "resume", j })
    assert.are.equal(0, r.code, r.err)
    assert.are.same(cjson.decode(numbers(30)), cjson.decode(r.out))
    -- after the resume record, no copy that had completed starts again
    local resumed = false
    for _, m in ipairs(lines_of(j)) do
      if m.journal == "resume" then resumed = true end
      if resumed and m.journal == "start" and m.scope then
        assert.is_nil(done_before[m.id], m.id .. " ran again")
      end
    end
    assert.is_true(resumed)
    os.remove(j)
    os.remove(marks)
  end)
end)
