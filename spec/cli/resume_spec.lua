-- resume_spec.lua -- `obelus resume` after a real SIGKILL: for plans of several shapes
-- (a chain, a fan-out with a join, branches, instances, fire-and-forget, a delegated
-- plan, the planning loop), the run is killed at a random moment, then its resumes too,
-- up to three kills in all (some journals then get a torn last line), resumed until it
-- ends, and checked against an uninterrupted run: the same stdout and exit status, no
-- call that had settled run twice (each tool appends to a marker file per execution),
-- and every call run again reported. Each point picks its --fsync level at random.
-- OBELUS_KILL_POINTS sets the points per shape (`make test`: 20; `make torture`: 200).
local cli = require "support.cli"
local cjson = require "cjson"

local POINTS = tonumber(os.getenv("OBELUS_KILL_POINTS") or "20")

local TOOLS = [[
local obelus = require "obelus"
local function mark(ctx, call)
  ctx = { tag = call and call.tag, id = ctx.id, attempt = ctx.attempt }
  local f = assert(io.open(os.getenv("OBELUS_MARKS"), "a"))
  f:write(ctx.tag or "", ctx.id, " ", ctx.attempt, "\n")
  f:close()
end
return {
  { name = "step", run = function(call, ctx)
      mark(ctx, call)
      obelus.sleep(call.ms or 20)
      if call.fail then error("broken on purpose") end
      return (call.x or 0) + (call.add or 1)
    end },
  { name = "pick", run = function(call, ctx)
      mark(ctx, call)
      obelus.sleep(15)
      return obelus.branch(call.x % 2 == 0 and 1 or 2, call.x)
    end },
  { name = "note", run = function(call, ctx) mark(ctx, call); obelus.sleep(30) end },
}
]]

local SHAPES = {
  chain = [[{"plan":[
    {"_tool":"step","x":0,"_outputPath":"†state.a"},
    {"_tool":"step","x":"†state.a","_outputPath":"†state.b"},
    {"_tool":"step","x":"†state.b","_outputPath":"†state.c"},
    {"_tool":"step","x":"†state.c","_outputPath":"†state.d"},
    {"_tool":"step","x":"†state.d","_outputPath":"†state.e"}]}]],
  fanout = [[{"plan":[
    {"_tool":"step","x":1,"ms":30,"_outputPath":"†state.p"},
    {"_tool":"step","x":2,"ms":60,"_outputPath":"†state.q"},
    {"_tool":"step","x":3,"ms":90,"_outputPath":"†state.r"},
    {"_tool":"step","x":"†state.p","add":"†state.q","_outputPath":"†state.s"},
    {"_tool":"step","x":"†state.s","add":"†state.r","_outputPath":"†state.t"},
    {"_tool":"step","x":"†state.t","fail":true,"_outputPath":"†state.u"}],
    "output":{"t":"†state.t","u":"†state.u"}}]],
  branches = [[{"plan":[
    {"_tool":"step","x":1,"_outputPath":"†state.n"},
    {"_tool":"pick","x":"†state.n","_outputPath":"†state.even || †state.odd"},
    {"_tool":"step","x":"†state.even","_outputPath":"†state.from_even"},
    {"_tool":"step","x":"†state.odd","_outputPath":"†state.from_odd"},
    {"_tool":"note","what":"†state.from_odd"}]}]],
  instances = [[{"instances":["n","s"],"plan":[
    {"_tool":"step","x":1,"_outputPath":"†state.a"},
    {"_tool":"step","x":"†state.a","ms":40,"_outputPath":"†state.b"},
    {"_tool":"step","x":"†state.b","_outputPath":"†state.c"}]}]],
  delegate = [[{"plan":[
    {"_tool":"step","x":1,"_outputPath":"†state.p"},
    {"_delegate":"sub.json","x":"†state.p","_outputPath":"†state.q"},
    {"_tool":"step","x":"†state.q","_outputPath":"†state.r"}]}]],
  loop = [[{"context":[{"type":"state","data":{"n":0}}],"plan":[
    {"_tool":"step","x":5,"_outputPath":"†state.first"}]}]],
}

-- the plan `delegate` runs: its calls' marks are tagged "sub"
local SUB = [[{"plan":[
  {"_tool":"step","tag":"sub","x":"†input.x","_outputPath":"†state.a"},
  {"_tool":"step","tag":"sub","x":"†state.a","_outputPath":"†state.b"},
  {"_tool":"step","tag":"sub","x":"†state.b","_outputPath":"†state.c"},
  {"_tool":"step","tag":"sub","x":"†state.c","_outputPath":"†state.d"}],"output":"†state.d"}]]

-- the planner `loop` asks: three steps of two chained calls (tagged "L<step>"), then done
local PLANNER = [[
return function(ctx)
  if ctx.step > 3 then
    return { output = { n = ctx:resolve("†state.n"), first = ctx:resolve("†state.first") } }
  end
  local tag = "L" .. ctx.step
  return { calls = {
    { _tool = "step", tag = tag, x = "†state.n", _outputPath = "†state.m" },
    { _tool = "step", tag = tag, x = "†state.m", add = 10, _outputPath = "†state.n" },
  } }
end
]]

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end
local tools = dir .. "/tools.lua"
write(tools, TOOLS)
write(dir .. "/sub.json", SUB)
write(dir .. "/planner.lua", PLANNER)

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok, how, code = p:close()
  return out, (how == "exit") and code or 128 + (code or 0)
