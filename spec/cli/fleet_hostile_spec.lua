-- spec/cli/fleet_hostile_spec.lua -- jobs anyone with Redis access could queue: stream
-- entries XADDed by hand (wrong types, missing fields, bad ids, garbage bytes, a plan
-- text that is not a plan), one job id named by two entries, a finished job's entry
-- added again. A real redis-server and real worker processes: the worker must stay
-- up, every good job must finish, every bad one must fail with a readable error that
-- wait, status and log --redis show, and a job must run once and keep its result.
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

local lines = cli.lines -- the non-empty lines of a text

describe("hostile jobs (a real redis-server, hand-made stream entries)", function()
  local redis, dir, tools

  setup(function()
    redis = assert(servers.redis())
    dir = fs.tmpdir()
    tools = dir .. "/tools"
    sh("mkdir -p " .. q(tools))
    fs.write(tools .. "/t.lua", TOOLS)
  end)
  teardown(function()
    redis.stop()
    sh("rm -rf " .. q(dir))
  end)

  local function plan_file(name, plan)
    local path = dir .. "/" .. name
    fs.write(path, cjson.encode(plan))
    return path
  end
  local function obelus(args, secs) return cli.run_for(secs or 30, args) end

  -- redis-cli with each argument quoted; stdin (bytes, NULs too) as the last argument
  local function rcli(args, stdin)
    local parts = {}
    for i, a in ipairs(args) do parts[i] = q(a) end
    local cmd = ("redis-cli -p %d %s %s 2>&1"):format(redis.port, stdin and "-x" or "", table.concat(parts, " "))
    if stdin then
      local inp = os.tmpname()
      local f = assert(io.open(inp, "wb"))
      f:write(stdin)
      f:close()
      cmd = cmd .. " <" .. inp
    end
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    return out
  end

  local function start_worker(queue, args)
    local log = os.tmpname()
    local parts = {}
    for i, a in ipairs(args or {}) do parts[i] = q(a) end
    local p = assert(io.popen(("%s worker --redis %s --queue %s %s >%s 2>&1 & echo $!"):format(
      q(bin), q(redis.url), q(queue), table.concat(parts, " "), log)))
    local pid = p:read("l")
    p:close()
    return pid, log
  end
  local function alive(pid) return sh("kill -0 " .. pid .. " 2>/dev/null") end
  local function stop(pid)
    sh("kill -TERM " .. pid .. " 2>/dev/null")
    for _ = 1, 400 do
      if not alive(pid) then return true end
      os.execute("sleep 0.05")
    end
    sh("kill -9 " .. pid .. " 2>/dev/null")
    return false
  end

  local simple = { plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.a" } }, output = "†state.a" }

  local function submit(queue, plan, ns)
    local b = dir .. "/" .. queue .. ".jsonl"
    local t = {}
    for i, n in ipairs(ns) do t[i] = ('{"n": %d}'):format(n) end
    fs.write(b, table.concat(t, "\n"))
    local s = obelus { "submit", plan, "--redis", redis.url, "--queue", queue, "--batch", b }
    assert.are.equal(0, s.code, s.err)
    return lines(s.out)
  end

  local function wait_all(queue, ids)
    local args = { "wait", "--redis", redis.url, "--queue", queue, "--timeout", "20000" }
    for _, id in ipairs(ids) do args[#args + 1] = id end
    local r = obelus(args, 40)
    local got = {}
    for _, l in ipairs(lines(r.out)) do
      local o = cjson.decode(l)
      got[o.job] = o
    end
    return r, got
  end

  it("malformed entries fail readably, each under its id; the worker stays up and every good job finishes", function()
    local p = plan_file("simple.json", simple)
    local good = submit("h1", p, { 1, 2, 3 })
    local hash = rcli({ "HGET", "ob:{h1}:job:" .. good[1], "plan" }):match("%x+")
    assert.are.equal(16, #hash)
    local stream = "ob:{h1}:jobs"
    -- a text that is not JSON, and JSON that is not a plan, stored as plans
    rcli({ "SET", "ob:{h1}:plan:00000000000000aa" }, "\0\255garbage{{")
    rcli({ "SET", "ob:{h1}:plan:00000000000000bb", '"just a string"' })
    local bad = {
      { id = "b-object", fields = { "job", "b-object", "plan", hash, "inputs", '{"n": 1}' }, why = "inputs.*object.*array" },
      { id = "b-notjson", fields = { "job", "b-notjson", "plan", hash, "inputs", '[{"n": ' }, why = "inputs.*not JSON" },
      { id = "b-noplan", fields = { "job", "b-noplan", "name", "x.json" }, why = "no \"plan\" field" },
      { id = "b-badhash", fields = { "job", "b-badhash", "plan", "../../etc" }, why = "not a plan's hash" },
      { id = "b-gone", fields = { "job", "b-gone", "plan", "0123456789abcdef" }, why = "plan is gone" },
      { id = "b-garbage", fields = { "job", "b-garbage", "plan", "00000000000000aa" }, why = "plan .*is not JSON" },
      { id = "b-string", fields = { "job", "b-string", "plan", "00000000000000bb" }, why = "a plan is a JSON array" },
      { id = "b-huge", fields = { "job", "b-huge", "plan", hash, "inputs", '[{"n": 123456789012345678901234567890}]' }, why = "too big integer" },
      { id = "b-inf", fields = { "job", "b-inf", "plan", hash, "inputs", '[{"n": 1e999999}]' }, why = "inputs.*overflow" },
      { id = "b-twice", fields = { "job", "b-twice", "plan", hash, "plan", hash }, why = "more than once" },
      -- inputs that are not objects: the run fails as `run --input 1` does (exit 1)
      { id = "b-numbers", fields = { "job", "b-numbers", "plan", hash, "inputs", "[1, 2, 3]" }, exit = 1 },
      { id = "b-batch", fields = { "job", "b-batch", "plan", hash, "batch", "../7" }, why = "not a batch id" },
      { id = "b-batch0", fields = { "job", "b-batch0", "plan", hash, "batch", "007" }, why = "not a batch id" },
      -- a batch that is not there, or a key of another type: the job runs, its end
      -- counts nothing, and no key is made
      { id = "b-nobatch", fields = { "job", "b-nobatch", "plan", hash, "inputs", '[{"n": 7}]', "batch", "999" },
        exit = 0, output = 14 },
      { id = "b-strbatch", fields = { "job", "b-strbatch", "plan", hash, "inputs", '[{"n": 8}]', "batch", "998" },
        exit = 0, output = 16 },
    }
    rcli({ "SET", "ob:{h1}:batch:998", "not a batch" })
    for _, b in ipairs(bad) do
      local args = { "XADD", stream, "*" }
      for _, f in ipairs(b.fields) do args[#args + 1] = f end
      assert.truthy(rcli(args):match("%d+%-%d+"))
    end
    -- garbage bytes (a NUL, an escape) in the name; an id that is a path; no id at all
    assert.truthy(rcli({ "XADD", stream, "*", "job", "b-name", "plan", hash, "name" }, "\27[31mx\0y"):match("%d+%-%d+"))
    local noid_entry = rcli({ "XADD", stream, "*", "plan", hash }):match("%d+%-%d+")
    local path_entry = rcli({ "XADD", stream, "*", "job", "../../../tmp/evil", "plan", hash }):match("%d+%-%d+")
    assert.truthy(noid_entry and path_entry)
    local good2 = submit("h1", p, { 4, 5, 6 })

    local pid, log = start_worker("h1", { "--tools", tools, "--jobs", "2" })
    local all = {}
    for _, id in ipairs(good) do all[#all + 1] = id end
    for _, id in ipairs(good2) do all[#all + 1] = id end
    -- the good jobs first: the hand-made entries, read before the last three, have been
    -- taken by then (a job's hash is made when a worker takes it), so wait knows them
    local r1, got = wait_all("h1", all)
    assert.are.equal(#all, #lines(r1.out), r1.out .. r1.err .. (fs.slurp(log) or ""))
    local nbad = {}
    for _, b in ipairs(bad) do nbad[#nbad + 1] = b.id end
    nbad[#nbad + 1] = "b-name"
    nbad[#nbad + 1] = noid_entry
    nbad[#nbad + 1] = path_entry
    local r, got2 = wait_all("h1", nbad)
    for k, v in pairs(got2) do got[k] = v end
    local text = fs.slurp(log) or ""
    assert.is_true(alive(pid), "the worker died:\n" .. text)
    assert.is_true(stop(pid))
    assert.are.equal(#nbad, #lines(r.out), r.out .. r.err .. text)
    for i, id in ipairs(good) do
      assert.are.same({ job = id, exit = 0, output = 2 * i }, got[id])
    end
    for i, id in ipairs(good2) do
      assert.are.same({ job = id, exit = 0, output = 2 * (i + 3) }, got[id])
    end
    for _, b in ipairs(bad) do
      local res = got[b.id]
      assert.truthy(res, b.id)
      assert.are.equal(b.exit or 2, res.exit, b.id .. ": " .. cjson.encode(res))
      local why = res.error or cjson.encode(res.output)
      assert.truthy(why:match(b.why or ""), b.id .. ": " .. why)
      if b.output then assert.are.equal(b.output, res.output, b.id) end
    end
    assert.are.equal("0", rcli({ "EXISTS", "ob:{h1}:batch:999" }):match("%d+"))
    assert.are.equal("not a batch", rcli({ "GET", "ob:{h1}:batch:998" }):match("[^\n]+"))
    assert.truthy(got["b-name"].error:match("\"name\""), cjson.encode(got["b-name"]))
    -- an entry without an id, or with one that is not an id: failed under the entry's id
    assert.truthy(got[noid_entry].error:match("no \"job\" field"), cjson.encode(got[noid_entry]))
    assert.truthy(got[path_entry].error:match("not a job id"), cjson.encode(got[path_entry]))
    assert.is_nil(io.open("/tmp/evil.jsonl"))
    -- nothing is left pending, status counts the failures, log --redis says why
    assert.truthy(rcli({ "XPENDING", stream, "workers" }):match("^0\n"))
    local st = cjson.decode(obelus({ "status", "--redis", redis.url, "--queue", "h1", "--json" }).out)
    assert.are.equal(8, st.done)
    assert.are.equal(#bad - 2 + 3, st.failed)
    local l = obelus { "log", "--redis", redis.url, "--queue", "h1", "b-object" }
    assert.are.equal(1, l.code)
    assert.truthy(l.err:match("inputs.*object"), l.err)
    assert.truthy(text:match("b%-object"), text)
    text = fs.slurp(log) or ""
    assert.falsy(text:match("Sanitizer"), text)
  end)

  it("job hashes written by hand: wait prints a readable result, never a crash or a broken line", function()
    rcli({ "HSET", "ob:{h4}:job:s1", "state", "sharded", "parts", "99999999999999999" })
    rcli({ "HSET", "ob:{h4}:job:s2", "state", "sharded", "parts", "-3" })
    rcli({ "HSET", "ob:{h4}:job:o1", "state", "done", "exit", "0", "output", "{not json" })
    rcli({ "HSET", "ob:{h4}:job:o2", "state", "failed", "exit", "99999999999", "output", "[1]" })
    rcli({ "SET", "ob:{h4}:job:t1", "not a hash" })
    local r, got = wait_all("h4", { "s1", "s2", "o1", "o2", "t1" })
    assert.are.equal(1, r.code, r.err)
    assert.are.equal(5, #lines(r.out), r.out)
    for _, id in ipairs { "s1", "s2", "t1" } do
      assert.are.equal(2, got[id].exit, r.out)
      assert.truthy(got[id].error:match("broken"), r.out)
    end
    assert.are.equal(1, got.o1.exit, r.out)
    assert.truthy(got.o1.error:match("not JSON"), r.out)
    assert.are.same({ job = "o2", exit = 1, output = { 1 } }, got.o2)
  end)

  it("two entries with one job id: it runs once, and the second entry is acked", function()
    local marks = dir .. "/marks-dup"
    local p = plan_file("slow.json", { plan = { { _tool = "step", n = 7, ms = 300, mark = marks, _outputPath = "†state.a" } },
                                      output = "†state.a" })
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "h2", "--tools", tools }
    assert.are.equal(0, s.code, s.err)
    local id = s.out:match("%S+")
    local stream = rcli({ "HGET", "ob:{h2}:job:" .. id, "stream" }):match("%S+")
    local hash = rcli({ "HGET", "ob:{h2}:job:" .. id, "plan" }):match("%x+")
    for _ = 1, 2 do
      assert.truthy(rcli({ "XADD", stream, "*", "job", id, "plan", hash, "name", "slow.json" }):match("%d+%-%d+"))
    end
    -- two workers, two slots each: all three entries are taken at once
    local pid1, log1 = start_worker("h2", { "--tools", tools, "--jobs", "2" })
    local pid2, log2 = start_worker("h2", { "--tools", tools, "--jobs", "2" })
    local r, got = wait_all("h2", { id })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ job = id, exit = 0, output = 14 }, got[id])
    for _ = 1, 200 do -- every entry acknowledged
      if rcli({ "XPENDING", stream, "workers" }):match("^0\n") then break end
      os.execute("sleep 0.05")
    end
    assert.truthy(rcli({ "XPENDING", stream, "workers" }):match("^0\n"))
    assert.is_true(alive(pid1) and alive(pid2))
    assert.is_true(stop(pid1))
    assert.is_true(stop(pid2))
    assert.are.equal("7\n", fs.slurp(marks))
    local text = (fs.slurp(log1) or "") .. (fs.slurp(log2) or "")
    assert.truthy(text:match("job " .. id .. ": .*ignored"), text)
    local st = cjson.decode(obelus({ "status", "--redis", redis.url, "--queue", "h2", "--json" }).out)
    assert.are.equal(1, st.done)
    assert.are.equal(0, st.failed)
  end)

  it("a job whose holding entry was deleted (its worker killed): a new entry of its id takes it over", function()
    local marks = dir .. "/marks-orphan"
    local plan = { plan = {} }
    for i = 1, 5 do
      plan.plan[i] = { _id = "s" .. i, _tool = "step", n = i == 1 and 1 or ("†state.s" .. (i - 1)), ms = 150,
                       mark = marks, _outputPath = "†state.s" .. i }
    end
    plan.output = "†state.s5"
    local p = plan_file("orphan.json", plan)
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "h5", "--tools", tools }
    assert.are.equal(0, s.code, s.err)
    local id = s.out:match("%S+")
    local stream = rcli({ "HGET", "ob:{h5}:job:" .. id, "stream" }):match("%S+")
    local hash = rcli({ "HGET", "ob:{h5}:job:" .. id, "plan" }):match("%x+")
    local entry = rcli({ "XRANGE", stream, "-", "+" }):match("%d+%-%d+")
    local pid = start_worker("h5", { "--tools", tools, "--claim-idle", "300" })
    local n = 0
    for _ = 1, 400 do -- until two calls have run
      n = #lines(fs.slurp(marks) or "")
      if n >= 2 then break end
      os.execute("sleep 0.02")
    end
    sh("kill -9 " .. pid)
    stop(pid)
    assert.is_true(n >= 2 and n < 5, "marks: " .. n)
    assert.truthy(rcli({ "XDEL", stream, entry }):match("1"))
    rcli({ "XADD", stream, "*", "job", id, "plan", hash, "name", "orphan.json" })
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "h5", "--tools", tools, "--claim-idle", "300", "--drain" }, 30)
    assert.are.equal(0, w.code, w.err)
    assert.truthy(w.err:match("the entry that held it is gone"), w.err)
    local r, got = wait_all("h5", { id })
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ job = id, exit = 0, output = 32 }, got[id])
    -- resumed from its journal: five calls, plus at most the one in flight at the kill
    local total = #lines(fs.slurp(marks) or "")
    assert.is_true(total == 5 or total == 6, "runs: " .. total)
  end)

  it("a finished job's entry added again (even malformed): acked and ignored, its result kept", function()
    local marks = dir .. "/marks-again"
    local p = plan_file("again.json", { plan = { { _tool = "step", n = "†input.n", mark = marks, _outputPath = "†state.a" } },
                                       output = "†state.a" })
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "h3", "--tools", tools, "--input", '{"n": 3}' }
    assert.are.equal(0, s.code, s.err)
    local id = s.out:match("%S+")
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "h3", "--tools", tools, "--drain" }, 30)
    assert.are.equal(0, w.code, w.err)
    local _, got = wait_all("h3", { id })
    assert.are.same({ job = id, exit = 0, output = 6 }, got[id])
    -- a finished job's hash no longer names its stream: the queue's set of streams does
    -- (submitted with --tools: the one that ends in the tool files' identity)
    local stream = rcli({ "SMEMBERS", "ob:{h3}:streams" }):match("ob:{h3}:jobs:%x+")
    assert.truthy(stream)
    assert.is_nil(rcli({ "HGET", "ob:{h3}:job:" .. id, "stream" }):match("%S"))
    local hash = rcli({ "HGET", "ob:{h3}:job:" .. id, "plan" }):match("%x+")
    local finished = rcli({ "HGET", "ob:{h3}:job:" .. id, "finished" })
    rcli({ "XADD", stream, "*", "job", id, "plan", hash, "inputs", '{"n": 3}' })
    rcli({ "XADD", stream, "*", "job", id, "plan", hash, "inputs", '[{"n": 5}]' })
    rcli({ "XADD", stream, "*", "job", id, "plan", "ffffffffffffffff" })
    local w2 = obelus({ "worker", "--redis", redis.url, "--queue", "h3", "--tools", tools, "--drain" }, 30)
    assert.are.equal(0, w2.code, w2.err)
    assert.truthy(w2.err:match("job " .. id .. ": already finished"), w2.err)
    assert.truthy(w2.err:match("0 done, 0 failed, 0 taken over, 0 poison, 3 ignored"), w2.err)
    local r2, got2 = wait_all("h3", { id })
    assert.are.equal(0, r2.code, r2.err)
    assert.are.same({ job = id, exit = 0, output = 6 }, got2[id])
    assert.are.equal(finished, rcli({ "HGET", "ob:{h3}:job:" .. id, "finished" }))
    assert.are.equal("3\n", fs.slurp(marks))
    assert.truthy(rcli({ "XPENDING", stream, "workers" }):match("^0\n"))
    local st = cjson.decode(obelus({ "status", "--redis", redis.url, "--queue", "h3", "--json" }).out)
    assert.are.equal(1, st.done)
    assert.are.equal(0, st.failed)
  end)
end)
