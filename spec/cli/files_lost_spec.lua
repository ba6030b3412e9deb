-- files_lost_spec.lua -- what the attack list (hostile/cases/files.lua) found still lost
-- or wrong (issue 26): a journal or events file that is the plan or the --input read
-- from stdin, `report J -o J`, log/resolve/report that cannot write their output, a
-- torn last line under report, and resume's consistency check over a failed call
-- without its error message and over delegated runs, before anything runs. No test
-- here depends on timing: every command is bounded by `timeout`.
local cli = require "support.cli"
local fs = require "support.fs"
local write, exists, folder = fs.write, fs.exists, fs.tmpdir

local q = cli.quote
local bin = cli.bin:sub(1, 1) == "/" and cli.bin or os.getenv("PWD") .. "/" .. cli.bin




-- sh runs in d with $OB the binary; stdout and stderr kept
local function sh(d, script)
  local cmd = ("cd %s && OB=%s MARKS=%s timeout -s KILL 30 sh -c %s >%s 2>%s"):format(
    q(d), q(bin), q(d .. "/marks"), q(script), q(d .. "/stdout"), q(d .. "/stderr"))
  local _, how, code = os.execute(cmd)
  return { code = how == "exit" and code or 128 + code, out = cli.slurp(d .. "/stdout"),
           err = cli.slurp(d .. "/stderr") }
end

local TOOLS = [[
return {
  { name = "mark", run = function(call, ctx)
      local f = assert(io.open(os.getenv("MARKS"), "a"))
      f:write(ctx.id, "\n")
      f:close()
      return call.v
    end },
}
]]

local CHAIN = [[{"plan":[{"_tool":"mark","_id":"a","v":1,"_outputPath":"†state.a"},
 {"_tool":"mark","_id":"b","v":"†state.a","_outputPath":"†state.b"},
 {"_tool":"mark","_id":"c","v":"†state.b","_outputPath":"†state.c"}],"output":"†state.c"}]]

local function setup()
  local d = folder()
  write(d .. "/tools.lua", TOOLS)
  write(d .. "/p.json", CHAIN)
  return d
end

-- a finished run's journal j.jsonl, marks cleared
local function finished(d)
  local r = sh(d, '"$OB" run p.json --tools tools.lua --journal j.jsonl && rm -f marks')
  assert.are.equal(0, r.code, r.err)
end

describe("a file read from stdin", function()
  it("is not overwritten by --journal or --events when it is the plan (run -)", function()
    local d = setup()
    for _, opt in ipairs { "--journal p.json --overwrite", "--events p.json" } do
      local r = sh(d, '"$OB" run - --tools tools.lua ' .. opt .. ' < p.json')
      assert.are.equal(2, r.code)
      assert.matches(opt:match("^%S+") .. " p.json is the file of stdin (the plan read from it)",
        r.err, 1, true)
      assert.are.equal(CHAIN, cli.slurp(d .. "/p.json"))
      assert.is_false(exists(d .. "/marks"))
    end
  end)

  it("is not overwritten by --journal when it is the --input @-", function()
    local d = setup()
    write(d .. "/in.json", '{"k":1}')
    local r = sh(d, '"$OB" run p.json --tools tools.lua --input @- --journal in.json ' ..
                    '--overwrite < in.json')
    assert.are.equal(2, r.code)
    assert.matches("--journal in.json is the file of stdin (the --input @- read from it)",
      r.err, 1, true)
    assert.are.equal('{"k":1}', cli.slurp(d .. "/in.json"))
    assert.is_false(exists(d .. "/marks"))
  end)

  it("a stdin from another file is no clash", function()
    local d = setup()
    local r = sh(d, '"$OB" run - --tools tools.lua --journal j.jsonl < p.json')
    assert.are.equal(0, r.code, r.err)
  end)
end)

describe("a module a tool file requires, under the --tools folder", function()
  it("is not overwritten by --journal --overwrite", function()
    local d = setup()
    assert(os.execute("mkdir -p " .. q(d .. "/tools/lib")))
    write(d .. "/tools/lib/h.lua", "return { x = 1 }\n")
    write(d .. "/tools/t.lua", 'local h = require "lib.h"\n' .. TOOLS)
    local r = sh(d, '"$OB" run p.json --tools tools --journal tools/lib/h.lua --overwrite')
    assert.are.equal(2, r.code)
    assert.matches("--journal tools/lib/h.lua is a file of the --tools folder", r.err, 1, true)
    assert.are.equal("return { x = 1 }\n", cli.slurp(d .. "/tools/lib/h.lua"))
    assert.is_false(exists(d .. "/marks"))
  end)

  it("a journal in a subfolder of --tools . is no module: --overwrite replaces it", function()
    local d = setup()
    assert(os.execute("mkdir -p " .. q(d .. "/out")))
    write(d .. "/out/run.jsonl", "old\n")
    local r = sh(d, '"$OB" run p.json --tools . --journal out/run.jsonl --overwrite')
    assert.are.equal(0, r.code, r.err)
    assert.matches('"type":"plan"', cli.slurp(d .. "/out/run.jsonl"), 1, true)
  end)
end)

