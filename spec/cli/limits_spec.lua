-- limits_spec.lua -- limits on runaway work (issue 10): each is a clear runtime error of
-- the call at fault, never a dead or hung process, and the run goes on: os.exit in a
-- tool, --max-memory, --max-output, --max-calls, delegation depth, and the watchdog for
-- tools that never yield (--max-slice). Every run here is capped (ulimit -v, timeout).
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/fixtures/limits/tools.lua"

-- runs obelus under a memory and a time cap; returns code, stdout, stderr. (AddressSanitizer
-- reserves terabytes of address space for its shadow: its build runs under the time cap only,
-- and every test that allocates without bound gives --max-memory.)
local ASAN = cli.bin:find("/asan/", 1, true) ~= nil
local function capped(args)
  local parts = { ASAN and "" or "ulimit -v 6000000;", "timeout 60", cli.quote(cli.bin) }
  for _, a in ipairs(args) do parts[#parts + 1] = cli.quote(a) end
  local out, err = os.tmpname(), os.tmpname()
  local _, how, code = os.execute("(" .. table.concat(parts, " ") .. ") >" .. out .. " 2>" .. err)
  local r = { code = how == "exit" and code or 128 + code, out = cli.slurp(out), err = cli.slurp(err) }
  os.remove(out); os.remove(err)
  return r
end

local function run(plan, ...)
  local file = cli.tmpfile(cjson.encode(plan), ".json")
  local args = { "run", file, "--tools", TOOLS }
  for _, a in ipairs { ... } do args[#args + 1] = a end
  local r = capped(args)
  r.file = file
  return r
end

local function journal_records(path)
  local t = {}
  for line in io.lines(path) do
    local m = cjson.decode(line)
    if m.journal then t[#t + 1] = m.journal end
  end
  return t
end

describe("os.exit in a tool", function()
  it("fails that call, and the engine alone ends the process (with its journal's end)", function()
    local j = os.tmpname()
    local r = run({ plan = {
      { _id = "bye", _tool = "exits", code = 3, _outputPath = "†state.a" },
      { _tool = "ok", ms = 20, value = "still here", _outputPath = "†state.b" },
    }, output = "†state.b" }, "--journal", j)
    assert.are.equal(1, r.code, r.err) -- a call failed; not 3
    assert.are.equal("still here", cjson.decode(r.out))
    assert.matches("call bye %(exits%) failed %(runtime%): .*os.exit called by a tool %(code 3%)", r.err)
    local recs = journal_records(j)
    assert.are.equal("end", recs[#recs])
    os.remove(j)
  end)

  it("os.exit(true) and os.exit() are refused too", function()
    for _, call in ipairs { { _tool = "exits", code = true, _outputPath = "a" }, { _tool = "exits", _outputPath = "a" } } do
      local r = run({ plan = { call } })
      assert.are.equal(1, r.code)
      assert.matches("os.exit called by a tool (code 0)", r.err, 1, true)
    end
  end)

  it("in a tool file as it loads, is a load error of that file (exit 2, nothing ran)", function()
    local file = cli.tmpfile(cjson.encode { plan = { { _tool = "ok", value = 1 } } }, ".json")
    local r = capped { "run", file, "--tools", TOOLS, "--tools", "spec/cli/fixtures/limits/exits_at_load.lua" }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.matches("exits_at_load.lua", r.err, 1, true)
    assert.matches("os.exit called by a tool (code 4)", r.err, 1, true)
  end)
end)

describe("--max-memory MB", function()
  it("fails the call that passes it; the run goes on and ends normally, no PANIC", function()
    local r = run({ plan = {
      { _id = "hog", _tool = "hog", _outputPath = "†state.a" },
      { _tool = "ok", ms = 30, value = "fine", _outputPath = "†state.b" },
      { _tool = "ok", value = "†state.b", _outputPath = "†state.c" },
    }, output = { b = "†state.b", c = "†state.c" } }, "--max-memory", "64")
    assert.are.equal(1, r.code, r.err)
    assert.are.same({ b = "fine", c = "fine" }, cjson.decode(r.out))
    assert.matches("call hog (hog) failed (runtime): memory limit of 64 MB reached (--max-memory)",
                   r.err, 1, true)
    assert.not_matches("PANIC", r.err, 1, true)
  end)

  it("routes the failure to a || alternative like any error", function()
    local r = run({ plan = { { _id = "h", _tool = "hog", _outputPath = "†state.a || †state.oops" } },
                    output = "†state.oops" }, "--max-memory", "32")
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ error = "memory limit of 32 MB reached (--max-memory)", tool = "hog", call = "h" },
                    cjson.decode(r.out))
  end)

  it("a memory error inside a tool's libuv callback fails the call that gave it (no endless retry)", function()
    local r = run({ plan = {
      { _id = "p", _tool = "pipe_hog", _outputPath = "†state.a" },
      { _tool = "ok", ms = 30, value = "fine", _outputPath = "†state.b" },
    }, output = "†state.b" }, "--max-memory", "64")
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("fine", cjson.decode(r.out))
    assert.matches("call p (pipe_hog) failed (runtime): memory limit of 64 MB reached (--max-memory)",
                   r.err, 1, true)
    -- not again and again: at most the one callback whose memory error came before it
    -- was tied to its attempt (in runtime.lua's wrapper) is said on stderr
    local _, said = r.err:gsub("error in a libuv callback", "")
    assert.is_true(said <= 1, r.err)
  end)

  it("holds in a tool's libuv callbacks too", function()
    local r = run({ plan = { { _tool = "hog_later", _outputPath = "†state.a" } }, output = "†state.a" },
                  "--max-memory", "32")
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("callback done", cjson.decode(r.out))
  end)

  it("refuses a bad value", function()
    for _, v in ipairs { "0", "-1", "lots" } do
      local r = run({ plan = { { _tool = "ok", value = 1 } } }, "--max-memory", v)
      assert.are.equal(2, r.code)
      assert.matches("--max-memory needs megabytes", r.err, 1, true)
    end
  end)
end)

describe("--max-output KB", function()
  it("fails a call whose result is larger; smaller results are written", function()
    local r = run({ plan = {
      { _id = "large", _tool = "big", n = 5000, _outputPath = "†state.a" },
      { _id = "small", _tool = "big", n = 3000, _outputPath = "†state.b" },
    }, output = { a = "†state.a", b = "†state.b" } }, "--max-output", "4")
    assert.are.equal(1, r.code)
    local out = cjson.decode(r.out)
    assert.are.equal(3000, #out.b)
    assert.are.equal(cjson.null, out.a)
    assert.matches("call large (big) failed (runtime): the result written to state is over 4 KB", r.err,
                   1, true)
  end)

  it("without it, any size is written", function()
    local r = run({ plan = { { _tool = "big", n = 200000, _outputPath = "†state.a" } }, output = "†state.a" })
    assert.are.equal(0, r.code)
    assert.are.equal(200000, #cjson.decode(r.out))
  end)
end)

describe("--max-calls N", function()
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    local f = assert(io.open(dir .. "/sub.json", "w"))
    f:write(cjson.encode { plan = { { _tool = "ok", value = 1, _outputPath = "†state.x" },
                                    { _tool = "ok", value = 2, _outputPath = "†state.y" } },
                           output = "†state.y" })
    f:close()
  end)
  teardown(function() os.execute("rm -rf " .. dir) end)

  local function plan_file(plan)
    local f = assert(io.open(dir .. "/top.json", "w"))
    f:write(cjson.encode(plan))
    f:close()
    return dir .. "/top.json"
  end

  it("a plan with more calls (instances counted) is refused before anything runs", function()
    local file = plan_file { instances = { "a", "b", "c" },
                             plan = { { _tool = "ok", value = 1, _outputPath = "†state.v" } } }
    local r = capped { "run", file, "--tools", TOOLS, "--max-calls", "2" }
    assert.are.equal(2, r.code, r.err)
    assert.are.equal("", r.out)
    assert.matches("more than --max-calls 2", r.err, 1, true)
    assert.are.equal(0, capped { "run", file, "--tools", TOOLS, "--max-calls", "3" }.code)
  end)

  it("instances x calls is counted before a call is copied: a huge product is refused in little memory", function()
    -- 4,000 instances x 4,000 calls: 16 M calls, a plan file of a few hundred KB
    local inst, calls = {}, {}
    for i = 1, 4000 do inst[i] = "i" .. i end
    for i = 1, 4000 do calls[i] = { _tool = "ok", value = i, _outputPath = "†state.v" .. i } end
    local file = plan_file { instances = inst, plan = calls }
    local out = os.tmpname()
    for _, args in ipairs { "run --max-calls 10", "check", "run" } do
      local _, _, code = os.execute(("(%s timeout 60 %s %s %s --tools %s) >/dev/null 2>%s"):format(
        ASAN and "" or "ulimit -v 1000000;", cli.quote(cli.bin), args, cli.quote(file), TOOLS, out))
      local err = cli.slurp(out)
      assert.are.equal(2, code, args .. ": " .. err)
      assert.matches("the plan has 16000000 calls (instances counted), more than --max-calls", err, 1, true)
    end
    os.remove(out)
    -- delegated: refused as its call's error, the rest goes on
    local f = assert(io.open(dir .. "/big.json", "w"))
    f:write(cjson.encode { instances = inst, plan = calls })
    f:close()
    file = plan_file { plan = { { _id = "d", _delegate = "big.json", _outputPath = "†state.d" },
                                { _tool = "ok", value = "top", _outputPath = "†state.t" } },
                       output = "†state.t" }
    local r = capped { "run", file, "--tools", TOOLS, "--max-calls", "10" }
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("top", cjson.decode(r.out))
    assert.matches("its 16000000 calls would make 16000002 in all, more than --max-calls 10", r.err, 1, true)
  end)

  it("a delegated plan that would pass it fails its call; the rest goes on", function()
    local file = plan_file { plan = {
      { _id = "d", _delegate = "sub.json", _outputPath = "†state.d" },
      { _tool = "ok", value = "top", _outputPath = "†state.t" },
    }, output = { d = "†state.d", t = "†state.t" } }
    local r = capped { "run", file, "--tools", TOOLS, "--max-calls", "3" }
    assert.are.equal(1, r.code, r.err)
    assert.are.same({ d = cjson.null, t = "top" }, cjson.decode(r.out))
    assert.matches("call d (delegate) failed (runtime): ", r.err, 1, true)
    assert.matches("its 2 calls would make 4 in all, more than --max-calls 3", r.err, 1, true)
    r = capped { "run", file, "--tools", TOOLS, "--max-calls", "4" }
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ d = 2, t = "top" }, cjson.decode(r.out))
  end)

  it("counts a loop's steps: the step that would pass it ends the loop with its error", function()
    local file = plan_file { plan = { { _tool = "ok", value = 0, _outputPath = "†state.s0" } } }
    local planner = cli.tmpfile([[
      return function(ctx)
        if ctx.step > 5 then return { output = "all steps ran" } end
        return { calls = { { _tool = "ok", value = ctx.step, _outputPath = "†state.s" .. ctx.step },
                           { _tool = "ok", value = ctx.step, _outputPath = "†state.t" .. ctx.step } } }
      end]], ".lua")
    local r = capped { "loop", file, "--planner", planner, "--tools", TOOLS, "--max-calls", "6" }
    assert.are.equal(1, r.code, r.err)
    assert.matches("step 3: .*its 2 calls would make 7 in all, more than %-%-max%-calls 6", r.err)
    r = capped { "loop", file, "--planner", planner, "--tools", TOOLS, "--max-calls", "11" }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("all steps ran", cjson.decode(r.out))
    os.remove(planner)
  end)

  it("refuses a bad value", function()
    local r = run({ plan = { { _tool = "ok", value = 1 } } }, "--max-calls", "0")
    assert.are.equal(2, r.code)
    assert.matches("--max-calls needs a number", r.err, 1, true)
  end)
end)

describe("the watchdog (--max-slice MS)", function()
  it("stops a tool that never yields with an error of its call; the others go on", function()
    local r = run({ plan = {
      { _id = "spin", _tool = "spin", _outputPath = "†state.a" },
      { _tool = "ok", value = "after", _outputPath = "†state.b" },
    }, output = "†state.b" }, "--max-slice", "200")
    assert.are.equal(1, r.code)
    assert.are.equal("after", cjson.decode(r.out))
    assert.matches("call spin %(spin%) failed %(runtime%): .*ran 200 ms without yielding", r.err)
  end)

  it("refuses a bad value", function()
    local r = run({ plan = { { _tool = "ok", value = 1 } } }, "--max-slice", "1")
    assert.are.equal(2, r.code)
    assert.matches("--max-slice needs milliseconds", r.err, 1, true)
  end)
end)
