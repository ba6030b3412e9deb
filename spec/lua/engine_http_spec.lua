-- engine_http_spec.lua -- obelus.http from the Lua module on luv's loop: a run's requests
-- answered; run:cancel() and engine:close() with transfers in flight stop them at once
-- (no callback into a closed state, nothing left on the loop).
local obelus = require "obelus"
local uv = require "luv"
local fs = require "support.fs"
local servers = require "support.servers"

local TOOLS = [[
local http = require("obelus").http
return { { name = "get", run = function(call) return http.get(call.url).body end } }
]]

-- Runs the loop until nothing keeps it alive; true when a guard had to stop it instead
-- (after 120 s: something still held it). The guard is unreferenced: it does not keep
-- the loop alive itself.
local function run_guarded()
  local guarded = false
  local guard = uv.new_timer()
  guard:start(120000, 0, function() guarded = true; uv.stop() end)
  guard:unref()
  uv.run()
  guard:close()
  uv.run("nowait")
  return guarded
end

describe("obelus.http in the Lua module", function()
  local s, dir, tools
  setup(function()
    s = assert(servers.httpd())
    dir = fs.tmpdir()
    tools = dir .. "/tools.lua"
    fs.write(tools, TOOLS)
  end)
  teardown(function()
    s.stop()
    os.execute("rm -rf " .. dir)
    collectgarbage()
    collectgarbage()
  end)

  it("answers a run's requests on luv's loop", function()
    local engine = obelus.engine { tools = tools }
    local run = engine:run({ plan = {
      { _tool = "get", url = s.url("/hello"), _outputPath = "†state.a" },
      { _tool = "get", url = s.url("/json"), _outputPath = "†state.b" } } })
    assert.are.equal(0, run:wait())
    assert.are.same({ a = "hello", b = '{"ok":true,"n":42}' }, run:output())
    engine:close()
  end)

  it("http_max holds the transfers at once: the others wait their turn", function()
    local engine = obelus.engine { tools = tools, http_max = 2 }
    local plan = {}
    for i = 1, 6 do
      plan[i] = { _tool = "get", url = s.url("/hold?n=2&tag=lua2"), _outputPath = "†state.n" .. i }
    end
    assert.are.equal(0, engine:run({ plan = plan }):wait())
    local peak = engine:run({ { _tool = "get", url = s.url("/peak?tag=lua2"), _outputPath = "†state.p" } })
    assert.are.equal(0, peak:wait())
    assert.are.same({ peak = 2 }, obelus.decode(peak:output().p))
    engine:close()
  end)

  it("http_max_bytes and http_allow_private: the engine's body limit and deny list", function()
    local function get(engine, url)
      local run = engine:run({ plan = { { _tool = "get", url = url, _outputPath = "†state.r || †state.err" } },
                               output = { r = "†state.r", err = "†state.err" } })
      assert.are.equal(0, run:wait())
      local o = run:output()
      return o.r ~= obelus.null and o.r or nil, o.err ~= obelus.null and o.err.error or nil
    end
    local zero = ("http://0.0.0.0:%d/hello"):format(s.port) -- Linux connects it to loopback
    local engine = obelus.engine { tools = tools, http_max_bytes = 1000 }
    local r, err = get(engine, s.url("/big?n=5000"))
    assert.is_nil(r)
    assert.matches("response body larger than 1000 bytes (max_bytes)", err, 1, true)
    r, err = get(engine, zero)
    assert.is_nil(r)
    assert.matches("0.0.0.0 is an unspecified (0.0.0.0/8) address, denied", err, 1, true)
    engine:close()
    engine = obelus.engine { tools = tools, http_allow_private = true }
    assert.are.equal(5000, #get(engine, s.url("/big?n=5000"))) -- 64 MB by default
    assert.are.equal("hello", get(engine, zero))
    engine:close()
    assert.has_error(function() obelus.engine { http_allow_private = 1 } end,
                     "obelus.engine: http_allow_private must be true or false")
    assert.has_error(function() obelus.engine { http_max_bytes = 0 } end)
  end)

  it("run:cancel() stops its transfers: the loop has nothing left to wait for", function()
    local engine = obelus.engine { tools = tools }
    local run = engine:run({ { _tool = "get", url = s.url("/slow?ms=3600000"), _outputPath = "x" } })
    uv.run("nowait")
    run:cancel()
    -- the transfer would take an hour: the loop ends by itself, not by the guard
    assert.is_false(run_guarded(), "the loop waited for the cancelled transfer")
    engine:close()
  end)

  it("leaks nothing and reads nothing freed under valgrind: an answer, a cancel, a close mid-transfer",
     function()
    if os.execute("command -v valgrind >/dev/null 2>&1") ~= true then
      return pending("valgrind is not installed")
    end
    local script = dir .. "/host.lua"
    fs.write(script, ([[
      package.cpath = "lib/?.so;" .. package.cpath
      package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
      local obelus = require "obelus"
      local uv = require "luv"
      local engine = obelus.engine { tools = %q }
      local done = engine:run { plan = { { _tool = "get", url = %q, _outputPath = "a" } } }
      local status = done:wait()
      local cancelled = engine:run { plan = { { _tool = "get", url = %q, _outputPath = "a" } } }
      uv.run("nowait")
      cancelled:cancel()
      engine:run { plan = { { _tool = "get", url = %q, _outputPath = "a" } } }
      uv.run("nowait")
      engine:close()
      uv.run()
      io.write(status, "\n")
    ]]):format(tools, s.url("/hello"), s.url("/slow?ms=3000"), s.url("/slow?ms=3000")))
    local log, out = os.tmpname(), os.tmpname()
    local _, _, code = os.execute(("valgrind -q --leak-check=full --show-leak-kinds=definite,indirect " ..
      "--errors-for-leak-kinds=definite,indirect --error-exitcode=99 --log-file=%s lua5.4 %s >%s 2>/dev/null")
      :format(log, script, out))
    assert.are.equal("", fs.slurp(log))
    assert.are.equal(0, code)
    assert.are.equal("0\n", fs.slurp(out))
    os.remove(log)
    os.remove(out)
  end)

  it("engine:close() with transfers in flight stops them; no callback comes", function()
    local engine = obelus.engine { tools = tools }
    local run = engine:run({ { _tool = "get", url = s.url("/slow?ms=3600000"), _outputPath = "x" } })
    uv.run("nowait")
    engine:close()
    assert.is_false(run_guarded(), "the loop waited for a transfer of a closed engine")
    assert.is_nil((run:status()))
  end)
end)
