-- graph_svg_spec.lua -- `obelus graph ... --format svg` (the library's ob_graph_svg_sync:
-- Graphviz's dot run as a child process), the node ids a page maps back to calls
-- (id="call-<i>", "call-<i>-<k>" below a call; the node's name in its <title>), instance
-- copies each with their own edges, `graph --journal J` without PLAN, the runs of
-- delegated plans drawn with their call, --max-calls, and a missing dot said plainly.
local cli = require "support.cli"

local TOOLS = "spec/cli/tools"
local DELEGATE = "spec/cli/fixtures/delegate"

local function have_dot()
  return os.execute("command -v dot >/dev/null 2>&1") == true
end

-- the SVG's nodes: { [id] = { class=, title=, texts = { ... } } }, and how many
local function svg_nodes(svg)
  svg = svg:gsub("&#45;", "-")
  local nodes, n = {}, 0
  for id, class, body in svg:gmatch('<g id="([^"]*)" class="node ?([^"]*)">(.-)</g>') do
    local texts = {}
    for t in body:gmatch("<text[^>]*>([^<]*)</text>") do texts[#texts + 1] = t end
    nodes[id] = { class = class, title = body:match("<title>([^<]*)</title>"), texts = texts }
    n = n + 1
  end
  return nodes, n
end

-- "n0 -> n2" for every edge line of a dot text, in order
local function dot_edges(text)
  local e = {}
  for from, to in text:gmatch("\n%s*(n[%w]+) %-> (n[%w]+) %[label") do e[#e + 1] = from .. " -> " .. to end
  return e
end

local function run_journal(plan, ...)
  local pf = cli.tmpfile(plan, ".json")
  local j = os.tmpname()
  local r = cli.run { "run", pf, "--journal", j, "--overwrite", ... }
  assert(r.code == 0 or r.code == 1, r.err)
  return pf, j
end

describe("obelus graph --format svg", function()
  it("links each instance's copy of a call to its own copies, never to another's", function()
    local plan = cli.tmpfile([=[{"instances":["a","b"],"plan":[
      {"_id":"src","_tool":"t","_outputPath":"†state.v"},
      {"_id":"mid","_tool":"t","x":"†state.v","_outputPath":"†state.w"},
      {"_id":"end","_tool":"t","x":"†state.w","_outputPath":"†state.z"}]}]=], ".json")
    local r = cli.run { "graph", plan }
    assert.are.equal(0, r.code, r.err)
    -- n0 src@a, n1 src@b, n2 mid@a, n3 mid@b, n4 end@a, n5 end@b
    assert.are.same({ "n0 -> n2", "n1 -> n3", "n2 -> n4", "n3 -> n5" }, dot_edges(r.out))
    assert.matches('n3 [label="mid@b\\nt\\ninstance b", id="call-3"]', r.out, 1, true)
    local m = cli.run { "graph", plan, "--format", "mermaid" }
    local edges = {}
    for line in m.out:gmatch("    (n%d+ %-%-> n%d+)\n") do edges[#edges + 1] = line end
    assert.are.same({}, edges) -- every edge is labelled
    for from, to in m.out:gmatch("    (n%d+) %-%->|[^|]*| (n%d+)\n") do edges[#edges + 1] = from .. " -> " .. to end
    assert.are.same({ "n0 -> n2", "n1 -> n3", "n2 -> n4", "n3 -> n5" }, edges)
  end)

  it("draws a plan as SVG: one node per call, its id call-<position>, its name in <title>", function()
    if not have_dot() then return pending("Graphviz's dot is not installed") end
    local r = cli.run { "graph", "plans/weather/plan.json", "--format", "svg" }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("", r.err)
    assert.matches("^<%?xml", r.out)
    assert.matches("</svg>%s*$", r.out)
    local nodes, n = svg_nodes(r.out)
    local dot = cli.run { "graph", "plans/weather/plan.json" }
    local ncalls = select(2, dot.out:gsub('\n  n%d+ %[label=', ""))
    assert.are.equal(ncalls, n)
    for i = 0, n - 1 do
      local g = nodes["call-" .. i]
      assert.is_truthy(g, "call-" .. i)
      assert.are.equal("n" .. i, g.title)
    end
    assert.are.same({ "weather", "checkWeather" }, nodes["call-0"].texts)
  end)

  it("draws a run as SVG with its _each copies and delegated runs, each node by outcome", function()
    if not have_dot() then return pending("Graphviz's dot is not installed") end
    local pf, j = run_journal(([=[{"plan":[
      {"_id":"list","_tool":"echo","value":%s,"_outputPath":"†state.items"},
      {"_id":"f","_tool":"failif","_each":"†state.items","fail":"†each.value",
       "value":"†each.index","_outputPath":"†state.out"}]}]=]):format(
      "[false,true" .. (",false"):rep(28) .. "]"), "--tools", TOOLS)
    local r = cli.run { "graph", "--journal", j, "--format", "svg" }
    assert.are.equal(0, r.code, r.err)
    local nodes, n = svg_nodes(r.out)
    assert.are.equal(2 + 24 + 1, n) -- list, f, its first 24 copies, and "... 6 more copies"
    local calls = 0
    for id in pairs(nodes) do calls = calls + (id:match("^call%-") and 1 or 0) end
    assert.are.equal(2 + 24, calls)
    assert.are.equal("done", nodes["call-0"].class)
    assert.are.equal("failed", nodes["call-1"].class)
    assert.are.equal("done", nodes["call-1-0"].class)
    assert.are.equal("failed", nodes["call-1-1"].class)
    assert.are.same({ "f[1]", "failif", "failed" }, nodes["call-1-1"].texts)
    assert.is_nil(nodes["call-1-24"])
    assert.is_truthy(nodes["more-1"])
    assert.matches(">... 6 more copies</text>", r.out, 1, true)
    -- without PLAN the plan is the journal's: the same drawing as with it
    local with = cli.run { "graph", pf, "--journal", j }
    local without = cli.run { "graph", "--journal", j }
    assert.are.equal(0, without.code, without.err)
    assert.are.equal(with.out, without.out)
    os.remove(pf)
    os.remove(j)

    -- a delegated plan's calls in a box with the call, with their own edges
    local dp = DELEGATE .. "/graph_svg_spec.json"
    local f = assert(io.open(dp, "wb"))
    f:write('{"plan":[{"_id":"go","_delegate":"countdown.json","n":"†input.n","_outputPath":"†state.r"}]}')
    f:close()
    j = os.tmpname()
    local run = cli.run { "run", dp, "--tools", DELEGATE .. "/tools.lua", "--input", '{"n":1}', "--journal", j,
                         "--overwrite" }
    os.remove(dp)
    assert.are.equal(0, run.code, run.err)
    local d = cli.run { "graph", "--journal", j }
    assert.are.equal(0, d.code, d.err)
    assert.matches('subgraph cluster_n0 {\n    style=dashed; label="_delegate [^"]*countdown%.json";\n    n0;', d.out)
    assert.matches('    subgraph cluster_n0c1 {', d.out, 1, true)
    assert.are.same({ "n0c1c0 -> n0c1c1", "n0c0 -> n0c1" }, dot_edges(d.out))
    assert.matches('n0c1c1 [id="call-0-1-1", class="skipped"]', d.out, 1, true)
    local svg = cli.run { "graph", "--journal", j, "--format", "svg" }
    nodes, n = svg_nodes(svg.out)
    assert.are.equal(5, n)
    assert.are.equal("skipped", nodes["call-0-1-1"].class)
    assert.are.equal("n0c1c1", nodes["call-0-1-1"].title)
    local m = cli.run { "graph", "--journal", j, "--format", "mermaid" }
    assert.matches('    subgraph run_n0 %["_delegate [^"]*countdown%.json"%]', m.out)
    assert.matches("    n0c0 -.->|\"†state.next\"| n0c1\n", m.out, 1, true)
    os.remove(j)
  end)

  it("draws the first --max-calls calls and counts the rest", function()
    local calls = {}
    for i = 1, 50 do
      calls[i] = ('{"_id":"c%d","_tool":"%s","value":%s,"_outputPath":"†state.n%d"}'):format(
        i, i == 45 and "fail" or "echo", i == 1 and "0" or ('"†state.n' .. (i - 1) .. '"'), i)
    end
    local pf, j = run_journal('{"plan":[' .. table.concat(calls, ",") .. "]}", "--tools", TOOLS)
    local r = cli.run { "graph", "--journal", j, "--max-calls", "10" }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(10, select(2, r.out:gsub('\n  n%d+ %[label=', "")))
    assert.matches('  nmore [label="... 40 more calls\\n1 failed", shape=plaintext, id="more"];', r.out, 1, true)
    assert.are.equal(9, #dot_edges(r.out)) -- only between the calls drawn
    os.remove(pf)
    os.remove(j)
  end)

  it("says plainly when Graphviz's dot is not installed, and prints nothing", function()
    local r = cli.sh("PATH=/nonexistent " .. cli.quote(cli.bin) .. " graph plans/weather/plan.json --format svg"
                     .. " 2>&1 >/dev/null; echo \"exit $?\"")
    assert.matches("obelus graph: Graphviz's dot is not installed", r, 1, true)
    assert.matches("exit 1\n$", r)
    local out = cli.sh("PATH=/nonexistent " .. cli.quote(cli.bin) .. " graph plans/weather/plan.json --format svg 2>/dev/null")
    assert.are.equal("", out)
  end)
end)
