-- memory_spec.lua -- the run's memory account (issue 26, item 4): --max-memory bounds the
-- Lua heap, values and the log together; what would pass it in C (a result, a write, an
-- async uv.fs_read, cjson.encode) fails that call, never the process; error messages are
-- cut; --max-output has a default. Every run is capped (ulimit -v, timeout): a test that
-- regresses fails with an abort or a timeout, never takes the machine down.
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/fixtures/memory/tools.lua"
-- AddressSanitizer reserves terabytes of address space: its build runs under the time
-- cap only, and every test that allocates without bound gives --max-memory there.
local ASAN = cli.bin:find("/asan/", 1, true) ~= nil

-- runs obelus under `ulimit -v kb` (none under ASan) and a 60 s cap
local function capped(kb, args)
  local parts = { ASAN and "" or ("ulimit -v " .. kb .. ";"), "timeout 60", cli.quote(cli.bin) }
  for _, a in ipairs(args) do parts[#parts + 1] = cli.quote(a) end
  local out, err = os.tmpname(), os.tmpname()
  local _, how, code = os.execute("(" .. table.concat(parts, " ") .. ") >" .. out .. " 2>" .. err)
  local r = { code = how == "exit" and code or 128 + code, out = cli.slurp(out), err = cli.slurp(err) }
  os.remove(out); os.remove(err)
  return r
end

local function run(kb, plan, ...)
  local file = cli.tmpfile(cjson.encode(plan), ".json")
  local args = { "run", file, "--tools", TOOLS }
  for _, a in ipairs { ... } do args[#args + 1] = a end
  local r = capped(kb, args)
  os.remove(file)
  return r
end

local function no_crash(r)
  assert.is_true(r.code == 0 or r.code == 1, "exit " .. r.code .. ": " .. r.err:sub(1, 2000))
  assert.not_matches("PANIC", r.err, 1, true)
end

describe("--max-memory counts values and the log, not only the Lua heap", function()
  it("a plan doubling an array with concat writes: the write that would pass it fails, the rest goes on", function()
    -- each call concats its array twice onto the next path: 2^30 elements at the end,
    -- all in C (views and shared values: the Lua heap stays small)
    local plan = { { _tool = "ok", value = { "x" }, _outputPath = "†state.a0" } }
    for i = 1, 30 do
      plan[#plan + 1] = { _id = "d" .. i, _tool = "double", a = "†state.a" .. (i - 1), to = "a" .. i,
                          _outputPath = "†state.a" .. i }
    end
    plan[#plan + 1] = { _tool = "ok", ms = 10, value = "fine", _outputPath = "†state.b" }
    local r = run(2000000, { plan = plan, output = "†state.b" }, "--max-memory", "64")
    no_crash(r)
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("fine", cjson.decode(r.out))
    assert.matches("call d%d+ %(double%) failed %(runtime%): memory limit of 64 MB reached %(%-%-max%-memory%)", r.err)
  end)

  it("a result that would pass it fails its call (the string is copied out of Lua)", function()
    local r = run(4000000, { plan = {
      { _id = "big", _tool = "big", n = 25 * 1024 * 1024, _outputPath = "†state.a" },
      { _tool = "ok", ms = 10, value = "fine", _outputPath = "†state.b" },
    }, output = "†state.b" }, "--max-memory", "64")
    no_crash(r)
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("fine", cjson.decode(r.out))
    assert.matches("call big %(big%) failed %(runtime%): [%w: ]*memory limit of 64 MB reached %(%-%-max%-memory%)",
                   r.err)
  end)
end)

describe("--max-memory against a result that shares its tables", function()
  it("a table holding the one below twice, 40 levels: its copy fails at the limit, the run goes on", function()
    -- 41 tables in Lua, 2^40 leaves once copied: checked at every table, not only strings
    local r = run(2000000, { plan = {
      { _id = "dag", _tool = "dag", n = 40, _outputPath = "†state.a" },
      { _tool = "ok", ms = 10, value = "fine", _outputPath = "†state.b" },
    }, output = "†state.b" }, "--max-memory", "64")
    no_crash(r)
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("fine", cjson.decode(r.out))
    assert.matches("call dag %(dag%) failed %(runtime%): [^\n]*memory limit of 64 MB reached %(%-%-max%-memory%)", r.err)
  end)
end)

describe("memory a library takes outside Lua", function()
  local dir, big
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    big = dir .. "/big"
    assert(os.execute("truncate -s 3G " .. big)) -- sparse: no disk used
  end)
  teardown(function() os.execute("rm -rf " .. dir) end)

  local function read_plan()
    return { plan = {
      { _id = "r", _tool = "read_async", path = big, n = 3 * 1024 * 1024 * 1024, _outputPath = "†state.a" },
      { _tool = "ok", ms = 10, value = "fine", _outputPath = "†state.b" },
    }, output = "†state.b" }
  end

  it("an async uv.fs_read of 3 GB fails its call, no PANIC", function()
    local r = run(4000000, read_plan(), "--max-memory", "64")
    no_crash(r)
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("fine", cjson.decode(r.out))
    assert.matches("call r (read_async) failed (runtime): memory limit of 64 MB reached (--max-memory): " ..
                   "uv.fs_read with a callback of 3072 MB", r.err, 1, true)
  end)

  it("without --max-memory, half the address-space limit (ulimit -v) is the default", function()
    if ASAN then return end -- no address-space limit under ASan
    local r = run(4000000, read_plan())
    no_crash(r)
    assert.are.equal(1, r.code, r.err)
    assert.matches("memory limit of 1953 MB reached (--max-memory): uv.fs_read", r.err, 1, true)
  end)

  it("cjson.encode of a text the account has no room for fails its call before cjson starts", function()
    -- 100,000 references to one 1 KB string: a small table, 100 MB of JSON text
    local r = run(4000000, { plan = {
      { _id = "e", _tool = "encode", n = 100000, _outputPath = "†state.a" },
      { _tool = "ok", ms = 10, value = "fine", _outputPath = "†state.b" },
    }, output = "†state.b" }, "--max-memory", "64")
    no_crash(r)
    assert.are.equal(1, r.code, r.err)
    assert.are.equal("fine", cjson.decode(r.out))
    assert.matches("call e (encode) failed (runtime): memory limit of 64 MB reached (--max-memory): " ..
                   "cjson.encode of a text over", r.err, 1, true)
  end)

  it("a smaller encode still works under the limit", function()
    local r = run(4000000, { plan = { { _tool = "encode", n = 1000, _outputPath = "†state.a" } },
                             output = "†state.a" }, "--max-memory", "64")
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(1000 * 1027 + 1, cjson.decode(r.out))
  end)
end)

describe("--max-output bounds error messages", function()
  local function journal_size(j)
    local f = assert(io.open(j, "rb"))
    local n = f:seek("end")
    f:close()
    return n
  end

  it("a 1 MB error is cut at 64 KB (the smaller of --max-output and 64 KB), saying so", function()
    local j = os.tmpname()
    os.remove(j)
    local r = run(4000000, { plan = {
      { _id = "r", _tool = "raise", n = 1000000, _outputPath = "†state.a" },
      { _tool = "ok", value = "fine", _outputPath = "†state.b" },
    }, output = "†state.b" }, "--journal", j)
    assert.are.equal(1, r.code)
    assert.are.equal("fine", cjson.decode(r.out))
    assert.matches("(error message cut at 64 KB of 977 KB)", r.err, 1, true)
    assert.is_true(#r.err < 300 * 1024, "stderr: " .. #r.err .. " bytes")
    assert.is_true(journal_size(j) < 200 * 1024, "journal: " .. journal_size(j) .. " bytes")
    os.remove(j)
  end)

  it("and at --max-output when that is smaller", function()
    local r = run(4000000, { plan = { { _id = "r", _tool = "raise", n = 100000, _outputPath = "†state.a" } } },
                  "--max-output", "1")
    assert.are.equal(1, r.code, r.err)
    assert.matches("(error message cut at 1 KB of 98 KB)", r.err, 1, true)
    assert.is_true(#r.err < 10 * 1024, "stderr: " .. #r.err .. " bytes")
  end)

  it("a || alternative gets the cut message", function()
    local r = run(4000000, { plan = {
      { _id = "r", _tool = "raise", n = 1000000, _outputPath = "†state.a || †state.err" },
    }, output = "†state.err" })
    assert.are.equal(0, r.code, r.err)
    local e = cjson.decode(r.out).error
    assert.is_true(#e < 65 * 1024, #e .. " bytes")
    assert.matches("(error message cut at 64 KB of 977 KB)", e, 1, true)
  end)
end)

describe("--max-output's default", function()
  it("is 64 MB: a larger result fails its call", function()
    local r = run(4000000, { plan = {
      { _id = "big", _tool = "big", n = 65 * 1024 * 1024, _outputPath = "†state.a" },
      { _tool = "ok", value = "fine", _outputPath = "†state.b" },
    }, output = "†state.b" })
    no_crash(r)
    assert.are.equal(1, r.code, r.err)
    assert.matches("call big (big) failed (runtime): the result written to state is over 65536 KB " ..
                   "(--max-output 65536)", r.err, 1, true)
  end)
end)

describe("--max-calls' default", function()
  it("is 1,000,000: a plan with more calls is refused before anything runs", function()
    -- 1,000 calls over 1,001 instances: 1,001,000 calls
    local inst, calls = {}, {}
    for i = 1, 1001 do inst[i] = "i" .. i end
    for i = 1, 1000 do calls[i] = { _tool = "ok", value = i, _outputPath = "†state.v" .. i } end
    local r = run(4000000, { instances = inst, plan = calls })
    assert.are.equal(2, r.code, r.err)
    assert.are.equal("", r.out)
    assert.matches("more than --max-calls 1000000", r.err, 1, true)
  end)
end)
