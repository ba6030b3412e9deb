-- spec/cli/mcp_spec.lua -- `obelus mcp`: the Model Context Protocol over stdio, driven by
-- the official MCP SDK's client (@modelcontextprotocol/sdk, installed here with npm into
-- spec/mcp/node_modules, not committed): list, call a tool, run a plan with progress, a
-- bad plan and a failed run as tool errors, concurrent requests, cancellation; and
-- malformed JSON-RPC answered with errors, never a crash.
local cjson = require "cjson"
local cli = require "support.cli"

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

local function abs(path)
  return path:sub(1, 1) == "/" and path or (os.getenv("PWD") .. "/" .. path)
end

describe("obelus mcp", function()
  setup(function()
    local f = io.open("spec/mcp/node_modules/@modelcontextprotocol/sdk/package.json")
    if f then
      f:close()
    else
      local out, ok = sh("cd spec/mcp && timeout 300 npm install --no-audit --no-fund 2>&1")
      assert(ok, "npm install of @modelcontextprotocol/sdk failed: " .. out)
    end
  end)

  it("serves the official SDK's client: list, call, run a plan, errors, concurrency, cancel", function()
    local out = sh(("timeout 60 node spec/mcp/client.mjs %s %s 2>&1"):format(
      cli.quote(abs(cli.bin)), cli.quote(abs("spec/cli/tools"))))
    local ok, r = pcall(cjson.decode, out)
    assert.is_true(ok, out)
    assert.are.equal("obelus", r.server.name)
    -- every loaded tool, and run_plan
    local names = {}
    for _, n in ipairs(r.tools) do names[n] = true end
    assert.is_true(names.echo and names.sleepy and names.run_plan)
    assert.are.same({ "plan" }, r.run_plan_schema.required)
    -- a tool's call: its result, a † string stays a string
    assert.is_false(r.echo.isError)
    assert.are.same({ n = 42, s = "†not a reference" }, cjson.decode(r.echo.content[1].text))
    -- a plan: its output as JSON text; exit status and errors alongside
    assert.is_false(r.plan.isError)
    assert.are.same({ z = 1 }, cjson.decode(r.plan.content[1].text))
    assert.are.equal(0, r.plan.structuredContent.exit)
    -- progress, one notification per settled call (the SDK drops those that arrive with
    -- the answer)
    assert.is_true(#r.progress >= 2, out)
    for i, p in ipairs(r.progress) do
      assert.are.equal(i, p.progress)
      assert.are.equal(3, p.total)
    end
    -- a plan that fails validation, and a failed run: tool errors, with the messages
    assert.is_true(r.bad.isError)
    assert.truthy(r.bad.content[1].text:match("no tool named \"nope\""))
    assert.are.equal(2, r.bad.structuredContent.exit)
    assert.is_true(r.failed.isError)
    assert.are.equal(1, r.failed.structuredContent.exit)
    assert.truthy(r.failed.structuredContent.errors[1]:match("boom"))
    -- answered as they finish
    assert.are.same({ "fast", "slow" }, r.order)
    -- cancelled at 100 ms (the call would take 5 s), and the server still serves
    assert.truthy(r.cancelled:match("^rejected"))
    assert.is_true(r.cancel_ms < 3000)
    assert.are.equal('"still here"', r.after_cancel.content[1].text)
    assert.are.equal(-32602, r.unknown.error)
  end)

  it("answers malformed JSON-RPC with errors and goes on serving", function()
    local lines = {
      "not json",
      "[1,2]",
      '{"id":1,"method":"ping"}',
      '{"jsonrpc":"2.0","id":2,"method":7}',
      '{"jsonrpc":"2.0","id":3,"method":"no/such"}',
      '{"jsonrpc":"2.0","method":"tools/list"}',
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}',
      '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_plan","arguments":{"plan":5}}}',
      '{"jsonrpc":"2.0","id":6,"method":"ping"}',
    }
    local r = cli.run { "mcp", "--tools", "spec/cli/tools", stdin = table.concat(lines, "\n") .. "\n" }
    assert.are.equal(0, r.code, r.err)
    local got = {}
    for l in r.out:gmatch("[^\n]+") do got[#got + 1] = cjson.decode(l) end
    local function err(i) return got[i].error and got[i].error.code end
    assert.are.equal(-32700, err(1))
    assert.are.equal(cjson.null, got[1].id)
    assert.are.equal(-32600, err(2))
    assert.are.equal(-32600, err(3))
    assert.are.equal(-32600, err(4))
    assert.are.equal(-32601, err(5))
    assert.are.equal(-32600, err(6)) -- a request without an id
    assert.are.equal(-32602, err(7))
    assert.is_true(got[8].result.isError)
    assert.are.same({ jsonrpc = "2.0", id = 6, result = {} }, got[9])
    assert.are.equal(9, #got)
  end)
end)
