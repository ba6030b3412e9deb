-- graph_journal_spec.lua -- `obelus graph PLAN --journal J`: every node filled by
-- its call's outcome in the run J records (done, failed, skipped, never ran), in dot and in
-- Mermaid, for the weather plan down both branches and for failures, instances,
-- calls without _id and fire-and-forget calls.
local cli = require "support.cli"

local WEATHER = "plans/weather/plan.json"
local GREEN, RED, GREY = "#c6efce", "#ffc7ce", "#e0e0e0"

local function journal(plan, tools, ...)
  local j = os.tmpname()
  local args = { "run", plan, "--tools", tools, "--journal", j, ... }
  local r = cli.run(args)
  assert(r.code ~= 2, r.err)
  return j
end

local function unescape_dot(s)
  return (s:gsub("\\(.)", function(c) return c == "n" and "\n" or c end))
end

-- dot text -> { [call id] = { fill=, outcome=, label= } }, the id and the
-- outcome being the label's first and last lines
local function dot_nodes(text)
  local nodes = {}
  for line in text:gmatch("[^\n]+") do
    local label, rest = line:match('^  n%d+ %[label="(.-[^\\])"(.*)%];$')
    if label then
      label = unescape_dot(label)
      local fill = rest:match('fillcolor="([^"]*)"')
      if fill then assert.matches('style="rounded,filled"', rest, 1, true) end
      nodes[label:match("^[^\n]*")] = { fill = fill, outcome = label:match("[^\n]*$"), label = label }
    end
  end
  return nodes
end

-- Mermaid text -> the same, from the node lines and the `style nX fill:` lines
local function mermaid_nodes(text)
  local by_name, nodes = {}, {}
  for line in text:gmatch("[^\n]+") do
    local name, label = line:match('^    (n%d+)[%[>]"(.*)"%]$')
    if name then
      label = label:gsub("<br>", "\n"):gsub("#35;", "#")
      local n = { outcome = label:match("[^\n]*$"), label = label }
      by_name[name] = n
      nodes[label:match("^[^\n]*")] = n
    end
    local sname, fill = line:match("^    style (n%d+) fill:(#%x+)$")
    if sname then by_name[sname].fill = fill end
  end
  return nodes
end

local function outcomes(nodes)
  local t = {}
  for id, n in pairs(nodes) do t[id] = { n.outcome, n.fill } end
  return t
end

