-- resolve_spec.lua -- `obelus resolve FILE EXPR [--at N] [--instance X]` (plan-format §12):
-- what a reference reads over a log, as JSON; exit 0 present, 1 absent, 2 malformed.
local cli = require "support.cli"

local seeds = cli.tmpfile([[
[
  {"type": "data", "data": {"user": {"name": "Alex", "status": "active"}}},
  {"type": "data", "data": {"user": {"status": "inactive"}},
   "_call": {"_tool": "updateUserStatus", "newStatus": "inactive", "_outputPath": "†data.user.status"},
   "_date": "2025-01-01T12:00:00.000Z"}
]
]], ".json")

local journal = cli.tmpfile(table.concat({
  '{"type":"plan","plan":[{"_tool":"t","_outputPath":"†state.out"}]}',
  '{"type":"input","data":{"lang":"en","cfg":{"a":1}}}',
  '',
  '{"type":"input","data":{"lang":"fr"},"_instance":"fr"}',
  '{"type":"data","kind":"state","data":{"out":[1]},"_path":"out","_outputMethod":"set","_date":"2025-01-01T00:00:00.000Z"}',
  '{"type":"data","kind":"state","data":{"out":2},"_path":"out","_outputMethod":"push","_date":"2025-01-01T00:00:01.000Z"}',
}, "\n") .. "\n", ".jsonl")

describe("obelus resolve", function()
  it("reads the seeds' worked example as the composed view", function()
    local r = cli.run { "resolve", seeds, "†data.user.status" }
    assert.are.equal(0, r.code)
    assert.are.equal('"inactive"\n', r.out)
    assert.are.equal('"Alex"\n', cli.run { "resolve", seeds, "†data.user.name" }.out)
    assert.are.equal('{"name":"Alex","status":"inactive"}\n', cli.run { "resolve", seeds, "†data.user" }.out)
  end)

  it("prints nothing and exits 1 when the value is absent", function()
    local r = cli.run { "resolve", seeds, "†data.user.email" }
    assert.are.equal(1, r.code)
    assert.are.equal("", r.out)
    assert.are.equal(1, cli.run { "resolve", seeds, "†nokind" }.code)
  end)

  it("evaluates || and && expressions", function()
    assert.are.equal('"Alex"\n', cli.run { "resolve", seeds, "†data.user.email || †data.user.name" }.out)
    assert.are.equal(1, cli.run { "resolve", seeds, "†data.user.name && †data.user.email" }.code)
    assert.are.equal('"inactive"\n', cli.run { "resolve", seeds, " †data.user.name&&†data.user.status " }.out)
  end)

  it("reads as of the first N messages with --at", function()
    assert.are.equal('"active"\n', cli.run { "resolve", seeds, "†data.user.status", "--at", "1" }.out)
    assert.are.equal('"inactive"\n', cli.run { "resolve", seeds, "--at", "2", "†data.user.status" }.out)
    assert.are.equal(1, cli.run { "resolve", seeds, "†data.user.status", "--at", "0" }.code)
  end)

  it("reads journals (JSON Lines, plan line first, blank lines skipped)", function()
    assert.are.equal('[1,2]\n', cli.run { "resolve", journal, "†state.out" }.out)
    assert.are.equal('[1]\n', cli.run { "resolve", journal, "†state.out", "--at", "4" }.out)
    assert.are.equal(1, cli.run { "resolve", journal, "†state.out", "--at", "3" }.code)
  end)

  it("reads the log from standard input when FILE is -", function()
    local r = cli.run { "resolve", "-", "†state.a", stdin = '{"type":"state","data":{"a":[1,2]}}\n' }
    assert.are.equal(0, r.code)
    assert.are.equal("[1,2]\n", r.out)
  end)

  it("reads an instance's view with --instance", function()
    assert.are.equal('"fr"\n', cli.run { "resolve", journal, "†input.lang", "--instance", "fr" }.out)
    assert.are.equal('"en"\n', cli.run { "resolve", journal, "†input.lang", "--instance", "de" }.out)
    assert.are.equal('{"lang":"fr","cfg":{"a":1}}\n', cli.run { "resolve", journal, "†input", "--instance", "fr" }.out)
    assert.are.equal('"en"\n', cli.run { "resolve", journal, "†input.lang" }.out)
  end)

  it("exits 2 with the character position for a malformed expression", function()
    local r = cli.run { "resolve", seeds, "†data.user..x" }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.matches("character 11", r.err, 1, true)
    local r2 = cli.run { "resolve", seeds, "†data.a | †data.b" }
    assert.are.equal(2, r2.code)
    assert.matches("character 8", r2.err, 1, true)
    assert.are.equal(2, cli.run { "resolve", seeds, "data.user" }.code)
  end)

  it("exits 2 naming the file and line for a bad file", function()
    local bad = cli.tmpfile('{"type":"state","data":{"a":1}}\n{"type":"state","data":\n', ".jsonl")
    local r = cli.run { "resolve", bad, "†state.a" }
    assert.are.equal(2, r.code)
    assert.matches(bad .. ":2:", r.err, 1, true)
    local r2 = cli.run { "resolve", "/nonexistent/log.json", "†state.a" }
    assert.are.equal(2, r2.code)
    assert.matches("/nonexistent/log.json", r2.err, 1, true)
    local badmsg = cli.tmpfile('[{"type":"state","data":{"a":1}}, {"data":{"a":1},"_path":"b"}]', ".json")
    local r3 = cli.run { "resolve", badmsg, "†state.a" }
    assert.are.equal(2, r3.code)
    assert.matches("[1]", r3.err, 1, true)
    assert.matches("holds nothing at its path", r3.err, 1, true)
  end)

  it("exits 2 on usage errors and answers --help", function()
    assert.are.equal(2, cli.run { "resolve", seeds }.code)
    assert.are.equal(2, cli.run { "resolve", seeds, "†data", "--at", "x" }.code)
    assert.are.equal(2, cli.run { "resolve", seeds, "†data", "--bogus" }.code)
    local h = cli.run { "resolve", "--help" }
    assert.are.equal(0, h.code)
    assert.matches("usage: obelus resolve", h.out, 1, true)
  end)

  it("keeps integers, reals, unicode and key order exact", function()
    local f = cli.tmpfile('[{"type":"state","data":{"z":1,"a":1.0,"s":"\\u2020 日本 \\ud83d\\ude00","big":9007199254740993}}]', ".json")
    assert.are.equal('{"z":1,"a":1.0,"s":"† 日本 😀","big":9007199254740993}\n', cli.run { "resolve", f, "†state" }.out)
  end)
end)
