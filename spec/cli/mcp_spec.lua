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
    -- once, under a lock: make test runs this spec in two processes at the same time
    local out, ok = sh("cd spec/mcp && flock .npm-install.lock sh -c " ..
      "'[ -f node_modules/@modelcontextprotocol/sdk/package.json ] || " ..
      "timeout 300 npm install --no-audit --no-fund' 2>&1")
    assert(ok, "npm install of @modelcontextprotocol/sdk failed: " .. out)
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
    -- cancelled at 100 ms (the call would take 60 s: a bound far from both), and the
    -- server still serves
    assert.truthy(r.cancelled:match("^rejected"))
    assert.is_true(r.cancel_ms < 20000)
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
      '{"jsonrpc":"2.0","method":"tools/list"}', -- no id: a notification, never answered
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}',
      '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_plan","arguments":{"plan":5}}}',
      '{"jsonrpc":"2.0","id":7}', -- no method: Invalid Request, with its id
      '{"jsonrpc":"2.0","method":"notifications/no-such"}', -- an unknown notification: nothing
      '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -- an id of the wrong type: id null
      '{"jsonrpc":"2.0","id":8,"result":{}}', -- a response: ignored
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
    assert.are.equal(-32602, err(6))
    assert.is_true(got[7].result.isError)
    assert.are.equal(-32600, err(8))
    assert.are.equal(7, got[8].id)
    assert.are.equal(-32600, err(9))
    assert.are.equal(cjson.null, got[9].id)
    assert.are.same({ jsonrpc = "2.0", id = 6, result = {} }, got[10])
    assert.are.equal(10, #got, r.out)
  end)

  it("bounds a line (--max-line): a longer one is answered -32600 and skipped, in linear time", function()
    -- 200 MB in one line through a pipe: read quadratically this took minutes; the bound
    -- (16 MB by default) drops it as it comes. The next request is still answered.
    local cmd = ([[{ printf '{"jsonrpc":"2.0","id":1,"method":"ping","x":"'; head -c 200000000 /dev/zero | tr '\0' a; ]] ..
      [[printf '"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n'; } | timeout 30 %s mcp --tools spec/cli/tools; echo "exit $?"]])
      :format(cli.quote(cli.bin))
    local out = sh(cmd)
    local got = {}
    for l in out:gmatch("[^\n]+") do got[#got + 1] = l end
    assert.are.equal(3, #got, out)
    local e = cjson.decode(got[1])
    assert.are.equal(-32600, e.error.code)
    assert.are.equal(cjson.null, e.id)
    assert.truthy(e.error.message:match("longer than 16777216 bytes"))
    assert.are.same({ jsonrpc = "2.0", id = 2, result = {} }, cjson.decode(got[2]))
    assert.are.equal("exit 0", got[3])
    -- the option, on a line and on the last line without its newline
    local long = '{"jsonrpc":"2.0","id":3,"method":"ping","x":"' .. ("b"):rep(5000) .. '"}'
    local r = cli.run { "mcp", "--tools", "spec/cli/tools", "--max-line", "1000",
      stdin = long .. "\n" .. '{"jsonrpc":"2.0","id":4,"method":"ping"}\n' .. long }
    assert.are.equal(0, r.code, r.err)
    got = {}
    for l in r.out:gmatch("[^\n]+") do got[#got + 1] = cjson.decode(l) end
    assert.are.equal(3, #got, r.out)
    assert.are.equal(-32600, got[1].error.code)
    assert.are.same({ jsonrpc = "2.0", id = 4, result = {} }, got[2])
    assert.are.equal(-32600, got[3].error.code)
    -- under the bound, a line is answered whatever its length
    r = cli.run { "mcp", "--tools", "spec/cli/tools", "--max-line", "100000", stdin = long .. "\n" }
    assert.are.same({ jsonrpc = "2.0", id = 3, result = {} }, cjson.decode(r.out))
    r = cli.run { "mcp", "--tools", "spec/cli/tools", "--max-line", "x" }
    assert.are.equal(2, r.code)
  end)
  it("stops a tool that never yields at --max-slice: its call answers isError, the server goes on", function()
    local tools = cli.tmpfile([[
      return { { name = "spin", description = "never yields", run = function() while true do end end } }
    ]], ".lua")
    local lines = {
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"spin","arguments":{}}}',
      '{"jsonrpc":"2.0","id":2,"method":"ping"}',
    }
    -- the default slice (30 s) is past the drain timeout: without --max-slice nothing answers id 1
    local r = cli.run { "mcp", "--tools", tools, "--max-slice", "100", "--drain-timeout", "20000",
      stdin = table.concat(lines, "\n") .. "\n" }
    assert.are.equal(0, r.code, r.err)
    local got = {}
    for l in r.out:gmatch("[^\n]+") do local m = cjson.decode(l); got[m.id] = m end
    assert.are.same({}, got[2].result)
    assert.is_true(got[1].result.isError, r.out)
    assert.matches("100 ms without yielding", cjson.encode(got[1].result), 1, true)
  end)
  it("kills the processes a tools/call spawned when its run ends, while the server goes on", function()
    -- the tool starts a child that would touch `late` 2 s later, and returns at once; the
    -- server reads its next request 4 s later (its input still open): the child must be gone
    -- with the call's run, not live on until the server ends (each tools/call is its own run)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. cli.quote(dir)))
    local tools = cli.tmpfile([[
      local obelus = require "obelus"
      return { { name = "spawner", description = "spawns a child, returns at once",
                 run = function(call)
                   local h, err = obelus.uv.spawn("sh", { args = { "-c", call.cmd } }, function() end)
                   assert(h, err)
                   return "spawned"
                 end } }
    ]], ".lua")
    local req = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"spawner",' ..
                '"arguments":{"cmd":"sleep 2; touch late"}}}'
    local out = sh(("cd %s && { printf '%%s\n' %s; sleep 4; printf '%%s\n' %s; } | timeout 30 %s mcp --tools %s; echo \"exit $?\"")
      :format(cli.quote(dir), cli.quote(req), cli.quote('{"jsonrpc":"2.0","id":2,"method":"ping"}'),
              cli.quote(abs(cli.bin)), cli.quote(tools)))
    local late = io.open(dir .. "/late")
    if late then late:close() end
    os.execute("rm -rf " .. cli.quote(dir))
    local got = {}
    for l in out:gmatch("[^\n]+") do got[#got + 1] = l end
    assert.are.equal(3, #got, out)
    local one = cjson.decode(got[1])
    assert.are.equal(1, one.id, out)
    assert.are.equal('"spawned"', one.result.content[1].text)
    assert.are.same({ jsonrpc = "2.0", id = 2, result = {} }, cjson.decode(got[2]))
    assert.are.equal("exit 0", got[3])
    assert.is_nil(late, "the tools/call's child lived on after its answer and wrote `late`")
  end)
end)
