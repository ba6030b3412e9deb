-- approve_spec.lua -- human in the loop: an approver allows, refuses or replaces each
-- ready call before it starts (obelus.set_approver, --approver, --approve on a terminal).
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/tools"

describe("approval", function()
  local approver = cli.tmpfile([[
    local obelus = require "obelus"
    local seen = {}
    obelus.set_approver(function(call, ctx)
      seen[#seen + 1] = ctx.id
      if call._tool == "fail" then return false end
      if ctx.id == "swap" then
        return { _id = "swap", _tool = "echo", value = "replaced: " .. call.value, _outputPath = "†state.s" }
      end
      if ctx.id == "rewire" then
        return { _id = "rewire", _tool = "echo", value = 1, _outputPath = "†state.elsewhere" }
      end
      if ctx.id == "badtool" then return { _id = "badtool", _tool = "nope", _outputPath = "†state.u" } end
      if ctx.id == "order" then
        return { _id = "order", _tool = "echo", value = table.concat(seen, ","), _outputPath = "†state.seen" }
      end
      return true
    end)
  ]], ".lua")

  local function run(plan, ...)
    local r = cli.run { "run", cli.tmpfile(plan, ".json"), "--tools", TOOLS, "--approver", approver, ... }
    if r.out ~= "" then r.output = cjson.decode(r.out) end
    return r
  end

  it("allows, refuses (error \"refused\") and replaces calls", function()
    local r = run([=[[
      {"_id":"ok","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"no","_tool":"fail","_outputPath":"†state.b"},
      {"_id":"swap","_tool":"sleepy","ms":1,"value":"orig","_outputPath":"†state.s"}
    ]]=])
    assert.are.equal(1, r.code)
    assert.are.same({ a = 1, s = "replaced: orig" }, r.output)
    assert.matches("call no (fail) failed (runtime): refused", r.err, 1, true)
  end)

  it("validates a replacement again: same wiring, a known tool", function()
    local r = run([=[[{"_id":"rewire","_tool":"echo","value":2,"_outputPath":"†state.t"},
                      {"_id":"badtool","_tool":"echo","value":3,"_outputPath":"†state.u"}]]=])
    assert.are.equal(1, r.code)
    assert.matches("not _outputPath", r.err, 1, true)
    assert.matches('no tool named "nope"', r.err, 1, true)
  end)

  it("is asked only for ready calls, never for skipped ones", function()
    local r = run([=[[{"_id":"pick","_tool":"pick","which":1,"value":1,"_outputPath":"†state.x || †state.y"},
                      {"_id":"onlyy","_tool":"echo","value":"†state.y","_outputPath":"†state.z"},
                      {"_id":"after","_tool":"echo","value":"†state.x","_outputPath":"†state.w"},
                      {"_id":"order","_tool":"identity","v":"†state.w","_outputPath":"†state.seen"}]]=])
    assert.are.equal(0, r.code)
    assert.are.equal("pick,after,order", r.output.seen)
  end)

  it("asks on a terminal with --approve: y runs, n refuses, e edits the call", function()
    if os.execute("command -v script >/dev/null 2>&1") ~= true then
      pending("script(1) is not installed")
      return
    end
    local plan = cli.tmpfile([=[[
      {"_id":"first","_tool":"echo","value":1,"_outputPath":"†state.a"},
      {"_id":"second","_tool":"echo","value":"†state.a","_outputPath":"†state.b"},
      {"_id":"third","_tool":"echo","value":"orig","_outputPath":"†state.c"}]]=], ".json")
    local out = os.tmpname()
    -- prompts come in the order calls become ready: first, third, then second
    local cmd = string.format(
      "printf 'y\\ne\\nn\\n' | EDITOR='sed -i s/orig/edited/' script -qec %s /dev/null > %s 2>&1",
      cli.quote(cli.bin .. " run " .. plan .. " --tools " .. TOOLS .. " --approve --concurrency 1"), out)
    os.execute(cmd)
    local screen = cli.slurp(out)
    local p1 = screen:find('run first echo {"value":1}? [y/n/e]', 1, true)
    local p2 = screen:find('run third echo {"value":"orig"}? [y/n/e]', 1, true)
    local p3 = screen:find('run second echo {"value":1}? [y/n/e]', 1, true)
    assert.is_truthy(p1 and p2 and p3)
    assert.is_true(p1 < p2 and p2 < p3)
    assert.matches('"c": "edited"', screen, 1, true)
    assert.matches("call second (echo) failed (runtime): refused", screen, 1, true)
    assert.is_nil(screen:find('"b":', 1, true))
  end)

  it("refuses, with a clear reason, when there is no terminal to ask", function()
    local plan = cli.tmpfile([=[[{"_tool":"echo","value":1,"_outputPath":"x"}]]=], ".json")
    local err = os.tmpname()
    -- setsid detaches from any controlling terminal, as under CI
    local ok = os.execute(string.format("setsid %s run %s --tools %s --approve </dev/null >/dev/null 2>%s",
      cli.quote(cli.bin), plan, TOOLS, err))
    assert.is_not_true(ok)
    assert.matches("needs a terminal", cli.slurp(err), 1, true)
  end)
  it("stops an approver that never returns on SIGTERM: exit 143, the call unsettled, resume asks again", function()
    local mark, j, err, rcf = os.tmpname(), os.tmpname(), os.tmpname(), os.tmpname()
    os.remove(mark); os.remove(j)
    local spin = cli.tmpfile(([[
      local obelus = require "obelus"
      obelus.set_approver(function()
        if not io.open(%q) then
          local f = io.open(%q, "w"); f:write("x"); f:close()
          while true do end
        end
        return true
      end)]]):format(mark, mark), ".lua")
    local plan = cli.tmpfile('[{"_id":"a","_tool":"echo","value":7,"_outputPath":"†state.a"}]', ".json")
    os.execute(([[%s run %s --tools %s --approver %s --journal %s 2>%s >/dev/null & P=$!
      (sleep 60; kill -KILL $P) >/dev/null 2>&1 & K=$!; i=0
      while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
      kill -TERM $P; wait $P; echo $? >%s; kill $K 2>/dev/null]]):format(cli.bin, plan, TOOLS, spin, j, err, mark, rcf))
    assert.are.equal("143", cli.slurp(rcf):match("%d+")) -- not the cap's 137
    assert.matches("interrupted by SIGTERM", cli.slurp(err), 1, true)
    for line in io.lines(j) do assert.is_nil(line:find('"settled"', 1, true)) end
    local r = cli.run { "resume", j, "--tools", TOOLS, "--approver", spin }
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ a = 7 }, cjson.decode(r.out))
  end)
end)
