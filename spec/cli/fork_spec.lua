-- fork_spec.lua -- `obelus fork` (issue 28): a new run from a point of a journal, with
-- changes. The fork's journal inherits the source's messages up to the point, names the
-- source and the point in its first record, writes each --set as a message of its own,
-- and runs exactly the calls that had not completed, the --from call, the readers of a
-- changed path, and what depends on them: asserted from the journals' records.
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/tools"

local function plan_file(json) return cli.tmpfile(json, ".json") end

local lines_of = cli.jsonl

-- the top-level calls that started in a journal after its "resume" record (what the
-- fork ran), as a sorted list
local function ran_after_resume(j)
  local after, ids = false, {}
  for _, m in ipairs(lines_of(j)) do
    if m.journal == "resume" then after = true end
    if after and m.journal == "start" and not m.scope then ids[#ids + 1] = m.id end
  end
  table.sort(ids)
  return ids
end

local function tmp()
  local p = os.tmpname()
  os.remove(p)
  return p
end

-- a -> b -> c (a chain), d reads a, z independent
local CHAIN = [=[{"plan":[
  {"_id":"a","_tool":"echo","value":"†input.x","_outputPath":"†state.a"},
  {"_id":"b","_tool":"echo","value":{"a":"†state.a"},"_outputPath":"†state.b"},
  {"_id":"c","_tool":"echo","value":{"b":"†state.b"},"_outputPath":"†state.c"},
  {"_id":"d","_tool":"echo","value":{"a2":"†state.a"},"_outputPath":"†state.d"},
  {"_id":"z","_tool":"echo","value":"alone","_outputPath":"†state.z"}],
  "output":{"c":"†state.c","d":"†state.d","z":"†state.z"}}]=]

local function run_chain()
  local j = tmp()
  local r = cli.run({ "run", plan_file(CHAIN), "--tools", TOOLS, "--input", '{"x":1}',
                      "--journal", j })
  assert.are.equal(0, r.code, r.err)
  return j
end

local function read(path) return cli.slurp(path) end

describe("obelus fork", function()
  it("--from re-runs exactly the call and its dependants; the source is untouched", function()
    local j = run_chain()
    local before = read(j)
    local f = tmp()
    local r = cli.run({ "fork", j, "--from", "b", "--journal", f })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ "b", "c" }, ran_after_resume(f))
    assert.are.same({ c = { b = { a = 1 } }, d = { a2 = 1 }, z = "alone" }, cjson.decode(r.out))
    assert.are.equal(before, read(j))
    local first
    for _, m in ipairs(lines_of(f)) do
      if m.journal then first = first or m end
    end
    assert.are.same({ journal = "fork", source = j, from = "b" }, first)
    os.remove(j)
    os.remove(f)
  end)

  it("--set runs the readers of the changed path and what follows, as a message of its own", function()
    local j = run_chain()
    local f = tmp()
    local r = cli.run({ "fork", j, "--from", "z", "--set", '†state.a={"new":true}', "--journal", f })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ "b", "c", "d", "z" }, ran_after_resume(f))
    local out = cjson.decode(r.out)
    assert.are.same({ b = { a = { new = true } } }, out.c)
    assert.are.same({ a2 = { new = true } }, out.d)
    local set
    for _, m in ipairs(lines_of(f)) do
      if m.type and m._call and m._call._tool == "fork" then set = m end
    end
    assert.are.same({ a = { new = true } }, set.data)
    assert.are.equal("a", set._path)
    -- `obelus log` shows it
    local log = cli.run({ "log", f })
    assert.are.equal(0, log.code, log.err)
    assert.matches("fork", log.out)
    os.remove(j)
    os.remove(f)
  end)

  it("--at N inside a chain keeps the first N messages and runs the rest", function()
    local j = run_chain()
    -- the messages: plan, input, then a, b, c, d, z's outputs in order; --at 4 keeps a and b
    local msgs = {}
    for _, m in ipairs(lines_of(j)) do if not m.journal then msgs[#msgs + 1] = m end end
    assert.are.equal(7, #msgs)
    local f = tmp()
    local r = cli.run({ "fork", j, "--at", "4", "--journal", f })
    assert.are.equal(0, r.code, r.err)
    local kept = {}
    for _, m in ipairs(lines_of(f)) do
      if m.journal == "settled" then kept[#kept + 1] = m.id end
      if m.journal == "resume" then break end
    end
    local ran = ran_after_resume(f)
    -- what ran is exactly what had not settled among the first 4 messages
    local all = {}
    for _, id in ipairs(kept) do all[#all + 1] = id end
    for _, id in ipairs(ran) do all[#all + 1] = id end
    table.sort(all)
    assert.are.same({ "a", "b", "c", "d", "z" }, all)
    assert.are.equal(2, #kept)
    assert.are.same({ c = { b = { a = 1 } }, d = { a2 = 1 }, z = "alone" }, cjson.decode(r.out))
    os.remove(j)
    os.remove(f)
  end)

  it("forks a fork", function()
    local j = run_chain()
    local f1, f2 = tmp(), tmp()
    assert.are.equal(0, cli.run({ "fork", j, "--from", "c", "--set", '†state.b="one"',
                                  "--journal", f1 }).code)
    local r = cli.run({ "fork", f1, "--from", "d", "--journal", f2 })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ "d" }, ran_after_resume(f2))
    -- the first fork's change is inherited
    assert.are.same({ b = "one" }, cjson.decode(r.out).c)
    os.remove(j)
    os.remove(f1)
    os.remove(f2)
  end)

  it("forks a failed run, which then succeeds with the value changed", function()
    local j = tmp()
    local pf = plan_file([=[{"plan":[
      {"_id":"cfg","_tool":"echo","value":{"fail":true},"_outputPath":"†state.cfg"},
      {"_id":"work","_tool":"failif","fail":"†state.cfg.fail","value":"ok","_outputPath":"†state.w"},
      {"_id":"z","_tool":"echo","value":1,"_outputPath":"†state.z"}],"output":"†state.w"}]=])
    local r = cli.run({ "run", pf, "--tools", TOOLS, "--journal", j })
    assert.are.equal(1, r.code)
    local f = tmp()
    r = cli.run({ "fork", j, "--from", "work", "--set", "†state.cfg.fail=false", "--journal", f })
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("ok", cjson.decode(r.out))
    assert.are.same({ "work" }, ran_after_resume(f))
    os.remove(j)
    os.remove(f)
  end)

  it("a killed fork is taken up by resume", function()
    local marks = tmp()
    local pf = plan_file(([=[{"plan":[
      {"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"s","_tool":"slowmark","_each":"†state.list","file":%q,"tag":"†each.index",
       "ms":30,"_eachConcurrency":1,"value":"†each.value","_outputPath":"†state.s"},
      {"_id":"l","_tool":"echo","value":[1,2,3,4,5,6,7,8,9,10],"_outputPath":"†state.list"}],
      "output":"†state.s"}]=]):format(marks))
    local j, f = tmp(), tmp()
    assert.are.equal(0, cli.run({ "run", pf, "--tools", TOOLS, "--journal", j }).code)
    os.remove(marks)
    local cmd = ("%s fork %s --from s --journal %s --fsync always >/dev/null 2>&1 & pid=$!; " ..
      "for i in $(seq 1 500); do n=$(cat %s 2>/dev/null | wc -l); [ \"$n\" -ge 3 ] && break; " ..
      "sleep 0.02; done; kill -9 $pid; wait $pid 2>/dev/null"):format(cli.quote(cli.bin),
      cli.quote(j), cli.quote(f), cli.quote(marks))
    os.execute(cmd)
    local r = cli.run({ "resume", f })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, cjson.decode(r.out))
    os.remove(j)
    os.remove(f)
    os.remove(marks)
  end)

  it("refuses a bad point, a copy's id, a missing --journal and an existing one", function()
    local j = run_chain()
    local f = tmp()
    local r = cli.run({ "fork", j, "--from", "nope", "--journal", f })
    assert.are.equal(2, r.code)
    assert.matches("%-%-from nope: the journal's plan has no call of that id", r.err)
    r = cli.run({ "fork", j, "--at", "99", "--journal", f })
    assert.are.equal(2, r.code)
    assert.matches("%-%-at 99: .* has 7 messages", r.err)
    r = cli.run({ "fork", j, "--at", "1", "--journal", f })
    assert.are.equal(2, r.code)
    assert.matches("the run had not begun", r.err)
    r = cli.run({ "fork", j, "--from", "b" })
    assert.are.equal(2, r.code)
    assert.matches("needs %-%-journal NEW", r.err)
    r = cli.run({ "fork", j, "--journal", f })
    assert.are.equal(2, r.code)
    assert.matches("%-%-at N or %-%-from CALL_ID", r.err)
    r = cli.run({ "fork", j, "--from", "b", "--set", "†state.a", "--journal", f })
    assert.are.equal(2, r.code)
    assert.matches("%-%-set", r.err)
    r = cli.run({ "fork", j, "--from", "b", "--journal", j })
    assert.are.equal(2, r.code) -- the source exists: never overwritten without --overwrite
    local before = read(j)
    r = cli.run({ "fork", j, "--from", "b", "--journal", j, "--overwrite" })
    assert.are.equal(2, r.code) -- nor with it
    assert.matches("is the journal forked", r.err)
    assert.are.equal(before, read(j))
    os.remove(j)
    os.remove(f)
  end)
end)