describe("obelus graph --journal", function()
  it("colours the weather plan down the rainy branch: the park skipped", function()
    local j = journal(WEATHER, "plans/weather/tools", "--input", '{"city":"London"}')
    local r = cli.run { "graph", WEATHER, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("", r.err)
    assert.are.same({
      weather = { "done", GREEN }, park = { "skipped", GREY },
      movie = { "done", GREEN }, suggest = { "done", GREEN },
    }, outcomes(dot_nodes(r.out)))
    assert.are.equal("weather\ncheckWeather\ndone", dot_nodes(r.out).weather.label)
    -- the edges are those of the plain graph
    local plain = cli.run { "graph", WEATHER }
    local function edges(t)
      local e = {}
      for line in t:gmatch("  n%d+ %-> [^\n]+") do e[#e + 1] = line end
      return e
    end
    assert.are.same(edges(plain.out), edges(r.out))
  end)

  it("colours the sunny branch the other way, in dot and in Mermaid", function()
    local j = journal(WEATHER, "plans/weather/tools", "--input", '{"city":"Lisbon"}')
    local want = {
      weather = { "done", GREEN }, park = { "done", GREEN },
      movie = { "skipped", GREY }, suggest = { "done", GREEN },
    }
    assert.are.same(want, outcomes(dot_nodes(cli.run({ "graph", WEATHER, "--journal", j }).out)))
    local m = cli.run { "graph", WEATHER, "--journal", j, "--format", "mermaid" }
    assert.are.equal(0, m.code)
    assert.are.same(want, outcomes(mermaid_nodes(m.out)))
  end)

  it("marks failed calls red, and matches calls without _id and instance copies", function()
    local plan = cli.tmpfile([=[{"instances":["a","b"],"context":[{"type":"state","data":{"v":0}}],"plan":[
      {"_id":"bad","_tool":"fail","_outputPath":"†state.v","_instance":"a"},
      {"_tool":"echo","value":"†state.v","_outputPath":"†state.w"},
      {"_tool":"echo","value":"one","_outputPath":"†state.x","_instance":"b"},
      {"_tool":"echo","value":"two","_outputPath":"†state.y","_instance":"b"},
      {"_id":"h","_tool":"fail","_outputPath":"†state.ok || †state.err","_instance":"a"},
      {"_id":"ff","_tool":"echo","value":1,"_instance":"a"},
      {"_id":"ffbad","_tool":"fail","_instance":"a"}
    ]}]=], ".json")
    local j = journal(plan, "spec/cli/tools")
    local r = cli.run { "graph", plan, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    assert.are.same({
      bad = { "failed", RED },
      ["#1@a"] = { "skipped", GREY },   -- upstream failed
      ["#1@b"] = { "done", GREEN },     -- the b copy reads the global v: nothing failed upstream
      ["#2"] = { "done", GREEN },       -- no _id: matched by position (the call as written)
      ["#3"] = { "done", GREEN },
      h = { "done", GREEN },            -- its error went to a || alternative: handled
      ff = { "no record (writes nothing)" }, -- fire-and-forget: nothing to tell, left white
      ffbad = { "failed", RED },
    }, outcomes(dot_nodes(r.out)))
  end)

  it("tells a call never reached (the run was interrupted) from a skipped one", function()
    local plan = cli.tmpfile([=[[{"_id":"quick","_tool":"echo","value":1,"_outputPath":"a"},
      {"_id":"long","_tool":"sleepy","ms":3600000,"value":1,"_outputPath":"b"},
      {"_id":"after","_tool":"echo","value":"†state.b","_outputPath":"c"}]]=], ".json")
    local j = os.tmpname()
    os.remove(j)
    -- SIGINT once quick has settled (its record is in the journal), long still sleeping
    os.execute(string.format("timeout -s KILL 120 %s run %s --tools spec/cli/tools --journal %s >/dev/null 2>&1 & pid=$!; " ..
      "i=0; until grep -q '\"settled\",\"id\":\"quick\"' %s 2>/dev/null || [ $i -ge 1200 ]; do sleep 0.05; i=$((i+1)); done; " ..
      "kill -INT $pid; wait $pid", cli.quote(cli.bin), plan, j, j))
    local r = cli.run { "graph", plan, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ quick = { "done", GREEN }, long = { "never ran" }, after = { "never ran" } },
      outcomes(dot_nodes(r.out)))
  end)

  it("refuses an unusable journal with its line, and draws nothing", function()
    local bad = cli.tmpfile('{"type":"plan","plan":[]}\n{"type":\n', ".jsonl")
    local r = cli.run { "graph", WEATHER, "--journal", bad }
    assert.are.equal(2, r.code)
    assert.matches(bad:gsub("%p", "%%%0") .. ":2: ", r.err)
    assert.are.equal("", r.out)
    r = cli.run { "graph", WEATHER, "--journal" }
    assert.are.equal(2, r.code)
    assert.matches("--journal needs", r.err, 1, true)
  end)

  it("warns when the journal is another plan's, and still matches by id", function()
    local j = journal(WEATHER, "plans/weather/tools", "--input", '{"city":"London"}')
    local other = cli.tmpfile([=[[{"_id":"weather","_tool":"echo","value":1,"_outputPath":"w"},
                                  {"_id":"else","_tool":"echo","value":2,"_outputPath":"e"}]]=], ".json")
    local r = cli.run { "graph", other, "--journal", j }
    assert.are.equal(0, r.code)
    assert.matches("warning: .* is the journal of a run of plans/weather/plan.json", r.err)
    assert.are.same({ weather = { "done", GREEN }, ["else"] = { "never ran" } }, outcomes(dot_nodes(r.out)))
  end)

  it("renders with Graphviz when it is installed", function()
    if not os.execute("command -v dot >/dev/null 2>&1") then return pending("Graphviz dot is not installed") end
    local j = journal(WEATHER, "plans/weather/tools", "--input", '{"city":"London"}')
    local svg = os.tmpname()
    assert.is_true(os.execute(cli.quote(cli.bin) .. " graph " .. WEATHER .. " --journal " .. j
      .. " | dot -Tsvg -o " .. svg) == true)
    local text = cli.slurp(svg)
    assert.matches("<svg", text, 1, true)
    assert.matches('fill="' .. GREEN .. '"', text, 1, true)
    assert.matches('fill="' .. GREY .. '"', text, 1, true)
  end)
end)
