-- view_spec.lua -- a call's big params as read-only views (core/bridge/ob_view.c, plan-format §9): reading
-- (index, #, pairs, ipairs, obelus.next), the error on writes, obelus.totable and
-- obelus.is_view, values returned unchanged (the same JSON), cjson.encode, the cut-off
-- between tables and views, latent handlers and retries, and the example tools on views.
local obelus = require "obelus"
local fs = require "support.fs"

local decode, encode, null = obelus.decode, obelus.encode, obelus.null

-- The tools: each reports what it saw as a value the spec compares.
local TOOLS = [=[
local obelus = require "obelus"
local cjson = require "cjson"
function KIND(call)
  local d = call.doc
  local out = { kind = obelus.is_view(d) or type(d), esc = type(d) ~= "number" and d.esc or nil }
  if type(d) == "table" or obelus.is_view(d) == "object" then
    for _, k in ipairs { "a", "b", "big", "few" } do
      if d[k] ~= nil then out[k] = obelus.is_view(d[k]) or type(d[k]) end
    end
  end
  return out
end
local function kind(v)
  local t = type(v)
  if t == "userdata" and v ~= obelus.null then return obelus.is_view(v) or "userdata" end
  if v == obelus.null then return "null" end
  return t
end
return {
  { name = "echo", run = function(call) return call.doc end },
  { name = "kind", run = function(call) return KIND(call) end },
  -- the same with a schema: its params are resolved before the call (another path)
  { name = "kind_s", schema = { type = "object" }, run = function(call) return KIND(call) end },
  { name = "wrap", run = function(call)
      return { whole = call.doc, part = call.doc.nested, list = { call.doc.list, 7 } }
    end },
  { name = "kinds", run = function(call)
      local d, out = call.doc, {}
      for _, k in ipairs { "z", "a", "m", "s", "nested", "list", "missing" } do
        out[k] = kind(d[k])
      end
      out.doc, out.small, out.type = kind(d), kind(call.small), type(d)
      out.deep, out.empty_a, out.empty_o = kind(d.nested.z[4]), kind(d.nested.x), kind(d.nested.y)
      out.len, out.list_len, out.empty_len = #d, #d.list, #d.nested.x
      out.z, out.a, out.a_type, out.unicode = d.z, d.a, math.type(d.a), d["ключ"]
      out.null = d.m == obelus.null
      out.int_key = d[1] == nil
      out.list1, out.list70, out.list0, out.list71 = d.list[1], d.list[70], d.list[0] == nil, d.list[71] == nil
      out.float_index, out.string_index = d.list[2.0], d.list["2"] == nil
      out.text = tostring(d):match("^[^(]*")
      out.same = d.nested == d.nested and d.list == call.doc.list
      out.differ = d.nested ~= d.list
      out.is_array = obelus.is_array(d.list)
      out.is_array_obj = obelus.is_array(d)
      out.concat = table.concat(d.nested.z, ",", 1, 2)
      out.unpack = select("#", table.unpack(d.list))
      return out
    end },
  { name = "walk", run = function(call)
      local d, keys, pairs_n, ipairs_n, nested = call.doc, {}, 0, 0, 0
      for k, v in pairs(d) do keys[#keys + 1] = k end
      for i, v in pairs(d.list) do pairs_n = pairs_n + 1; assert(v == i, "list[" .. i .. "]") end
      for i, v in ipairs(d.list) do ipairs_n = ipairs_n + 1 end
      for k in pairs(d) do for k2 in pairs(d) do nested = nested + 1 end end -- one view, two walks
      local by_next, k = {}, obelus.next(d)
      while k ~= nil do by_next[#by_next + 1] = k; k = obelus.next(d, k) end
      local i1, v1 = obelus.next(d.list)
      local i2, v2 = obelus.next(d.list, 69)
      local last = obelus.next(d.list, 70)
      local t = { only = 1 }
      local tk, tv = obelus.next(t)
      local plain = select(2, pcall(next, d))
      local bad = select(2, pcall(obelus.next, d, "no such key"))
      return { keys = table.concat(keys, " "), pairs_n = pairs_n, ipairs_n = ipairs_n,
               nested = nested, by_next = table.concat(by_next, " "),
               first = { i1, v1 }, near_end = { i2, v2 }, last = last == nil,
               table_next = { tk, tv }, plain_next = plain, bad_next = bad }
    end },
  { name = "write", run = function(call)
      local d, out = call.doc, {}
      out.top = select(2, pcall(function() d.z = 2 end))
      out.nested = select(2, pcall(function() d.nested.z[1] = 2 end))
      out.insert = select(2, pcall(table.insert, d.list, 1))
      out.unchanged = d.z
      local small = call.small
      small.added = true -- small params are tables, as before: writable
      out.small = small.added
      return out
    end },
  { name = "copy", run = function(call)
      local t = obelus.totable(call.doc)
      local same = obelus.totable(call.small) == call.small and obelus.totable(5) == 5
                   and obelus.totable("s") == "s" and obelus.totable(obelus.null) == obelus.null
      return { copy = t, is_table = type(t) == "table", is_array = obelus.is_array(t.list),
               empty_array = obelus.is_array(t.nested.x), not_view = not obelus.is_view(t),
               unchanged = same, written = (function() t.z = "changed"; return t.z end)() }
    end },
  { name = "copy_back", run = function(call) return obelus.totable(call.doc) end },
  { name = "json", run = function(call)
      local safe = require "cjson.safe"
      local text, err = safe.encode({ f = function() end })
      return { view = cjson.encode(call.doc), nested = cjson.encode(call.doc.nested),
               mixed = cjson.decode(cjson.encode({ v = call.doc.nested, n = 1 })),
               plain = cjson.encode({ 1, 2, 3 }), safe = safe.encode(call.doc.list),
               safe_err = text == nil and err ~= nil,
               raises = not pcall(cjson.encode, { f = function() end }),
               obelus = obelus.encode(call.doc) }
    end },
  { name = "message", run = function(call)
      return obelus.message { path = "m", value = call.doc.nested }
    end },
  { name = "branch", run = function(call) return obelus.branch(2, call.doc.list) end },
  { name = "fails", run = function(call) error(call.doc.nested) end },
  { name = "flaky", run = function(call, ctx)
      if ctx.attempt == 1 then error("first attempt", 0) end
      return { attempt = ctx.attempt, kind = kind(call.doc), z = call.doc.z }
    end },
  { name = "ask" }, -- latent: the handler below answers
}
]=]

local LATENT = [[
local obelus = require "obelus"
local cjson = require "cjson"
obelus.set_latent(function(call, tool, ctx)
  return { kind = obelus.is_view(call.doc), json = cjson.encode(call.doc), z = call.doc.z }
end)
]]

-- The big document: 70 list entries alone put it over the cut-off (64). Keys are in no
-- sorted order, reals stay reals, a null, unicode, empty containers.
local list = {}
for i = 1, 70 do list[i] = tostring(i) end
local BIG = '{"z":1,"a":1.0,"m":null,"ключ":"é✓ \\u0000 end","s":"text",'
  .. '"nested":{"x":[],"y":{},"z":[1,2.5,null,{"deep":true,"e":-0.0}]},'
  .. '"list":[' .. table.concat(list, ",") .. ']}'
local SMALL = '{"b":1,"a":[1,2]}'

local dir, engine

setup(function()
  dir = fs.tmpdir()
  fs.write(dir .. "/tools.lua", TOOLS)
  fs.write(dir .. "/latent.lua", LATENT)
  engine = obelus.engine { tools = dir .. "/tools.lua", scripts = dir .. "/latent.lua" }
end)

teardown(function()
  engine:close()
  fs.rmtree(dir)
end)

-- Runs one call of tool with doc = input.doc (the JSON text doc) and small = input.small
-- (or the input whose JSON text is input); extra: more params. Returns †state.r, the run's status and the run.
local function call(tool, doc, extra, input)
  local c = { _tool = tool, doc = "†input.doc", small = "†input.small", _outputPath = "†state.r" }
  for k, v in pairs(extra or {}) do c[k] = v end
  input = input or '{"doc":' .. doc .. ',"small":' .. SMALL .. '}'
  local run = engine:run({ plan = { c } }, { input = decode(input) })
  local status = run:wait()
  return run:resolve("†state.r"), status, run
end

local READ_ONLY = "obelus: params are read-only; use obelus.totable(v) for a copy you can change"

describe("a big object param", function()
  it("is a view: scalars as Lua values, objects and arrays inside as views", function()
    local r, status = call("kinds", BIG)
    assert.are.equal(0, status)
    assert.are.same({
      z = "number", a = "number", m = "null", s = "string", nested = "object", list = "array",
      missing = "nil", doc = "object", small = "table", type = "userdata",
      deep = "object", empty_a = "array", empty_o = "object", -- small, but inside a view
      len = 0, list_len = 70, empty_len = 0,
      a_type = "float", unicode = "é✓ \0 end", null = true, int_key = true,
      list1 = 1, list70 = 70, list0 = true, list71 = true, float_index = 2, string_index = true,
      text = "obelus.view: object of 7 keys ", same = true, differ = true,
      is_array = true, is_array_obj = false, concat = "1,2.5", unpack = 70,
      z = 1, a = 1.0,
    }, r)
  end)

  it("walks with pairs in its key order, arrays 1..n, ipairs, and obelus.next", function()
    local r = call("walk", BIG)
    assert.are.same({
      keys = "z a m ключ s nested list", pairs_n = 70, ipairs_n = 70, nested = 49,
      by_next = "z a m ключ s nested list", first = { 1, 1 }, near_end = { 70, 70 }, last = true,
      table_next = { "only", 1 },
      plain_next = "bad argument #1 to 'next' (table expected, got obelus.view)",
      bad_next = "invalid key to 'next'",
    }, r)
  end)

  it("refuses writes, at any depth, with what to do instead", function()
    local r = call("write", BIG)
    assert.matches("tools.lua:%d+: " .. READ_ONLY:gsub("%p", "%%%0"), r.top)
    assert.matches(READ_ONLY, r.nested, 1, true)
    assert.matches(READ_ONLY, r.insert, 1, true)
    assert.are.equal(1, r.unchanged)
    assert.is_true(r.small)
  end)
end)

describe("obelus.totable", function()
  it("copies a view into tables as the bridge made them, and returns anything else as it is", function()
    local r = call("copy", BIG)
    assert.is_true(r.is_table and r.is_array and r.empty_array and r.not_view and r.unchanged)
    assert.are.equal("changed", r.written)
    assert.are.equal(decode(BIG).s, r.copy.s)
  end)

  it("gives tables that come back as the same JSON (key order, 1.0, empty arrays)", function()
    local r = call("copy_back", BIG)
    assert.are.equal(BIG:gsub("\\u0000", "\\u0000"), encode(r))
  end)
end)

describe("a view returned", function()
  it("gives back exactly the same JSON: key order, integers and reals, unicode, empties", function()
    local r = call("echo", BIG)
    assert.are.equal(BIG, encode(r))
    local arr = '[1,1.0,null,"s",{"b":1,"a":[]},[],{},' .. table.concat(list, ",") .. ']'
    assert.are.equal(arr, encode((call("echo", arr))))
  end)

  it("is its value inside a table, an obelus.message or an obelus.branch", function()
    local r = call("wrap", BIG)
    local big = decode(BIG)
    assert.are.equal(BIG, encode(r.whole))
    assert.are.equal(encode(big.nested), encode(r.part))
    assert.are.equal(encode(big.list), encode(r.list[1]))
    assert.are.equal(7, r.list[2])
    local _, status, run = call("message", BIG, { _outputPath = "†state.m" })
    assert.are.equal(0, status)
    assert.are.equal('{"x":[],"y":{},"z":[1,2.5,null,{"deep":true,"e":-0.0}]}', encode(run:resolve("†state.m")))
    _, status, run = call("branch", BIG, { _outputPath = "†state.one || †state.two" })
    assert.are.equal(0, status)
    assert.are.equal(encode(big.list), encode(run:resolve("†state.two")))
  end)

  it("raised as an error, reads as its JSON", function()
    local _, status, run = call("fails", BIG)
    assert.are.equal(1, status)
    local seen
    for _, m in ipairs(run:messages()) do
      local e = m.kind == "error" and m.data or m.error
      if type(e) == "table" and e.error then seen = e.error end
      if type(m.data) == "table" and type(m.data.error) == "string" then seen = m.data.error end
    end
    assert.matches('{"x":[],"y":{},"z":[1,2.5,null,{"deep":true,"e":-0.0}]}', tostring(seen), 1, true)
  end)
end)

describe("cjson.encode in a tool", function()
  it("prints a view from its value and a table holding views; plain tables as before", function()
    local r = call("json", BIG)
    assert.are.equal(BIG, r.view)
    assert.are.equal(BIG, r.obelus)
    assert.are.equal('{"x":[],"y":{},"z":[1,2.5,null,{"deep":true,"e":-0.0}]}', r.nested)
    assert.are.same({ n = 1, v = decode(BIG).nested }, r.mixed)
    assert.are.equal("[1,2,3]", r.plain)
    assert.are.equal(encode(decode(BIG).list), r.safe)
    assert.is_true(r.safe_err)
    assert.is_true(r.raises)
  end)
end)

describe("the cut-off", function()
  local function object(n) -- n integer members
    local parts = {}
    for i = 1, n do parts[i] = ('"k%d":%d'):format(i, i) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  local function records(n) -- an array of n records of 4 members: 5n entries
    local parts = {}
    for i = 1, n do parts[i] = ('{"id":%d,"name":"n%d","ok":true,"tags":null}'):format(i, i) end
    return "[" .. table.concat(parts, ",") .. "]"
  end

  it("keeps values of fewer than 64 entries, counted at every depth, as tables", function()
    assert.are.equal("table", call("kind", object(63)).kind)
    assert.are.equal("object", call("kind", object(64)).kind)
    assert.are.equal("table", call("kind", '{"a":' .. object(62) .. '}').kind) -- 1 + 62
    assert.are.equal("object", call("kind", '{"a":' .. object(63) .. '}').kind)
    assert.are.equal("table", call("kind", records(12)).kind) -- 60
    assert.are.equal("array", call("kind", records(13)).kind) -- 65
    local r = call("kind", '{"a":' .. object(10) .. ',"b":' .. records(13) .. '}')
    assert.are.same({ kind = "object", a = "object", b = "array" }, r)
  end)

  it("judges values written in the plan by what they resolve to, whatever the path", function()
    local input = '{"big":' .. records(13) .. ',"few":' .. records(12) .. ',"small":{}}'
    local ints = {}
    for i = 1, 70 do ints[i] = i end
    for _, tool in ipairs { "kind", "kind_s" } do
      -- 2 + 65 entries: a view, and all in it
      assert.are.same({ kind = "object", big = "array" },
        call(tool, nil, { doc = { big = "†input.big", n = 1 } }, input))
      -- 2 + 60: tables
      assert.are.same({ kind = "table", few = "table" },
        call(tool, nil, { doc = { few = "†input.few", n = 1 } }, input))
      -- written in the plan whole: 70 integers, a "††" literal unescaped
      assert.are.same({ kind = "array" }, call(tool, nil, { doc = obelus.array(ints) }, input))
      assert.are.same({ kind = "object", esc = "†x", big = "array" },
        call(tool, nil, { doc = { esc = "††x", big = obelus.array(ints) } }, input))
      assert.are.same({ kind = "table", esc = "†x" }, call(tool, nil, { doc = { esc = "††x" } }, input))
    end
  end)
end)

describe("views reach", function()
  it("a latent handler, which can encode them", function()
    local r = call("ask", BIG)
    assert.are.same({ kind = "object", json = BIG, z = 1 }, r)
  end)

  it("every attempt of a retried call", function()
    local r = call("flaky", BIG, { _retry = { attempts = 2, delay_ms = 1 } })
    assert.are.same({ attempt = 2, kind = "object", z = 1 }, r)
  end)

  it("the example tools, which read them as they read tables", function()
    local e = obelus.engine { tools = "plans/fanout-summary/tools" }
    local summaries = {}
    for i = 1, 80 do summaries[i] = "summary " .. i end
    local run = e:run({ plan = { { _tool = "digest", summaries = "†input.s", _outputPath = "†state.d" } } },
      { input = { s = obelus.array(summaries) } })
    assert.are.equal(0, run:wait())
    local d = run:resolve("†state.d")
    assert.are.equal(80, d.count)
    assert.are.equal("1. summary 1\n2. summary 2", d.text:sub(1, 25))
    e:close()
  end)
end)
