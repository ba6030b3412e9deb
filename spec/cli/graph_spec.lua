-- graph_spec.lua -- `obelus graph PLAN [--format dot|mermaid] [--tools PATH]...` (plan-format §12):
-- the dependency DAG, read back from both syntaxes into exact node and edge sets.
local cli = require "support.cli"

-- --- reading the output back ---------------------------------------------------

-- A dot "..." string starting at s[i] (the quote): its text and the index after it.
local function dot_quoted(s, i)
  assert(s:sub(i, i) == '"', "expected a quote at " .. i .. " in " .. s)
  local out, j = {}, i + 1
  while true do
    local c = s:sub(j, j)
    assert(c ~= "", "unterminated string in " .. s)
    if c == '"' then return table.concat(out), j + 1 end
    if c == "\\" then
      local n = s:sub(j + 1, j + 1)
      out[#out + 1] = (n == "n") and "\n" or n
      assert(n == "n" or n == '"' or n == "\\", "unexpected escape \\" .. n)
      j = j + 2
    else
      out[#out + 1] = c
      j = j + 1
    end
  end
end

-- "key=value, key=\"value\"" -> table
local function dot_attrs(s)
  local attrs, i = {}, 1
  while i <= #s do
    local key, after = s:match("^([%w_]+)=()", i)
    assert(key, "bad attribute list: " .. s)
    local val
    if s:sub(after, after) == '"' then
      val, i = dot_quoted(s, after)
    else
      val, i = s:match("^([%w_.]+)()", after)
    end
    attrs[key] = val
    if s:sub(i, i + 1) == ", " then i = i + 2 end
  end
  return attrs
end

-- Returns { nodes = { name = { label=, shape= } }, edges = { { from=, to=, label=, dashed= } } }.
local function parse_dot(text)
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  assert.are.equal("digraph plan {", lines[1])
  assert.are.equal("}", lines[#lines])
  local g = { nodes = {}, edges = {} }
  for k = 2, #lines - 1 do
    local line = lines[k]
    local from, to, eattrs = line:match("^  (n%d+) %-> (n%d+) %[(.*)%];$")
    local name, nattrs = line:match("^  (n%d+) %[(.*)%];$")
    if from then
      local a = dot_attrs(eattrs)
      g.edges[#g.edges + 1] = { from = from, to = to, label = a.label, dashed = a.style == "dashed" }
    elseif name then
      local a = dot_attrs(nattrs)
      assert(not g.nodes[name], "node defined twice: " .. name)
      g.nodes[name] = { label = a.label, shape = a.shape or "box" }
    else
      assert(line:match("^  node %[") or line:match("^  edge %["), "unexpected line: " .. line)
    end
  end
  return g
end

local entities = { quot = '"', lt = "<", gt = ">", amp = "&" }

local function mermaid_text(q)
  assert(q:sub(1, 1) == '"' and q:sub(-1) == '"', "unquoted label: " .. q)
  local s = q:sub(2, -2)
  assert(not s:find('"', 1, true), "raw quote inside a label: " .. q)
  assert(not s:find("|", 1, true), "raw | inside a label: " .. q)
  s = s:gsub("<br>", "\n")
  assert(not s:find("[<>]"), "raw < or > inside a label: " .. q)
  return (s:gsub("#(%w+);", function(e)
    return entities[e] or utf8.char((assert(tonumber(e), "unknown entity " .. e)))
  end))
end

local function parse_mermaid(text)
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  assert.are.equal("flowchart TD", lines[1])
  local g = { nodes = {}, edges = {} }
  for k = 2, #lines do
    local line = lines[k]
    local box_name, box = line:match('^    (n%d+)%[(".*")%]$')
    local flag_name, flag = line:match('^    (n%d+)>(".*")%]$')
    local from, arrow, label, to = line:match('^    (n%d+) (%-%.?%->)|(".*")| (n%d+)$')
    if not from then
      from, arrow, to = line:match("^    (n%d+) (%-%.?%->) (n%d+)$")
    end
    if box_name or flag_name then
      local name = box_name or flag_name
      assert(not g.nodes[name], "node defined twice: " .. name)
      g.nodes[name] = { label = mermaid_text(box or flag), shape = box_name and "box" or "cds" }
    elseif from then
      g.edges[#g.edges + 1] = { from = from, to = to, label = label and mermaid_text(label) or "",
                                dashed = arrow == "-.->" }
    else
      error("unexpected line: " .. line)
    end
  end
  return g
end

-- Node and edge sets in terms of call ids, sorted, so both syntaxes compare alike:
-- nodes "id|tool|shape" (label lines joined by |), edges "from -> to [label] solid|dashed".
local function sets(g)
  local ids, nodes, edges = {}, {}, {}
  for name, n in pairs(g.nodes) do
    ids[name] = n.label:match("^[^\n]*")
    nodes[#nodes + 1] = n.label:gsub("\n", "|") .. "|" .. n.shape
  end
  for _, e in ipairs(g.edges) do
    assert(ids[e.from] and ids[e.to], "edge between undeclared nodes")
    edges[#edges + 1] = ("%s -> %s [%s] %s"):format(ids[e.from], ids[e.to], e.label,
                                                   e.dashed and "dashed" or "solid")
  end
  table.sort(nodes)
  table.sort(edges)
  return nodes, edges
end

local function graph(plan, format, extra)
  local file = cli.tmpfile(plan, ".json")
  local args = { "graph", file, "--format", format }
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  local r = cli.run(args)
  assert.are.equal("", r.err)
  assert.are.equal(0, r.code)
  return r.out
end

local function parse(plan, format, extra)
  local out = graph(plan, format, extra)
  return (format == "dot" and parse_dot or parse_mermaid)(out), out
end

-- Checks both formats against the same expected sets.
local function expect(plan, nodes, edges, extra)
  table.sort(nodes)
  table.sort(edges)
  for _, format in ipairs { "dot", "mermaid" } do
    local n, e = sets(parse(plan, format, extra))
    assert.are.same(nodes, n, format .. " nodes")
    assert.are.same(edges, e, format .. " edges")
  end
end

local function have_dot()
  return os.execute("command -v dot >/dev/null 2>&1") == true
end

-- --- plans -----------------------------------------------------------------------

local chain = [[
[ {"_id": "fetch", "_tool": "http", "url": "x", "_outputPath": "†state.profile"},
  {"_id": "summarise", "_tool": "llm", "text": "†state.profile.bio", "_outputPath": "summary"},
  {"_id": "send", "_tool": "mail", "body": "†state.summary"} ]
]]

local fanout = [[
[ {"_id": "split", "_tool": "t", "_outputPath": "†state.a && †state.b"},
  {"_id": "useA", "_tool": "t", "x": "†state.a", "_outputPath": "†state.ra"},
  {"_id": "useB", "_tool": "t", "x": {"deep": ["†state.b.name"]}, "_outputPath": "†state.rb"},
  {"_id": "all", "_tool": "t", "x": "†state", "_outputPath": "†out.all"} ]
]]

local weather_calls = {
  [[{"_id": "checkWeather", "_tool": "weather", "city": "†input.city", "_outputPath": "†state.sunny || †state.rainy"}]],
  [[{"_id": "park", "_tool": "plan", "w": "†state.sunny", "_outputPath": "†state.plan.park"}]],
  [[{"_id": "movie", "_tool": "plan", "w": "†state.rainy", "_outputPath": "†state.plan.movie"}]],
  [[{"_id": "join", "_tool": "choose", "p": "†state.plan.park || †state.plan.movie", "_outputPath": "†state.final"}]],
}
local weather = "[" .. table.concat(weather_calls, ",\n") .. "]"
local reversed = {}
for i = #weather_calls, 1, -1 do reversed[#reversed + 1] = weather_calls[i] end
local weather_reversed = '{"context": [{"type": "input", "data": {"city": "Oslo"}}],\n "plan": ['
                         .. table.concat(reversed, ",\n") .. "]}"

local weather_nodes = { "checkWeather|weather|box", "park|plan|box", "movie|plan|box", "join|choose|box" }
local weather_edges = {
  "checkWeather -> park [†state.sunny] dashed",
  "checkWeather -> movie [†state.rainy] dashed",
  "park -> join [†state.plan.park] solid",
  "movie -> join [†state.plan.movie] solid",
}

-- ids and paths that neither syntax takes bare
local awkward = [[
[ {"_tool": "src", "_outputPath": "†state[\"a|b c\"]"},
  {"_id": "say \"hi\"", "_tool": "t\"q", "x": "†state[\"a|b c\"]", "_outputPath": "†state.q"},
  {"_id": "with space", "_tool": "t", "x": "†state.q", "_outputPath": "†state[\"<b>&#35;\"]"},
  {"_id": "a<b>|c#d;&e`", "_tool": "t", "x": "†state[\"<b>&#35;\"]", "_outputPath": "†state.r"},
  {"_id": "back\\slash\\N", "_tool": "t", "x": "†state.r", "_outputPath": "†state.s"},
  {"_id": "end", "_tool": "t", "x": "†state.s", "_outputPath": "†state.t"} ]
]]

describe("obelus graph", function()
  it("draws a chain: ids and tools as nodes, the linking path on each edge", function()
    expect(chain,
      { "fetch|http|box", "summarise|llm|box", "send|mail|cds" },
      { "fetch -> summarise [†state.profile → †state.profile.bio] solid",
        "summarise -> send [†state.summary] solid" })
  end)

  it("draws && fan-out as solid edges, one line per linking path", function()
    expect(fanout,
      { "split|t|box", "useA|t|box", "useB|t|box", "all|t|box" },
      { "split -> useA [†state.a] solid",
        "split -> useB [†state.b → †state.b.name] solid",
        "split -> all [†state.a → †state\n†state.b → †state] solid",
        "useA -> all [†state.ra → †state] solid",
        "useB -> all [†state.rb → †state] solid" })
  end)

  it("draws || branches as dashed edges labelled with their alternative (the weather plan)", function()
    expect(weather, weather_nodes, weather_edges)
  end)

  it("gives one dashed edge per alternative when a reader reads several", function()
    local plan = [[
[ {"_id": "verify", "_tool": "t", "_outputPath": "†state.ok && †state.log || †state.failed"},
  {"_id": "report", "_tool": "t", "r": {"ok": "†state.ok", "log": "†state.log", "bad": "†state.failed"},
   "_outputPath": "†state.report"} ]
]]
    expect(plan, { "verify|t|box", "report|t|box" },
      { "verify -> report [†state.ok\n†state.log] dashed",
        "verify -> report [†state.failed] dashed" })
  end)

  it("draws the same graph for a plan listed in reverse order (plan object form)", function()
    expect(weather_reversed, weather_nodes, weather_edges)
  end)

  it("links a global writer to instanced readers, never one instance to another", function()
    local plan = [[
[ {"_id": "cfg", "_tool": "t", "_outputPath": "†state.cfg"},
  {"_id": "fr", "_tool": "t", "_instance": "fr", "c": "†state.cfg.lang", "_outputPath": "†state.x"},
  {"_id": "fr2", "_tool": "t", "_instance": "fr", "x": "†state.x", "_outputPath": "†state.y"},
  {"_id": "de", "_tool": "t", "_instance": "de", "x": "†state.x || †state.cfg", "_outputPath": "†state.y"},
  {"_id": "global", "_tool": "t", "x": "†state.x || †state.none", "_outputPath": "†state.z"} ]
]]
    expect(plan,
      { "cfg|t|box", "fr|t|instance fr|box", "fr2|t|instance fr|box", "de|t|instance de|box",
        "global|t|box" },
      { "cfg -> fr [†state.cfg → †state.cfg.lang] solid",
        "cfg -> de [†state.cfg] solid",
        "fr -> fr2 [†state.x] solid" })
  end)

  it("draws an instances plan's copies each with its own edges, none to another copy", function()
    local plan = [[
{"instances": ["x", "y"], "plan": [
  {"_id": "a", "_tool": "t", "_outputPath": "†state.a"},
  {"_id": "b", "_tool": "t", "v": "†state.a", "_outputPath": "†state.b"},
  {"_id": "g", "_tool": "t", "_instance": "x", "v": "†state.b", "_outputPath": "†state.g"} ]}
]]
    expect(plan,
      { "a@x|t|instance x|box", "a@y|t|instance y|box", "b@x|t|instance x|box",
        "b@y|t|instance y|box", "g|t|instance x|box" },
      { "a@x -> b@x [†state.a] solid", "a@y -> b@y [†state.a] solid",
        "b@x -> g [†state.b] solid" })
  end)

  it("names nodes n0, n1, ... and escapes ids, tools and paths in both syntaxes", function()
    local nodes = { "#0|src|box", 'say "hi"|t"q|box', "with space|t|box", "a<b>|c#d;&e`|t|box",
                    "back\\slash\\N|t|box", "end|t|box" }
    expect(awkward, nodes,
      { '#0 -> say "hi" [†state["a|b c"]] solid',
        'say "hi" -> with space [†state.q] solid',
        'with space -> a<b>|c#d;&e` [†state["<b>&#35;"]] solid',
        "a<b>|c#d;&e` -> back\\slash\\N [†state.r] solid",
        "back\\slash\\N -> end [†state.s] solid" })
    for _, format in ipairs { "dot", "mermaid" } do
      local g = parse(awkward, format)
      local names = {}
      for name in pairs(g.nodes) do names[#names + 1] = name end
      table.sort(names)
      assert.are.same({ "n0", "n1", "n2", "n3", "n4", "n5" }, names)
      assert.are.equal("#0\nsrc", g.nodes.n0.label)
    end
  end)

  it("prints output that Graphviz accepts", function()
    if not have_dot() then
      pending("dot (Graphviz) is not installed: `dot -Tsvg` not checked")
      return
    end
    for _, plan in ipairs { chain, fanout, weather, weather_reversed, awkward } do
      local gv = cli.tmpfile(graph(plan, "dot"), ".gv")
      local svg = os.tmpname()
      local errf = os.tmpname()
      local ok = os.execute("dot -Tsvg " .. cli.quote(gv) .. " >" .. svg .. " 2>" .. errf)
      local err = cli.slurp(errf)
      local out = cli.slurp(svg)
      os.remove(gv); os.remove(svg); os.remove(errf)
      assert.is_true(ok == true, err)
      assert.are.equal("", err)
      assert.matches("<svg", out, 1, true)
      if plan == awkward then -- the labels come out as written: no \N expanded, no HTML let through
        assert.matches(">back\\slash\\N</text>", out, 1, true)
        assert.matches(">a&lt;b&gt;|c#d;&amp;e`</text>", out, 1, true)
        assert.matches(">say &quot;hi&quot;</text>", out, 1, true)
      end
    end
  end)

  it("defaults to dot", function()
    local file = cli.tmpfile(weather, ".json")
    local r = cli.run { "graph", file }
    assert.are.equal(0, r.code)
    assert.are.equal(graph(weather, "dot"), r.out)
  end)

  it("draws fire-and-forget calls in their own shape; with --tools a latent thought stays a box", function()
    local tools = cli.tmpfile([[
return {
  { name = "fetch", schema = { type = "object", properties = { url = { type = "string" } },
                               required = { "url" } },
    run = function(call) return {} end },
  { name = "think" },
  { name = "notify", run = function() end },
}
]], ".lua")
    local plan = [[
[ {"_id": "f", "_tool": "fetch", "url": "x", "_outputPath": "page"},
  {"_id": "t", "_tool": "think", "p": "†state.page"},
  {"_id": "n", "_tool": "notify", "p": "†state.page"} ]
]]
    expect(plan, { "f|fetch|box", "t|think|box", "n|notify|cds" },
      { "f -> t [†state.page] solid", "f -> n [†state.page] solid" }, { "--tools", tools })
    -- without tools nothing says `think` is latent: every call without output is fire-and-forget
    expect(plan, { "f|fetch|box", "t|think|cds", "n|notify|cds" },
      { "f -> t [†state.page] solid", "f -> n [†state.page] solid" })

    -- with --tools the calls are checked against the tools
    local bad = cli.tmpfile('[{"_tool": "fetch", "_outputPath": "page"}, {"_id": "x", "_tool": "nope"}]', ".json")
    local r = cli.run { "graph", bad, "--tools", tools }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.matches('missing property "url"', r.err, 1, true)
    assert.matches('call x (nope): no tool named "nope"', r.err, 1, true)
    assert.are.equal(0, cli.run { "graph", bad }.code)
    local r2 = cli.run { "graph", bad, "--tools", "/nonexistent/tools.lua" }
    assert.are.equal(2, r2.code)
    assert.are.equal("", r2.out)
    assert.matches("/nonexistent/tools.lua", r2.err, 1, true)
  end)

  it("exits 2 with every problem on stderr and nothing on stdout for an invalid plan", function()
    local file = cli.tmpfile('[{"_id": "a", "_tool": "t", "_bogus": 1, "x": "†state..x"}]', ".json")
    for _, format in ipairs { "dot", "mermaid" } do
      local r = cli.run { "graph", file, "--format", format }
      assert.are.equal(2, r.code)
      assert.are.equal("", r.out)
      assert.matches(file .. ": call a (t): unknown meta-property _bogus", r.err, 1, true)
      assert.matches('parameter "x": empty path segment', r.err, 1, true)
      assert.matches("2 problems", r.err, 1, true)
    end
    local ctx = cli.tmpfile('{"context": [42], "plan": []}', ".json")
    local r = cli.run { "graph", ctx }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.matches("context[0]", r.err, 1, true)
  end)

  it("draws a plan whose only problems are cycles, each cycle's edges red, then exits 2 naming them", function()
    local file = cli.tmpfile([[
[ {"_id": "a", "_tool": "t", "x": "†state.b", "_outputPath": "a"},
  {"_id": "b", "_tool": "t", "x": "†state.a", "_outputPath": "b"},
  {"_id": "c", "_tool": "t", "x": "†state.a", "_outputPath": "c"} ]
]], ".json")
    local r = cli.run { "graph", file }
    assert.are.equal(2, r.code)
    assert.matches("dependency cycle: a (t) -> b (t) -> a (t)", r.err, 1, true)
    assert.matches("drawn with each cycle's edges in red", r.err, 1, true)
    -- every edge drawn; those on the cycle (a <-> b) red, a -> c not
    local red = {}
    for from, to, attrs in r.out:gmatch("  (n%d) %-> (n%d) %[([^\n]*)%];") do
      red[#red + 1] = from .. to .. "=" .. (attrs:find('class="cycle"', 1, true) and "red" or "plain")
    end
    table.sort(red)
    assert.are.same({ "n0n1=red", "n0n2=plain", "n1n0=red" }, red)
    local m = cli.run { "graph", file, "--format", "mermaid" }
    assert.are.equal(2, m.code)
    assert.matches("n0 ==>", m.out, 1, true)
    assert.matches("n0 -->|", m.out, 1, true) -- a -> c
    -- another problem beside a cycle: nothing drawn
    local both = cli.tmpfile([[
[ {"_id": "a", "_tool": "t", "x": "†state.b", "_outputPath": "a"},
  {"_id": "b", "_tool": "t", "x": "†state.a", "_outputPath": "b", "_bogus": 1} ]
]], ".json")
    r = cli.run { "graph", both }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.matches("nothing drawn", r.err, 1, true)
  end)

  it("prints usage with examples on --help, and exits 2 on usage errors", function()
    local r = cli.run { "graph", "--help" }
    assert.are.equal(0, r.code)
    assert.matches("usage: obelus graph PLAN [--format dot|mermaid] [--tools PATH]...", r.out, 1, true)
    assert.matches("examples:", r.out, 1, true)
    assert.matches("--format mermaid", r.out, 1, true)
    local file = cli.tmpfile(weather, ".json")
    for _, args in ipairs {
      { "graph" },
      { "graph", file, "--format", "png" },
      { "graph", file, "--format" },
      { "graph", file, "--tools" },
      { "graph", file, "--journal", "x.jsonl" },
      { "graph", file, "other.json" },
      { "graph", "/nonexistent/plan.json" },
    } do
      local u = cli.run(args)
      assert.are.equal(2, u.code, table.concat(args, " "))
      assert.are.equal("", u.out)
      assert.is_true(#u.err > 0)
    end
  end)

  it("is listed by `obelus --help` and no longer planned", function()
    local r = cli.run { "--help" }
    assert.matches("  graph PLAN", r.out, 1, true)
    assert.matches("  resume ", r.out, 1, true)
  end)
  it("refuses a plan with more dependencies than --max-edges (10000 by default) before printing", function()
    -- 120 writers of state.x.wN and 120 readers of state.x: 14,400 dependencies
    local calls = {}
    for i = 1, 120 do
      calls[#calls + 1] = ('{"_tool":"echo","value":%d,"_outputPath":"\xE2\x80\xA0state.x.w%d"}'):format(i, i)
    end
    for i = 1, 120 do
      calls[#calls + 1] = ('{"_tool":"echo","value":"\xE2\x80\xA0state.x","_outputPath":"\xE2\x80\xA0state.r%d"}'):format(i)
    end
    local p = cli.tmpfile('{"plan":[' .. table.concat(calls, ",") .. "]}")
    local r = cli.run { "graph", p }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.matches("has 14400 dependencies between its 240 calls, more than --max-edges 10000", r.err, 1, true)
    for _, fmt in ipairs { "dot", "mermaid" } do
      r = cli.run { "graph", p, "--max-edges", "20000", "--format", fmt }
      assert.are.equal(0, r.code, r.err)
      local _, edges = r.out:gsub(fmt == "dot" and " %-> " or "n%d+ %-%->", "")
      assert.are.equal(14400, edges)
    end
    r = cli.run { "graph", p, "--max-edges", "0" }
    assert.are.equal(0, r.code, r.err)
    r = cli.run { "graph", p, "--max-edges", "x" }
    assert.are.equal(2, r.code)
    os.remove(p)
  end)
end)
