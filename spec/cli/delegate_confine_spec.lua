-- delegate_confine_spec.lua -- _delegate stays inside the plans root (plans are
-- untrusted): absolute paths, ".." that climbs out, symbolic links leading out and
-- prefix-sibling folders are validation errors (exit 2, nothing runs, the call named,
-- nothing of the file quoted); a sub-plan may delegate anywhere inside the root the
-- run started with; --plans-root widens it.
local cli = require "support.cli"
local fs = require "support.fs"
local cjson = require "cjson"

local TOOLS = "spec/cli/tools"

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- A fresh tree: base/plans (the root), base/plans2 (its prefix sibling), base/outside.json.
-- Every plan marks base/marks/<name> when its call runs.
local base, marks
local function mark_call(name)
  return string.format('{"_tool":"marker","file":"%s/%s","value":"%s","_outputPath":"†state.%s"}',
    marks, name, name, name)
end

-- A plan that marks `name`, then delegates to each of `paths` (one call each).
local function delegating(name, paths)
  local calls = { mark_call(name) }
  for i, p in ipairs(paths) do
    calls[#calls + 1] = string.format('{"_id":"d%d","_delegate":"%s","_outputPath":"†state.out%d"}', i, p, i)
  end
  return '{"plan":[' .. table.concat(calls, ",") .. "]}"
end

local function run(cmd, plan, ...)
  local r = cli.run { cmd, plan, "--tools", TOOLS, ... }
  if cmd == "run" and r.out ~= "" then r.output = cjson.decode(r.out) end
  return r
end

local function ran(name)
  return fs.exists(marks .. "/" .. name)
end

-- No line of the file (nor its first token) appears in text.
local function quotes_nothing_of(path, text)
  for line in io.lines(path) do
    if #line > 3 then assert.is_nil(text:find(line, 1, true), "quotes: " .. line) end
    local token = line:match("^[%w_]+")
    if token and #token > 3 then assert.is_nil(text:find("'" .. token .. "'", 1, true)) end
  end
end

-- the folder's real path: messages name the root by it
local function realpath(path)
  local p = assert(io.popen("realpath '" .. path .. "'"))
  local real = p:read("l")
  p:close()
  return real
end

before_each(function()
  base = realpath(fs.tmpdir())
  marks = base .. "/marks"
  os.execute(string.format("mkdir -p '%s/plans/sub' '%s/plans2' '%s'", base, base, marks))
  write(base .. "/outside.json", delegating("outside", {}))
  write(base .. "/plans2/sibling.json", delegating("plans2", {}))
  write(base .. "/plans/leaf.json", delegating("leaf", {}))
  write(base .. "/plans/secret.txt", "root:x:0:0:root:/root:/bin/bash\n")
end)

after_each(function()
  os.execute("rm -rf '" .. base .. "'")
end)

describe("_delegate confined to the plans root", function()
  it("refuses an absolute path (/etc/passwd) without opening it", function()
    local plan = base .. "/plans/p.json"
    write(plan, delegating("top", { "/etc/passwd" }))
    for _, cmd in ipairs { "check", "run", "graph" } do
      local r = run(cmd, plan)
      assert.are.equal(2, r.code)
      assert.are.equal("", r.out)
      assert.matches("call d1 (delegate): _delegate \"/etc/passwd\" is outside the plans root", r.err, 1, true)
      assert.matches("an absolute path", r.err, 1, true)
      assert.is_nil(r.err:find("root:x:0", 1, true))
      quotes_nothing_of("/etc/passwd", r.err)
    end
    assert.is_false(ran("top"))
  end)

  it("refuses a .. that climbs out, even to a valid plan", function()
    local plan = base .. "/plans/p.json"
    write(plan, delegating("top", { "../outside.json" }))
    local r = run("run", plan)
    assert.are.equal(2, r.code)
    assert.matches("call d1 (delegate): _delegate \"../outside.json\" is outside the plans root "
      .. base, r.err, 1, true)
    assert.is_false(ran("top"))
    assert.is_false(ran("outside"))
    -- a missing file out there says the same: its absence is not told
    write(plan, delegating("top", { "../nothing/here.json" }))
    r = run("check", plan)
    assert.are.equal(2, r.code)
    assert.matches("is outside the plans root", r.err, 1, true)
  end)

  it("refuses a symbolic link inside the folder that leads out", function()
    os.execute(string.format("ln -s ../outside.json '%s/plans/link.json'", base))
    os.execute(string.format("ln -s /etc/passwd '%s/plans/pw.json'", base))
    os.execute(string.format("ln -s /etc '%s/plans/etc'", base))
    local plan = base .. "/plans/p.json"
    write(plan, delegating("top", { "link.json", "pw.json", "etc/passwd", "etc/no-such-file" }))
    local r = run("run", plan)
    assert.are.equal(2, r.code)
    for i, p in ipairs { "link.json", "pw.json", "etc/passwd", "etc/no-such-file" } do
      assert.matches(string.format('call d%d (delegate): _delegate "%s" is outside the plans root', i, p),
        r.err, 1, true)
    end
    assert.matches("symbolic links are followed", r.err, 1, true)
    quotes_nothing_of("/etc/passwd", r.err)
    assert.is_false(ran("top"))
    assert.is_false(ran("outside"))
  end)

  it("does not take a prefix sibling (plans2) for the root (plans)", function()
    local plan = base .. "/plans/p.json"
    write(plan, delegating("top", { "../plans2/sibling.json" }))
    os.execute(string.format("ln -s ../plans2/sibling.json '%s/plans/sib.json'", base))
    write(base .. "/plans/q.json", delegating("top", { "sib.json" }))
    for _, f in ipairs { plan, base .. "/plans/q.json" } do
      local r = run("run", f)
      assert.are.equal(2, r.code)
      assert.matches("is outside the plans root " .. base .. "/plans:", r.err, 1, true)
    end
    assert.is_false(ran("top"))
    assert.is_false(ran("plans2"))
  end)

  it("lets a sub-plan in a subfolder delegate back up to a sibling inside the root", function()
    write(base .. "/plans/sub/s.json", delegating("sub", { "../leaf.json" }))
    local plan = base .. "/plans/p.json"
    write(plan, delegating("top", { "sub/s.json" }))
    local r = run("run", plan)
    assert.are.equal(0, r.code, r.err)
    assert.is_true(ran("top") and ran("sub") and ran("leaf"))
    -- but not out of the root the run started with, from a sub-plan either
    write(base .. "/plans/sub/s.json", delegating("sub2", { "../../outside.json" }))
    r = run("check", plan)
    assert.are.equal(2, r.code)
    assert.matches("in the delegated plan: " .. base .. "/plans/sub/s.json: call d1 (delegate): "
      .. '_delegate "../../outside.json" is outside the plans root ' .. base .. "/plans:", r.err, 1, true)
  end)

  it("takes --plans-root DIR to widen the root (run, check, resume, loop)", function()
    local plan = base .. "/plans/p.json"
    write(plan, delegating("top", { "../plans2/sibling.json", "../outside.json" }))
    assert.are.equal(2, run("check", plan).code)
    local r = run("check", plan, "--plans-root", base)
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(2, run("graph", plan).code)
    assert.are.equal(0, run("graph", plan, "--plans-root", base).code)
    r = run("run", plan, "--plans-root", base)
    assert.are.equal(0, r.code, r.err)
    assert.is_true(ran("top") and ran("plans2") and ran("outside"))
    -- resume takes it too (a run that ended: it prints its output again)
    local j = base .. "/run.jsonl"
    r = run("run", plan, "--plans-root", base, "--journal", j)
    assert.are.equal(0, r.code, r.err)
    r = cli.run { "resume", j, "--plans-root", base }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(2, cli.run { "resume", j }.code)
    -- loop: the planner's calls are confined too
    local planner = base .. "/planner.lua"
    write(planner, [[return function(ctx)
      if ctx.step > 1 then return { output = "done" } end
      return { calls = { { _delegate = "../outside.json", _outputPath = "†state.o" } } }
    end]])
    write(base .. "/plans/l.json", '{"plan":[]}')
    r = cli.run { "loop", base .. "/plans/l.json", "--planner", planner, "--tools", TOOLS, "--plans-root", base }
    assert.are.equal(0, r.code, r.err)
    os.remove(marks .. "/outside")
    r = cli.run { "loop", base .. "/plans/l.json", "--planner", planner, "--tools", TOOLS, "--journal", j .. "2" }
    assert.are.equal(0, r.code, r.err) -- the step's problem goes to the planner, which ends
    assert.is_false(ran("outside"))
    assert.matches("is outside the plans root", cli.slurp(j .. "2"), 1, true)
    -- a root that is not a folder
    r = run("check", plan, "--plans-root", base .. "/nowhere")
    assert.are.equal(2, r.code)
    assert.matches("the plans root " .. base .. "/nowhere: No such file or directory", r.err, 1, true)
    assert.are.equal(2, run("check", plan, "--plans-root", plan).code)
  end)

  it("keeps the missing-file error for a file inside the root, and quotes nothing of a non-plan", function()
    local plan = base .. "/plans/p.json"
    write(plan, delegating("top", { "nowhere.json", "secret.txt" }))
    local r = run("check", plan)
    assert.are.equal(2, r.code)
    assert.matches("call d1 (delegate): _delegate: " .. base .. "/plans/nowhere.json: No such file or directory",
      r.err, 1, true)
    assert.matches("call d2 (delegate): _delegate: " .. base .. "/plans/secret.txt: line 1", r.err, 1, true)
    quotes_nothing_of(base .. "/plans/secret.txt", r.err)
  end)

  it("is checked again when the call runs: a plan file swapped for a link after validation", function()
    -- the first call waits, then replaces leaf.json by a link out; the delegating call runs after it
    local plan = base .. "/plans/p.json"
    write(base .. "/plans/swap.sh", string.format("rm '%s/plans/leaf.json'; ln -s /etc/passwd '%s/plans/leaf.json'",
      base, base))
    write(base .. "/tools.lua", [[return { { name = "swap", run = function(call)
      os.execute("sh '" .. call.script .. "'"); return true end } }]])
    write(plan, string.format([[{"plan":[
      {"_tool":"swap","script":"%s/plans/swap.sh","_outputPath":"†state.swapped"},
      {"_id":"late","_delegate":"leaf.json","after":"†state.swapped","_outputPath":"†state.out"}]}]], base))
    local r = run("run", plan, "--tools", base .. "/tools.lua")
    assert.are.equal(1, r.code)
    assert.matches('call late (delegate) failed (runtime): _delegate "leaf.json" is outside the plans root',
      r.err, 1, true)
    quotes_nothing_of("/etc/passwd", r.err)
    quotes_nothing_of("/etc/passwd", r.out)
  end)
end)
