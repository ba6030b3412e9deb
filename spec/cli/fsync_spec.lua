-- fsync_spec.lua -- `--fsync never|batch|always` (default batch): how durable the
-- journal is; every level writes the same journal and prints the same output, and
-- resume takes the option too. A bad level is a usage error (exit 2), nothing run.
-- (That `always` holds a reader back until its writer's line is on disk is shown in C,
-- spec/c/test_wal_run_always.c, where the fsyncs can be slowed and watched.)
local cli = require "support.cli"
local cjson = require "cjson"

local WEATHER = { "plans/weather/plan.json", "--tools", "plans/weather/tools", "--input",
                  '{"city":"London"}' }

local function args(...)
  local t = { "run" }
  for _, a in ipairs(WEATHER) do t[#t + 1] = a end
  for _, a in ipairs { ... } do t[#t + 1] = a end
  return t
end

-- the journal's lines, the dates taken out (they differ from run to run)
local function lines(path)
  local t = {}
  for line in io.lines(path) do t[#t + 1] = (line:gsub('"_date":"[^"]*"', '"_date":""'):gsub(',"t":%d+', ',"t":0')) end
  return t
end

describe("--fsync", function()
  it("never, batch and always write the same journal and print the same output", function()
    local ref = cli.run(args())
    assert.are.equal(0, ref.code, ref.err)
    local journals = {}
    for _, level in ipairs { "never", "batch", "always" } do
      local j = os.tmpname()
      local r = cli.run(args("--journal", j, "--fsync", level))
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("", r.err)
      assert.are.same(cjson.decode(ref.out), cjson.decode(r.out))
      journals[level] = lines(j)
      os.remove(j)
    end
    assert.are.same(journals.batch, journals.never)
    assert.are.same(journals.batch, journals.always)
    assert.matches('^{"journal":"end","exit":0}$', journals.always[#journals.always])
  end)

  it("is the default batch: the journal without --fsync is the same", function()
    local a, b = os.tmpname(), os.tmpname()
    assert.are.equal(0, cli.run(args("--journal", a)).code)
    assert.are.equal(0, cli.run(args("--journal", b, "--fsync", "batch")).code)
    assert.are.same(lines(a), lines(b))
    os.remove(a)
    os.remove(b)
  end)

  it("refuses a level it does not know: exit 2, naming the option, nothing run", function()
    local j = os.tmpname()
    os.remove(j)
    local r = cli.run(args("--journal", j, "--fsync", "sometimes"))
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.matches('--fsync is never, batch or always, not "sometimes"', r.err, 1, true)
    assert.is_nil(io.open(j))
    r = cli.run(args("--journal", j, "--fsync"))
    assert.are.equal(2, r.code)
  end)

  it("is taken by resume, which appends at that level", function()
    local j = os.tmpname()
    assert.are.equal(0, cli.run(args("--journal", j, "--fsync", "never")).code)
    local whole = lines(j)
    -- the run as if killed after its first call settled
    local keep = {}
    for _, line in ipairs(whole) do
      keep[#keep + 1] = line
      if line:find('"journal":"settled"', 1, true) then break end
    end
    local f = assert(io.open(j, "w"))
    f:write(table.concat(keep, "\n"), "\n")
    f:close()
    local r = cli.run { "resume", j, "--fsync", "always" }
    assert.are.equal(0, r.code, r.err)
    local again = lines(j)
    assert.matches('^{"journal":"end","exit":0}$', again[#again])
    assert.are.equal('{"journal":"resume"}', again[#keep + 1])
    assert.are.equal(2, cli.run({ "resume", j, "--fsync", "often" }).code)
    os.remove(j)
  end)
end)
