-- spec/cli/export_spec.lua -- the tools exported for models, and what comes back:
-- API names (^[a-zA-Z0-9_-]{1,64}$) in the openai and anthropic formats and the plan
-- schemas, resolved back in plans, loop steps and MCP's tools/call, the real name
-- winning; `tools --plan-schema --strict`, walked by a checker of OpenAI's documented
-- strict-mode rules and limits; a plan written to it, nulls and all, valid against it
-- and running as the plain plan does; nulls read as absent.
local cjson = require "cjson"
local cli = require "support.cli"

local NAMES = "spec/cli/fixtures/export/tools"
local PLANS = { "user-status", "weather", "refund", "translate", "fanout-summary", "notify", "files",
                "http", "cluster", "replan" }
local DAGGER = "\u{2020}"

local function ok_run(args)
  local r = cli.run(args)
  assert.are.equal(0, r.code, r.err)
  return r
end

local function json_file(v) return cli.tmpfile(type(v) == "string" and v or cjson.encode(v), ".json") end

-- The low 32 bits of FNV-1a 64 of s, in hex: the rule's hash (Lua's integers wrap).
local function fnv(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do
    h = h ~ s:byte(i)
    h = h * 0x100000001b3
  end
  return ("%08x"):format(h & 0xffffffff)
end

local LONG = ("long.name."):rep(8)
local EXPECTED = {
  ["weather.lookup now"] = "weather_lookup_now",
  ["a/c"] = "a_c",
  ["météo"] = "m_t_o",
  ["a_b"] = "a_b",                            -- fits: keeps itself
  ["a.b"] = "a_b_" .. fnv("a.b"),             -- "a_b" is a real name's, and "a b" shares it
  ["a b"] = "a_b_" .. fnv("a b"),
  [LONG] = ("long_name_"):rep(6):sub(1, 55) .. "_" .. fnv(LONG),
}

-- --- a checker of OpenAI's strict structured-output rules --------------------------------
-- The documented rules ("Supported schemas"): the root an object, not anyOf; every object
-- with additionalProperties false and all its properties required; types string, number,
-- boolean, integer, object, array, null; anyOf nested only; $ref into $defs; the
-- keywords below only (no allOf, not, oneOf, if/then/else, patternProperties,
-- propertyNames, dependentRequired ...); string formats of its list; limits: 5000
-- object properties, 10 levels of nested objects, 1000 enum values, 120,000 characters
-- of property names, definition names, enum and const values, a string enum of more than
-- 250 values at most 15,000 characters.
local KEYWORDS = {}
for _, k in ipairs { "type", "properties", "required", "additionalProperties", "items", "enum", "const",
                     "anyOf", "$ref", "$defs", "description", "pattern", "format", "minimum", "maximum",
                     "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems" } do
  KEYWORDS[k] = true
end
local TYPES = { string = true, number = true, boolean = true, integer = true, object = true, array = true,
                null = true }
local FORMATS = { ["date-time"] = true, time = true, date = true, duration = true, email = true,
                  hostname = true, ipv4 = true, ipv6 = true, uuid = true }

local function strict_problems(root)
  local problems, stats = {}, { props = 0, enums = 0, chars = 0, depth = 0 }
  local function bad(where, what) problems[#problems + 1] = where .. ": " .. what end
  local defs = type(root) == "table" and root["$defs"] or {}
  if type(root) ~= "table" or root.type ~= "object" then bad("(root)", "the root is not an object") end
  if type(root) == "table" and root.anyOf then bad("(root)", "anyOf at the root") end
  local function types_of(s)
    if type(s.type) == "table" then return s.type end
    return s.type and { s.type } or {}
  end
  local function walk(s, where, top)
    if type(s) ~= "table" then bad(where, "a boolean schema") return end
    for k in pairs(s) do
      if not KEYWORDS[k] then bad(where, "keyword " .. k .. " is not supported") end
    end
    if s["$defs"] and not top then bad(where, "$defs below the root") end
    if s["$ref"] then
      local name = tostring(s["$ref"]):match("^#/%$defs/(.+)$")
      if not name or not defs[name] then bad(where, "$ref " .. tostring(s["$ref"]) .. " leads nowhere") end
      for k in pairs(s) do if k ~= "$ref" then bad(where, "a keyword beside $ref: " .. k) end end
    end
    if not (s.type or s.anyOf or s["$ref"] or s.enum or s.const) then bad(where, "no type") end
    local object = false
    for _, t in ipairs(types_of(s)) do
      if not TYPES[t] then bad(where, "type " .. tostring(t)) end
      object = object or t == "object"
    end
    if object then
      if s.additionalProperties ~= false then bad(where, "additionalProperties is not false") end
      local props, req = s.properties or {}, {}
      for _, r in ipairs(s.required or {}) do req[r] = true end
      for name, ps in pairs(props) do
        stats.props = stats.props + 1
        stats.chars = stats.chars + utf8.len(name)
        if not req[name] then bad(where, "property " .. name .. " is not in required") end
        walk(ps, where .. "/" .. name)
      end
      for r in pairs(req) do
        if props[r] == nil then bad(where, "required " .. r .. " is not a property") end
      end
    elseif s.properties or s.required or s.additionalProperties ~= nil then
      bad(where, "object keywords on a schema that is not an object")
    end
    if s.items ~= nil then
      if type(s.items) ~= "table" or s.items[1] then bad(where, "items is not one schema") end
      walk(s.items, where .. "[]")
    end
    if s.anyOf then
      for i, b in ipairs(s.anyOf) do walk(b, where .. "|" .. i) end
    end
    if s.enum then
      local n = 0
      stats.enums = stats.enums + #s.enum
      for _, v in ipairs(s.enum) do
        if type(v) == "string" then n = n + utf8.len(v) end
      end
      stats.chars = stats.chars + n
      if #s.enum > 250 and n > 15000 then bad(where, "an enum of more than 250 strings past 15,000 characters") end
    end
    if type(s.const) == "string" then stats.chars = stats.chars + utf8.len(s.const) end
    if s.format and not FORMATS[s.format] then bad(where, "format " .. tostring(s.format)) end
  end
  walk(root, "(root)", true)
  for name, d in pairs(defs) do
    stats.chars = stats.chars + utf8.len(name)
    walk(d, "$defs/" .. name)
  end
  -- a draft-07 schema's definitions (not strict mode's) are walked too, to say what they hold
  for name, d in pairs(type(root) == "table" and type(root.definitions) == "table" and root.definitions or {}) do
    walk(d, "definitions/" .. name)
  end
  -- nested objects, $refs followed
  local function levels(s, budget)
    if type(s) ~= "table" or budget == 0 then return 0 end
    if s["$ref"] then
      local name = tostring(s["$ref"]):match("^#/%$defs/(.+)$")
      return name and levels(defs[name], budget - 1) or 0
    end
    local most = 0
    for _, ps in pairs(s.properties or {}) do most = math.max(most, levels(ps, budget - 1)) end
    most = math.max(most, levels(s.items, budget - 1))
    for _, b in ipairs(s.anyOf or {}) do most = math.max(most, levels(b, budget - 1)) end
    local object = false
    for _, t in ipairs(types_of(s)) do object = object or t == "object" end
    return most + (object and 1 or 0)
  end
  stats.depth = levels(root, 100)
  if stats.props > 5000 then bad("(schema)", stats.props .. " object properties, past 5000") end
  if stats.enums > 1000 then bad("(schema)", stats.enums .. " enum values, past 1000") end
  if stats.chars > 120000 then bad("(schema)", stats.chars .. " characters, past 120,000") end
  if stats.depth > 10 then bad("(schema)", "objects nested " .. stats.depth .. " levels, past 10") end
  return problems, stats
end

local function strict_schema(...)
  local r = ok_run { "tools", "--plan-schema", "--strict", ... }
  return cjson.decode(r.out), r.err, r.out
end

-- --- plans ---------------------------------------------------------------------------------
-- The weather plan, with one output reference (a strict plan's output is one string).
local function weather_plain()
  return {
    plan = {
      { _tool = "checkWeather", _id = "weather", city = DAGGER .. "input.city",
        _outputPath = DAGGER .. "state.sunny || " .. DAGGER .. "state.rainy" },
      { _tool = "park", _id = "park", weather = DAGGER .. "state.sunny", markerDir = cjson.null,
        _outputPath = DAGGER .. "state.suggestion.park" },
      { _tool = "movie", _id = "movie", weather = DAGGER .. "state.rainy", markerDir = cjson.null,
        _outputPath = DAGGER .. "state.suggestion.movie", _retry = { attempts = 2 } },
      { _tool = "suggest", _id = "suggest",
        idea = DAGGER .. "state.suggestion.park || " .. DAGGER .. "state.suggestion.movie",
        _outputPath = DAGGER .. "state.answer" },
    },
    output = DAGGER .. "state.answer",
  }
end

local METAS = { "_id", "_outputPath", "_outputMethod", "_instance", "_timeout", "_retry", "_each",
                "_eachConcurrency" }

-- The same plan as a model under strict mode writes it: every key, null for the absent.
local function weather_strict()
  local p = weather_plain()
  for _, c in ipairs(p.plan) do
    for _, m in ipairs(METAS) do
      if c[m] == nil then c[m] = cjson.null end
    end
    if c._retry ~= cjson.null then
      for _, k in ipairs { "delay_ms", "backoff", "max_delay_ms", "jitter" } do c._retry[k] = cjson.null end
    end
  end
  p.instances = cjson.null
  return p
end

describe("tools exported for models", function()
  describe("API names", function()
    it("openai and anthropic name each tool to the pattern, by the rule", function()
      local o = cjson.decode(ok_run { "tools", "--tools", NAMES, "--format", "openai" }.out)
      local a = cjson.decode(ok_run { "tools", "--tools", NAMES, "--format", "anthropic" }.out)
      local j = cjson.decode(ok_run { "tools", "--tools", NAMES }.out)
      assert.are.equal(7, #o)
      local seen = {}
      for i, t in ipairs(j) do
        local want = EXPECTED[t.name]
        assert.is_not_nil(want, t.name)
        assert.are.equal(want, o[i]["function"].name)
        assert.are.equal(want, a[i].name)
        assert.truthy(want:match("^[%w_-]+$") and #want <= 64, want)
        assert.is_nil(seen[want], "two tools share " .. want)
        seen[want] = true
        -- json-schema keeps the real name, and gives the API name when they differ
        if want == t.name then assert.is_nil(t.api_name) else assert.are.equal(want, t.api_name) end
      end
      assert.are.equal(64, #EXPECTED[LONG])
    end)

    it("the names do not depend on the order the tools were loaded in", function()
      local one = cli.tmpfile([[return { { name = "x.y", run = function() return 1 end } }]], ".lua")
      local two = cli.tmpfile([[return { { name = "x y", run = function() return 2 end } }]], ".lua")
      local function names(...)
        local out = {}
        for _, t in ipairs(cjson.decode(ok_run { "tools", "--format", "openai", ... }.out)) do
          out[#out + 1] = t["function"].name
        end
        return out
      end
      local ab, ba = names("--tools", one, "--tools", two), names("--tools", two, "--tools", one)
      assert.are.same(ab, ba)
      assert.are.same({ "x_y_" .. fnv("x y"), "x_y_" .. fnv("x.y") }, ab) -- shared: neither has x_y
    end)

    it("MCP's tools/list keeps the real names (MCP takes any string)", function()
      local m = cjson.decode(ok_run { "tools", "--tools", NAMES, "--format", "mcp" }.out)
      local names = {}
      for _, t in ipairs(m.tools) do names[t.name] = true end
      assert.is_true(names["weather.lookup now"] and names["a.b"] and names["météo"])
    end)

    it("a plan calls a tool by its API name or its real name; the real name wins", function()
      local plan = json_file {
        plan = {
          { _tool = "weather_lookup_now", city = "Oslo", _outputPath = DAGGER .. "state.w" },
          { _tool = "weather.lookup now", city = "Rome", _outputPath = DAGGER .. "state.real" },
          { _tool = "a_b", x = 1, _outputPath = DAGGER .. "state.ab" },               -- the real a_b
          { _tool = EXPECTED["a.b"], x = 2, _outputPath = DAGGER .. "state.dot" },
          { _tool = EXPECTED["a b"], x = 3, _outputPath = DAGGER .. "state.space" },
          { _tool = EXPECTED[LONG], x = 4, _outputPath = DAGGER .. "state.long" },
          { _tool = "m_t_o", x = 5, _outputPath = DAGGER .. "state.meteo" },
          { _tool = "a_c", x = 6, _outputPath = DAGGER .. "state.slash" },
        },
      }
      local out = cjson.decode(ok_run { "run", plan, "--tools", NAMES }.out)
      assert.are.same({ tool = "weather.lookup now", city = "Oslo" }, out.w)
      assert.are.same({ tool = "weather.lookup now", city = "Rome" }, out.real)
      assert.are.same({ tool = "a_b", x = 1 }, out.ab)
      assert.are.same({ tool = "a.b", x = 2 }, out.dot)
      assert.are.same({ tool = "a b", x = 3 }, out.space)
      assert.are.same({ tool = LONG, x = 4 }, out.long)
      assert.are.same({ tool = "météo", x = 5 }, out.meteo)
      assert.are.same({ tool = "a/c", x = 6 }, out.slash)
    end)

    it("a call named by its API name is reported under the real name; an unknown name is refused", function()
      local r = cli.run { "check", json_file { { _tool = "weather_lookup_now", city = "" } }, "--tools", NAMES }
      assert.are.equal(2, r.code)
      assert.matches('call #0 (weather.lookup now): parameter "city"', r.err, 1, true)
      r = cli.run { "check", json_file { { _tool = "weather_lookup_later", city = "x" } }, "--tools", NAMES }
      assert.are.equal(2, r.code)
      assert.matches('no tool named "weather_lookup_later"', r.err, 1, true)
      -- events name the tool by its real name, an _each call's copies too
      r = cli.run { "run", json_file {
        context = { { type = "input", data = { xs = { 1, 2 } } } },
        plan = { { _tool = "a_c", x = DAGGER .. "each.value", _each = DAGGER .. "input.xs",
                   _outputPath = DAGGER .. "state.r" },
                 { _tool = "weather_lookup_now", city = "x", _outputPath = DAGGER .. "state.w" } } },
        "--tools", NAMES, "--events", "-" }
      assert.are.equal(0, r.code, r.err)
      local tools = {}
      for line in r.out:gmatch("[^\n]+") do
        local ev = cjson.decode(line)
        if ev.tool then tools[ev.tool] = (tools[ev.tool] or 0) + 1 end
      end
      assert.is_true((tools["a/c"] or 0) >= 3 and (tools["weather.lookup now"] or 0) >= 1, r.out)
      assert.is_nil(tools.a_c)
      assert.is_nil(tools.weather_lookup_now)
      -- the sanitized name a shared one would have had is nobody's
      r = cli.run { "check", json_file { { _tool = "x_y" } }, "--tools", NAMES }
      assert.are.equal(2, r.code)
    end)

    it("a loop step's calls name tools by their API names, with nulls for the absent", function()
      local planner = cli.tmpfile([[
        local null = require("obelus").null
        return function(ctx)
          if ctx.step == 1 then
            return { calls = { { _tool = "weather_lookup_now", city = "Oslo", days = null, unit = null,
                                 _id = null, _retry = null, _outputPath = "]] .. DAGGER .. [[state.w" } } }
          end
          return { output = ctx:resolve("]] .. DAGGER .. [[state.w") }
        end]], ".lua")
      local r = cli.run { "loop", json_file '{"plan": []}', "--planner", planner, "--tools", NAMES }
      assert.are.equal(0, r.code, r.err)
      -- days (null refused by its schema) absent; unit (null accepted) kept as null
      assert.are.same({ tool = "weather.lookup now", city = "Oslo", unit = cjson.null }, cjson.decode(r.out))
    end)

    it("MCP's tools/call takes an API name", function()
      local lines = table.concat({
        cjson.encode { jsonrpc = "2.0", id = 1, method = "initialize",
                       params = { protocolVersion = "2025-06-18", capabilities = {},
                                  clientInfo = { name = "spec", version = "1" } } },
        cjson.encode { jsonrpc = "2.0", method = "notifications/initialized" },
        cjson.encode { jsonrpc = "2.0", id = 2, method = "tools/call",
                       params = { name = "weather_lookup_now", arguments = { city = "Oslo" } } },
        cjson.encode { jsonrpc = "2.0", id = 3, method = "tools/call",
                       params = { name = "a_b", arguments = { x = 1 } } },
      }, "\n") .. "\n"
      local r = cli.run { "mcp", "--tools", NAMES, stdin = lines }
      assert.are.equal(0, r.code, r.err)
      local answers = {}
      for line in r.out:gmatch("[^\n]+") do
        local m = cjson.decode(line)
        answers[m.id] = m
      end
      assert.are.same({ tool = "weather.lookup now", city = "Oslo" }, answers[2].result.structuredContent.output)
      assert.are.same({ tool = "a_b", x = 1 }, answers[3].result.structuredContent.output)
    end)

    it("the plain plan schema keys tools by API name and takes either name in _tool", function()
      local r = ok_run { "tools", "--tools", NAMES, "--plan-schema" }
      local s = cjson.decode(r.out)
      assert.is_not_nil(s.definitions["tool:a_c"]) -- "a/c" would need escaping in a $ref
      assert.are.same({ "a_c", "a/c" }, s.definitions["tool:a_c"].properties._tool.enum)
      local schema = cli.tmpfile(r.out, ".json")
      for _, name in ipairs { "a_c", "a/c", "weather_lookup_now", "weather.lookup now" } do
        local plan = json_file { { _tool = name, city = "x", x = 1 } }
        local v = cli.run { "schema", schema, plan }
        assert.are.equal(0, v.code, name .. ": " .. v.out .. v.err)
      end
      assert.are.equal(1, cli.run { "schema", schema, json_file { { _tool = "a_d", x = 1 } } }.code)
    end)
  end)

  describe("--plan-schema --strict", function()
    it("the checker finds the plain plan schema breaks strict mode's rules", function()
      local plain = cjson.decode(ok_run { "tools", "--tools", "plans/weather/tools", "--plan-schema" }.out)
      local problems = strict_problems(plain)
      local text = table.concat(problems, "\n")
      assert.matches("anyOf at the root", text, 1, true)
      assert.matches("keyword propertyNames is not supported", text, 1, true)
      assert.matches("keyword allOf is not supported", text, 1, true)
      assert.matches("additionalProperties is not false", text, 1, true)
      assert.matches("property _id is not in required", text, 1, true)
    end)

    it("meets strict mode's rules and limits for every example's tools and the odd names", function()
      for _, dir in ipairs { NAMES, "spec/cli/tools" } do
        local s = strict_schema("--tools", dir)
        assert.are.same({}, (strict_problems(s)), dir)
      end
      for _, p in ipairs(PLANS) do
        local s = strict_schema("--tools", "plans/" .. p .. "/tools")
        local problems, stats = strict_problems(s)
        assert.are.same({}, problems, p)
        assert.is_true(stats.depth >= 2 and stats.props > 0, p)
      end
    end)

    it("a call's _tool is its API name; every meta-property nullable, required params not", function()
      local s = strict_schema("--tools", NAMES)
      local call = s["$defs"]["tool_weather_lookup_now"]
      assert.are.same({ "weather_lookup_now" }, call.properties._tool.enum)
      assert.are.same({ "string", "null" }, call.properties._instance.type)
      assert.are.same({ "integer", "null" }, call.properties._timeout.type)
      local function takes_null(p)
        if p.type == "null" then return true end
        if type(p.type) == "table" then
          for _, t in ipairs(p.type) do if t == "null" then return true end end
        end
        for _, b in ipairs(p.anyOf or {}) do if takes_null(b) then return true end end
        return false
      end
      assert.is_false(takes_null(call.properties.city))                -- required
      assert.is_true(takes_null(call.properties.days))                 -- optional
      assert.is_true(takes_null(call.properties._outputPath))
      -- the root is the plan's object form
      assert.are.same({ "plan", "output", "instances" }, s.required)
      assert.is_nil(s.anyOf)
    end)

    it("says on stderr what the tools' schemas hold that strict mode cannot", function()
      local _, err = strict_schema("--tools", "plans/weather/tools")
      assert.matches('note: tool "checkWeather": /city: minLength is left out', err, 1, true)
      local map = cli.tmpfile([[return { { name = "m", schema = { type = "object", properties = {
        tags = { type = "object", additionalProperties = { type = "string" } },
        pick = { oneOf = { { type = "string" }, { type = "integer" } } } } },
        run = function() end } }]], ".lua")
      local s, err2 = strict_schema("--tools", map)
      assert.matches("/tags: an object without properties (a map) can only be {}", err2, 1, true)
      assert.matches("/pick: oneOf is taken as anyOf", err2, 1, true)
      assert.are.same({}, (strict_problems(s)))
    end)

    it("refuses --strict without --plan-schema", function()
      assert.are.equal(2, cli.run { "tools", "--tools", NAMES, "--strict" }.code)
      assert.are.equal(2, cli.run { "tools", "--tools", NAMES, "--format", "openai", "--strict" }.code)
    end)

    it("a plan written to it, nulls and all, validates and runs as the plain plan does", function()
      local r = ok_run { "tools", "--tools", "plans/weather/tools", "--plan-schema", "--strict" }
      local schema = cli.tmpfile(r.out, ".json")
      local strict, plain = json_file(weather_strict()), json_file(weather_plain())
      local v = cli.run { "schema", schema, strict }
      assert.are.equal(0, v.code, v.out .. v.err)
      -- the plain plan is not what strict mode writes: its keys are missing
      assert.are.equal(1, cli.run { "schema", schema, plain }.code)
      for _, city in ipairs { "Lisbon", "London" } do
        local input = cjson.encode { city = city }
        local a = ok_run { "run", plain, "--tools", "plans/weather/tools", "--input", input }
        local b = ok_run { "run", strict, "--tools", "plans/weather/tools", "--input", input }
        assert.are.equal(a.out, b.out)
        assert.matches(city, a.out, 1, true)
      end
    end)

    it("the checker's validation refuses what strict mode would not write", function()
      local schema = cli.tmpfile(ok_run { "tools", "--tools", "plans/weather/tools", "--plan-schema",
                                          "--strict" }.out, ".json")
      local function with(change)
        local p = weather_strict()
        change(p)
        return cli.run { "schema", schema, json_file(p) }.code
      end
      assert.are.equal(1, with(function(p) p.plan[1]._timeout = nil end))            -- a key left out
      assert.are.equal(1, with(function(p) p.plan[1].extra = 1 end))                 -- a key too many
      assert.are.equal(1, with(function(p) p.plan[1]._tool = "nope" end))
      assert.are.equal(1, with(function(p) p.plan[1].city = cjson.null end))         -- required: not null
      assert.are.equal(1, with(function(p) p.output = nil end))
      assert.are.equal(0, with(function(p) p.output = cjson.null end))
    end)
  end)

  describe("nulls read as absent", function()
    local function run(plan, ...)
      return cli.run { "run", json_file(plan), "--tools", NAMES, ... }
    end

    it("a null meta-property, plan key or _retry key is absent", function()
      local r = run {
        context = cjson.null, instances = cjson.null, output = cjson.null,
        plan = { { _tool = "a_b", x = 1, _outputPath = DAGGER .. "state.a", _id = cjson.null,
                   _instance = cjson.null, _outputMethod = cjson.null, _timeout = cjson.null,
                   _each = cjson.null, _eachConcurrency = cjson.null, _delegate = cjson.null,
                   _scopes = cjson.null, _retry = { attempts = 1, delay_ms = cjson.null, jitter = cjson.null } } },
      }
      assert.are.equal(0, r.code, r.err)
      assert.are.same({ a = { tool = "a_b", x = 1 } }, cjson.decode(r.out)) -- output null: the state
    end)

    it("an optional param whose schema refuses null is absent; a null it takes, or a required one, stays", function()
      local r = run { plan = { { _tool = "weather.lookup now", city = "Oslo", days = cjson.null, unit = cjson.null,
                                 opts = { metric = true, lang = cjson.null }, _outputPath = DAGGER .. "state.w" } } }
      assert.are.equal(0, r.code, r.err)
      assert.are.same({ w = { tool = "weather.lookup now", city = "Oslo", unit = cjson.null,
                              opts = { metric = true } } }, cjson.decode(r.out))
      -- a required param's null is a value, which its schema refuses
      r = run { plan = { { _tool = "weather.lookup now", city = cjson.null, _outputPath = DAGGER .. "state.w" } } }
      assert.are.equal(2, r.code)
      assert.matches('parameter "city"', r.err, 1, true)
      -- and so is a nested required one
      r = run { plan = { { _tool = "weather.lookup now", city = "x", opts = { metric = cjson.null },
                           _outputPath = DAGGER .. "state.w" } } }
      assert.are.equal(2, r.code)
      assert.matches("opts/metric", r.err, 1, true)
    end)

    it("obelus log still knows a call whose nulls were dropped, by its place", function()
      local j = os.tmpname()
      os.remove(j)
      local r = run({ plan = { { _tool = "weather_lookup_now", city = "Oslo", days = cjson.null, _id = cjson.null,
                                 opts = { metric = true, lang = cjson.null }, _outputPath = DAGGER .. "state.w" } } },
                    "--journal", j)
      assert.are.equal(0, r.code, r.err)
      local log = ok_run { "log", j }.out
      assert.matches("#0%s+weather_lookup_now%s+" .. DAGGER .. "state.w", log)
      assert.is_nil(log:find("#?", 1, true))
      os.remove(j)
    end)

    it("a reference that resolves to null is a value, not absent", function()
      local r = run({ plan = { { _tool = "weather.lookup now", city = "Oslo", unit = DAGGER .. "input.u",
                                 _outputPath = DAGGER .. "state.w" } } }, "--input", '{"u": null}')
      assert.are.equal(0, r.code, r.err)
      assert.are.same(cjson.null, cjson.decode(r.out).w.unit)
    end)
  end)
end)
