-- engine_journal_files_spec.lua -- engine:run's journal option gets the command line's
-- protections (issue 26): an existing non-empty file is refused rather than truncated
-- (overwrite = true replaces it), the plan file, a tool file or a delegated plan is
-- refused as its journal (even with overwrite = true), and a journal
-- that cannot be written stops the run: run:wait() says so, and no tool ran.
local obelus = require "obelus"
local fs = require "support.fs"

local write, slurp = fs.write, fs.slurp

local TOOLS = [[
return {
  { name = "mark", run = function(c)
      local f = assert(io.open(c.mark, "a")); f:write("x\n"); f:close()
      return 1
    end },
}
]]

describe("engine:run's journal", function()
  local dir, engine, marker, plan
  before_each(function()
    dir = fs.tmpdir()
    write(dir .. "/tools.lua", TOOLS)
    marker = dir .. "/marker"
    plan = { plan = { { _tool = "mark", mark = marker, _outputPath = "†state.a" } } }
    engine = obelus.engine { tools = dir .. "/tools.lua" }
  end)
  after_each(function()
    engine:close()
    fs.rmtree(dir)
  end)

  it("refuses an existing non-empty file, and replaces it with overwrite = true", function()
    local j = dir .. "/run.jsonl"
    write(j, "precious\n")
    local ok, err = pcall(engine.run, engine, plan, { journal = j })
    assert.is_false(ok)
    assert.matches("is there already: not replaced", err, 1, true)
    assert.matches("overwrite = true", err, 1, true)
    assert.are.equal("precious\n", slurp(j))
    local run = engine:run(plan, { journal = j, overwrite = true })
    assert.are.equal(0, run:wait())
    run:close()
    assert.matches('^{"type":"plan"', slurp(j))
  end)

  it("refuses the plan file as its journal", function()
    local p = dir .. "/plan.json"
    write(p, obelus.encode(plan))
    local before = slurp(p)
    local ok, err = pcall(engine.run, engine, p, { journal = p })
    assert.is_false(ok)
    assert.matches("is the plan file", err, 1, true)
    assert.are.equal(before, slurp(p))
  end)

  it("refuses a tool file or a delegated plan as its journal, even with overwrite", function()
    local tools_before = slurp(dir .. "/tools.lua")
    local ok, err = pcall(engine.run, engine, plan,
                          { journal = dir .. "/tools.lua", overwrite = true })
    assert.is_false(ok)
    assert.matches("/tools.lua is the tool file", err, 1, true)
    assert.are.equal(tools_before, slurp(dir .. "/tools.lua"))
    local sub = obelus.encode { plan = { { _tool = "mark", mark = marker, _outputPath = "†state.s" } } }
    write(dir .. "/d.json", sub)
    write(dir .. "/p.json", obelus.encode { plan = { { _delegate = "d.json", _outputPath = "†state.d" } } })
    ok, err = pcall(engine.run, engine, dir .. "/p.json", { journal = dir .. "/d.json", overwrite = true })
    assert.is_false(ok)
    assert.matches("is the delegated plan", err, 1, true)
    assert.are.equal(sub, slurp(dir .. "/d.json"))
    assert.is_nil(io.open(marker, "r"))
  end)

  it("stops the run when the journal cannot be written: wait says why, no tool ran", function()
    local run = engine:run(plan, { journal = "/dev/full" })
    local status, why = run:wait()
    assert.is_nil(status)
    assert.matches("/dev/full: cannot write the journal: No space left on device", why, 1, true)
    run:close()
    assert.is_nil(io.open(marker, "r"))
  end)
end)
