-- valgrind_spec.lua -- the CLI on every example plan under valgrind: no leak, no
-- invalid read or write, and the plan's own exit status.
local cli = require "support.cli"

local function have_valgrind()
  return os.execute("command -v valgrind >/dev/null 2>&1") == true
end

-- journals: written under each --fsync level (the syncer thread included), then
-- resumed after being cut back to their first settled call (a run killed there)
local J1, J2, J3, J4 = os.tmpname(), os.tmpname(), os.tmpname(), os.tmpname()
local function cut_after_first_settled(path)
  return function()
    local keep = {}
    for line in io.lines(path) do
      keep[#keep + 1] = line
      if line:find('"journal":"settled"', 1, true) then break end
    end
    local f = assert(io.open(path, "w"))
    f:write(table.concat(keep, "\n"), "\n")
    f:close()
  end
end

-- each example with the exit status it is meant to end with
local runs = {
  { 0, "run", "plans/user-status/plan.json", "--tools", "plans/user-status/tools" },
  { 0, "run", "plans/weather/plan.json", "--tools", "plans/weather/tools", "--input", '{"city":"Lisbon"}' },
  { 0, "run", "plans/weather/plan.json", "--tools", "plans/weather/tools", "--input", '{"city":"London"}' },
  { 0, "run", "plans/refund/plan.json", "--tools", "plans/refund/tools", "--input", '{"orderId":"A-101","amount":5000}' },
  { 1, "run", "plans/translate/plan.json", "--tools", "plans/translate/tools", "--input", '{"text":"hello my friend the cat sleeps"}' },
  { 0, "run", "plans/fanout-summary/plan.json", "--tools", "plans/fanout-summary/tools", "--input", '{"topic":"Harbour City"}' },
  { 0, "run", "plans/notify/plan.json", "--tools", "plans/notify/tools", "--input", '{"item":"lamp","notifyFile":"' .. os.tmpname() .. '"}' },
  { 0, "loop", "plans/replan/plan.json", "--planner", "plans/replan/planner.lua", "--tools", "plans/replan/tools" },
  { 0, "run", "plans/files/plan.json", "--tools", "plans/files/tools" },
  { 0, "check", "plans/weather/plan.json", "--tools", "plans/weather/tools" },
  { 0, "graph", "plans/fanout-summary/plan.json" },
  { 0, "resolve", "plans/seeds/log.json", "†data.user" },
  { 0, "run", "plans/weather/plan.json", "--tools", "plans/weather/tools", "--input", '{"city":"London"}',
    "--journal", J1, "--fsync", "always" },
  { 0, "resume", J1, before = cut_after_first_settled(J1) },
  { 0, "log", J1, "--format", "trace" },
  { 0, "log", J1, "--format", "otlp" },
  { 0, "report", J1, "-o", os.tmpname() .. ".html" },
  { 0, "run", "plans/cluster/plan.json", "--tools", "plans/cluster/tools", "--input", '{"customer":"c1"}' },
  { 0, "tools", "--tools", "plans/weather/tools", "--plan-schema" },
  { 0, "tools", "--tools", "plans/weather/tools", "--format", "openai" },
  { 0, "run", "plans/fanout-summary/plan.json", "--tools", "plans/fanout-summary/tools", "--input",
    '{"topic":"Harbour City"}', "--journal", J2, "--fsync", "batch" },
  { 0, "resume", J2, before = cut_after_first_settled(J2) },
  { 0, "fork", J2, "--from", "sum", "--set", '†state.articles=[{"title":"T","words":10,"body":"B."}]',
    "--journal", J4, "--overwrite" },
  { 0, "graph", "plans/fanout-summary/plan.json", "--journal", J2 },
  { 0, "log", J2 },
  { 0, "loop", "plans/replan/plan.json", "--planner", "plans/replan/planner.lua", "--tools", "plans/replan/tools",
    "--journal", J3 },
  { 0, "resume", J3, before = cut_after_first_settled(J3) },
  { 0, "resume", J3 }, -- ended: its output again, nothing run
}

describe("valgrind on the example plans", function()
  for _, r in ipairs(runs) do
    local want = r[1]
    local args = { table.unpack(r, 2) }
    it(table.concat(args, " "), function()
      if not have_valgrind() then
        pending("valgrind is not installed")
        return
      end
      if r.before then r.before() end
      local quoted = {}
      for i, a in ipairs(args) do quoted[i] = cli.quote(a) end
      local log = os.tmpname()
      local cmd = string.format(
        "valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible " ..
        "--errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 --log-file=%s %s %s >/dev/null 2>&1",
        log, cli.quote(cli.bin), table.concat(quoted, " "))
      local _, _, code = os.execute(cmd)
      local report = cli.slurp(log)
      os.remove(log)
      assert.are.equal("", report)
      assert.are.equal(want, code)
    end)
  end
end)

-- the fleet's commands against a real redis-server, each under valgrind
describe("valgrind on the fleet's commands", function()
  local servers = require "support.servers"
  local redis
  local function vg(want, args)
    local quoted = {}
    for i, a in ipairs(args) do quoted[i] = cli.quote(a) end
    local log, out = os.tmpname(), os.tmpname()
    local cmd = string.format(
      "timeout 120 valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible " ..
      "--errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 --log-file=%s %s %s >%s 2>&1",
      log, cli.quote(cli.bin), table.concat(quoted, " "), out)
    local _, _, code = os.execute(cmd)
    local report = cli.slurp(log)
    local text = cli.slurp(out)
    os.remove(log)
    os.remove(out)
    assert.are.equal("", report)
    assert.are.equal(want, code, text)
    return text
  end
  setup(function() redis = servers.redis() end)
  teardown(function() if redis then redis.stop() end end)

  it("submit, worker --drain, wait, status, log --redis; an unreachable Redis", function()
    if not have_valgrind() or not redis then
      pending("valgrind or redis-server is not installed")
      return
    end
    local batch = os.tmpname()
    local f = assert(io.open(batch, "w"))
    f:write('{"city":"Lisbon"}\n{"city":"London"}\n')
    f:close()
    local ids = vg(0, { "submit", "plans/weather/plan.json", "--tools", "plans/weather/tools",
                        "--redis", redis.url, "--queue", "vg", "--batch", batch })
    os.remove(batch)
    local a, b = ids:match("(%S+)\n(%S+)")
    assert.is_string(b)
    vg(0, { "worker", "--redis", redis.url, "--queue", "vg", "--tools", "plans/weather/tools", "--drain", "--jobs", "2" })
    local lines = vg(0, { "wait", "--redis", redis.url, "--queue", "vg", a, b })
    assert.truthy(lines:match('"exit":0'))
    vg(0, { "status", "--redis", redis.url, "--queue", "vg" })
    vg(0, { "log", "--redis", redis.url, "--queue", "vg", a })
    vg(3, { "status", "--redis", "redis://127.0.0.1:" .. servers.free_port() })
  end)
end)

describe("valgrind on obelus mcp", function()
  it("answers a session of requests, malformed lines included, with nothing leaked", function()
    if not have_valgrind() then
      pending("valgrind is not installed")
      return
    end
    local input = cli.tmpfile(table.concat({
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}',
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
      '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"checkWeather","arguments":{"city":"Oslo"}}}',
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"run_plan",' ..
        '"arguments":{"plan":[{"_tool":"checkWeather","city":"†input.city","_outputPath":"†state.sunny || †state.rainy"}],' ..
        '"input":{"city":"Lisbon"}}}}',
      '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_plan","arguments":{"plan":[{"_tool":"nope"}]}}}',
      "not json",
      '{"jsonrpc":"2.0","id":6,"method":"nope"}',
    }, "\n") .. "\n")
    local log, out = os.tmpname(), os.tmpname()
    local _, _, code = os.execute(string.format(
      "timeout 120 valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible " ..
      "--errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 --log-file=%s %s mcp " ..
      "--tools plans/weather/tools <%s >%s 2>/dev/null", log, cli.quote(cli.bin), input, out))
    local report, answers = cli.slurp(log), cli.slurp(out)
    os.remove(log)
    os.remove(out)
    os.remove(input)
    assert.are.equal("", report)
    assert.are.equal(0, code)
    local n = 0
    for _ in answers:gmatch('"id":') do n = n + 1 end
    assert.is_true(n >= 7, answers) -- 6 answers with ids, and the parse error's null id
  end)
end)
