-- spec/cli/tools_spec.lua -- `obelus tools`: the loaded tools in the shapes LLM APIs and
-- MCP take, and --plan-schema, a JSON Schema of a whole plan for them: every example plan
-- under plans/ validates against its plan schema with `obelus schema`, broken ones do not.
local cjson = require "cjson"
local cli = require "support.cli"

local PLANS = { "user-status", "weather", "refund", "translate", "fanout-summary", "notify", "files",
                "http", "cluster", "replan" }

local function tools(...)
  local r = cli.run { "tools", ... }
  assert.are.equal(0, r.code, r.err)
  return cjson.decode(r.out)
end

local LATENT = cli.tmpfile([[
return {
  { name = "think", description = "a latent tool", schema = { type = "object",
    properties = { topic = { type = "string" }, _outputPath = { type = "string" } },
    required = { "topic", "_outputPath" } } },
  { name = "act", description = "runs", schema = { type = "object", properties = { n = { type = "integer" } } },
    run = function(call) return call.n end },
}
]], ".lua")
local HANDLER = cli.tmpfile([[require("obelus").set_latent(function() return 1 end)]], ".lua")

describe("obelus tools", function()
  it("json-schema (the default): name, description, params without meta-properties, latent marked", function()
    local list = tools("--tools", LATENT, "--latent", HANDLER)
    assert.are.same({
      { name = "act", description = "runs", parameters = { type = "object", properties = { n = { type = "integer" } } } },
      { name = "think", description = "a latent tool", latent = true,
        parameters = { type = "object", properties = { topic = { type = "string" } }, required = { "topic" } } },
    }, list)
  end)

  it("openai: the array of function tools that API takes", function()
    local list = tools("--tools", "plans/weather/tools", "--format", "openai")
    assert.are.equal(4, #list)
    for _, t in ipairs(list) do
      assert.are.equal("function", t.type)
      assert.are.same({ "description", "name", "parameters" }, (function()
        local keys = {}
        for k in pairs(t["function"]) do keys[#keys + 1] = k end
        table.sort(keys)
        return keys
      end)())
      assert.truthy(t["function"].name:match("^[%w_-]+$"))
      assert.are.equal("object", t["function"].parameters.type)
    end
    assert.are.equal("checkWeather", list[1]["function"].name)
    assert.are.same({ "city" }, list[1]["function"].parameters.required)
  end)

  it("anthropic and mcp", function()
    local a = tools("--tools", "plans/weather/tools", "--format", "anthropic")
    assert.are.equal("checkWeather", a[1].name)
    assert.are.equal("object", a[1].input_schema.type)
    assert.is_nil(a[1].parameters)
    local m = tools("--tools", LATENT, "--latent", HANDLER, "--format", "mcp")
    assert.are.equal(2, #m.tools)
    assert.are.equal("object", m.tools[2].inputSchema.type)
    assert.are.same({ ["obelus/latent"] = true }, m.tools[2]._meta)
    assert.is_nil(m.tools[1]._meta)
  end)

  it("refuses bad options", function()
    assert.are.equal(2, cli.run { "tools" }.code)
    assert.are.equal(2, cli.run { "tools", "--tools", "plans/weather/tools", "--format", "xml" }.code)
    assert.are.equal(2, cli.run { "tools", "--tools", "/no/such/tools" }.code)
  end)

  describe("--plan-schema", function()
    local function schema_for(dir)
      local r = cli.run { "tools", "--tools", dir, "--plan-schema" }
      assert.are.equal(0, r.code, r.err)
      local s = cjson.decode(r.out)
      assert.are.equal("http://json-schema.org/draft-07/schema#", s["$schema"])
      return cli.tmpfile(r.out, ".json")
    end

    it("every example plan validates against its plan schema", function()
      for _, p in ipairs(PLANS) do
        local s = schema_for("plans/" .. p .. "/tools")
        local r = cli.run { "schema", s, "plans/" .. p .. "/plan.json" }
        assert.are.equal(0, r.code, p .. ": " .. r.out .. r.err)
        os.remove(s)
      end
    end)

    it("delegate calls and every meta-property validate", function()
      local s = schema_for("plans/weather/tools")
      local plan = cli.tmpfile(cjson.encode {
        context = { { type = "data", kind = "input", data = { city = "Oslo" } } },
        instances = "auto",
        plan = {
          { _id = "w", _tool = "checkWeather", city = "†input.city", _outputPath = "†state.sunny || †state.rainy",
            _outputMethod = "merge", _instance = "a", _timeout = 500, _retry = { attempts = 2, backoff = 2 } },
          { _id = "d", _delegate = "sub.json", _scopes = { "input" }, city = "x", _outputPath = "†state.d" },
        },
        output = { x = "†state.d" },
      }, ".json")
      local r = cli.run { "schema", s, plan }
      assert.are.equal(0, r.code, r.out .. r.err)
    end)

    it("broken plans do not validate", function()
      local s = schema_for("plans/weather/tools")
      for _, bad in ipairs {
        { { _tool = "nope", _outputPath = "†state.a" } },                           -- unknown tool
        { { _tool = "checkWeather", _outputPath = "†state.a" } },                   -- required param
        { { _tool = "checkWeather", city = "x", _bogus = 1 } },                     -- unknown meta
        { { _tool = "checkWeather", city = "x", _outputPath = "state.a" } },        -- not a reference
        { { _tool = "checkWeather", city = "x", _outputMethod = "append" } },       -- no such method
        { { _tool = "checkWeather", city = "" } },                                  -- the tool's minLength
        { { _tool = "checkWeather", city = "x", _id = "a@b" } },                    -- @ in an id
        { { _tool = "checkWeather", city = "x", _timeout = 0 } },
        { { _tool = "checkWeather", city = "x", _retry = { backoff = 2 } } },       -- no attempts
        { { _tool = "checkWeather", city = "x", _scopes = { "input" } } },          -- _scopes without _delegate
        { plan = {}, extra = 1 },
        { plan = {}, instances = "some" },
      } do
        local f = cli.tmpfile(cjson.encode(bad), ".json")
        local r = cli.run { "schema", s, f }
        assert.are.equal(1, r.code, cjson.encode(bad) .. ": " .. r.out .. r.err)
        os.remove(f)
      end
    end)
  end)
end)
