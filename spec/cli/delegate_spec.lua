-- delegate_spec.lua -- a call that runs a plan (_delegate): the clean room of
-- _scopes, the result, errors, the depth limit, and the sub-plan's messages.
local cli = require "support.cli"
local cjson = require "cjson"

local DIR = "spec/cli/fixtures/delegate"

-- a parent plan written next to the fixtures (delegates are relative to it)
local function run(json, ...)
  local f = DIR .. "/parent-" .. tostring(math.random(1e9)) .. ".json"
  local h = assert(io.open(f, "w"))
  h:write(json)
  h:close()
  local r = cli.run { "run", f, "--tools", "spec/cli/tools", "--tools", DIR .. "/tools.lua", ... }
  os.remove(f)
  if r.out ~= "" then r.output = cjson.decode(r.out) end
  return r
end

describe("_delegate", function()
  it("runs a plan that delegates to itself until its own branch stops it", function()
    local r = run([[{"context":[{"type":"input","data":{"n":5}}],
      "plan":[{"_id":"count","_delegate":"countdown.json","n":"†input.n","_outputPath":"out"}]}]])
    assert.are.equal(0, r.code)
    assert.are.same({ out = "liftoff" }, r.output)
  end)

  it("stops at the depth limit with a clear error, and --max-depth moves it", function()
    local plan = [[{"context":[{"type":"input","data":{"n":20}}],
      "plan":[{"_delegate":"countdown.json","n":"†input.n","_outputPath":"out"}]}]]
    local r = run(plan)
    assert.are.equal(1, r.code)
    assert.matches("delegation deeper than 16 levels", r.err, 1, true)
    assert.are.same({ out = "liftoff" }, run(plan, "--max-depth", "25").output)
  end)

  it("shows the sub-plan only the kinds named by _scopes, as the call's instance sees them", function()
    local ctx = [=["context":[{"type":"secret","data":{"code":42}},{"type":"input","data":{"lang":"en"}},
                   {"type":"input","data":{"lang":"fr"},"_instance":"x"}]]=]
    local closed = run("{" .. ctx .. [[,"plan":[{"_delegate":"reads_secret.json","_outputPath":"out"}]}]])
    assert.are.equal(1, closed.code)
    assert.matches("no call in the plan writes it", closed.err, 1, true)
    local open = run("{" .. ctx .. [[,"instances":["x"],"plan":[{"_delegate":"reads_secret.json",
                                     "_scopes":["secret","input"],"_outputPath":"out"}]}]])
    assert.are.equal(0, open.code)
    assert.are.same({ code = 42, lang = "fr" }, open.output.x.out) -- x's view of input
  end)

  it("passes the call's params as the sub-plan's input", function()
    local r = run([[{"plan":[{"_delegate":"reads_secret.json","_scopes":["secret"],"lang":"de","_outputPath":"out"}],
                     "context":[{"type":"secret","data":{"code":1}}]}]])
    assert.are.same({ code = 1, lang = "de" }, r.output.out)
  end)

  it("keeps the sub-plan's messages out of the parent log, under the call's journal entry", function()
    local j = os.tmpname()
    local r = run([[{"context":[{"type":"input","data":{"n":1}}],
      "plan":[{"_id":"count","_delegate":"countdown.json","n":"†input.n","_outputPath":"out"}]}]], "--journal", j)
    assert.are.equal(0, r.code)
    -- a scope is defined once ({"journal":"scope","n":N,"path":P} or "in":N,"call":I)
    -- and lines name it by its number
    local lines, scoped, names = {}, {}, {}
    for line in io.lines(j) do
      local m = cjson.decode(line)
      if not m.journal then lines[#lines + 1] = m end -- records (start, settled...) aside
      if m.journal == "scope" then
        names[m.n] = m.path or (names[m["in"]] .. "/" .. m.call)
      elseif m.scope then
        assert.are.equal("number", type(m.scope), line)
        assert.is_string(names[m.scope], line) -- defined before its first use
      end
      if m.journal == "msg" then
        local name = names[m.scope]
        scoped[name] = scoped[name] or {}
        table.insert(scoped[name], m.msg)
      end
    end
    assert.are.equal(3, #lines) -- plan, input, the call's output
    -- its _log names the scope whose "msg" lines hold the sub-plan's messages: each is
    -- in the journal once, however deep the delegation
    assert.are.equal("count", names[lines[3]._log.scope])
    local sub = scoped["count"]
    assert.are.equal("plan", sub[1].type)
    assert.are.equal("input", sub[2].kind) -- its params as input
    local last = sub[#sub]
    assert.are.equal("again", last._call._id) -- the nested delegation, with its own _log
    assert.are.equal("count/again", names[last._log.scope])
    assert.is_table(scoped["count/again"])
    -- `obelus log` puts them back under the call's line
    local log = cli.run { "log", j }
    assert.are.equal(0, log.code)
    assert.matches("2.3.2", log.out, 1, true) -- the nested run's last message
    os.remove(j)
  end)

  it("turns the sub-plan's failure into the call's runtime error, or routes it with ||", function()
    local r = run([[{"plan":[{"_id":"d","_delegate":"fails.json","_outputPath":"out"}]}]])
    assert.are.equal(1, r.code)
    assert.matches("call d (delegate) failed (runtime): the delegated plan", r.err, 1, true)
    assert.matches("call inner: spec/cli/tools/testtools.lua:30: inner trouble", r.err, 1, true)
    local routed = run([[{"plan":[{"_id":"d","_delegate":"fails.json","_outputPath":"ok || err"}]}]])
    assert.are.equal(0, routed.code)
    assert.matches("inner trouble", routed.output.err.error, 1, true)
  end)

  it("is checked before anything runs: a missing or invalid delegated plan is exit 2", function()
    local r = run([[{"plan":[{"_delegate":"nowhere.json","_outputPath":"out"}]}]])
    assert.are.equal(2, r.code)
    assert.matches("nowhere.json", r.err, 1, true)
    local bad = run([[{"plan":[{"_delegate":"fails.json","_scopes":"state","_outputPath":"out"},
                              {"_tool":"echo","_scopes":["state"]}]}]])
    assert.are.equal(2, bad.code)
    assert.matches("_scopes must be a list of kinds", bad.err, 1, true)
    assert.matches("_scopes only applies to a call with _delegate", bad.err, 1, true)
  end)
end)
