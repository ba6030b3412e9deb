-- files_hostile_spec.lua -- the files a run writes never destroy another (issue 26,
-- item 1): a --journal or --events that is the plan, a tool file, an --input file, a
-- delegated plan, the other of the two, stdout, or a link to any of them is refused
-- (exit 2) before anything runs; an existing journal is never truncated (--overwrite
-- replaces it); a journal is locked by its writer; a journal that cannot be written
-- (a file-size limit, a full tmpfs) stops the run with exit 4, and a resume after it
-- is exact; stdout and --events that cannot be written exit 4; resume refuses an
-- inconsistent journal, naming the line. No test here depends on timing: processes
-- hand over through files they create (a marker, a release file), every wait is
-- bounded by `timeout`.
local cli = require "support.cli"
local cjson = require "cjson"

local q = cli.quote

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function lines(path)
  local n = 0
  local f = io.open(path, "rb")
  if not f then return 0 end
  for _ in f:lines() do n = n + 1 end
  f:close()
  return n
end

local function count(text, pat)
  local n = 0
  for _ in text:gmatch(pat) do n = n + 1 end
  return n
end

-- a folder of its own (the plans root, the tools), under the specs' temporary folder
local function folder()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. q(d)))
  return d
end

-- "mark" appends its call id to $MARKS (each execution of a tool, for real), then
-- returns call.v or call.pad bytes; "hold" writes $HELD and waits for $RELEASE.
local TOOLS = [[
local obelus = require "obelus"
local function mark(ctx)
  local f = assert(io.open(os.getenv("MARKS"), "a"))
  f:write(ctx.id, "\n")
  f:close()
end
return {
  { name = "mark", run = function(call, ctx)
      mark(ctx)
      return call.pad and string.rep("x", call.pad) or call.v
    end },
  { name = "hold", run = function(call, ctx)
      mark(ctx)
      local f = assert(io.open(os.getenv("HELD"), "w")); f:close()
      while not io.open(os.getenv("RELEASE"), "r") do obelus.sleep(20) end
      return 1
    end },
}
]]

local function setup()
  local d = folder()
  write(d .. "/tools.lua", TOOLS)
  write(d .. "/plan.json", [[{"plan":[{"_tool":"mark","v":1,"_outputPath":"†state.a"},
    {"_tool":"mark","v":"†state.a","_outputPath":"†state.b"}]}]])
  return d
end

local function run_in(d, args, env)
  local parts = {}
  for i, a in ipairs(args) do parts[i] = q(a) end
  local out, err = d .. "/stdout", d .. "/stderr"
  local cmd = ("cd %s && %s MARKS=%s timeout -s KILL 30 %s %s >%s 2>%s"):format(
    q(d), env or "", q(d .. "/marks"), q(cli.bin:sub(1, 1) == "/" and cli.bin or
    os.getenv("PWD") .. "/" .. cli.bin), table.concat(parts, " "), q(out), q(err))
  local _, how, code = os.execute(cmd)
  return { code = how == "exit" and code or 128 + code, out = cli.slurp(out), err = cli.slurp(err) }
end

