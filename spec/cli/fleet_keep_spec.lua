-- spec/cli/fleet_keep_spec.lua -- what a finished job leaves in Redis, and for how long:
-- its result (--keep-results), its journal as a compact record in the minute's bucket
-- (--keep-journals), its plan while jobs of it are to come; the jobs stream let go of
-- what was acknowledged; `status` measuring a finished job's memory; and a queue that,
-- run again and again, comes back to the same keys. A real redis-server and real worker
-- processes; expiries are waited for by looking at Redis, never by a clock.
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"
local servers = require "support.servers"

local q = cli.quote

local TOOLS = cli.slurp("spec/cli/fixtures/fleet/step.lua")

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

describe("what a finished job keeps in Redis (a real redis-server)", function()
  local redis, dir, tools, plan, steps

  setup(function()
    redis = assert(servers.redis())
    dir = fs.tmpdir()
    tools = dir .. "/tools"
    sh("mkdir -p " .. q(tools))
    fs.write(tools .. "/t.lua", TOOLS)
    plan = dir .. "/p.json"
    fs.write(plan, cjson.encode { plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.a" } },
                                  output = "†state.a" })
    local calls = {}
    for i = 1, 4 do
      calls[i] = { _tool = "step", n = i == 1 and "†input.n" or ("†state.s" .. (i - 1)), _outputPath = "†state.s" .. i }
    end
    steps = dir .. "/steps.json"
    fs.write(steps, cjson.encode { plan = calls, output = "†state.s4" })
  end)
  teardown(function()
    redis.stop()
    sh("rm -rf " .. q(dir))
  end)

  local function obelus(args, secs) return cli.run_for(secs or 60, args) end
  local function rcli(args) return redis.call(args) end
  local lines = cli.lines
  local function batch(queue, n, p)
    local f = dir .. "/batch-" .. queue .. ".jsonl"
    local t = {}
    for i = 1, n do t[i] = cjson.encode { n = i } end
    fs.write(f, table.concat(t, "\n") .. "\n")
    local s = obelus { "submit", p or plan, "--redis", redis.url, "--queue", queue, "--tools", tools, "--batch", f }
    assert.are.equal(0, s.code, s.err)
    return lines(s.out)
  end
  local function drain(queue, extra)
    local args = { "worker", "--redis", redis.url, "--queue", queue, "--tools", tools, "--drain", "--jobs", "64" }
    for _, a in ipairs(extra or {}) do args[#args + 1] = a end
    local w = obelus(args)
    assert.are.equal(0, w.code, w.err)
    return w
  end
  local function keys(queue)
    local t = lines(rcli { "KEYS", "ob:{" .. queue .. "}:*" })
    table.sort(t)
    return t
  end
  local function kinds(list, queue)
    local n = {}
    for _, k in ipairs(list) do
      local kind = k:sub(#("ob:{" .. queue .. "}:") + 1):match("^[a-z]+")
      n[kind] = (n[kind] or 0) + 1
    end
    return n
  end
  -- until f() is true, looking every 0.1 s, for at most secs (a bound on a hang, not a timing)
  local function until_true(f, secs)
    for _ = 1, secs * 10 do
      if f() then return true end
      os.execute("sleep 0.1")
    end
    return f()
  end

  it("a finished job: its hash names its journal's record; log reads it back; its entry and plan let go", function()
    local ids = batch("k1", 300, steps)
    drain("k1")
    local h = rcli { "HGETALL", "ob:{k1}:job:" .. ids[150] }
    assert.truthy(h:find("\njournal\n", 1, true), h)
    assert.falsy(h:find("\nentry\n", 1, true), h) -- let go of once finished
    assert.falsy(h:find("\nstream\n", 1, true), h)
    assert.falsy(h:find("\ntools\n", 1, true), h) -- the tool list is the queue's, once
    assert.falsy(h:find("\ndeliveries\n", 1, true), h) -- said only past the first
    -- no running journal left, and the records are fewer than the jobs (stored together)
    local k = kinds(keys("k1"), "k1")
    assert.is_nil(k.journal)
    assert.are.equal(300, k.job)
    assert.are.equal(1, k.plan)
    local buckets = lines(rcli { "KEYS", "ob:{k1}:journals:*" })
    local records = 0
    for _, b in ipairs(buckets) do
      records = records + tonumber(rcli({ "HLEN", b }):match("%d+"))
      local ttl = tonumber(rcli({ "TTL", b }):match("%-?%d+"))
      assert.truthy(ttl > 3500 and ttl <= 3600, ttl) -- an hour after its last record, by default
    end
    assert.truthy(records >= 1 and records < 300, records)
    local ttl = tonumber(rcli({ "TTL", "ob:{k1}:job:" .. ids[1] }):match("%-?%d+"))
    assert.truthy(ttl > 86000 and ttl <= 86400, ttl) -- a day, by default
    -- every job's journal as `run` would have written it: four calls, its own input
    for _, i in ipairs { 1, 150, 300 } do
      local l = obelus { "log", "--redis", redis.url, "--queue", "k1", ids[i] }
      assert.are.equal(0, l.code, l.err)
      assert.truthy(l.out:find("{\"n\":" .. i .. "}", 1, true), l.out)
      assert.truthy(l.out:find("4 outputs", 1, true), l.out)
    end
    -- the stream keeps no acknowledged entry but the last; the plan's count is gone and
    -- its text expires (its jobs are all done)
    local stream = rcli({ "SMEMBERS", "ob:{k1}:streams" }):match("ob:{k1}:jobs:%x+")
    assert.truthy(tonumber(rcli({ "XLEN", stream }):match("%d+")) <= 1)
    assert.are.equal("0", rcli({ "HLEN", "ob:{k1}:planrefs" }):match("%d+"))
    local pk = keys("k1")
    for _, key in ipairs(pk) do
      if key:find(":plan:", 1, true) then
        assert.truthy(tonumber(rcli({ "TTL", key }):match("%-?%d+")) > 0, key)
      end
    end
  end)

  it("a plan's text stays while jobs of it wait, though its earlier jobs ended", function()
    local first = batch("k2", 5)
    drain("k2")
    local pkey = keys("k2")
    local plan_key
    for _, key in ipairs(pkey) do if key:find(":plan:", 1, true) then plan_key = key end end
    assert.truthy(tonumber(rcli({ "TTL", plan_key }):match("%-?%d+")) > 0) -- all ended: expiring
    -- the first batch's record too: none of its jobs left, it expires with their results
    assert.are.equal("0", rcli({ "HGET", "ob:{k2}:batch:1", "left" }):match("%-?%d+"))
    assert.truthy(tonumber(rcli({ "TTL", "ob:{k2}:batch:1" }):match("%-?%d+")) > 0)
    local second = batch("k2", 5) -- the same plan again: kept until they end
    assert.are.equal("-1", rcli({ "TTL", plan_key }):match("%-?%d+"))
    assert.are.equal("5", rcli({ "HGET", "ob:{k2}:planrefs", plan_key:match("%x+$") }):match("%d+"))
    assert.are.equal("5", rcli({ "HGET", "ob:{k2}:batch:2", "left" }):match("%d+"))
    assert.are.equal("-1", rcli({ "TTL", "ob:{k2}:batch:2" }):match("%-?%d+"))
    drain("k2")
    assert.are.equal("0", rcli({ "HGET", "ob:{k2}:batch:2", "left" }):match("%-?%d+"))
    local w = obelus { "wait", "--redis", redis.url, "--queue", "k2", first[1], second[5] }
    assert.are.equal(0, w.code, w.err)
  end)

  it("--keep-journals and --keep-results: records, results and plans expire; the queue comes back to the same keys", function()
    local function run_once()
      local ids = batch("k3", 200, steps)
      drain("k3", { "--keep-journals", "1s", "--keep-results", "2s" })
      return ids
    end
    local ids = run_once()
    -- read back at once
    local l = obelus { "log", "--redis", redis.url, "--queue", "k3", ids[7] }
    assert.are.equal(0, l.code, l.err)
    local st = cjson.decode(obelus({ "status", "--redis", redis.url, "--queue", "k3", "--json" }).out)
    assert.are.equal(100, st.memory.sampled_jobs)
    assert.truthy(st.memory.per_job_bytes > 0 and st.memory.per_job_bytes < 2000, cjson.encode(st.memory))
    assert.truthy(st.memory.journal_bytes < st.memory.job_hash_bytes, cjson.encode(st.memory))
    -- the bucket expires 1 s after its last record, the results and the plan 2 s after
    -- their jobs ended
    assert.is_true(until_true(function() return kinds(keys("k3"), "k3").job == nil end, 30))
    local gone = obelus { "log", "--redis", redis.url, "--queue", "k3", ids[7] }
    assert.are.equal(1, gone.code)
    local w = obelus { "wait", "--redis", redis.url, "--queue", "k3", "--timeout", "200", ids[7] }
    assert.are.equal(2, w.code, w.err) -- no such job any more
    assert.is_true(until_true(function()
      local k = kinds(keys("k3"), "k3")
      return k.journals == nil and k.plan == nil and k.batch == nil
    end, 30))
    local after_one = keys("k3")
    run_once()
    assert.is_true(until_true(function()
      local k = kinds(keys("k3"), "k3")
      return k.job == nil and k.journals == nil and k.plan == nil and k.batch == nil
    end, 30))
    -- the same keys as after the first (the per-second counters expire on their own):
    -- no key per job or batch ever run is left
    local after_two = keys("k3")
    local extra = {}
    for _, key in ipairs(after_two) do
      if key:find(":rate:", 1, true) then goto next end
      local found = false
      for _, old in ipairs(after_one) do found = found or old == key end
      if not found then extra[#extra + 1] = key end
      ::next::
    end
    assert.are.same({}, extra)
  end)

  it("--keep-journals 0: no record; the job's log says its journal was not kept", function()
    local ids = batch("k4", 3)
    drain("k4", { "--keep-journals", "0" })
    assert.are.same({}, lines(rcli { "KEYS", "ob:{k4}:journals:*" }))
    local l = obelus { "log", "--redis", redis.url, "--queue", "k4", ids[2] }
    assert.are.equal(1, l.code)
    assert.truthy(l.err:find("no longer kept", 1, true), l.err)
    local w = obelus { "wait", "--redis", redis.url, "--queue", "k4", ids[2] }
    assert.are.equal(0, w.code, w.err)
    assert.are.same({ job = ids[2], exit = 0, output = 4 }, cjson.decode(w.out))
  end)

  it("jobs that end one at a time: their journals held as text, then one record at the end", function()
    local ids = batch("k5", 12)
    drain("k5", { "--jobs", "1" })
    -- the worker's end made the held journals a record: no text key left, each job's
    -- hash names its record, and one record (two when the minute turned) holds them all
    assert.are.same({}, lines(rcli { "KEYS", "ob:{k5}:journal:*" }))
    local records, names = 0, {}
    for _, b in ipairs(lines(rcli { "KEYS", "ob:{k5}:journals:*" })) do
      records = records + tonumber(rcli({ "HLEN", b }):match("%d+"))
    end
    for _, id in ipairs(ids) do
      names[rcli({ "HGET", "ob:{k5}:job:" .. id, "journal" }):match("%S+")] = true
      local l = obelus { "log", "--redis", redis.url, "--queue", "k5", id }
      assert.are.equal(0, l.code, l.err)
    end
    assert.truthy(records >= 1 and records <= 2, records)
    local n = 0
    for _ in pairs(names) do n = n + 1 end
    assert.are.equal(records, n)
  end)

  it("a worker killed while it holds journals: each job's is there as text or in a record", function()
    local ids = batch("k6", 6)
    local wout = os.tmpname()
    local p = assert(io.popen(("%s worker --redis %s --queue k6 --tools %s --jobs 1 --claim-idle 60000 >%s 2>&1 & echo $!"):format(
      q(cli.bin), q(redis.url), q(tools), wout)))
    local pid = p:read("l")
    p:close()
    local w = obelus { "wait", "--redis", redis.url, "--queue", "k6", "--timeout", "30000", table.unpack(ids) }
    sh("kill -9 " .. pid)
    os.remove(wout)
    assert.are.equal(0, w.code, w.err)
    for i, id in ipairs(ids) do
      local rec = rcli({ "HGET", "ob:{k6}:job:" .. id, "journal" }):match("%S+")
      local ttl = tonumber(rcli({ "TTL", "ob:{k6}:journal:" .. id }):match("%-?%d+"))
      assert.truthy(rec or (ttl > 3000 and ttl <= 3600), id)
      local l = obelus { "log", "--redis", redis.url, "--queue", "k6", id }
      assert.are.equal(0, l.code, l.err)
      assert.truthy(l.out:find("{\"n\":" .. i .. "}", 1, true), l.out)
    end
  end)

  it("refuses a duration it cannot read", function()
    for _, bad in ipairs { "1w", "-3", "h", "1.5h", "" } do
      local w = obelus { "worker", "--redis", redis.url, "--tools", tools, "--keep-journals", bad }
      assert.are.equal(2, w.code, bad)
      assert.truthy(w.err:find("--keep-journals needs a duration", 1, true), w.err)
    end
    local r = obelus { "worker", "--redis", redis.url, "--tools", tools, "--keep-results", "0" }
    assert.are.equal(2, r.code)
    assert.truthy(r.err:find("1s at least", 1, true), r.err)
  end)
end)
