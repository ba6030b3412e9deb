-- mistakes_spec.lua -- errors that teach (issue 30): a reference nothing provides, an
-- unknown key in a tool table, obelus.branch made but not returned, a tool name misspelt;
-- each refused with its exact message and exit code, and the valid neighbours of each
-- still accepted.
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/tools"

local function file(text, suffix) return cli.tmpfile(text, suffix or ".json") end

-- `obelus CMD PLAN --tools TOOLS ARGS...` on a plan given as text; r.plan is its file
local function go(cmd, plan, ...)
  local p = file(plan)
  local r = cli.run({ cmd, p, "--tools", TOOLS, ... })
  r.plan = p
  return r
end

local lines = cli.lines -- the non-empty lines of a text

local CITIES = [=[[
  {"_id":"a","_tool":"echo","value":["Paris","Oslo"],"_outputPath":"†state.cities"},
  {"_id":"b","_tool":"echo","value":"†state.citeis","_outputPath":"†state.out"}
]]=]

describe("a reference nothing provides", function()
  it("is refused by check, with the path that exists (exit 2)", function()
    local r = go("check", CITIES)
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.are.same({
      r.plan .. ': call b (echo): parameter "value": †state.citeis is written by no call ' ..
        "(did you mean †state.cities?)",
      "obelus check: 1 problem, nothing ran",
    }, lines(r.err))
  end)

  it("is met by run as the contract says: a structural error of the call, exit 1", function()
    -- (check refuses it beforehand; a run does what the contract says of a reference
    -- nothing writes: the call fails, structural, and what ran stays)
    local marker = os.tmpname() .. ".m"
    local r = go("run", ([=[[
      {"_id":"a","_tool":"marker","file":"%s","value":1,"_outputPath":"†state.cities"},
      {"_id":"b","_tool":"echo","value":"†state.citeis","_outputPath":"†state.out"}
    ]]=]):format(marker))
    assert.are.equal(1, r.code)
    assert.matches('parameter "value": †state.citeis is absent and no call in the plan writes it ' ..
                   "(did you mean †state.cities?)", r.err, 1, true)
    assert.truthy(io.open(marker)) -- a ran
    os.remove(marker)
  end)

  it("misspelt before its end is named with the rest of its path kept", function()
    local plan = [=[{"plan":[
      {"_id":"a","_tool":"echo","value":{"text":"hi"},"_outputPath":"†state.greeting"},
      {"_id":"b","_tool":"echo","value":"†state.greting.text","_outputPath":"†state.loud"}],
      "output":{"loud":"†state.lod.text"}}]=]
    local r = go("check", plan)
    assert.are.equal(2, r.code)
    assert.are.same({
      r.plan .. ': call b (echo): parameter "value": †state.greting.text is written by no call ' ..
        "(did you mean †state.greeting.text?)",
      r.plan .. ": output loud: †state.lod.text is written by no call (did you mean †state.loud.text?)",
      "obelus check: 2 problems, nothing ran",
    }, lines(r.err))
    -- a name right and one inside it wrong: nothing near enough to say
    r = go("check", [=[[
      {"_id":"a","_tool":"echo","value":{"text":"hi"},"_outputPath":"†state.greeting"},
      {"_id":"b","_tool":"echo","value":"†state.other.text","_outputPath":"†state.loud"}]]=])
    assert.are.equal(2, r.code)
    assert.matches("†state.other.text is written by no call$", lines(r.err)[1])
  end)

  it("in the output template is refused too, named by its place", function()
    local r = go("check", [=[{"plan":[
      {"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.total"}],
      "output":{"sum":"†state.totl","all":"†state.total"}}]=])
    assert.are.equal(2, r.code)
    assert.are.same({
      r.plan .. ": output sum: †state.totl is written by no call (did you mean †state.total?)",
      "obelus check: 1 problem, nothing ran",
    }, lines(r.err))
  end)

  it("says what else could have given it: the context, --input", function()
    local r = go("check", [=[{"context":[{"type":"state","data":{"cities":[]}}],"plan":[
      {"_id":"b","_tool":"echo","value":"†state.citeis","_outputPath":"out"},
      {"_id":"c","_tool":"echo","value":"†input.citi","_outputPath":"out2"}]}]=],
      "--input", '{"city":"Oslo"}')
    assert.are.equal(2, r.code)
    assert.are.same({
      r.plan .. ': call b (echo): parameter "value": †state.citeis is written by no call and ' ..
        "is not in the context or --input (did you mean †state.cities?)",
      r.plan .. ': call c (echo): parameter "value": †input.citi is written by no call and ' ..
        "is not in the context or --input (did you mean †input.city?)",
      "obelus check: 2 problems, nothing ran",
    }, lines(r.err))
  end)

  it("suggests across kinds, and nothing for a name too short to be a slip", function()
    local r = go("check", [=[[
      {"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.items || †state.x"},
      {"_id":"b","_tool":"echo","value":"†stat.items","_outputPath":"†state.b1"},
      {"_id":"c","_tool":"echo","value":"†state.y","_outputPath":"†state.c1"}
    ]]=])
    assert.are.equal(2, r.code)
    assert.are.same({
      r.plan .. ': call b (echo): parameter "value": †stat.items is written by no call ' ..
        "(did you mean †state.items?)",
      r.plan .. ': call c (echo): parameter "value": †state.y is written by no call',
      "obelus check: 2 problems, nothing ran",
    }, lines(r.err))
  end)

  it("in _each, and in every alternative when none can be present", function()
    local r = go("check", [=[[
      {"_id":"a","_tool":"echo","value":[1,2],"_outputPath":"†state.items"},
      {"_id":"b","_tool":"echo","_each":"†state.itemz","value":"†each.value","_outputPath":"†state.b1"},
      {"_id":"c","_tool":"echo","value":"†state.iems || †state.items && †state.nope","_outputPath":"†state.c1"}
    ]]=])
    assert.are.equal(2, r.code)
    assert.are.same({
      r.plan .. ": call b (echo): _each: †state.itemz is written by no call " ..
        "(did you mean †state.items?)",
      r.plan .. ': call c (echo): parameter "value": †state.iems is written by no call ' ..
        "(did you mean †state.items?)",
      r.plan .. ': call c (echo): parameter "value": †state.nope is written by no call',
      "obelus check: 3 problems, nothing ran",
    }, lines(r.err))
  end)

  it("is judged in each instance's view, and an instanced call is reported once", function()
    local r = go("check", [=[{"instances":["x","y"],"context":[
      {"type":"config","data":{"lang":"en"},"_instance":"x"}],"plan":[
      {"_id":"b","_tool":"echo","value":"†config.lang","_outputPath":"out"},
      {"_id":"c","_tool":"echo","value":"†config.lnag","_outputPath":"out2"}]}]=])
    assert.are.equal(2, r.code)
    assert.are.same({
      r.plan .. ': call b@y (echo): parameter "value": †config.lang is written by no call and ' ..
        "is not in the context",
      r.plan .. ': call c@x (echo): parameter "value": †config.lnag is written by no call and ' ..
        "is not in the context (did you mean †config.lang?)",
      "obelus check: 2 problems, nothing ran",
    }, lines(r.err))
  end)

  it("accepts what a call, the context or --input can give, and what || covers", function()
    local cases = {
      -- a call writing a path makes its parts readable, and its parents
      { [=[[{"_id":"a","_tool":"echo","value":{"name":"A"},"_outputPath":"†state.user"},
            {"_id":"b","_tool":"echo","value":"†state.user.name","_outputPath":"x"}]]=] },
      { [=[[{"_id":"a","_tool":"echo","value":"A","_outputPath":"user.name"},
            {"_id":"b","_tool":"echo","value":"†state.user","_outputPath":"x"},
            {"_id":"c","_tool":"echo","value":"†state","_outputPath":"y"}]]=] },
      -- every output method writes its path; a branch's alternatives each count
      { [=[[{"_id":"a","_tool":"echo","value":[1],"_outputPath":"list","_outputMethod":"concat"},
            {"_id":"b","_tool":"pick","which":2,"value":1,"_outputPath":"†state.p || †data.q"},
            {"_id":"c","_tool":"echo","value":"†state.list && †data.q","_outputPath":"x"}]]=] },
      -- the context, and --input
      { [=[{"context":[{"type":"state","data":{"cfg":{"n":1}}}],"plan":[
            {"_id":"b","_tool":"echo","value":"†state.cfg.n","_outputPath":"x"}]}]=] },
      { [=[[{"_id":"b","_tool":"echo","value":"†input.city","_outputPath":"x"}]]=],
        "--input", '{"city":"Oslo"}' },
      -- no --input at all: the input comes at run time, not judged here, even where the
      -- context gives part of it (plans/weather)
      { [=[[{"_id":"b","_tool":"echo","value":"†input.anything","_outputPath":"x"}]]=] },
      { [=[{"context":[{"type":"input","data":{"dir":null}}],"plan":[
            {"_id":"b","_tool":"echo","value":"†input.city","_outputPath":"x"}]}]=] },
      -- an alternative that can be present covers the others
      { [=[[{"_id":"b","_tool":"echo","value":"†input.nick || †input.city","_outputPath":"x"}]]=],
        "--input", '{"city":"Oslo"}' },
      -- _each reads a list a call writes; a delegating call writes its _outputPath
      { [=[[{"_id":"a","_tool":"echo","value":[1],"_outputPath":"items"},
            {"_id":"b","_tool":"echo","_each":"†state.items","value":"†each.value","_outputPath":"out"},
            {"_id":"c","_delegate":"DELEGATE","_outputPath":"sub.result"},
            {"_id":"d","_tool":"echo","value":"†state.sub.result.x","_outputPath":"y"}]]=] },
      -- instances: an instance's own input, and the output read in any view
      { [=[{"instances":"auto","context":[{"type":"input","data":{"a":1},"_instance":"i1"},
            {"type":"input","data":{"a":2},"_instance":"i2"}],"plan":[
            {"_id":"b","_tool":"echo","value":"†input.a","_outputPath":"out"}],
            "output":"†state.out"}]=] },
    }
    local sub = file('[{"_tool":"echo","value":1,"_outputPath":"x"}]')
    for i, c in ipairs(cases) do
      local plan = c[1]:gsub("DELEGATE", sub:match("[^/]+$"))
      local r = go("check", plan, table.unpack(c, 2))
      assert(r.code == 0, ("case %d: %s"):format(i, r.err))
    end
  end)

  it("leaves every plan of plans/ valid", function()
    for dir in cli.sh("ls -d plans/*/"):gmatch("[^\n]+") do
      local plan = dir .. "plan.json"
      if io.open(plan) then
        local r = cli.run({ "check", plan, "--tools", dir .. "tools" })
        assert(r.code == 0, plan .. ": " .. r.err)
      end
    end
  end)
end)

