-- loop_spec.lua -- `obelus loop`: the planner is asked, its calls run on the shared
-- log, their errors feed the next step, until an output or the step limit.
local cli = require "support.cli"
local cjson = require "cjson"

local function planner(src) return cli.tmpfile(src, ".lua") end

local function loop(plan_json, planner_src, ...)
  local r = cli.run { "loop", cli.tmpfile(plan_json, ".json"), "--planner", planner(planner_src),
                      "--tools", "spec/cli/tools", ... }
  if r.code ~= 2 and r.out ~= "" then r.output = cjson.decode(r.out) end
  return r
end

describe("obelus loop", function()
  it("replans after a failed call, as the seeds' payment example (plans/replan)", function()
    local j = os.tmpname()
    local r = cli.run { "loop", "plans/replan/plan.json", "--planner", "plans/replan/planner.lua",
                        "--tools", "plans/replan/tools", "--journal", j }
    assert.are.equal(0, r.code)
    local out = cjson.decode(r.out)
    assert.are.equal("Paid 40 with mastercard-5555 (AUTH-15)", out.receipt)
    assert.are.equal(2, out.steps)
    local kinds = {}
    for line in io.lines(j) do
      local m = cjson.decode(line)
      if not m.journal then kinds[#kinds + 1] = m.kind or m.type end -- the input is in its "type" shorthand
    end
    -- initial plan + input, step 1 (plan, its error), step 2 (plan, payment, receipt)
    assert.are.same({ "plan", "input", "plan", "error", "plan", "state", "state" }, kinds)
  end)

  it("resumes an ended loop's journal: its output again, nothing run; with --events - as the last line", function()
    local j = os.tmpname()
    local r = cli.run { "loop", "plans/replan/plan.json", "--planner", "plans/replan/planner.lua",
                        "--tools", "plans/replan/tools", "--journal", j }
    assert.are.equal(0, r.code, r.err)
    local out = cjson.decode(r.out)
    local again = cli.run { "resume", j }
    assert.are.equal(0, again.code, again.err)
    assert.are.same(out, cjson.decode(again.out))
    local ev = cli.run { "resume", j, "--events", "-" }
    assert.are.equal(0, ev.code, ev.err)
    assert.are.same({ event = "output", data = out }, cjson.decode(ev.out))
    os.remove(j)
  end)

  it("gives the planner the log and a resolver", function()
    local r = loop([[{"context":[{"type":"input","data":{"x":3}}],"plan":[]}]], [[
      return function(ctx)
        if ctx.step == 1 then
          return { calls = { { _tool = "echo", value = "†input.x", _outputPath = "†state.y" } } }
        end
        return { output = { y = ctx:resolve("†state.y"), absent = ctx:resolve("†state.nope") == nil,
                            count = #ctx.messages, step = ctx.step } }
      end]])
    assert.are.equal(0, r.code)
    assert.are.same({ y = 3, absent = true, count = 4, step = 2 }, r.output)
  end)

  it("runs the plan's own calls before asking the planner", function()
    local r = loop([[{"plan":[{"_tool":"echo","value":"first","_outputPath":"†state.a"}]}]], [[
      return function(ctx) return { output = ctx:resolve("†state.a") } end]])
    assert.are.equal("first", r.output)
  end)

  it("feeds validation problems of a step back as error messages", function()
    local r = loop([[{"plan":[]}]], [[
      return function(ctx)
        for _, m in ipairs(ctx.messages) do
          if m.kind == "error" and m.data.phase == "validation" then return { output = m.data.error } end
        end
        return { calls = { { _tool = "no_such_tool", _outputPath = "x" } } }
      end]])
    assert.are.equal(0, r.code)
    assert.matches('no tool named "no_such_tool"', r.output, 1, true)
  end)

  it("stops at --max-steps with exit 1 and a clear message", function()
    local r = loop([[{"plan":[]}]], [[return function(ctx) return { calls = {} } end]], "--max-steps", "3")
    assert.are.equal(1, r.code)
    assert.matches("no output after 3 steps", r.err, 1, true)
  end)

  it("exits 1 when the planner raises, 2 when the planner file is unusable", function()
    assert.are.equal(1, loop([[{"plan":[]}]], [[return function() error("planner bug") end]]).code)
    assert.are.equal(2, loop([[{"plan":[]}]], [[return 42]]).code)
    assert.are.equal(2, loop([[{"plan":[]}]], [[return function( ]]).code)
    assert.are.equal(2, cli.run { "loop", cli.tmpfile("[]", ".json") }.code) -- no --planner
  end)

  it("stops a planner that never returns on SIGTERM: exit 143, no end record, resume asks again", function()
    local mark, j, err, rcf = os.tmpname(), os.tmpname(), os.tmpname(), os.tmpname()
    os.remove(mark); os.remove(j)
    local pl = planner(([[
      return function(ctx)
        if ctx.step == 1 and not io.open(%q) then
          local f = io.open(%q, "w"); f:write("x"); f:close()
          while true do end
        end
        return { output = ctx.step }
      end]]):format(mark, mark))
    local plan = cli.tmpfile('{"plan":[]}', ".json")
    os.execute(([[%s loop %s --planner %s --journal %s 2>%s >/dev/null & P=$!
      (sleep 60; kill -KILL $P) >/dev/null 2>&1 & K=$!; i=0
      while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
      kill -TERM $P; wait $P; echo $? >%s; kill $K 2>/dev/null]]):format(cli.bin, plan, pl, j, err, mark, rcf))
    assert.are.equal("143", cli.slurp(rcf):match("%d+")) -- not the cap's 137
    assert.matches("interrupted by SIGTERM; the planner was stopped at step 1", cli.slurp(err), 1, true)
    for line in io.lines(j) do assert.is_nil(line:find('"journal":"end"', 1, true)) end
    local r = cli.run { "resume", j }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("1", r.out:match("%S+")) -- step 1 asked again; the mark is there now
  end)
end)
