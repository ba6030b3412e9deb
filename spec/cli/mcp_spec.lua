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
    -- a tool's emits: one notification each, its value in the message, progress growing
    -- (k / (k + 1) of a step while the call runs), then the calls settling
    assert.is_false(r.streamed_result.isError, out)
    local msgs, last = {}, -1
    for _, p in ipairs(r.streamed) do
      assert.is_true(p.progress > last, out)
      last = p.progress
      assert.are.equal(2, p.total)
      msgs[#msgs + 1] = p.message
    end
    assert.are.same({ 's progress {"attempt":1,"step":1}', 's progress {"attempt":1,"step":2}',
                      's progress {"attempt":1,"step":3}', "s done" }, { msgs[1], msgs[2], msgs[3], msgs[4] })
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
  it("ties a child spawned in a tool's libuv callback to the call's run; refuses it once the run has ended", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. cli.quote(dir)))
    local tools = cli.tmpfile([[
      local obelus = require "obelus"
      local function exists(p) local f = io.open(p) if f then f:close() end return f ~= nil end
      return {
        { name = "later", description = "spawns from a timer callback, ms later; returns at once",
          run = function(call)
            local t = obelus.uv.new_timer()
            t:start(call.ms, 0, function()
              local h, err = obelus.uv.spawn("sh", { args = { "-c", "sleep 1; touch " .. call.file } }, function() end)
              local f = io.open("said." .. call.file, "w")
              f:write(h and "spawned" or tostring(err))
              f:close()
              t:close()
            end)
            return "ok"
          end },
        { name = "await", description = "waits for a file (up to 20 s)",
          run = function(call)
            for _ = 1, 2000 do
              if exists(call.file) then return "seen" end
              obelus.sleep(10)
            end
            return "not seen"
          end },
      }
    ]], ".lua")
    -- 1: the call returns at once, its timer fires after its run has ended: refused
    local one = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"later","arguments":{"ms":50,"file":"late1"}}}'
    -- 2: the timer fires while the run goes on (await waits for it): the child is the
    -- run's, killed as it ends, before it could touch late2
    local two = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_plan","arguments":{"plan":[' ..
                '{"_tool":"later","ms":50,"file":"late2","_outputPath":"†state.a"},' ..
                '{"_tool":"await","file":"said.late2","_outputPath":"†state.b"}]}}}'
    local wait_for = "i=0; while [ ! -e %s ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done"
    local out = sh(("cd %s && { printf '%%s\\n' %s; %s; printf '%%s\\n' %s; %s; sleep 3; printf '%%s\\n' %s; } | " ..
                    "timeout 60 %s mcp --tools %s; echo \"exit $?\"")
      :format(cli.quote(dir), cli.quote(one), wait_for:format("said.late1"), cli.quote(two), wait_for:format("said.late2"),
              cli.quote('{"jsonrpc":"2.0","id":3,"method":"ping"}'), cli.quote(abs(cli.bin)), cli.quote(tools)))
    local said1, said2 = cli.slurp(dir .. "/said.late1"), cli.slurp(dir .. "/said.late2")
    local late1, late2 = io.open(dir .. "/late1"), io.open(dir .. "/late2")
    os.execute("rm -rf " .. cli.quote(dir))
    assert.matches("exit 0\n$", out)
    assert.matches('"id":3,"result":{}', out, 1, true)
    assert.matches('"output":{"a":"ok","b":"seen"}', out, 1, true)
    assert.are.equal("obelus.uv.spawn: the run of this callback's call has ended", said1)
    assert.are.equal("spawned", said2)
    assert.is_nil(late1)
    assert.is_nil(late2, "the child a callback spawned during the run lived on after it")
  end)

  it("answers a JSON-RPC batch with one array at 2025-03-26, members run concurrently", function()
    -- meet: writes its marker, then waits for the other's (up to 20 s): both members
    -- answer "met" only if they ran at the same time
    local tools = cli.tmpfile([[
      local obelus = require "obelus"
      local function exists(path) local f = io.open(path) if f then f:close() end return f ~= nil end
      return { { name = "meet", description = "meets another call",
                 run = function(call)
                   io.open(call.mine, "w"):close()
                   for _ = 1, 2000 do
                     if exists(call.other) then return "met" end
                     obelus.sleep(10)
                   end
                   return "alone"
                 end } }
    ]], ".lua")
    local marks = os.tmpname()
    local function init(version)
      return ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"%s",' ..
              '"capabilities":{},"clientInfo":{"name":"spec","version":"1"}}}'):format(version)
    end
    local function call(id, mine, other)
      return ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"meet",' ..
              '"arguments":{"mine":"%s.%s","other":"%s.%s"}}}'):format(id, marks, mine, marks, other)
    end
    local members = {
      '{"jsonrpc":"2.0","id":1,"method":"ping"}',
      call(2, "a", "b"), call(3, "b", "a"),
      "5",                                                          -- not a request: its own -32600
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',     -- a notification: no answer
      '{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}}', -- never in a batch
      '{"jsonrpc":"2.0","id":5,"method":"no/such"}',
      '{"jsonrpc":"2.0","id":6,"result":{}}',                       -- a response: ignored
    }
    local many = {}
    for k = 1, 1001 do many[k] = '{"jsonrpc":"2.0","id":' .. k .. ',"method":"ping"}' end
    local lines = {
      init("2025-03-26"),
      "[" .. table.concat(members, ",") .. "]",
      '[{"jsonrpc":"2.0","method":"notifications/initialized"}]', -- notifications alone: nothing
      "[]",
      "[" .. table.concat(many, ",") .. "]",
      "[" .. table.concat(many, ",", 1, 1000) .. "]",
      "[" .. ("["):rep(1000) .. ("]"):rep(1000) .. "]",
      '{"jsonrpc":"2.0","id":"end","method":"ping"}',
    }
    local r = cli.run { "mcp", "--tools", tools, "--drain-timeout", "30000", stdin = table.concat(lines, "\n") .. "\n" }
    os.remove(marks .. ".a")
    os.remove(marks .. ".b")
    assert.are.equal(0, r.code, r.err)
    local got = {}
    for l in r.out:gmatch("[^\n]+") do got[#got + 1] = cjson.decode(l) end
    assert.are.equal(7, #got, r.out)
    assert.are.equal(0, got[1].id)
    -- the lines answered at once first; the batch holding tools/calls when both are done
    assert.are.same({ code = -32600, message = "Invalid Request: an empty batch" }, got[2].error)
    assert.are.equal(cjson.null, got[2].id)
    assert.are.equal(-32600, got[3].error.code)
    assert.matches("more than 1000 messages", got[3].error.message, 1, true)
    assert.are.equal(1000, #got[4])
    for k = 1, 1000 do assert.are.same({ jsonrpc = "2.0", id = k, result = {} }, got[4][k]) end
    assert.are.same({ { jsonrpc = "2.0", id = cjson.null,
                        error = { code = -32600, message = "Invalid Request: a JSON-RPC 2.0 object is expected" } } },
                    got[5])
    assert.are.same({ jsonrpc = "2.0", id = "end", result = {} }, got[6])
    local batch, by = got[7], {}
    assert.are.equal(6, #batch, r.out)
    for _, a in ipairs(batch) do
      assert.are.equal("2.0", a.jsonrpc)
      by[a.id == cjson.null and "null" or a.id] = a
    end
    assert.are.same({}, by[1].result)
    assert.are.equal('"met"', by[2].result.content[1].text)
    assert.are.equal('"met"', by[3].result.content[1].text)
    assert.are.equal(-32600, by.null.error.code)
    assert.are.equal("Invalid Request: initialize must not be part of a batch", by[4].error.message)
    assert.are.equal(-32601, by[5].error.code)
    -- at 2025-06-18 (which removed batches), and before initialize: one -32600 for the line
    for _, first in ipairs { init("2025-06-18"), init("2025-11-25"), "" } do
      r = cli.run { "mcp", "--tools", tools,
                    stdin = first .. "\n" .. '[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n' }
      got = {}
      for l in r.out:gmatch("[^\n]+") do got[#got + 1] = cjson.decode(l) end
      local e = got[#got]
      assert.are.equal(first == "" and 1 or 2, #got, r.out)
      assert.are.equal(-32600, e.error.code)
      assert.are.equal(cjson.null, e.id)
      assert.matches("taken only at protocol version 2025-03-26", e.error.message, 1, true)
    end
  end)

  it("refuses a batch of 100,000 members with one -32600 (at most 1000), and answers the next line", function()
    local members = {}
    for k = 1, 100000 do members[k] = '{"jsonrpc":"2.0","id":' .. k .. ',"method":"ping"}' end
    local stdin = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}\n' ..
                  "[" .. table.concat(members, ",") .. "]\n" .. '{"jsonrpc":"2.0","id":"end","method":"ping"}\n'
    local f = cli.tmpfile(stdin)
    local out = sh(("timeout 30 %s mcp --tools spec/cli/tools <%s; echo \"exit $?\""):format(
      cli.quote(cli.bin), cli.quote(f)))
    os.remove(f)
    local got = {}
    for l in out:gmatch("[^\n]+") do got[#got + 1] = l end
    assert.are.equal(4, #got, out:sub(1, 500))
    local e = cjson.decode(got[2])
    assert.are.equal(-32600, e.error.code)
    assert.are.equal("Invalid Request: a batch of more than 1000 messages", e.error.message)
    assert.are.same({ jsonrpc = "2.0", id = "end", result = {} }, cjson.decode(got[3]))
    assert.are.equal("exit 0", got[4])
  end)
end)