describe("a journal or events file that is a file the run reads", function()
  local cases = {
    { "the plan", function() return "plan.json" end, "the plan plan.json" },
    { "a symbolic link to the plan", function(d)
        assert(os.execute("ln -s plan.json " .. q(d .. "/link.json"))); return "link.json" end,
      "the plan plan.json (the same file)" },
    { "a hard link to the plan", function(d)
        assert(os.execute("ln " .. q(d .. "/plan.json") .. " " .. q(d .. "/hard.json")))
        return "hard.json" end, "the plan plan.json (the same file)" },
    { "the tool file", function() return "tools.lua" end, "tools.lua" },
  }
  for _, c in ipairs(cases) do
    for _, opt in ipairs { "--journal", "--events" } do
      it(opt .. " that is " .. c[1] .. " is refused, naming both, and nothing runs", function()
        local d = setup()
        local target = c[2](d)
        local before = cli.slurp(d .. "/plan.json") .. cli.slurp(d .. "/tools.lua")
        local r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", opt, target })
        assert.are.equal(2, r.code)
        assert.matches(opt .. " " .. target .. " is ", r.err, 1, true)
        assert.matches(c[3], r.err, 1, true)
        assert.are.equal("", r.out)
        assert.are.equal(before, cli.slurp(d .. "/plan.json") .. cli.slurp(d .. "/tools.lua"))
        assert.is_false(exists(d .. "/marks"))
      end)
    end
  end

  it("a file of a --tools folder, an --input @FILE and a delegated plan are refused", function()
    local d = setup()
    assert(os.execute("mkdir " .. q(d .. "/tools") .. " && cp " .. q(d .. "/tools.lua") .. " " ..
                      q(d .. "/tools/") .. " && echo notes > " .. q(d .. "/tools/README")))
    write(d .. "/in.json", '{"x":1}')
    write(d .. "/sub.json", [[{"plan":[{"_tool":"mark","v":2,"_outputPath":"†state.s"}]}]])
    write(d .. "/outer.json", [[{"plan":[{"_delegate":"sub.json","_outputPath":"†state.d"}]}]])
    local r = run_in(d, { "run", "plan.json", "--tools", "tools", "--journal", "tools/README" })
    assert.are.equal(2, r.code)
    assert.matches("a file of the --tools folder tools/README", r.err, 1, true)
    r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", "--input", "@in.json",
                    "--events", "in.json" })
    assert.are.equal(2, r.code)
    assert.matches("--events in.json is the --input file in.json", r.err, 1, true)
    r = run_in(d, { "run", "outer.json", "--tools", "tools.lua", "--journal", "sub.json" })
    assert.are.equal(2, r.code)
    assert.matches("--journal sub.json is the delegated plan", r.err, 1, true)
    assert.are.equal("notes\n", cli.slurp(d .. "/tools/README"))
    assert.are.equal('{"x":1}', cli.slurp(d .. "/in.json"))
    assert.matches('"_tool":"mark"', cli.slurp(d .. "/sub.json"), 1, true)
    assert.is_false(exists(d .. "/marks"))
  end)

  it("--journal X --events X, and a journal that is stdout, are refused", function()
    local d = setup()
    local r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", "--journal", "x",
                          "--events", "x" })
    assert.are.equal(2, r.code)
    assert.matches("--events x is --journal x", r.err, 1, true)
    assert.is_false(exists(d .. "/x"))
    -- stdout redirected to the journal's file
    local _, _, code = os.execute(("cd %s && MARKS=marks %s run plan.json --tools tools.lua " ..
      "--journal out.jsonl >out.jsonl 2>err"):format(q(d), q(cli.bin:sub(1, 1) == "/" and cli.bin
      or os.getenv("PWD") .. "/" .. cli.bin)))
    assert.are.equal(2, code)
    assert.matches("--journal out.jsonl is the file of stdout", cli.slurp(d .. "/err"), 1, true)
  end)
end)

describe("an existing journal", function()
  it("is never truncated: run and loop refuse it, naming resume and --overwrite", function()
    local d = setup()
    local r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", "--journal", "j" })
    assert.are.equal(0, r.code)
    local before = cli.slurp(d .. "/j")
    assert.matches('"journal":"end"', before, 1, true)
    r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", "--journal", "j" })
    assert.are.equal(2, r.code)
    assert.matches("`obelus resume j`", r.err, 1, true)
    assert.matches("--overwrite", r.err, 1, true)
    assert.are.equal(before, cli.slurp(d .. "/j"))
    write(d .. "/planner.lua", "return function() return { output = 1 } end")
    r = run_in(d, { "loop", "plan.json", "--tools", "tools.lua", "--planner", "planner.lua",
                    "--journal", "j" })
    assert.are.equal(2, r.code)
    assert.are.equal(before, cli.slurp(d .. "/j"))
    assert.are.equal(2, lines(d .. "/marks")) -- the first run's two calls, nothing since
  end)

  it("is replaced whole with --overwrite; an empty file is simply taken", function()
    local d = setup()
    write(d .. "/j", "precious\n")
    local r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", "--journal", "j",
                          "--overwrite" })
    assert.are.equal(0, r.code)
    local first = io.open(d .. "/j"):read("l")
    assert.are.equal("plan", cjson.decode(first).type)
    write(d .. "/e", "")
    r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", "--journal", "e" })
    assert.are.equal(0, r.code)
    assert.matches('"journal":"end"', cli.slurp(d .. "/e"), 1, true)
    -- nothing written aside is left behind
    local ls = io.popen("ls -A " .. q(d)):read("a")
    assert.is_nil(ls:find("^%.", 1) or ls:find("\n%.", 1))
  end)
end)

