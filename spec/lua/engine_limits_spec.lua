-- engine_limits_spec.lua -- the limits and the default timeout from the Lua module, as
-- the command line has them: obelus.engine{max_memory_mb}, and engine:run's
-- call_timeout_ms, max_output_kb and max_calls; each fails the call at fault (its
-- reason in the failed event), the run goes on; bad values are errors of the call made.
local obelus = require "obelus"
local _ = require "luv" -- as a host does: luv first (the engines run on its loop)
local fs = require "support.fs"

local TOOLS = [[
local obelus = require "obelus"
local _ = require "luv" -- as a host does: luv first (the engines run on its loop)
return {
  { name = "hog", run = function()
      local t = {}
      for i = 1, math.maxinteger do t[i] = ("x"):rep(64) .. i end
    end },
  { name = "nap", run = function(call) obelus.sleep(call.ms); return call.ms end },
  { name = "big", run = function(call) return ("x"):rep(call.n) end },
  { name = "many", run = function(call) -- n distinct strings of 40 bytes and more
      local t = {}
      for i = 1, call.n do t[i] = ("s"):rep(40) .. (call.from + i) end
      return t
    end },
  { name = "count", run = function(call) return #call.all end },
  { name = "bye", run = function() os.exit(5) end },
}
]]

local dir, tools

setup(function()
  dir = fs.tmpdir()
  tools = dir .. "/tools.lua"
  local f = assert(io.open(tools, "w"))
  f:write(TOOLS)
  f:close()
  f = assert(io.open(dir .. "/sub.json", "w"))
  f:write('[{"_tool":"nap","ms":1,"_outputPath":"a"},{"_tool":"nap","ms":1,"_outputPath":"b"}]')
  f:close()
end)

teardown(function()
  os.execute("rm -rf " .. dir)
  collectgarbage()
  collectgarbage()
end)

-- runs plan with opts; returns the status, the output and the failed calls' reasons by id
local function run(engine, plan, opts)
  local failed = {}
  opts = opts or {}
  opts.on_event = function(ev) if ev.event == "failed" then failed[ev.call] = ev.reason end end
  local r = engine:run(plan, opts)
  local status = r:wait()
  return status, r:output(), failed
end

describe("limits in the Lua module", function()
  it("max_memory_mb fails the call that passes it; the others finish", function()
    local engine = obelus.engine { tools = tools, max_memory_mb = 32 }
    local status, out, failed = run(engine, { plan = {
      { _id = "hog", _tool = "hog", _outputPath = "†state.h" },
      { _tool = "nap", ms = 20, _outputPath = "†state.n" } }, output = "†state.n" })
    assert.are.equal(1, status)
    assert.are.equal(20, out)
    assert.matches("memory limit of 32 MB reached", failed.hog, 1, true)
    engine:close()
  end)

  it("max_memory_mb fails a call whose params alone pass it, before its tool runs", function()
    -- the account holds the log's values too: the 40 MB input fits 64 MB, its copy does not
    local engine = obelus.engine { tools = tools, max_memory_mb = 64 }
    -- a 40 MB string is copied into the engine's Lua state whole (a big object or array
    -- would reach the tool as a view, which holds no Lua memory: the second run)
    local big = string.rep("x", 40 * 1024 * 1024)
    local plan = { output = "†state.n", context = { { type = "input", data = { big = big } } },
      plan = {
        { _id = "count", _tool = "count", all = "†input.big", _outputPath = "†state.c" },
        { _tool = "nap", ms = 20, _outputPath = "†state.n" } } }
    local status, out, failed = run(engine, plan)
    assert.are.equal(1, status)
    assert.are.equal(20, out)
    assert.matches("memory limit of 64 MB reached", failed.count, 1, true)
    local viewed = { output = "†state.c" , plan = {
      { _id = "count", _tool = "count", all = "†state.big", _outputPath = "†state.c" } } }
    for k = 0, 2 do -- 450,000 strings in the log, ~43 MB as Lua tables: a view instead
      table.insert(viewed.plan, { _tool = "many", n = 150000, from = k * 150000,
                                  _outputPath = "†state.big", _outputMethod = "concat" })
    end
    engine:close() -- a fresh account: the first run's 40 MB input is not in it
    engine = obelus.engine { tools = tools, max_memory_mb = 64 }
    status, out, failed = run(engine, viewed)
    assert.are.same({}, failed)
    assert.are.equal(0, status)
    assert.are.equal(450000, out)
    engine:close()
  end)

  it("os.exit in a tool fails its call, not the host", function()
    local engine = obelus.engine { tools = tools }
    local status, _, failed = run(engine, { { _id = "b", _tool = "bye", _outputPath = "x" } })
    assert.are.equal(1, status)
    assert.matches("os.exit called by a tool (code 5)", failed.b, 1, true)
    engine:close()
  end)

  it("call_timeout_ms times out every call without its own _timeout", function()
    local engine = obelus.engine { tools = tools }
    local status, out, failed = run(engine, { plan = {
      { _id = "slow", _tool = "nap", ms = 300, _outputPath = "†state.a" },
      { _id = "own", _tool = "nap", ms = 60, _timeout = 5000, _outputPath = "†state.b" } },
      output = "†state.b" }, { call_timeout_ms = 30 })
    assert.are.equal(1, status)
    assert.are.equal(60, out)
    assert.matches("timeout after 30 ms", failed.slow, 1, true)
    assert.is_nil(failed.own)
    engine:close()
  end)

  it("max_output_kb fails a call whose result is larger", function()
    local engine = obelus.engine { tools = tools }
    local status, _, failed = run(engine, { { _id = "b", _tool = "big", n = 3000, _outputPath = "x" },
                                            { _id = "s", _tool = "big", n = 100, _outputPath = "y" } },
                                  { max_output_kb = 2 })
    assert.are.equal(1, status)
    assert.matches("over 2 KB", failed.b, 1, true)
    assert.is_nil(failed.s)
    engine:close()
  end)

  it("max_calls counts delegated plans; a plan with more calls is invalid", function()
    local engine = obelus.engine { tools = tools }
    local plan = { { _id = "d", _delegate = "sub.json", _outputPath = "d" },
                   { _tool = "nap", ms = 1, _outputPath = "n" } }
    local f = assert(io.open(dir .. "/top.json", "w"))
    f:write(obelus.encode(plan))
    f:close()
    local status, _, failed = run(engine, dir .. "/top.json", { max_calls = 3 })
    assert.are.equal(1, status)
    assert.matches("would make 4 in all, more than --max-calls 3", failed.d, 1, true)
    assert.are.equal(0, (run(engine, dir .. "/top.json", { max_calls = 4 })))
    local ok, err = pcall(engine.run, engine, dir .. "/top.json", { max_calls = 1 })
    assert.is_false(ok)
    assert.matches("the plan has 2 calls", tostring(err), 1, true)
    engine:close()
  end)

  it("engine:run without an options table has the defaults: 64 MB of output, 1,000,000 calls", function()
    local engine = obelus.engine { tools = tools }
    local r = engine:run { { _id = "b", _tool = "big", n = 64 * 1024 * 1024 + 1, _outputPath = "x" } }
    assert.are.equal(1, r:wait())
    local inst, calls = {}, {}
    for i = 1, 1001 do inst[i] = "i" .. i end
    for i = 1, 1000 do calls[i] = { _tool = "nap", ms = 1, _outputPath = "v" .. i } end
    local ok, err = pcall(engine.run, engine, { instances = inst, plan = calls })
    assert.is_false(ok)
    assert.matches("more than --max-calls 1000000", tostring(err), 1, true)
    engine:close()
  end)

  it("refuses bad values", function()
    local engine = obelus.engine { tools = tools }
    for _, opts in ipairs { { call_timeout_ms = 0 }, { max_output_kb = -1 }, { max_calls = 1.5 } } do
      local ok, err = pcall(engine.run, engine, { { _tool = "nap", ms = 1 } }, opts)
      assert.is_false(ok)
      assert.matches("must be an integer", tostring(err), 1, true)
    end
    engine:close()
    local ok, err = pcall(obelus.engine, { tools = tools, max_memory_mb = 0 })
    assert.is_false(ok)
    assert.matches("max_memory_mb", tostring(err), 1, true)
  end)
end)
