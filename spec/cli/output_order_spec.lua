-- spec/cli/output_order_spec.lua -- the output lists keys in the plan's order (the order
-- the calls' _outputPath name them), not the order parallel writes landed: a run and a
-- resume of its journal print byte-identical output whatever order the calls finished in.
local cli = require "support.cli"

local DAG = "\xE2\x80\xA0"

-- a fan-out whose calls sleep by a value read from the input (the later in the plan, the
-- sooner it finishes), and a chain that writes in reverse plan order by its references
local function plan(output)
  local calls = {}
  for i, k in ipairs { "a", "b", "c", "d" } do
    calls[#calls + 1] = ('{"_tool":"sleepy","ms":"%sinput.ms.%s","value":%d,"_outputPath":"%sstate.%s"}')
      :format(DAG, k, i, DAG, k)
  end
  calls[#calls + 1] = ('{"_tool":"echo","value":"%sstate.deep.y","_outputPath":"%sstate.deep.x"}'):format(DAG, DAG)
  calls[#calls + 1] = ('{"_tool":"sleepy","ms":"%sinput.ms.a","value":{"q":1,"p":2},"_outputPath":"%sstate.deep.y"}')
    :format(DAG, DAG)
  return cli.tmpfile('{"plan":[' .. table.concat(calls, ",") .. ']' .. (output or "") .. '}')
end

local input = '{"ms":{"a":60,"b":40,"c":20,"d":0}}'

describe("the output's key order", function()
  it("is the plan's, whatever order the calls finished in", function()
    local p = plan()
    local r = cli.run { "run", p, "--tools", "spec/cli/tools", "--input", input }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal('{"a":1,"b":2,"c":3,"d":4,"deep":{"x":{"q":1,"p":2},"y":{"q":1,"p":2}}}', (r.out:gsub("%s", "")))
    os.remove(p)
  end)

  it("is the plan's through an output template (the part of an || that gave the value)", function()
    local p = plan(',"output":{"all":"' .. DAG .. 'state","deep":"' .. DAG .. 'state.nope || ' .. DAG .. 'state.deep"}')
    local r = cli.run { "run", p, "--tools", "spec/cli/tools", "--input", input }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal('{"all":{"a":1,"b":2,"c":3,"d":4,"deep":{"x":{"q":1,"p":2},"y":{"q":1,"p":2}}},' ..
      '"deep":{"x":{"q":1,"p":2},"y":{"q":1,"p":2}}}', (r.out:gsub("%s", "")))
    os.remove(p)
  end)

  it("makes a resume of the journal print the run's output byte for byte", function()
    local p = plan()
    local j = os.tmpname()
    os.remove(j)
    local r = cli.run { "run", p, "--tools", "spec/cli/tools", "--input", input, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    local again = cli.run { "resume", j, "--tools", "spec/cli/tools" }
    assert.are.equal(0, again.code, again.err)
    assert.are.equal(r.out, again.out)
    assert.truthy(r.out:find('"a"', 1, true) < r.out:find('"d"', 1, true))
    os.remove(p)
    os.remove(j)
  end)
end)
