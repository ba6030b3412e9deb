-- journal_read_spec.lua -- how `log`, `resolve` and `graph --journal` read a journal
-- that holds records ({"journal": ...} lines, written for `resume`) and a torn last
-- line (its writer died mid-line): records are skipped, so the output and every
-- --at N (counted in messages) are those of the messages alone; a torn last line is
-- ignored, parseable or not, with one warning naming file and line; any other bad
-- line is still an error naming file and line, exit 2.
local cli = require "support.cli"

local WEATHER = "plans/weather/plan.json"
local DAGGER = "\u{2020}"

local function lines_of(path)
  local t = {}
  for line in io.lines(path) do t[#t + 1] = line end
  return t
end

-- a real run's journal (London: 6 messages), once
local plain
local function london()
  if not plain then
    plain = os.tmpname()
    local r = cli.run { "run", WEATHER, "--tools", "plans/weather/tools", "--input", '{"city":"London"}',
                        "--journal", plain }
    assert(r.code == 0, r.err)
  end
  return plain
end

-- the same journal with a record before and after every message, and a tail
local function with_records(tail)
  local out = {}
  for i, line in ipairs(lines_of(london())) do
    out[#out + 1] = string.format('{"journal":"start","id":"#%d","attempt":1}', i)
    out[#out + 1] = line
    out[#out + 1] = string.format('{"journal":"settled","id":"#%d","state":"done"}', i)
  end
  return cli.tmpfile(table.concat(out, "\n") .. "\n" .. (tail or ""), ".jsonl")
end

-- log's output without its calls (they come from the records, which these tests add
-- and take away): the messages' lines and the last line
local function messages_part(out)
  return (out:gsub("\ncalls, from the run's first start:\n.-\n([^\n]*\n)$", "\n%1"))
end

local function torn_warning(cmd, file, line)
  return string.format("obelus %s: %s:%d: the last line is torn (the process died while writing it); ignored\n",
    cmd, file, line)
end

describe("reading a journal with records", function()
  it("log prints the messages only, numbered as without the records", function()
    local a, b = cli.run { "log", london() }, cli.run { "log", with_records() }
    assert.are.equal(0, b.code, b.err)
    assert.are.equal("", b.err)
    assert.are.equal(messages_part(a.out), messages_part(b.out))
    assert.matches("6 messages", b.out, 1, true)
  end)

  it("--at N counts messages, not records (log and resolve)", function()
    local j = with_records()
    for n = 0, 6 do
      local a, b = cli.run { "log", london(), "--at", n }, cli.run { "log", j, "--at", n }
      assert.are.equal(0, b.code, b.err)
      assert.are.equal(a.out, b.out)
      local ra = cli.run { "resolve", london(), DAGGER .. "state", "--at", n }
      local rb = cli.run { "resolve", j, DAGGER .. "state", "--at", n }
      assert.are.equal(ra.code, rb.code)
      assert.are.equal(ra.out, rb.out)
    end
    local r = cli.run { "log", j, "--at", "7" }
    assert.are.equal(2, r.code)
    assert.matches("holds 6 messages", r.err, 1, true)
  end)

  it("graph --journal colours the calls as without the records", function()
    local a = cli.run { "graph", WEATHER, "--journal", london() }
    local b = cli.run { "graph", WEATHER, "--journal", with_records() }
    assert.are.equal(0, b.code, b.err)
    assert.are.equal("", b.err)
    assert.are.equal(a.out, b.out)
  end)
end)

describe("reading a journal with a torn last line", function()
  local half = '{"type":"data","kind":"state","data":{"rainy":{"cel'
  -- a whole message, but without its '\n': its writer died before the end of the line
  local whole = '{"type":"data","kind":"state","data":{"answer":"changed"},"_path":"answer"}'

  it("log ignores it and says so once, naming file and line", function()
    local j = with_records(half)
    local r = cli.run { "log", j }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(torn_warning("log", j, #lines_of(j)), r.err)
    assert.are.equal(messages_part(cli.run({ "log", london() }).out), messages_part(r.out))
  end)

  it("resolve ignores it even when it parses", function()
    local j = with_records(whole)
    local r = cli.run { "resolve", j, DAGGER .. "state.answer" }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal('"Today: rainy in London, 12°C: a film at the cinema."\n', r.out)
    assert.are.equal(torn_warning("resolve", j, #lines_of(j)), r.err)
    -- the same line with its '\n' is a message like any other
    local ok = with_records(whole .. "\n")
    r = cli.run { "resolve", ok, DAGGER .. "state.answer" }
    assert.are.equal('"changed"\n', r.out)
    assert.are.equal("", r.err)
  end)

  it("graph --journal ignores it and says so", function()
    local j = with_records(half)
    local r = cli.run { "graph", WEATHER, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(torn_warning("graph", j, #lines_of(j)), r.err)
    assert.are.equal(cli.run({ "graph", WEATHER, "--journal", london() }).out, r.out)
  end)

  it("a journal that is one torn line holds no messages", function()
    local j = cli.tmpfile('{"type":"plan","plan":[', ".jsonl")
    local r = cli.run { "log", j }
    assert.are.equal(0, r.code)
    assert.are.equal(torn_warning("log", j, 1) .. "obelus log: " .. j .. " holds no messages\n", r.err)
  end)

  it("a malformed line that ends with its newline is still an error, exit 2", function()
    local j = cli.tmpfile('{"type":"plan","plan":[]}\n{"journal":"start","id":"#0"}\n{"oops": \n'
      .. '{"type":"state","data":{}}\n{"type":"sta', ".jsonl")
    local pat = j:gsub("%p", "%%%0") .. ":3: "
    local r = cli.run { "log", j }
    assert.are.equal(2, r.code)
    assert.matches("^obelus log: " .. pat, r.err)
    r = cli.run { "resolve", j, DAGGER .. "state" }
    assert.are.equal(2, r.code)
    assert.matches("^obelus resolve: " .. pat, r.err)
    r = cli.run { "graph", WEATHER, "--journal", j }
    assert.are.equal(2, r.code)
    assert.matches("^obelus graph: " .. pat, r.err)
  end)
end)
