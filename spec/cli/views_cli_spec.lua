-- views_cli_spec.lua -- big params as read-only views through `obelus run` (also on the
-- ASan build): a tool reads, walks and returns a view of a 2,000-key input, the output is
-- the same JSON, writes fail the call with the message that says what to do.
local cli = require "support.cli"
local obelus = require "obelus"

-- The output as compact JSON, its keys in their order.
local function compact(text) return obelus.encode(obelus.decode(text)) end

local TOOLS = [[
local obelus = require "obelus"
local cjson = require "cjson"
return {
  { name = "pick", run = function(call)
      local d, n, sum = call.doc, 0, 0
      for k, v in pairs(d) do n = n + 1; sum = sum + v.id end
      return { kind = obelus.is_view(d), n = n, sum = sum, one = d.k1234.name,
               tags = cjson.encode(d.k7.tags), last = obelus.totable(d.k1999).tags[2] }
    end },
  { name = "echo", run = function(call) return { doc = call.doc, part = call.doc.k3 } end },
  { name = "poke", run = function(call) call.doc.k1.id = 0 end },
}
]]

local function doc_text()
  local parts = {}
  for i = 0, 1999 do
    parts[#parts + 1] = ('"k%d":{"id":%d,"name":"n%d","r":%d.5,"tags":["x",null,{}]}'):format(i, i, i, i)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

describe("obelus run with big params", function()
  local tools, doc
  setup(function()
    tools = cli.tmpfile(TOOLS, ".lua")
    doc = doc_text()
  end)
  teardown(function() os.remove(tools) end)

  local function plan(tool)
    return cli.tmpfile(('{"context":[{"type":"input","data":{"doc":%s}}],"plan":[{"_tool":"%s",'
      .. '"doc":"†input.doc","_outputPath":"†state.r"}],"output":"†state.r"}'):format(doc, tool))
  end

  it("hands them to the tool as views it reads and walks", function()
    local p = plan("pick")
    local r = cli.run { "run", p, "--tools", tools }
    os.remove(p)
    assert.are.equal(0, r.code, r.err)
    assert.are.equal('{"kind":"object","last":null,"n":2000,"one":"n1234","sum":1999000,'
      .. '"tags":"[\\"x\\",null,{}]"}', compact(r.out))
  end)

  it("gives back the same JSON when the tool returns them", function()
    local p = plan("echo")
    local r = cli.run { "run", p, "--tools", tools }
    os.remove(p)
    assert.are.equal(0, r.code, r.err)
    local want = '{"doc":' .. doc .. ',"part":{"id":3,"name":"n3","r":3.5,"tags":["x",null,{}]}}'
    assert.is_true(compact(r.out) == want, "the output differs from the input") -- 150 KB: no dump
  end)

  it("fails a call that writes into them, saying what to do", function()
    local p = plan("poke")
    local r = cli.run { "run", p, "--tools", tools }
    os.remove(p)
    assert.are.equal(1, r.code)
    assert.matches("obelus: params are read-only; use obelus.totable(v) for a copy you can change",
      r.err, 1, true)
  end)
end)
