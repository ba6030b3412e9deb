-- trace_run_spec.lua -- the run as `obelus report` and `obelus ui` read it (ob_trace.h's
-- OB_TRACE_RUN, read back from the report page's embedded JSON): a call whose error a
-- `||` alternative received is "handled", with its error; each call's params as it read
-- them ("resolved": its run's documents as of its first start, an instance's view, a
-- delegated run's own input); the calls of runs (delegated plans, _each copies) name
-- their "parent"; and every call's "node" is the id of its node in the drawing
-- `obelus graph --journal J --format svg` makes.
local cjson = require "cjson"
local cli = require "support.cli"

local TOOLS = "spec/cli/tools"
local DELEGATE = "spec/cli/fixtures/delegate"

local function have_dot()
  return os.execute("command -v dot >/dev/null 2>&1") == true
end

-- runs plan (JSON text, written next to the delegate fixtures when asked) and returns the
-- journal's name
local function journal(plan, args, dir)
  local pf = dir and (dir .. "/trace_run_" .. tostring(os.time()) .. math.random(1e6) .. ".json")
             or cli.tmpfile(plan, ".json")
  if dir then
    local f = assert(io.open(pf, "wb"))
    f:write(plan)
    f:close()
  end
  local full = { pf }
  for _, a in ipairs(args or { "--tools", TOOLS }) do full[#full + 1] = a end
  local j = cli.journal_of(full)
  os.remove(pf)
  return j
end

-- the run's data as the report embeds it
local function run_data(j)
  local html = os.tmpname() .. ".html"
  local r = cli.run { "report", j, "-o", html }
  assert.are.equal(0, r.code, r.err)
  local text = cli.slurp(html)
  os.remove(html)
  local json = assert(text:match('<script type="application/json" id="obelus%-run">(.-)</script>'))
  return cjson.decode(json).run
end

local function by_key(calls)
  local t = {}
  for i, c in ipairs(calls) do
    c.index = i - 1
    t[(c.scope ~= "" and c.scope .. " > " or "") .. c.id] = c
  end
  return t
end

describe("the run's data (report, ui)", function()
  it("says handled for a call whose error its last || alternative received, with the error", function()
    local j = journal([=[{"plan":[
      {"_id":"h","_tool":"fail","_outputPath":"†state.x || †state.err","_retry":{"attempts":2,"delay_ms":1}},
      {"_id":"next","_tool":"echo","value":"†state.err.error","_outputPath":"†state.y"},
      {"_id":"chose","_tool":"pick","which":2,"value":"fine","_outputPath":"†state.p || †state.q"},
      {"_id":"bad","_tool":"fail","_outputPath":"†state.z"},
      {"_id":"ok","_tool":"echo","value":1,"_outputPath":"†state.o || †state.e"}],
      "output":"†state.y"}]=])
    local calls = by_key(run_data(j).calls)
    local h = calls.h
    assert.are.equal("handled", h.state)
    assert.matches("failed on purpose", h.error, 1, true)
    assert.are.equal(2, #h.attempts)                    -- both attempts failed
    assert.matches("failed on purpose", h.attempts[1][3], 1, true)
    assert.are.equal("fail", h.output.err.tool)        -- what the alternative received
    assert.are.equal("h", h.output.err.call)
    assert.are.equal("done", calls.next.state)          -- the run went on
    assert.are.equal("done", calls.chose.state)         -- a branch a tool chose is no error
    assert.are.equal(cjson.null, calls.chose.error)
    assert.are.equal("failed", calls.bad.state)
    assert.are.equal("done", calls.ok.state)
    assert.are.equal(cjson.null, calls.ok.error)
    -- the trace formats say it too: the span is not an error, its attribute holds it
    local otlp = cjson.decode(cli.run({ "log", j, "--format", "otlp" }).out)
    local seen = 0
    for _, s in ipairs(otlp.resourceSpans[1].scopeSpans[1].spans) do
      for _, a in ipairs(s.attributes) do
        if a.key == "obelus.call.handled_error" then
          seen = seen + 1
          assert.are.equal(1, s.status.code)
          assert.matches("failed on purpose", a.value.stringValue, 1, true)
        end
      end
    end
    assert.are.equal(1, seen)
    os.remove(j)
  end)

  it("gives each call's params as it read them, in its instance's view, and as written", function()
    local j = journal([=[{"instances":["fr","de"],"context":[{"type":"state","data":{"x":0}},
      {"type":"state","_instance":"fr","data":{"lang":"fr"}},
      {"type":"state","_instance":"de","data":{"lang":"de"}}],"plan":[
      {"_id":"a","_tool":"echo","value":1,"_outputPath":"†state.x","_instance":"fr"},
      {"_id":"b","_tool":"echo","value":{"x":"†state.x","city":"†input.city","lit":"††not a ref",
       "lang":"†state.lang","alt":"†state.none || †state.lang"},"_outputPath":"†state.b"},
      {"_id":"d","_tool":"echo","value":"†state.nothing","_outputPath":"†state.d","_instance":"de"}]}]=],
      { "--tools", TOOLS, "--input", '{"city":"Paris"}' })
    local calls = by_key(run_data(j).calls)
    local fr, de = calls["b@fr"], calls["b@de"]
    assert.are.same({ x = 1, city = "Paris", lit = "†not a ref", lang = "fr", alt = "fr" }, fr.resolved.value)
    assert.are.same({ x = 0, city = "Paris", lit = "†not a ref", lang = "de", alt = "de" }, de.resolved.value)
    -- what the tool got is what it wrote back (echo)
    assert.are.same(fr.resolved.value, fr.output.b)
    assert.are.equal("†state.x", fr.params.value.x)     -- as written, still
    assert.are.equal("†state.b", fr.resolved._outputPath) -- meta-properties as written
    assert.are.equal(1, calls.a.resolved.value)
    assert.are.equal("failed", calls.d.state)            -- never started: nothing read
    assert.are.equal(cjson.null, calls.d.resolved)
    os.remove(j)
  end)

  it("reads a delegated run's params in its own documents, and names each run's parent", function()
    local j = journal('{"plan":[{"_id":"go","_delegate":"countdown.json","n":"†input.n","_outputPath":"†state.r"}],'
                      .. '"output":"†state.r"}',
      { "--tools", DELEGATE .. "/tools.lua", "--input", '{"n":2}' }, DELEGATE)
    local run = run_data(j)
    local calls = by_key(run.calls)
    assert.are.equal(2, calls["go > step"].resolved.n)
    assert.are.equal(1, calls["go/again > step"].resolved.n)
    assert.are.equal(0, calls["go/again/again > step"].resolved.n)
    assert.are.equal("†input.n", calls["go/again/again > step"].params.n)
    assert.are.equal(cjson.null, calls.go.parent)
    assert.are.equal(calls.go.index, calls["go > step"].parent)
    assert.are.equal(calls["go > again"].index, calls["go/again > step"].parent)
    assert.are.equal(calls["go/again > again"].index, calls["go/again/again > again"].parent)
    assert.are.equal("call-0", calls.go.node)
    assert.are.equal("call-0-1", calls["go > again"].node)
    assert.are.equal("call-0-1-1-0", calls["go/again/again > step"].node)
    os.remove(j)
  end)

  it("gives every call the id of its node in `graph --journal J --format svg`", function()
    if not have_dot() then return pending("Graphviz's dot is not installed") end
    local j = journal([=[{"instances":["a","b"],"plan":[
      {"_id":"list","_tool":"echo","value":[1,2,3],"_outputPath":"†state.items","_instance":"a"},
      {"_id":"each","_tool":"echo","_each":"†state.items","value":"†each.value","_outputPath":"†state.out",
       "_instance":"a"},
      {"_id":"both","_tool":"echo","value":"†state.out || †state.none","_outputPath":"†state.z"}]}]=])
    local run = run_data(j)
    local r = cli.run { "graph", "--journal", j, "--format", "svg" }
    assert.are.equal(0, r.code, r.err)
    local svg = r.out:gsub("&#45;", "-")
    local nodes = {}
    for id, class, title in svg:gmatch('<g id="([^"]*)" class="node ?([^"]*)">%s*<title>([^<]*)</title>') do
      nodes[id] = { class = class, title = title }
    end
    local n = 0
    for _, c in ipairs(run.calls) do
      assert.are_not.equal(cjson.null, c.node, c.id)
      local g = nodes[c.node]
      assert.is_truthy(g, "no node " .. c.node .. " for " .. c.id)
      -- the node's name: the same positions, n<i>c<k>
      assert.are.equal((c.node:gsub("^call%-", "n"):gsub("%-", "c")), g.title)
      -- coloured by the same outcome
      assert.are.equal(c.state == "never ran" and "never-ran" or c.state, g.class)
      n = n + 1
    end
    assert.are.equal(7, n) -- list, each, its 3 copies, both@a, both@b
    local count = 0
    for _ in pairs(nodes) do count = count + 1 end
    assert.are.equal(n, count)
    os.remove(j)
  end)
end)