end

local function counts(marks)
  local n = {}
  local f = io.open(marks)
  if not f then return n end
  for line in f:lines() do
    local id = line:match("^(%S+)")
    n[id] = (n[id] or 0) + 1
  end
  f:close()
  return n
end

-- calls settled in the journal before a kill, named as their marks name them (a
-- delegated plan's "sub#0", a loop step's "L2#1"): those must never run again
local function settled(journal)
  local s = {}
  for line in io.lines(journal) do
    local ok, m = pcall(cjson.decode, line)
    if ok and type(m) == "table" and m.journal == "settled" then
      local tag = m.scope and "sub" or m.step and ("L" .. m.step) or ""
      s[tag .. m.id] = true
    end
  end
  return s
end

local function q(s) return "'" .. s .. "'" end

local FSYNC = { "never", "batch", "always" }

for name, plan in pairs(SHAPES) do
  describe("obelus resume after SIGKILL: " .. name, function()
    local pf = dir .. "/" .. name .. ".json"
    write(pf, plan)
    local bin = cli.bin
    local how = name == "loop" and (" loop " .. q(pf) .. " --planner " .. q(dir .. "/planner.lua"))
                or (" run " .. q(pf))

    local ref_out, ref_code
    setup(function()
      local marks = dir .. "/" .. name .. ".ref.marks"
      ref_out, ref_code = sh("OBELUS_MARKS=" .. q(marks) .. " timeout 20 " .. q(bin) .. how ..
                             " --tools " .. q(tools) .. " 2>/dev/null")
    end)

    for point = 1, POINTS do
      it("killed at random moments (" .. point .. "), resumed: same output, nothing settled runs twice", function()
        local j = dir .. "/" .. name .. "." .. point .. ".jsonl"
        local marks = dir .. "/" .. name .. "." .. point .. ".marks"
        local errf = j .. ".err"
        os.remove(j)
        os.remove(marks)
        local fsync = FSYNC[math.random(#FSYNC)]
        local env = "OBELUS_MARKS=" .. q(marks) .. " "
        -- no `timeout` in front: the kill must reach obelus itself, not a wrapper
        local function killed(cmd)
          sh(env .. q(bin) .. cmd .. " >/dev/null 2>>" .. q(errf) .. " & pid=$!; sleep " ..
             math.random(0, 250) / 1000 .. "; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null")
        end
        killed(how .. " --tools " .. q(tools) .. " --journal " .. q(j) .. " --fsync " .. fsync)
        local jf = io.open(j)
        if not jf then return end -- killed before the journal was opened: nothing to resume
        local text = jf:read("a")
        jf:close()
        if not text:find('"journal":"run"', 1, true) then -- the run never began: resume says so
          local _, code = sh(env .. "timeout 20 " .. q(bin) .. " resume " .. q(j) .. " 2>/dev/null")
          assert.are.equal(2, code)
          return
        end
        local kills = math.random(0, 2) -- the resumes are killed too, sometimes
        for round = 0, kills do
          local jt = io.open(j):read("a")
          if (point + round) % 2 == 0 and jt:sub(-1) == "\n" then -- died while writing a line
            local w = assert(io.open(j, "a"))
            w:write(('{"journal":"settled","id":"#0","state":"do'):sub(1, math.random(3, 40)))
            w:close()
          end
          local before, seen = settled(j), counts(marks)
          os.remove(errf)
          local out, code
          if round < kills then
            killed(" resume " .. q(j) .. " --fsync " .. fsync)
          else
            out, code = sh(env .. "timeout 20 " .. q(bin) .. " resume " .. q(j) .. " --fsync " ..
                           fsync .. " 2>" .. q(errf))
          end
          local after = counts(marks)
          local ef = io.open(errf)
          local err = ef and ef:read("a") or ""
          if ef then ef:close() end
          for id, n in pairs(after) do
            if before[id] then
              assert.are.equal(seen[id], n, "call " .. id .. " had settled and ran again")
            elseif seen[id] and n > seen[id] and round == kills then
              local bare = id:match("(#.*)$") or id
              assert.truthy(err:find("call " .. bare .. " ", 1, true),
                            "call " .. id .. " ran again unreported: " .. err)
            end
          end
          if round == kills then
            assert.are.equal(ref_code, code, err)
            assert.are.same(cjson.decode(ref_out), cjson.decode(out))
          end
        end
        -- resumed again once it ended: runs nothing, prints the same
        local after = counts(marks)
        local out2, code2 = sh(env .. q(bin) .. " resume " .. q(j) .. " 2>" .. q(j .. ".err2"))
        assert.are.equal(ref_code, code2, io.open(j .. ".err2"):read("a"))
        assert.are.same(cjson.decode(ref_out), cjson.decode(out2))
        assert.are.same(after, counts(marks))
      end)
    end
  end)
end
