-- progress_spec.lua -- the live progress line of `obelus run` (and `loop`) on a
-- terminal: run under a pseudo-terminal (script(1)), it shows the counts, ends with
-- the right ones and is erased before any other output; piped, it is not there.
local cli = require "support.cli"
local cjson = require "cjson"

local has_script = os.execute("command -v script >/dev/null 2>&1")

local PROGRESS = "done (%d+) · running (%d+) · waiting (%d+) · skipped (%d+) · failed (%d+) · ([%d.]+)s"
local ERASE = "\r\27[K"

-- Runs the obelus command line `args` (a shell fragment after the binary) with
-- stdout and stderr on a pseudo-terminal; returns everything the terminal got.
local function on_tty(args, env)
  local out = os.tmpname()
  local cmd = cli.quote(cli.bin) .. " " .. args
  local _, how, code = os.execute(string.format("TERM=xterm %s script -qec %s /dev/null > %s",
    env or "", cli.quote(cmd), out))
  local text = cli.slurp(out)
  os.remove(out)
  assert(not text:find("Sanitizer", 1, true), text) -- the ASan build reports on the terminal
  return text, how == "exit" and code or -1
end

local function sleepy_plan()
  return cli.tmpfile([=[[
    {"_id":"a","_tool":"sleepy","ms":300,"value":1,"_outputPath":"†state.a"},
    {"_id":"b","_tool":"sleepy","ms":150,"value":"†state.a","_outputPath":"†state.b"},
    {"_id":"c","_tool":"sleepy","ms":150,"value":3,"_outputPath":"†state.c"}
  ]]=], ".json")
end

-- every drawing of the line, in order: { done=, running=, waiting=, skipped=, failed=, s=, stop= }
local function drawings(text)
  text = text:gsub("\27%[%d+m", "") -- the failed count may be red
  local all, from = {}, 1
  while true do
    local a, b, d, r, w, sk, f, s = text:find(PROGRESS, from)
    if not a then return all, text end
    all[#all + 1] = { done = tonumber(d), running = tonumber(r), waiting = tonumber(w),
                      skipped = tonumber(sk), failed = tonumber(f), s = tonumber(s), start = a, stop = b }
    from = b + 1
  end
end

