-- spec/lua/engine_queue_spec.lua -- obelus.queue: a Lua host submits plans to a job
-- queue in a real redis-server (started here) and waits for their results, blocking
-- or from luv's loop, while a real `obelus worker` runs them.
local obelus = require "obelus"
local uv = require "luv"
local servers = require "support.servers"
local fs = require "support.fs"
local cli = require "support.cli"

local D = "\u{2020}"

describe("obelus.queue (a real redis-server and worker)", function()
  local redis, dir, tools

  setup(function()
    redis = assert(servers.redis())
    dir = fs.tmpdir()
    tools = dir .. "/double.lua"
    fs.write(tools, [[
return { name = "double", schema = { type = "object", required = { "n" } },
         run = function(call) return call.n * 2 end }
]])
  end)
  teardown(function()
    redis.stop()
    os.execute("rm -rf " .. cli.quote(dir))
  end)

  local function worker(queue)
    local ok = os.execute(("timeout 30 %s worker --redis %s --queue %s --tools %s --drain 2>/dev/null"):format(
      cli.quote(cli.bin), redis.url, queue, cli.quote(tools)))
    assert.is_true(ok == true or ok == 0)
  end

  local plan = { plan = { { _tool = "double", n = D .. "input.n", _outputPath = D .. "state.a" } },
                 output = D .. "state.a" }

  it("submits, a worker runs, wait gives the result; blocking calls", function()
    local q = obelus.queue { redis = redis.url, queue = "l1" }
    local id1 = q:submit(plan, { input = { n = 21 } })
    local id2 = q:submit(plan, { input = { n = 1 } })
    assert.is_string(id1)
    assert.are_not.equal(id1, id2)
    local t = q:wait(id1, { timeout_ms = 100 })
    assert.are.same({ job = id1, error = "timeout", state = "queued" }, t)
    worker("l1")
    assert.are.same({ job = id1, exit = 0, output = 42, state = "done" }, q:wait(id1))
    assert.are.same({ job = id2, exit = 0, output = 2, state = "done" }, q:wait(id2))
    assert.are.same({ job = "nope", error = "no such job" }, q:wait("nope"))
    q:close()
    assert.has_error(function() q:submit(plan) end, "the queue is closed")
  end)

  it("validates against an engine's tools, and refuses an invalid plan with its problems", function()
    local e = obelus.engine { tools = tools }
    local q = obelus.queue { redis = redis.url, queue = "l2" }
    local ok, err = pcall(q.submit, q, { { _tool = "double", _outputPath = D .. "state.a" } },
                          { engine = e, name = "bad.json" })
    assert.is_false(ok)
    assert.truthy(err:match("bad%.json"), err)
    local ok2, err2 = pcall(q.submit, q, { { _tool = "nope", _outputPath = D .. "state.a" } }, { engine = e })
    assert.is_false(ok2)
    assert.truthy(err2:match("nope"), err2)
    local id = q:submit({ { _tool = "double", n = 3, _outputPath = D .. "state.a" } }, { engine = e })
    worker("l2")
    assert.are.same({ job = id, exit = 0, output = { a = 6 }, state = "done" }, q:wait(id))
    q:close()
    e:close()
  end)

  it("on_done: submit and wait answer from luv's loop", function()
    local q = obelus.queue { redis = redis.url, queue = "l3" }
    local got, result = nil, nil
    q:submit(plan, { input = { n = 5 }, on_done = function(id, err)
      assert.is_nil(err)
      got = id
      q:wait(id, { on_done = function(res)
        result = res
        uv.stop() -- the queue's connection keeps the loop alive
      end })
    end })
    local t = uv.new_timer()
    local ran = false
    t:start(300, 0, function()
      t:close()
      ran = true
      worker("l3")
    end)
    uv.run()
    assert.is_true(ran)
    assert.are.same({ job = got, exit = 0, output = 10, state = "done" }, result)
    q:close()
  end)

  it("an error in on_done goes to Lua's warn function, which the host turns on or not", function()
    local host = dir .. "/warn_host.lua"
    fs.write(host, ([[
package.cpath = "lib/?.so;" .. package.cpath
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
local obelus, uv = require "obelus", require "luv"
io.stdout:setvbuf("no") -- in order with the warning on stderr
local q = obelus.queue { redis = %q, queue = "l5" }
q:wait("nope", { on_done = function(res)
  io.write("called ", res.error, "\n")
  uv.stop()
  error("boom", 0)
end })
uv.run()
q:close()
io.write("end\n")
]]):format(redis.url))
    local function run(flags)
      local p = io.popen(("lua5.4 %s %s 2>&1; echo status $?"):format(flags, cli.quote(host)))
      local out = p:read("a")
      p:close()
      return out
    end
    assert.are.equal("called no such job\nend\nstatus 0\n", run(""))
    assert.are.equal("called no such job\nLua warning: obelus: error in a queue's on_done: boom\n"
                     .. "end\nstatus 0\n", run("-W"))
  end)

  it("an unreachable Redis is named; a closed queue calls nothing back", function()
    local url = "redis://127.0.0.1:" .. servers.free_port()
    local q = obelus.queue { redis = url }
    local ok, err = pcall(q.submit, q, plan, { input = { n = 1 } })
    assert.is_false(ok)
    assert.truthy(err:find("cannot reach Redis at " .. url, 1, true), err)
    q:close()
    local q2 = obelus.queue { redis = redis.url, queue = "l4" }
    local called = false
    q2:wait("1", { on_done = function() called = true end })
    q2:close()
    uv.run("nowait")
    assert.is_false(called)
    assert.has_error(function() obelus.queue { queue = "x" } end)
    assert.has_error(function() obelus.queue { redis = "ftp://x" } end)
  end)
end)
