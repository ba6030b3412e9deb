-- spec/cli/escape_spec.lua -- text a plan, a tool or a journal controls (an _id, a tool
-- name, a path, an error message) reaches a terminal escaped: an ANSI sequence in an _id
-- shows as \x1b[31m on run's stderr and in `obelus log`, never as raw control bytes.
local cli = require "support.cli"

local ESC = "\27"

describe("control characters in what the CLI prints", function()
  local plan
  before_each(function()
    -- an _id with a colour and a title-setting sequence, a C1 CSI (U+009B) in another,
    -- a tool name with a screen-clearing sequence, an error message with a bell
    plan = cli.tmpfile('{"plan":[' ..
      '{"_id":"a\\u001b[31mRED","_tool":"fail","_outputPath":"x"},' ..
      '{"_id":"c\\u009b2J\\nfake line","_tool":"sleepy","ms":"\\u0007","_outputPath":"z"}]}')
  end)
  after_each(function() os.remove(plan) end)

  it("escapes them on run's stderr (failed calls, plan problems)", function()
    local r = cli.run { "run", plan, "--tools", "spec/cli/tools" }
    assert.are.equal(2, r.code, r.err) -- ms is not an integer: a plan problem
    assert.is_nil(r.err:find(ESC, 1, true))
    assert.is_nil(r.err:find("\xC2\x9B", 1, true))
    assert.matches("c\\u009b2J", r.err, 1, true)
    local bad = cli.tmpfile('{"plan":[{"_id":"b\\u001b]0;title\\u0007","_tool":"no\\u001b[2J","_outputPath":"y"}]}')
    r = cli.run { "run", bad, "--tools", "spec/cli/tools" }
    os.remove(bad)
    assert.are.equal(2, r.code)
    assert.is_nil(r.err:find(ESC, 1, true))
    assert.is_nil(r.err:find("\7", 1, true))
    assert.matches('call b\\x1b]0;title\\x07 (no\\x1b[2J): no tool named "no\\x1b[2J"', r.err, 1, true)
    local failing = cli.tmpfile('{"plan":[{"_id":"a\\u001b[31mRED","_tool":"fail","_outputPath":"x"}]}')
    r = cli.run { "run", failing, "--tools", "spec/cli/tools" }
    os.remove(failing)
    assert.are.equal(1, r.code)
    assert.is_nil(r.err:find(ESC, 1, true))
    assert.matches("call a\\x1b[31mRED (fail) failed (runtime)", r.err, 1, true)
  end)

  it("escapes them in `obelus log`, one line a message", function()
    local p = cli.tmpfile('{"plan":[{"_id":"a\\u001b[31mRED","_tool":"fail","_outputPath":"x"},' ..
      '{"_id":"c\\u009b2J\\nfake line","_tool":"echo","value":"\\u001b[2J","_outputPath":"z"}]}')
    local j = cli.journal_of { p, "--tools", "spec/cli/tools" }
    local r = cli.run { "log", j }
    os.remove(p)
    os.remove(j)
    assert.are.equal(0, r.code, r.err)
    assert.is_nil(r.out:find(ESC, 1, true))
    assert.is_nil(r.out:find("\xC2\x9B", 1, true))
    assert.matches("a\\x1b[31mRED", r.out, 1, true)
    assert.matches("c\\u009b2J\\x0afake line", r.out, 1, true)
    local lines = 0
    for line in r.out:gmatch("([^\n]*)\n") do
      if not line:match("^  ") and not line:match("^calls, from") then lines = lines + 1 end
    end
    assert.are.equal(4, lines, r.out) -- the plan, an output, an error, the summary (and
    -- the calls, indented, each on one line too)
    assert.matches("\n  a\\x1b[31mRED ", r.out, 1, true)
  end)

  it("escapes the plan's file name in check's \"ok\" line", function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p '" .. dir .. "'")
    local name = dir .. "/a" .. ESC .. "[2Jb.json"
    local f = assert(io.open(name, "w"))
    f:write('{"plan":[{"_tool":"echo","value":1,"_outputPath":"x"}]}')
    f:close()
    local r = cli.run { "check", name, "--tools", "spec/cli/tools" }
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal(0, r.code, r.err)
    assert.is_nil(r.out:find(ESC, 1, true))
    assert.matches("a\\x1b[2Jb.json: ok, 1 call, 0 dependencies", r.out, 1, true)
  end)
end)
