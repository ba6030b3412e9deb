-- schema_strict_spec.lua -- a tool's JSON Schema is read strictly (issue 30): a misspelt
-- keyword (`requird`) or format is a load error naming the nearest known one, exit 2
-- before anything runs; an x- keyword is an extension and passes; --lenient-schemas lets
-- the unknown through; and a `format` is checked: a call whose params break
-- `format: email` fails, named by the path and the format.
local cli = require "support.cli"

local function tool(schema)
  return cli.tmpfile(([[
return {
  name = "greet",
  schema = %s,
  run = function(p) return { hi = p.x } end,
}
]]):format(schema), ".lua")
end

-- x comes from --input: checked when the call starts, not by check
local plan = cli.tmpfile(
  [=[{"plan": [{"_tool": "greet", "_id": "a", "x": "†input.email", "_outputPath": "†state.a"}],
      "output": "†state.a"}]=], ".json")

local TYPO = [[{ type = "object", properties = { x = { type = "string" } }, requird = { "x" } }]]

describe("a tool's schema, read strictly", function()
  it("refuses a misspelt keyword at load, with a did-you-mean, exit 2, nothing run", function()
    local t = tool(TYPO)
    for _, cmd in ipairs({ "check", "run" }) do
      local r = cli.run({ cmd, plan, "--tools", t, "--input", '{"email": "a@b.org"}' })
      assert.are.equal(2, r.code, r.err)
      assert.are.equal("", r.out)
      assert.truthy(r.err:find(t .. ":4: tool #1 (greet): the schema is not usable: (root): requird: " ..
        'unknown keyword; did you mean "required"? (a keyword of your own must start with "x-"); ' ..
        "or --lenient-schemas lets it through", 1, true), r.err)
    end
  end)

  it("refuses a misspelt keyword or format deeper in, naming its place", function()
    local r = cli.run({ "check", plan, "--tools",
      tool([[{ type = "object", properties = { x = { type = "string", fromat = "email" } } }]]) })
    assert.are.equal(2, r.code, r.err)
    assert.truthy(r.err:find('/properties/x: fromat: unknown keyword; did you mean "format"?', 1, true), r.err)
    r = cli.run({ "check", plan, "--tools",
      tool([[{ type = "object", properties = { x = { type = "string", format = "emial" } } }]]) })
    assert.are.equal(2, r.code, r.err)
    assert.truthy(r.err:find('/properties/x: format: unknown format "emial"; did you mean "email"?', 1, true),
      r.err)
  end)

  it("lets a keyword starting with x- through", function()
    local t = tool([[{ type = "object", ["x-foo"] = { note = "mine" }, properties = { x = { type = "string" } } }]])
    local r = cli.run({ "run", plan, "--tools", t, "--input", '{"email": "a@b.org"}' })
    assert.are.equal(0, r.code, r.err)
    assert.are.same('{\n  "hi": "a@b.org"\n}\n', r.out)
  end)

  it("lets any unknown keyword through with --lenient-schemas", function()
    local t = tool(TYPO)
    local r = cli.run({ "check", plan, "--tools", t, "--lenient-schemas" })
    assert.are.equal(0, r.code, r.err)
    r = cli.run({ "run", plan, "--tools", t, "--lenient-schemas", "--input", '{"email": "a@b.org"}' })
    assert.are.equal(0, r.code, r.err)
    assert.truthy(r.out:find('"hi": "a@b.org"', 1, true), r.out)
    r = cli.run({ "graph", plan, "--tools", t })
    assert.are.equal(2, r.code, r.err)
    assert.truthy(r.err:find('did you mean "required"?', 1, true), r.err)
    r = cli.run({ "graph", plan, "--tools", t, "--lenient-schemas" })
    assert.are.equal(0, r.code, r.err)
    assert.truthy(r.out:find("digraph", 1, true), r.out)
    assert.truthy(cli.run({ "run", "--help" }).out:find("--lenient-schemas", 1, true))
    assert.truthy(cli.run({ "check", "--help" }).out:find("--lenient-schemas", 1, true))
  end)

  it("fails a call whose params break format: email, naming the path and the format", function()
    local t = tool([[{ type = "object", properties = { x = { type = "string", format = "email" } } }]])
    local r = cli.run({ "run", plan, "--tools", t, "--input", '{"email": "not-an-address"}' })
    assert.are.equal(1, r.code, r.err)
    assert.truthy(r.err:find("call a (greet) failed (structural): params do not satisfy the tool's schema: " ..
      '/x: format: "not-an-address" is not an email address (format: email)', 1, true), r.err)
    r = cli.run({ "run", plan, "--tools", t, "--input", '{"email": "joe@example.com"}' })
    assert.are.equal(0, r.code, r.err)
  end)

  it("checks a format in a plan's literal params at check time", function()
    local t = tool([[{ type = "object", properties = { x = { type = "string", format = "date" } } }]])
    local p = cli.tmpfile([=[{"plan": [{"_tool": "greet", "_id": "a", "x": "2021-02-29"}]}]=], ".json")
    local r = cli.run({ "check", p, "--tools", t })
    assert.are.equal(2, r.code, r.err)
    assert.truthy(r.err:find('call a (greet): parameter "x" does not satisfy the tool\'s schema: format: ' ..
      '"2021-02-29" is not a date (RFC 3339: 2024-05-01) (format: date)', 1, true), r.err)
  end)
end)
