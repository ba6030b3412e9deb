-- instances_spec.lua -- plan-format §6 in plans: "instances" copies every call without
-- _instance per instance, each copy reads its view and writes its own scope.
local cli = require "support.cli"
local cjson = require "cjson"

local function run(json, ...)
  local r = cli.run { "run", cli.tmpfile(json, ".json"), "--tools", "spec/cli/tools", ... }
  if r.out ~= "" then r.output = cjson.decode(r.out) end
  return r
end

describe("instances in plans", function()
  local context = [[
    {"type": "input", "data": {"greeting": "hello", "name": "world", "list": ["g"]}},
    {"type": "input", "data": {"name": "Ann"}, "_instance": "a"},
    {"type": "input", "data": {"name": "Bob", "greeting": "hi"}, "_instance": "b"}]]

  it("runs each call once per instance, reading the instance's view", function()
    local j = os.tmpname()
    local r = run([[{"instances":["a","b"],"context":[]] .. context .. [[],
      "plan":[{"_id":"greet","_tool":"echo","value":["†input.greeting","†input.name"],"_outputPath":"words"}]}]],
      "--journal", j)
    assert.are.equal(0, r.code)
    assert.are.same({ a = { words = { "hello", "Ann" } }, b = { words = { "hi", "Bob" } } }, r.output)
    local ids = {}
    for line in io.lines(j) do
      local m = cjson.decode(line)
      if m._call then ids[#ids + 1] = m._instance end
    end
    table.sort(ids)
    assert.are.same({ "a", "b" }, ids)
  end)

  it("finds the instances in the context with \"auto\"", function()
    local r = run([[{"instances":"auto","context":[]] .. context .. [[],
      "plan":[{"_tool":"echo","value":"†input.name","_outputPath":"n"}]}]])
    assert.are.same({ a = { n = "Ann" }, b = { n = "Bob" } }, r.output)
  end)

  it("keeps instances apart when they write the same path at the same time", function()
    local r = run([[{"instances":["a","b"],"context":[]] .. context .. [[],
      "plan":[{"_tool":"sleepy","ms":30,"value":"†input.name","_outputPath":"same"},
              {"_tool":"echo","value":"†input.name","_outputPath":"list","_outputMethod":"push"}]}]])
    assert.are.equal("Ann", r.output.a.same)
    assert.are.equal("Bob", r.output.b.same)
    assert.are.same({ "Ann" }, r.output.a.list)
    assert.are.same({ "Bob" }, r.output.b.list)
  end)

  it("copies a global array on write (push gives the instance global + new)", function()
    local r = run([[{"instances":["a","b"],"context":[]] .. context .. [[],
      "plan":[{"_tool":"echo","value":"†input.name","_outputPath":"†input.list","_outputMethod":"push"},
              {"_tool":"echo","value":"†input.list","_outputPath":"seen"}],
      "output":"†state.seen"}]])
    assert.are.equal(0, r.code)
    assert.are.same({ "g", "Ann" }, r.output.a)
    assert.are.same({ "g", "Bob" }, r.output.b)
  end)

  it("never makes dependencies across instances", function()
    local r = cli.run { "check", cli.tmpfile([[{"instances":["a","b"],"plan":[
        {"_tool":"echo","value":1,"_outputPath":"x"},
        {"_tool":"echo","value":"†state.x","_outputPath":"y"}]}]], ".json"), "--tools", "spec/cli/tools" }
    assert.are.equal(0, r.code)
    assert.matches("ok, 4 calls, 2 dependencies", r.out, 1, true)
  end)

  it("names the copies <id>@<instance>", function()
    local r = run([[{"instances":["a","b"],"plan":[{"_id":"boom","_tool":"fail","_outputPath":"x"}]}]])
    assert.are.equal(1, r.code)
    assert.matches("call boom@a (fail) failed", r.err, 1, true)
    assert.matches("call boom@b (fail) failed", r.err, 1, true)
  end)

  it("refuses bad instance lists", function()
    assert.are.equal(2, run([[{"instances":[],"plan":[]}]]).code)
    assert.are.equal(2, run([[{"instances":["a","a"],"plan":[]}]]).code)
    assert.are.equal(2, run([[{"instances":"auto","plan":[]}]]).code)
    assert.are.equal(2, run([[{"instances":[""],"plan":[]}]]).code)
  end)
end)
