-- spec/cli/fleet_junk_spec.lua -- the queue's keys other than its entries as anyone
-- with Redis access could leave them (the attack list's fleet cases): a jobs stream
-- that is a string, a job's journal of the wrong type, junk in the stats hash, a plan
-- key of the wrong type; and what log --redis and status print of text stored there.
-- A real redis-server and real worker processes; each assertion on exit codes, results
-- and output.
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"
local servers = require "support.servers"

local q = cli.quote
local bin = cli.bin

-- the tool every job runs (doubles n; waits for `gate`, appends n to `mark`)
local TOOLS = cli.slurp("spec/cli/fixtures/fleet/step.lua")

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

describe("the queue's keys left as junk (a real redis-server)", function()
  local redis, dir, tools, plan, gated

  setup(function()
    redis = assert(servers.redis())
    dir = fs.tmpdir()
    tools = dir .. "/tools"
    sh("mkdir -p " .. q(tools))
    fs.write(tools .. "/t.lua", TOOLS)
    plan = dir .. "/p.json"
    fs.write(plan, cjson.encode { plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.a" } },
                                  output = "†state.a" })
    gated = dir .. "/gated.json"
    fs.write(gated, cjson.encode { plan = { { _tool = "step", n = "†input.n", gate = "†input.gate",
                                               _outputPath = "†state.a" } }, output = "†state.a" })
  end)
  teardown(function()
    redis.stop()
    sh("rm -rf " .. q(dir))
  end)

  local function obelus(args, secs) return cli.run_for(secs or 30, args) end
  local function rcli(args) return redis.call(args) end
  local function submit(queue, input, p)
    local s = obelus { "submit", p or plan, "--redis", redis.url, "--queue", queue, "--input", input }
    assert.are.equal(0, s.code, s.err)
    return s.out:match("[^\n]+")
  end
  local function drain(queue)
    return obelus({ "worker", "--redis", redis.url, "--queue", queue, "--tools", tools, "--drain" }, 30)
  end
  local function result(queue, id)
    local r = obelus { "wait", "--redis", redis.url, "--queue", queue, "--timeout", "10000", id }
    return cjson.decode(r.out:match("[^\n]+") or "null"), r
  end

  it("a jobs stream that is a string: worker --drain ends, exit 3, saying why (no busy loop)", function()
    rcli { "SET", "ob:{j1}:jobs", "not a stream" }
    local w = drain("j1")
    assert.are.equal(3, w.code, w.err)
    assert.truthy(w.err:find("cannot read the jobs of queue j1: WRONGTYPE", 1, true), w.err)
    -- not once per read: a few lines in all
    local _, n = w.err:gsub("\n", "")
    assert.is_true(n < 5, w.err)
  end)

  it("junk in the stats hash: the result is stored and counted done, not 'could not be stored'", function()
    rcli { "HSET", "ob:{j2}:stats", "done", "abc", "failed", "-5" }
    local id = submit("j2", '{"n": 3}')
    local w = drain("j2")
    assert.are.equal(0, w.code, w.err)
    assert.falsy(w.err:find("could not be stored", 1, true), w.err)
    assert.truthy(w.err:find("1 done, 0 failed", 1, true), w.err)
    local res = result("j2", id)
    assert.are.same({ job = id, exit = 0, output = 6 }, res)
  end)

  it("a job's journal key a hash before it runs: replaced by its journal, which log --redis reads", function()
    local id = submit("j3", '{"n": 4}')
    rcli { "HSET", "ob:{j3}:journal:" .. id, "a", "b" }
    local w = drain("j3")
    assert.are.equal(0, w.code, w.err)
    assert.are.same({ job = id, exit = 0, output = 8 }, (result("j3", id)))
    local l = obelus { "log", "--redis", redis.url, "--queue", "j3", id }
    assert.are.equal(0, l.code, l.err)
    assert.truthy(l.out:find("step", 1, true), l.out)
  end)

  it("a job's journal turned into a hash while it runs: its record still holds it whole", function()
    local gate = dir .. "/gate4a"
    local id = submit("j4a", cjson.encode { n = 5, gate = gate }, gated)
    local jk = "ob:{j4a}:journal:" .. id
    local wout = os.tmpname()
    local p = assert(io.popen(("%s worker --redis %s --queue j4a --tools %s --drain >%s 2>&1 & echo $!"):format(
      q(bin), q(redis.url), q(tools), wout)))
    local pid = p:read("l")
    p:close()
    local seen = false -- the run has shipped its first lines (the tool waits for the gate)
    for _ = 1, 600 do
      if rcli({ "EXISTS", jk }):match("1") then seen = true break end
      os.execute("sleep 0.05")
    end
    assert.is_true(seen, "the job's journal never reached Redis")
    rcli { "DEL", jk }
    rcli { "HSET", jk, "junk", "x" } -- the APPENDs to come are refused
    fs.write(gate, "")
    local res = result("j4a", id)
    for _ = 1, 600 do
      if not sh("kill -0 " .. pid .. " 2>/dev/null") then break end
      os.execute("sleep 0.05")
    end
    sh("kill -9 " .. pid .. " 2>/dev/null")
    os.remove(wout)
    assert.are.equal(0, res.exit, cjson.encode(res))
    assert.are.equal("0", rcli({ "EXISTS", jk }):match("%d")) -- the running journal's key went
    local l = obelus { "log", "--redis", redis.url, "--queue", "j4a", id }
    assert.are.equal(0, l.code, l.err)
    assert.truthy(l.out:find("1 output", 1, true), l.out)
  end)

  it("the minute's bucket of journal records is a string: no job is done with its journal lost", function()
    -- the worker's buckets of this minute and the next two, where the records would go
    local now = tonumber((rcli({ "TIME" }):match("%d+"))) * 1000
    for m = 0, 2 do
      rcli { "SET", ("ob:{j4}:journals:%d:w4"):format(now // 60000 + m), "junk" }
    end
    -- a lone job first (its journal held as text, for a record that then fails), then 40
    -- at once (most end together: their record goes with their results, and fails them)
    local lone = submit("j4", '{"n": 5}')
    local d1 = obelus { "worker", "--redis", redis.url, "--queue", "j4", "--name", "w4", "--tools", tools, "--drain" }
    assert.are.equal(0, d1.code, d1.err)
    assert.truthy(d1.err:find("could not be stored", 1, true), d1.err)
    local f = dir .. "/j4.jsonl"
    local t = {}
    for i = 1, 40 do t[i] = cjson.encode { n = i } end
    fs.write(f, table.concat(t, "\n") .. "\n")
    local s = obelus { "submit", plan, "--redis", redis.url, "--queue", "j4", "--batch", f }
    assert.are.equal(0, s.code, s.err)
    local d2 = obelus { "worker", "--redis", redis.url, "--queue", "j4", "--name", "w4", "--tools", tools,
                        "--drain", "--jobs", "64" }
    assert.are.equal(0, d2.code, d2.err)
    local ids = { lone }
    for id in s.out:gmatch("%S+") do ids[#ids + 1] = id end
    local failed = 0
    for _, id in ipairs(ids) do
      local res = result("j4", id)
      if res.exit == 1 then -- failed, naming the bucket
        failed = failed + 1
        assert.truthy(res.error:find("its journal could not be written to Redis (ob:{j4}:journals:", 1, true), res.error)
        assert.truthy(res.error:find("WRONGTYPE", 1, true), res.error)
      else -- done: its journal kept as text, read back
        assert.are.equal(0, res.exit, cjson.encode(res))
        assert.are.equal("1", rcli({ "EXISTS", "ob:{j4}:journal:" .. id }):match("%d"))
        local l = obelus { "log", "--redis", redis.url, "--queue", "j4", id }
        assert.are.equal(0, l.code, l.err)
      end
    end
    assert.are.equal(0, result("j4", lone).exit) -- the lone one: held, so done
    assert.truthy(failed > 0 or d2.err:find("could not be stored", 1, true), d2.err)
  end)

  it("a job's journal in Redis that does not go with its plan: the job fails naming the line, nothing re-runs", function()
    local id = submit("j8", '{"n": 4}')
    -- a real journal of the plan, its output message taken out: "done" with no output
    local j = dir .. "/j8.jsonl"
    local r = obelus { "run", plan, "--tools", tools, "--input", '{"n": 4}', "--journal", j }
    assert.are.equal(0, r.code, r.err)
    local kept = {}
    for line in io.lines(j) do
      if not line:find('"kind":"state"', 1, true) then kept[#kept + 1] = line end
    end
    assert.is_true(#kept >= 3)
    local f = assert(io.open(j, "w"))
    f:write(table.concat(kept, "\n"), "\n")
    f:close()
    assert.truthy(sh(("redis-cli -p %d -x SET %s < %s >/dev/null"):format(redis.port, q("ob:{j8}:journal:" .. id), q(j))))
    -- a worker that died holding the job: the next one claims it and resumes its journal
    rcli { "XREADGROUP", "GROUP", "workers", "dead-worker", "COUNT", "1", "STREAMS", "ob:{j8}:jobs", ">" }
    os.execute("sleep 0.1") -- idle past --claim-idle (the least it takes, 10 ms)
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "j8", "--tools", tools, "--claim-idle", "10",
                       "--drain" }, 30)
    assert.are.equal(0, w.code, w.err)
    local res = result("j8", id)
    assert.are.equal(2, res.exit, cjson.encode(res)) -- invalid, as a job that cannot run is
    local why = res.output and res.output[1] or ""
    assert.truthy(why:find("its journal cannot be resumed: line 5: inconsistent journal: call #0 settled done", 1, true), why)
  end)

  it("a plan key of the wrong type: the job fails saying its key holds no text, not that it is gone", function()
    rcli { "HSET", "ob:{j5}:plan:00000000000000b1", "_tool", "step" }
    rcli { "XADD", "ob:{j5}:jobs", "*", "job", "wt", "plan", "00000000000000b1" }
    local w = drain("j5")
    assert.are.equal(0, w.code, w.err)
    local res = result("j5", "wt")
    assert.are.equal(2, res.exit, cjson.encode(res))
    local why = cjson.encode(res.output)
    assert.truthy(why:find("holds no text", 1, true), why)
    assert.falsy(why:find("gone", 1, true), why)
  end)

  it("log --redis of a job whose plan was gone: exit 1, saying why from its stored output", function()
    rcli { "XADD", "ob:{j6}:jobs", "*", "job", "pg", "plan", "0123456789abcdef" }
    local w = drain("j6")
    assert.are.equal(0, w.code, w.err)
    local l = obelus { "log", "--redis", redis.url, "--queue", "j6", "pg" }
    assert.are.equal(1, l.code, l.err)
    assert.truthy(l.err:find("it failed before it ran", 1, true), l.err)
    assert.truthy(l.err:find("plan is gone", 1, true), l.err)
  end)

  it("log --redis prints a stored error with terminal controls escaped", function()
    rcli { "HSET", "ob:{j7}:job:e1", "state", "failed", "exit", "2", "error", "bad \27[2J\27]0;pwned\7 x" }
    local l = obelus { "log", "--redis", redis.url, "--queue", "j7", "e1" }
    assert.are.equal(1, l.code, l.err)
    assert.falsy(l.err:find("[\27\7]"), l.err)
    assert.truthy(l.err:find("bad \\x1b[2J", 1, true), l.err)
  end)

  it("status prints a worker's name and host from Redis escaped", function()
    rcli { "HSET", "ob:{j8}:workers", "e\27[31mRED", '{"host":"h\\u001b[2J","pid":1,"seen":1,"tools_id":"\\u001b[31m"}' }
    local s = obelus { "status", "--redis", redis.url, "--queue", "j8" }
    assert.are.equal(0, s.code, s.err)
    assert.falsy(s.out:find("\27", 1, true), s.out)
    assert.truthy(s.out:find("e\\x1b[31mRED", 1, true), s.out)
  end)
end)