describe("a journal being written", function()
  it("is locked: resume and run --overwrite are refused with the writer's pid; log reads it",
    function()
      local d = setup()
      write(d .. "/hold.json", [[{"plan":[{"_tool":"hold","_outputPath":"†state.h"}]}]])
      local bin = cli.bin:sub(1, 1) == "/" and cli.bin or os.getenv("PWD") .. "/" .. cli.bin
      -- the writer, in the background: its exit status lands in rc
      assert(os.execute(("cd %s && (MARKS=marks HELD=held RELEASE=release timeout -s KILL 60 %s " ..
        "run hold.json --tools tools.lua --journal j >out 2>err; echo $? >rc) &"):format(q(d),
        q(bin))))
      -- wait (bounded) until the tool holds: the journal is then in place and locked
      assert(os.execute(("cd %s && timeout 30 sh -c 'until [ -e held ]; do sleep 0.05; done'")
        :format(q(d))))
      assert.are.equal("#0\n", cli.slurp(d .. "/marks"))
      local r = run_in(d, { "resume", "j" })
      assert.are.equal(2, r.code)
      assert.matches("j is being written by another obelus %(pid %d+%)", r.err)
      r = run_in(d, { "run", "hold.json", "--tools", "tools.lua", "--journal", "j", "--overwrite" })
      assert.are.equal(2, r.code)
      assert.matches("is being written by another obelus", r.err, 1, true)
      r = run_in(d, { "log", "j" })
      assert.are.equal(0, r.code)
      write(d .. "/release", "")
      assert(os.execute(("cd %s && timeout 30 sh -c 'until [ -s rc ]; do sleep 0.05; done'")
        :format(q(d))))
      assert.are.equal("0\n", cli.slurp(d .. "/rc"))
      assert.are.equal(1, lines(d .. "/marks")) -- the tool ran once
      r = run_in(d, { "resume", "j" }) -- the writer has gone: its lock too
      assert.are.equal(0, r.code)
    end)
end)