describe("report", function()
  it("refuses -o the journal itself (another name of it too), leaving it whole", function()
    local d = setup()
    finished(d)
    local before = cli.slurp(d .. "/j.jsonl")
    assert(os.execute("ln -s j.jsonl " .. q(d .. "/l.html")))
    for _, o in ipairs { "j.jsonl", "l.html" } do
      local r = sh(d, '"$OB" report j.jsonl -o ' .. o)
      assert.are.equal(2, r.code)
      assert.matches("-o " .. o .. " is the journal j.jsonl", r.err, 1, true)
      assert.are.equal(before, cli.slurp(d .. "/j.jsonl"))
    end
  end)

  it("says a torn last line and draws the rest", function()
    local d = setup()
    finished(d)
    local r = sh(d, 'head -c -4 j.jsonl > t && mv t j.jsonl && "$OB" report j.jsonl -o r.html')
    assert.are.equal(0, r.code, r.err)
    assert.matches("j.jsonl:12: the last line is torn", r.err, 1, true)
    assert.matches("<!doctype html>", cli.slurp(d .. "/r.html"), 1, true)
  end)
end)

describe("a reader's output that cannot be written", function()
  it("log, resolve, report -o /dev/full exit 4, saying so", function()
    local d = setup()
    finished(d)
    for _, c in ipairs { '"$OB" log j.jsonl > /dev/full', "\"$OB\" resolve j.jsonl '†state.c' > /dev/full",
                         '"$OB" report j.jsonl -o /dev/full' } do
      local r = sh(d, c)
      assert.are.equal(4, r.code, c)
      assert.matches("No space left on device", r.err, 1, true)
    end
  end)
end)

describe("resume checks the journal's consistency before anything runs", function()
  it("refuses a call whose state was edited done -> failed (no error message)", function()
    local d = setup()
    finished(d)
    local r = sh(d, [[sed -i '/"settled","id":"b"/s/"done"/"failed"/;/"journal":"end"/d' j.jsonl ]] ..
                    '&& cp j.jsonl before && "$OB" resume j.jsonl')
    assert.are.equal(2, r.code)
    assert.matches("j.jsonl:8: inconsistent journal: call b failed but its error message",
      r.err, 1, true)
    assert.are.equal(cli.slurp(d .. "/before"), cli.slurp(d .. "/j.jsonl"))
    assert.is_false(exists(d .. "/marks"))
  end)

  describe("of a delegated run", function()
    local function deleg()
      local d = folder()
      write(d .. "/tools.lua", TOOLS)
      write(d .. "/d.json", [[{"plan":[{"_tool":"mark","_id":"s1","v":1,"_outputPath":"†state.s1"},
        {"_tool":"mark","_id":"s2","v":"†state.s1","_outputPath":"†state.s2"}],"output":"†state.s2"}]])
      write(d .. "/p.json", [[{"plan":[{"_tool":"mark","_id":"a","v":1,"_outputPath":"†state.a"},
        {"_delegate":"d.json","_id":"del","x":"†state.a","_outputPath":"†state.d"}],
        "output":{"a":"†state.a","d":"†state.d"}}]])
      -- killed inside its delegated plan: the delegating call settled nothing
      local r = sh(d, '"$OB" run p.json --tools tools.lua --journal j.jsonl && rm -f marks && ' ..
        [[sed -i '/"journal":"end"/d;/"settled","id":"del"/d;/"_path":"d"/d' j.jsonl]])
      assert.are.equal(0, r.code, r.err)
      return d
    end

    it("refuses an output message deleted, naming the line", function()
      local d = deleg()
      local r = sh(d, [[sed -i '/"_path":"s2"/d' j.jsonl && cp j.jsonl before && ]] ..
                      '"$OB" resume j.jsonl')
      assert.are.equal(2, r.code)
      assert.matches("j.jsonl:15: inconsistent journal: call s2 of del settled done", r.err, 1, true)
      assert.are.equal(cli.slurp(d .. "/before"), cli.slurp(d .. "/j.jsonl"))
      assert.is_false(exists(d .. "/marks"))
    end)

    it("refuses a record naming a call not in its plan", function()
      local d = deleg()
      local r = sh(d, [[sed -i 's/"id":"s2"/"id":"nope"/' j.jsonl && cp j.jsonl before && ]] ..
                      '"$OB" resume j.jsonl')
      assert.are.equal(2, r.code)
      assert.matches("j.jsonl:14: inconsistent journal: its record names call nope of del",
        r.err, 1, true)
      assert.are.equal(cli.slurp(d .. "/before"), cli.slurp(d .. "/j.jsonl"))
      assert.is_false(exists(d .. "/marks"))
    end)

    it("takes a consistent one up", function()
      local d = deleg()
      local r = sh(d, '"$OB" resume j.jsonl')
      assert.are.equal(0, r.code, r.err)
      assert.is_false(exists(d .. "/marks")) -- s1 and s2 had settled: nothing runs again
    end)
  end)
end)