describe("obelus run: the progress line", function()
  it("is drawn on a terminal while calls run, ends with the final counts and is erased", function()
    if not has_script then return pending("script(1) is not installed") end
    local out, code = on_tty("run " .. sleepy_plan() .. " --tools spec/cli/tools")
    assert.are.equal(0, code, out)
    local d, text = drawings(out)
    assert.is_true(#d >= 3, "expected several drawings in\n" .. out) -- the run takes 450 ms
    assert.is_true(d[1].waiting + d[1].running > 0)
    local last = d[#d]
    assert.are.same({ 3, 0, 0, 0, 0 }, { last.done, last.running, last.waiting, last.skipped, last.failed })
    assert.is_true(last.s >= 0.4, "elapsed " .. last.s)
    for k = 2, #d do assert.is_true(d[k].s >= d[k - 1].s) end
    -- each drawing starts at the line's beginning and clears what was after it
    for _, x in ipairs(d) do
      assert.are.equal("\r", text:sub(x.start - 1, x.start - 1))
      assert.are.equal("\27[K", text:sub(x.stop + 1, x.stop + 3))
    end
    -- erased before the output, and never drawn again
    local rest = text:sub(last.stop + 4)
    assert.are.equal(ERASE, rest:sub(1, #ERASE))
    assert.are.same({ a = 1, b = 1, c = 3 }, cjson.decode((rest:sub(#ERASE + 1):gsub("\r", ""))))
  end)

  it("counts skipped and failed calls, and erases itself before any other message", function()
    if not has_script then return pending("script(1) is not installed") end
    local plan = cli.tmpfile([=[[
      {"_id":"slow","_tool":"sleepy","ms":250,"value":1,"_outputPath":"†state.a"},
      {"_id":"bad","_tool":"sleepy","ms":120,"value":"†state.a","_outputPath":"†state.b"},
      {"_id":"boom","_tool":"fail","message":"late trouble","_outputPath":"†state.c"},
      {"_id":"after","_tool":"echo","value":"†state.c","_outputPath":"†state.d"}
    ]]=], ".json")
    local out, code = on_tty("run " .. plan .. " --tools spec/cli/tools")
    assert.are.equal(1, code, out)
    local d, text = drawings(out)
    local last = d[#d]
    assert.are.same({ 2, 0, 0, 1, 1 }, { last.done, last.running, last.waiting, last.skipped, last.failed })
    -- every message of the run begins a line of its own: after a newline or after the erase
    local seen = 0
    for at in text:gmatch("()obelus: call") do
      seen = seen + 1
      local before = text:sub(1, at - 1)
      assert.is_true(before == "" or before:sub(-1) == "\n" or before:sub(-#ERASE) == ERASE,
        "a message written over the progress line: " .. before:sub(-80))
    end
    assert.is_true(seen >= 2) -- "raised an error" and "failed (runtime)"
    assert.matches("late trouble", text, 1, true)
  end)

  it("gives way to what tools write (print, io.write, io.stderr) and keeps their streams open", function()
    if not has_script then return pending("script(1) is not installed") end
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    local f = assert(io.open(dir .. "/talker.lua", "w"))
    f:write([[
local obelus = require "obelus"
return { name = "talker", run = function(call)
  obelus.sleep(call.ms)
  print("said by print", call.n)
  io.write("said by io.write ", tostring(call.n), "\n")
  io.stderr:write("said on io.stderr ", tostring(call.n), "\n")
  local closed, why = io.stdout:close()
  return { closed = closed == true, why = why, again = io.stdout:write("") == io.stdout }
end }
]])
    f:close()
    local plan = cli.tmpfile([=[[
      {"_id":"a","_tool":"talker","ms":250,"n":1,"_outputPath":"†state.a"},
      {"_id":"b","_tool":"talker","ms":150,"n":"†state.a.closed","_outputPath":"†state.b"}
    ]]=], ".json")
    local out, code = on_tty("run " .. plan .. " --tools " .. dir)
    os.execute("rm -rf " .. dir)
    assert.are.equal(0, code, out)
    local d = drawings(out)
    assert.is_true(#d >= 2, out)
    local n = 0
    for at, what in out:gmatch("()(said [^\r\n]*)") do
      n = n + 1
      local before = out:sub(1, at - 1)
      assert.is_true(before == "" or before:sub(-1) == "\n" or before:sub(-#ERASE) == ERASE,
        "a tool's line written over the progress line: " .. what .. " after " .. before:sub(-60))
    end
    assert.are.equal(6, n, out)
    local last = d[#d]
    local result = cjson.decode((out:sub(last.stop + 4 + #ERASE):gsub("\r", "")))
    assert.is_false(result.a.closed)
    assert.are.equal("cannot close standard file", result.a.why)
    assert.is_true(result.b.again)
  end)

  it("keeps the loop's counts across its steps", function()
    if not has_script then return pending("script(1) is not installed") end
    local out, code = on_tty("loop plans/replan/plan.json --planner plans/replan/planner.lua "
      .. "--tools plans/replan/tools")
    assert.are.equal(0, code, out)
    local d, text = drawings(out)
    local last = d[#d]
    assert.are.same({ 2, 0, 0, 1, 1 }, { last.done, last.running, last.waiting, last.skipped, last.failed })
    local rest = text:sub(last.stop + 4)
    assert.are.equal(ERASE, rest:sub(1, #ERASE))
    assert.matches('"steps": 2', rest, 1, true)
  end)

  it("is absent when stderr is not a terminal", function()
    local r = cli.run { "run", sleepy_plan(), "--tools", "spec/cli/tools" }
    assert.are.equal(0, r.code)
    assert.are.equal("", r.err)
    assert.are.same({ a = 1, b = 1, c = 3 }, cjson.decode(r.out))
    if not has_script then return end
    -- stdout on the terminal, stderr to a file: still none, anywhere
    local err = os.tmpname()
    local out = on_tty("run " .. sleepy_plan() .. " --tools spec/cli/tools 2>" .. err)
    assert.is_nil(out:find("running", 1, true))
    assert.are.equal("", cli.slurp(err))
  end)

  it("gives way to --events stderr and to TERM=dumb", function()
    if not has_script then return pending("script(1) is not installed") end
    local out = on_tty("run " .. sleepy_plan() .. " --tools spec/cli/tools --events stderr")
    assert.are.equal(0, #drawings(out))
    assert.matches('"event":"run_done"', out, 1, true)
    assert.is_nil(out:find("\27[K", 1, true))
    out = on_tty("run " .. sleepy_plan() .. " --tools spec/cli/tools", "TERM=dumb")
    assert.are.equal(0, #drawings(out))
  end)

  it("leaves --events FILE, the journal and SIGINT as they were", function()
    if not has_script then return pending("script(1) is not installed") end
    local ev, j = os.tmpname(), os.tmpname()
    local plan = cli.tmpfile('[{"_id":"s","_tool":"sleepy","ms":3600000,"value":1,"_outputPath":"†state.s"},'
      .. '{"_id":"e","_tool":"echo","value":2,"_outputPath":"†state.e"}]', ".json")
    -- (s sleeps an hour: it is abandoned whatever the machine's load; the cap ends a hang)
    local out = on_tty(string.format("run %s --tools spec/cli/tools --events %s --journal %s & "
      -- the signal once e is done (its event written), not after a guess at how long that takes
      .. "pid=$!; for i in $(seq 600); do grep -q '\"done\"' %s 2>/dev/null && break; sleep 0.05; done; "
      .. "sleep 0.3; kill -INT $pid; wait $pid; echo exit=$?", plan, ev, j, ev))
    assert.matches("exit=130", out, 1, true)
    local d, text = drawings(out)
    assert.is_true(#d >= 2)
    local rest = text:sub(d[#d].stop + 4)
    assert.are.equal(ERASE .. "obelus run: interrupted by SIGINT", rest:sub(1, #ERASE + 33))
    local events = {}
    for line in io.lines(ev) do
      local e = cjson.decode(line).event
      events[e] = (events[e] or 0) + 1
    end
    assert.are.same({ ready = 2, started = 2, done = 1 }, events) -- s was abandoned
    local lines = 0
    for line in io.lines(j) do
      if not line:find('^{"journal":') then lines = lines + 1 end
    end
    assert.are.equal(2, lines) -- the plan and e's output
  end)

  it("counts the calls of every thread of a run on threads", function()
    if not has_script then return pending("script(1) is not installed") end
    local p = cli.tmpfile([=[{"instances":["a","b","c","d"],"plan":[
      {"_id":"x","_tool":"sleepy","ms":200,"value":1,"_outputPath":"x"},
      {"_id":"y","_tool":"sleepy","ms":100,"value":"†state.x","_outputPath":"y"},
      {"_id":"z","_tool":"fail","_outputPath":"z"}]}]=], ".json")
    local out, code = on_tty("run " .. p .. " --tools spec/cli/tools --threads 2")
    assert.are.equal(1, code, out)
    local d = drawings(out)
    assert.is_true(#d >= 2, "expected several drawings in\n" .. out)
    assert.is_true(d[1].waiting + d[1].running > 0)
    local last = d[#d]
    assert.are.same({ 8, 0, 0, 0, 4 }, { last.done, last.running, last.waiting, last.skipped, last.failed })
  end)
end)