describe("a tool table", function()
  local function load(src)
    local f = file(src, ".lua")
    local r = cli.run({ "check", file("[]"), "--tools", f })
    r.file = f
    return r
  end

  it("with a misspelt key is refused at load with the key meant (exit 2)", function()
    local r = load([[return { name = "weather", shema = { type = "object" },
      run = function() return 1 end }]])
    assert.are.equal(2, r.code)
    assert.are.equal("obelus check: " .. r.file .. ':2: tool #1 (weather): unknown key "shema" ' ..
                     '(did you mean "schema"?)\n', r.err)
    r = load([[return { { name = "a", run = function() end },
      { name = "weather", descripton = "Weather." } }]])
    assert.are.equal(2, r.code)
    assert.are.equal("obelus check: " .. r.file .. ': tool #2 (weather): unknown key ' ..
                     '"descripton" (did you mean "description"?)\n', r.err)
    r = load([[return { nmae = "weather", run = function() end }]])
    assert.are.equal(2, r.code)
    assert.are.equal("obelus check: " .. r.file .. ':1: tool #1: unknown key "nmae" ' ..
                     '(did you mean "name"?)\n', r.err)
  end)

  it("with a key of no known kind says which keys there are; x_ keys are the author's", function()
    local r = load([[return { name = "weather", colour = "blue", run = function() end }]])
    assert.are.equal(2, r.code)
    assert.are.equal("obelus check: " .. r.file .. ':1: tool #1 (weather): unknown key ' ..
                     '"colour" (a tool table has name, description, schema and run; keys of ' ..
                     'your own begin with x_)\n', r.err)
    r = load([[return { name = "weather", description = "d", schema = { type = "object" },
      x_prompt = "Say the weather.", run = function() end }]])
    assert.are.equal(0, r.code, r.err)
  end)
end)

