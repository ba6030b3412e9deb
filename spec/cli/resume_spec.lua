-- resume_spec.lua -- `obelus resume` after a real SIGKILL: for plans of several shapes
-- (a chain, a fan-out with a join, branches, instances, fire-and-forget), the run is
-- killed at random moments (some journals then get a torn last line), resumed until it
-- ends, and checked against an uninterrupted run: the same stdout and exit status, no
-- call that had settled run twice (each tool appends to a marker file per execution),
-- and every call run again reported. OBELUS_KILL_POINTS sets the points per shape
-- (`make test`: 4; `make torture`: more).
local cli = require "support.cli"
local cjson = require "cjson"

local POINTS = tonumber(os.getenv("OBELUS_KILL_POINTS") or "4")

local TOOLS = [[
local obelus = require "obelus"
local function mark(ctx)
  local f = assert(io.open(os.getenv("OBELUS_MARKS"), "a"))
  f:write(ctx.id, " ", ctx.attempt, "\n")
  f:close()
end
return {
  { name = "step", run = function(call, ctx)
      mark(ctx)
      obelus.sleep(call.ms or 20)
      if call.fail then error("broken on purpose") end
      return (call.x or 0) + (call.add or 1)
    end },
  { name = "pick", run = function(call, ctx)
      mark(ctx)
      obelus.sleep(15)
      return obelus.branch(call.x % 2 == 0 and 1 or 2, call.x)
    end },
  { name = "note", run = function(call, ctx) mark(ctx); obelus.sleep(30) end },
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
}

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local tools = dir .. "/tools.lua"
do
  local f = assert(io.open(tools, "w"))
  f:write(TOOLS)
  f:close()
end

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

-- ids settled in the journal before a kill: those must never run again
local function settled(journal)
  local s = {}
  for line in io.lines(journal) do
    local ok, m = pcall(cjson.decode, line)
    if ok and m.journal == "settled" and not m.scope then s[m.id] = true end
  end
  return s
end

local function q(s) return "'" .. s .. "'" end

for name, plan in pairs(SHAPES) do
  describe("obelus resume after SIGKILL: " .. name, function()
    local pf = dir .. "/" .. name .. ".json"
    local f = assert(io.open(pf, "w"))
    f:write(plan)
    f:close()
    local bin = cli.bin

    local ref_out, ref_code
    setup(function()
      local marks = dir .. "/" .. name .. ".ref.marks"
      ref_out, ref_code = sh("OBELUS_MARKS=" .. q(marks) .. " timeout 20 " .. q(bin) .. " run " ..
                             q(pf) .. " --tools " .. q(tools) .. " 2>/dev/null")
    end)

    for point = 1, POINTS do
      it("killed at a random moment (" .. point .. "), resumed: same output, nothing settled runs twice", function()
        local j = dir .. "/" .. name .. "." .. point .. ".jsonl"
        local marks = dir .. "/" .. name .. "." .. point .. ".marks"
        os.remove(j)
        os.remove(marks)
        local delay = math.random(0, 250) / 1000
        -- no `timeout` in front: the kill must reach obelus itself, not a wrapper
        sh("OBELUS_MARKS=" .. q(marks) .. " " .. q(bin) .. " run " .. q(pf) .. " --tools " ..
           q(tools) .. " --journal " .. q(j) .. " >/dev/null 2>&1 & pid=$!; sleep " .. delay ..
           "; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null")
        local jf = io.open(j)
        if not jf then return end -- killed before the journal was opened: nothing to resume
        local text = jf:read("a")
        jf:close()
        if point % 2 == 0 and text:sub(-1) == "\n" then -- died while writing the next line
          local w = assert(io.open(j, "a"))
          w:write(('{"journal":"settled","id":"#0","state":"do'):sub(1, math.random(3, 40)))
          w:close()
        end
        local before = settled(j)
        local ok_plan = text:find('"journal":"run"', 1, true)
        local seen = counts(marks)
        local out, code = sh("OBELUS_MARKS=" .. q(marks) .. " timeout 20 " .. q(bin) .. " resume " ..
                             q(j) .. " 2>" .. q(j .. ".err"))
        if not ok_plan then -- the run never began: resume says so
          assert.are.equal(2, code)
          return
        end
        assert.are.equal(ref_code, code)
        assert.are.same(cjson.decode(ref_out), cjson.decode(out))
        local after = counts(marks)
        local err = io.open(j .. ".err"):read("a")
        for id, n in pairs(after) do
          if before[id] then
            assert.are.equal(seen[id], n, "call " .. id .. " had settled and ran again")
          elseif seen[id] and n > seen[id] then
            assert.truthy(err:find("call " .. id .. " ", 1, true),
                          "call " .. id .. " ran again unreported: " .. err)
          end
        end
        -- resumed again once it ended: runs nothing, prints the same
        local out2, code2 = sh("OBELUS_MARKS=" .. q(marks) .. " " .. q(bin) .. " resume " .. q(j) ..
                               " 2>" .. q(j .. ".err2"))
        assert.are.equal(ref_code, code2, io.open(j .. ".err2"):read("a"))
        assert.are.same(cjson.decode(ref_out), cjson.decode(out2))
        assert.are.same(after, counts(marks))
      end)
    end
  end)
end