-- 60 calls of 3 KB each, one at a time: about 190 KB of journal
local function big_plan(d)
  local calls = {}
  for i = 0, 59 do
    calls[#calls + 1] = ('{"_tool":"mark","pad":3000,"_outputPath":"†state.c%d"}'):format(i)
  end
  write(d .. "/big.json", '{"plan":[' .. table.concat(calls, ",") ..
    '],"output":{"last":"†state.c59"}}')
end

-- After a run stopped by a journal that could not be written: every tool that ran has
-- its start record in the file (write-ahead), resume re-runs exactly the calls whose
-- settled record is missing and says so, and its output is the uninterrupted run's.
local function check_stopped_then_resumed(d, journal, r)
  assert.are.equal(4, r.code)
  assert.are.equal("", r.out)
  assert.matches(journal .. ": cannot write the journal", r.err, 1, true)
  assert.matches("`obelus resume " .. journal .. "`", r.err, 1, true)
  local text = cli.slurp(d .. "/" .. journal)
  local starts, settled = count(text, '"journal":"start"'), count(text, '"journal":"settled"')
  local ran = lines(d .. "/marks")
  assert.is_true(ran < 60)
  assert.are.equal(ran, starts) -- no tool ran without its start record on disk
  return starts, settled, ran
end

local function resume_exact(d, journal, starts, settled, ran)
  local r = run_in(d, { "resume", journal })
  assert.are.equal(0, r.code, r.err)
  assert.are.equal(string.rep("x", 3000), cjson.decode(r.out).last)
  local reruns = count(r.err, "had started %(attempt 1%) and did not settle: it runs again")
  assert.are.equal(starts - settled, reruns) -- the re-runs reported are those that happen
  assert.are.equal(60 + reruns, lines(d .. "/marks"))
  assert.are.equal(ran + (60 - settled), lines(d .. "/marks"))
end

describe("a journal that cannot be written", function()
  it("a file-size limit (EFBIG): the run stops, exit 4, and a resume is exact", function()
    local d = setup()
    big_plan(d)
    local r = run_in(d, { "run", "big.json", "--tools", "tools.lua", "--journal", "j",
                          "--concurrency", "1" }, "ulimit -f 64;")
    local starts, settled, ran = check_stopped_then_resumed(d, "j", r)
    assert.matches("File too large", r.err, 1, true)
    resume_exact(d, "j", starts, settled, ran)
  end)

  it("a full disk (a 64 KB tmpfs): the run stops, exit 4, and a resume is exact", function()
    local d = setup()
    big_plan(d)
    assert(os.execute("mkdir " .. q(d .. "/mnt")))
    if not os.execute("mount -t tmpfs -o size=64k tmpfs " .. q(d .. "/mnt") .. " 2>/dev/null") then
      return pending("cannot mount a tmpfs here (not root?): the full disk is not tried")
    end
    finally(function() os.execute("umount " .. q(d .. "/mnt")) end)
    local r = run_in(d, { "run", "big.json", "--tools", "tools.lua", "--journal", "mnt/j",
                          "--concurrency", "1" })
    local starts, settled, ran = check_stopped_then_resumed(d, "mnt/j", r)
    assert.matches("No space left on device", r.err, 1, true)
    -- room again: the journal moved to a bigger one, resumed there
    assert(os.execute("cp " .. q(d .. "/mnt/j") .. " " .. q(d .. "/j2")))
    resume_exact(d, "j2", starts, settled, ran)
  end)
end)

describe("a journal that cannot be written, on threads", function()
  it("stops every part: no tool runs without its start record; a resume is exact", function()
    local d = setup()
    local calls = {}
    for i = 0, 19 do
      calls[#calls + 1] = ('{"_tool":"mark","pad":3000,"_outputPath":"†state.c%d"}'):format(i)
    end
    write(d .. "/inst.json", '{"instances":["a","b","c","d"],"plan":[' ..
      table.concat(calls, ",") .. '],"output":{"last":"†state.c19"}}')
    local r = run_in(d, { "run", "inst.json", "--tools", "tools.lua", "--journal", "j",
                          "--threads", "2", "--concurrency", "1" }, "ulimit -f 64;")
    assert.are.equal(4, r.code)
    assert.matches("j: cannot write the journal: File too large", r.err, 1, true)
    local text = cli.slurp(d .. "/j")
    local starts, settled = count(text, '"journal":"start"'), count(text, '"journal":"settled"')
    local ran = lines(d .. "/marks")
    assert.is_true(ran < 80)
    assert.are.equal(ran, starts)
    r = run_in(d, { "resume", "j" })
    assert.are.equal(0, r.code, r.err)
    local reruns = count(r.err, "had started %(attempt 1%) and did not settle: it runs again")
    assert.are.equal(starts - settled, reruns)
    assert.are.equal(80 + reruns, lines(d .. "/marks"))
  end)
end)

describe("output that cannot be written", function()
  it("stdout on /dev/full exits 4, saying so", function()
    local d = setup()
    local bin = cli.bin:sub(1, 1) == "/" and cli.bin or os.getenv("PWD") .. "/" .. cli.bin
    local _, _, code = os.execute(("cd %s && MARKS=marks %s run plan.json --tools tools.lua " ..
      ">/dev/full 2>err"):format(q(d), q(bin)))
    assert.are.equal(4, code)
    assert.matches("cannot write the output to stdout: No space left on device",
      cli.slurp(d .. "/err"), 1, true)
  end)

  it("--events /dev/full exits 4, saying so", function()
    local d = setup()
    local r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", "--events", "/dev/full" })
    assert.are.equal(4, r.code)
    assert.matches("cannot write the events to /dev/full: No space left on device", r.err, 1, true)
  end)
end)

describe("resume checks the journal's consistency", function()
  local function journal_of(d)
    local r = run_in(d, { "run", "plan.json", "--tools", "tools.lua", "--journal", "j" })
    assert.are.equal(0, r.code)
    local t = {}
    for l in io.lines(d .. "/j") do t[#t + 1] = l end
    return t
  end
  local function edited(d, t, drop, fn)
    local out = {}
    for i, l in ipairs(t) do
      if not (drop and l:find(drop, 1, true)) then out[#out + 1] = fn and fn(l, i) or l end
    end
    write(d .. "/e", table.concat(out, "\n") .. "\n")
    return run_in(d, { "resume", "e" })
  end

  it("refuses a journal with a settled record deleted, naming the line", function()
    local d = setup()
    local t = journal_of(d)
    for _, keep_end in ipairs { true, false } do
      local r = edited(d, t, '"settled","id":"#0"', function(l)
        if not keep_end and l:find('"journal":"end"', 1, true) then return "" end
        return l
      end)
      assert.are.equal(2, r.code)
      assert.are.equal("", r.out)
      assert.matches("e:5: inconsistent journal", r.err, 1, true)
    end
  end)

  it("refuses an output message deleted, and a call id not in the plan", function()
    local d = setup()
    local t = journal_of(d)
    local r = edited(d, t, '"data":{"a":1}')
    assert.are.equal(2, r.code)
    assert.matches("e:4: inconsistent journal: call #0 settled done, but its output message",
      r.err, 1, true)
    r = edited(d, t, nil, function(l) return (l:gsub('"id":"#1"', '"id":"#7"')) end)
    assert.are.equal(2, r.code)
    assert.matches("e:6: inconsistent journal: its record names call #7, which is not in the plan",
      r.err, 1, true)
    r = run_in(d, { "resume", "j" }) -- the journal as written is consistent
    assert.are.equal(0, r.code)
  end)
end)