describe("obelus.branch", function()
  local tools = file([[
local obelus = require "obelus"
return {
  { name = "dropped", run = function() obelus.branch(2, "no"); return "yes" end },
  { name = "returned", run = function() return obelus.branch(2, "no") end },
}]], ".lua")

  it("called but not returned fails the call, writing nothing (exit 1)", function()
    local p = file('[{"_id":"d","_tool":"dropped","_outputPath":"a || b"}]')
    local r = cli.run({ "run", p, "--tools", tools })
    assert.are.equal(1, r.code)
    assert.are.same({}, cjson.decode(r.out))
    assert.matches("call d (dropped) failed (runtime): obelus.branch(...) was called but its " ..
                   "value not returned: return obelus.branch(...)", r.err, 1, true)
  end)

  it("returned picks its alternative", function()
    local p = file('[{"_id":"d","_tool":"returned","_outputPath":"a || b"}]')
    local r = cli.run({ "run", p, "--tools", tools })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ b = "no" }, cjson.decode(r.out))
  end)
end)

describe("a tool not loaded", function()
  local PLAN = '[{"_id":"w","_tool":"ehco","value":1,"_outputPath":"x"}]'

  it("is named with the nearest loaded tool", function()
    local r = go("check", PLAN)
    assert.are.equal(2, r.code)
    assert.are.same({
      r.plan .. ': call w (ehco): no tool named "ehco" is loaded (did you mean "echo"?)',
      "obelus check: 1 problem, nothing ran",
    }, lines(r.err))
  end)

  it("says how to load tools when none is loaded", function()
    local p = file(PLAN)
    local r = cli.run({ "check", p })
    assert.are.equal(2, r.code)
    assert.matches(p .. ': call w (ehco): no tool named "ehco" is loaded (use --tools PATH)',
                   r.err, 1, true)
  end)

  it("lists the tools loaded when none is near", function()
    local tools = file([[return { { name = "alpha", run = function() end },
      { name = "beta", run = function() end } }]], ".lua")
    local p = file('[{"_id":"w","_tool":"weather","_outputPath":"x"}]')
    local r = cli.run({ "check", p, "--tools", tools })
    assert.are.equal(2, r.code)
    assert.matches(p .. ': call w (weather): no tool named "weather" is loaded (loaded: alpha, beta)',
                   r.err, 1, true)
  end)
end)
