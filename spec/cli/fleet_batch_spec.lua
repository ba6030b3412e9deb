-- spec/cli/fleet_batch_spec.lua -- batches of any size: `submit --batch` records the batch
-- (its id said on stderr, standard output still the job ids), and `wait` takes any number
-- of jobs: on the command line (in the order given), from --ids FILE or stdin, or a batch
-- (each job once, as it finishes). A real redis-server and worker; 100,000 jobs. Every
-- obelus process runs under `timeout` (and `ulimit -v` outside ASan).
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"
local servers = require "support.servers"

local q = cli.quote
local bin = cli.bin
local ASAN = bin:find("/asan/", 1, true) ~= nil
local lines = cli.lines

local N = 100000

describe("batches of any size (a real redis-server)", function()
  local redis, dir, tools, plan, gated

  setup(function()
    redis = assert(servers.redis { fsync = "no" }) -- AOF without fsyncs: the batch is what is measured
    dir = fs.tmpdir()
    tools = dir .. "/tools"
    os.execute("mkdir -p " .. q(tools))
    fs.write(tools .. "/step.lua", cli.slurp("spec/cli/fixtures/fleet/step.lua"))
    plan = dir .. "/plan.json"
    fs.write(plan, cjson.encode { plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.a" } },
                                  output = "†state.a" })
    gated = dir .. "/gated.json" -- each job waits until the file its input names exists
    fs.write(gated, cjson.encode { plan = { { _tool = "step", n = "†input.n", gate = "†input.gate",
                                              _outputPath = "†state.a" } }, output = "†state.a" })
  end)
  teardown(function()
    redis.stop()
    os.execute("rm -rf " .. q(dir))
  end)

  -- obelus ARGS (each quoted) with `redirects` (a shell tail: "<f", "| ..."), under a
  -- virtual memory cap of vm_kb (none under ASan) and `timeout -s KILL secs`
  local function obelus(args, opts)
    opts = opts or {}
    local parts = {}
    for i, a in ipairs(args) do parts[i] = q(a) end
    local out, err = os.tmpname(), os.tmpname()
    local cmd = ("%s%s timeout -s KILL %d %s %s %s >%s 2>%s"):format(
      ASAN and "" or ("ulimit -v %d; "):format(opts.vm_kb or 400000), opts.before or "",
      opts.secs or 60, q(bin), table.concat(parts, " "), opts.stdin or "", out, err)
    local _, how, code = os.execute(cmd)
    local r = { code = how == "exit" and code or 128 + code, out = cli.slurp(out), err = cli.slurp(err) }
    os.remove(out)
    os.remove(err)
    return r
  end

  -- wait's lines as {job = result}; fails on a job printed twice
  local function by_job(out)
    local got, n = {}, 0
    for _, l in ipairs(lines(out)) do
      local o = cjson.decode(l)
      assert(got[o.job] == nil, "printed twice: " .. o.job)
      got[o.job] = o
      n = n + 1
    end
    return got, n
  end

  it("waits for 100,000 jobs by --ids FILE, by stdin and by --batch: each job once, its result right", function()
    local batch = dir .. "/big.jsonl"
    local t = {}
    for i = 1, N do t[i] = ('{"n": %d}'):format(i) end
    fs.write(batch, table.concat(t, "\n") .. "\n")
    local s = obelus({ "submit", plan, "--redis", redis.url, "--queue", "big", "--tools", tools, "--batch", batch },
                     { vm_kb = 4000000 })
    assert.are.equal(0, s.code, s.err)
    local ids = lines(s.out) -- standard output: the ids alone, one a line, in order
    assert.are.equal(N, #ids)
    local b, count, first, last = s.err:match("^obelus submit: batch (%d+): (%d+) jobs, (%S+) to (%S+) %(")
    assert.truthy(b, s.err)
    assert.are.same({ tostring(N), ids[1], ids[N] }, { count, first, last })
    assert.are.equal(tostring(N), redis.cli("hget 'ob:{big}:batch:" .. b .. "' count"):match("%d+"))
    local want = {}
    for i, id in ipairs(ids) do want[id] = 2 * i end

    local w = obelus({ "worker", "--redis", redis.url, "--queue", "big", "--tools", tools, "--drain", "--jobs", "256" },
                     { vm_kb = 4000000, secs = 600 })
    assert.are.equal(0, w.code, w.err)
    assert.truthy(w.err:find(N .. " done, 0 failed", 1, true), w.err)

    local file = dir .. "/ids.txt"
    fs.write(file, s.out)
    for _, how in ipairs {
      { args = { "--ids", file } },
      -- standard input, every id twice: still each job once
      { args = { "--ids", "-" }, before = "cat " .. q(file) .. " " .. q(file) .. " |" },
      { args = { "--batch", b } },
    } do
      local args = { "wait", "--redis", redis.url, "--queue", "big", "--timeout", "120000" }
      for _, a in ipairs(how.args) do args[#args + 1] = a end
      local r = obelus(args, { vm_kb = 200000, secs = 180, before = how.before })
      local what = table.concat(how.args, " ")
      assert.are.equal(0, r.code, what .. ": " .. r.err)
      local got, n = by_job(r.out)
      assert.are.equal(N, n, what)
      for id, v in pairs(want) do
        local res = got[id]
        if not (res and res.exit == 0 and res.output == v) then
          error(what .. ": job " .. id .. ": " .. cjson.encode(res))
        end
      end
    end

    -- the command line: more than the 4,096 ids it once took, in the order given
    local args = { "wait", "--redis", redis.url, "--queue", "big" }
    for i = 5000, 1, -1 do args[#args + 1] = ids[i] end
    local r = obelus(args, { vm_kb = 200000 })
    assert.are.equal(0, r.code, r.err)
    local got = lines(r.out)
    assert.are.equal(5000, #got)
    for k, l in ipairs(got) do
      local i = 5001 - k
      assert.are.same({ job = ids[i], exit = 0, output = 2 * i }, cjson.decode(l))
    end
  end)

  -- `submit --batch` streams its file: peak RSS under RSS_KB however many lines (the
  -- whole file parsed at once took about 260 MB for these 300,000; streamed, about 14)
  local BIG, RSS_KB = 300000, 64 * 1024
  local function has_time() return os.execute("test -x /usr/bin/time") end

  -- the keys of queue qn, sorted
  local function keys(qn)
    local t = lines(redis.cli(("--scan --pattern 'ob:{%s}:*'"):format(qn)))
    table.sort(t)
    return t
  end

  it("streams a 300,000-line batch in bounded memory: ids consecutive, in order, the batch's record right", function()
    local big = dir .. "/stream.jsonl"
    local t = {}
    for i = 1, BIG do t[i] = ('{"n": %d}'):format(i) end
    fs.write(big, table.concat(t, "\n") .. "\n")
    t = nil
    redis.cli("set 'ob:{stream}:seq' 41") -- ids start past what others took
    local rss = dir .. "/stream.rss"
    local s = obelus({ "submit", plan, "--redis", redis.url, "--queue", "stream", "--batch", big },
                     { before = has_time() and ("/usr/bin/time -f %%M -o %s "):format(q(rss)) or "", secs = 300 })
    assert.are.equal(0, s.code, s.err)
    local ids = lines(s.out)
    assert.are.equal(BIG, #ids)
    for i, id in ipairs(ids) do
      if id ~= tostring(41 + i) then error(("line %d: id %s, not %d"):format(i, id, 41 + i)) end
    end
    local b, count, first, last = s.err:match("^obelus submit: batch (%d+): (%d+) jobs, (%S+) to (%S+) %(")
    assert.truthy(b, s.err)
    assert.are.same({ tostring(BIG), "42", tostring(41 + BIG) }, { count, first, last })
    local rec = lines(redis.cli("hmget 'ob:{stream}:batch:" .. b .. "' first last count"))
    assert.are.same({ "42", tostring(41 + BIG), tostring(BIG) }, rec)
    -- its jobs left to end, counted over every part; kept while any is left
    assert.are.equal(tostring(BIG), redis.cli("hget 'ob:{stream}:batch:" .. b .. "' left"):match("%d+"))
    assert.are.equal("-1", redis.cli("ttl 'ob:{stream}:batch:" .. b .. "'"):match("%-?%d+"))
    assert.are.equal(tostring(41 + BIG), redis.cli("get 'ob:{stream}:seq'"):match("%d+"))
    assert.are.equal(tostring(BIG), redis.cli("xlen 'ob:{stream}:jobs'"):match("%d+"))
    -- the plan stored once, counted once per job over every part
    local refs = lines(redis.cli("hgetall 'ob:{stream}:planrefs'"))
    assert.are.equal(2, #refs)
    assert.are.equal(tostring(BIG), refs[2])
    assert.truthy(redis.cli("exists 'ob:{stream}:plan:" .. refs[1] .. "'"):match("^1"))
    -- the input of a job of the last part is its line's
    assert.truthy(redis.cli("xrevrange 'ob:{stream}:jobs' + - count 1"):find('[{"n":' .. BIG .. '}]', 1, true))
    if has_time() and not ASAN then -- ASan's quarantine and shadow outweigh what is measured
      local kb = tonumber(cli.slurp(rss):match("(%d+)%s*$"))
      assert.truthy(kb and kb < RSS_KB, ("peak RSS %s KB, more than %d"):format(tostring(kb), RSS_KB))
    end
    redis.cli("del 'ob:{stream}:jobs'")
  end)

  it("a bad line near the end of a big batch: said with its number, nothing queued, no id taken", function()
    local bad = dir .. "/bad-end.jsonl"
    local t = {}
    for i = 1, BIG do t[i] = ('{"n": %d}'):format(i) end
    t[BIG - 2] = '{"n": oops}'
    fs.write(bad, table.concat(t, "\n") .. "\n")
    redis.cli("set 'ob:{stream-bad}:seq' 7")
    local s = obelus { "submit", plan, "--redis", redis.url, "--queue", "stream-bad", "--batch", bad }
    assert.are.equal(2, s.code, s.err)
    assert.are.equal("", s.out)
    assert.truthy(s.err:find("obelus submit: " .. bad .. ":" .. (BIG - 2) .. ": ", 1, true), s.err)
    assert.are.same({ "ob:{stream-bad}:seq" }, keys("stream-bad")) -- no job, plan, stream nor batch
    assert.are.equal("7", redis.cli("get 'ob:{stream-bad}:seq'"):match("%d+"))
  end)

  it("a sharded batch of many parts and one on standard input: ids consecutive, plans counted in full", function()
    local p = dir .. "/inst3.json"
    fs.write(p, cjson.encode { instances = { "a", "b", "c" },
                               plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.x" } },
                               output = "†state.x" })
    local n, t = 6001, {}
    for i = 1, n do t[i] = ('{"n": %d}'):format(i) end
    local file = dir .. "/sharded-many.jsonl"
    fs.write(file, table.concat(t, "\n\n")) -- blank lines between, no newline at the end
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "stream-sh", "--batch", file, "--shard", "1" }
    assert.are.equal(0, s.code, s.err)
    local ids = lines(s.out)
    assert.are.equal(n, #ids)
    for i, id in ipairs(ids) do assert.are.equal(tostring(i), id) end
    assert.truthy(s.err:find(("batch %%d+: %d jobs, 1 to %d "):format(n, n)), s.err)
    assert.are.equal("sharded", redis.cli("hget 'ob:{stream-sh}:job:" .. n .. "' state"):match("%a+"))
    assert.are.equal(tostring(3 * n), redis.cli("xlen 'ob:{stream-sh}:jobs'"):match("%d+"))
    local refs = lines(redis.cli("hgetall 'ob:{stream-sh}:planrefs'")) -- a plan per part, each run n times
    local sb = s.err:match("batch (%d+):") -- its entries left: the parts, not the wholes
    assert.are.equal(tostring(3 * n), redis.cli("hget 'ob:{stream-sh}:batch:" .. sb .. "' left"):match("%d+"))
    assert.are.same({ tostring(n), tostring(n), tostring(n) }, { refs[2], refs[4], refs[6] })
    -- standard input (a pipe, read once: kept aside for the second pass), past a part's size
    local pipe = obelus({ "submit", plan, "--redis", redis.url, "--queue", "stream-in", "--batch", "-" },
                        { before = ("(cat %s; echo; cat %s) |"):format(q(file), q(file)) })
    assert.are.equal(0, pipe.code, pipe.err)
    local got = lines(pipe.out)
    assert.are.equal(2 * n, #got)
    for i, id in ipairs(got) do assert.are.equal(tostring(i), id) end
    local b = pipe.err:match("batch (%d+):")
    assert.are.same({ "1", tostring(2 * n) },
                    lines(redis.cli("hmget 'ob:{stream-in}:batch:" .. b .. "' first last")))
  end)

  it("a batch that does not exist, or a --batch that is not a batch id: said, exit 2, nothing printed", function()
    local r = obelus { "wait", "--redis", redis.url, "--queue", "nob", "--batch", "12345" }
    assert.are.equal(2, r.code, r.err)
    assert.are.equal("", r.out)
    assert.truthy(r.err:find("obelus wait: --batch 12345: no such batch in queue nob", 1, true), r.err)
    local bad = obelus { "wait", "--redis", redis.url, "--queue", "nob", "--batch", "b7" }
    assert.are.equal(2, bad.code)
    assert.truthy(bad.err:find("--batch needs the batch id", 1, true), bad.err)
    -- a record that is not one (written by hand): said, not taken for a range
    redis.cli("hset 'ob:{nob}:batch:3' first 9 last x")
    local broken = obelus { "wait", "--redis", redis.url, "--queue", "nob", "--batch", "3" }
    assert.are.equal(2, broken.code)
    assert.truthy(broken.err:find("is broken", 1, true), broken.err)
  end)

  it("--ids with a line that is not job ids: names the file and the line, exit 2, waits for nothing", function()
    local file = dir .. "/junk.txt"
    fs.write(file, "1\n2 3\n\n  4\t5\r\n{\"job\": \"6\"}\n7\n")
    local r = obelus { "wait", "--redis", redis.url, "--queue", "junk", "--ids", file }
    assert.are.equal(2, r.code, r.err)
    assert.are.equal("", r.out)
    assert.truthy(r.err:find("obelus wait: --ids " .. file .. ':5: "{"job":" is not a job id', 1, true), r.err)
    local stdin = obelus({ "wait", "--redis", redis.url, "--queue", "junk", "--ids", "-" },
                         { stdin = "<" .. q(cli.tmpfile("8\n../../etc/passwd\n")) })
    assert.are.equal(2, stdin.code)
    assert.truthy(stdin.err:find('--ids <stdin>:2: "../../etc/passwd" is not a job id', 1, true), stdin.err)
    local arg = obelus { "wait", "--redis", redis.url, "--queue", "junk", "1", "a b" }
    assert.are.equal(2, arg.code)
    assert.truthy(arg.err:find('"a b" is not a job id', 1, true), arg.err)
    local none = obelus { "wait", "--redis", redis.url, "--queue", "junk", "--ids", dir .. "/no-such-file" }
    assert.are.equal(2, none.code)
    assert.truthy(none.err:find("no-such-file: No such file", 1, true), none.err)
  end)

  it("--batch prints each job as it finishes, not in the batch's order; --timeout the rest with their state", function()
    local gates, t = {}, {}
    for i = 1, 3 do
      gates[i] = dir .. "/gate" .. i
      t[i] = cjson.encode { n = i, gate = gates[i] }
    end
    local batch = dir .. "/gated.jsonl"
    fs.write(batch, table.concat(t, "\n"))
    local s = obelus { "submit", gated, "--redis", redis.url, "--queue", "gated", "--tools", tools, "--batch", batch }
    assert.are.equal(0, s.code, s.err)
    local ids = lines(s.out)
    local b = s.err:match("batch (%d+):")
    local out, err = dir .. "/gated.out", dir .. "/gated.err"
    os.execute(("%s timeout -s KILL 60 %s wait --redis %s --queue gated --batch %s >%s 2>%s &"):format(
      ASAN and "" or "ulimit -v 400000;", q(bin), q(redis.url), b, out, err))
    local pid = cli.sh(("%s worker --redis %s --queue gated --tools %s --jobs 3 >/dev/null 2>&1 & echo $!"):format(
      q(bin), q(redis.url), q(tools))):match("%d+")
    local function printed(k)
      for _ = 1, 600 do
        if #lines(fs.slurp(out) or "") >= k then return lines(fs.slurp(out)) end
        os.execute("sleep 0.05")
      end
      return lines(fs.slurp(out) or "")
    end
    -- the last job of the batch finishes first: printed while the others still run
    fs.write(gates[3], "")
    local got = printed(1)
    assert.are.equal(1, #got, fs.slurp(err))
    assert.are.same({ job = ids[3], exit = 0, output = 6 }, cjson.decode(got[1]))
    fs.write(gates[1], "")
    got = printed(2)
    assert.are.same({ job = ids[1], exit = 0, output = 2 }, cjson.decode(got[2]))
    -- the second still runs: --timeout prints it with its state
    local r = obelus { "wait", "--redis", redis.url, "--queue", "gated", "--batch", b, "--timeout", "300" }
    assert.are.equal(4, r.code, r.err)
    local res = by_job(r.out)
    assert.are.same({ job = ids[2], exit = cjson.null, state = "running" }, res[ids[2]])
    assert.are.same({ job = ids[3], exit = 0, output = 6 }, res[ids[3]])
    -- on the command line, in the order given: the one that runs first, then the finished one
    local inorder = obelus { "wait", "--redis", redis.url, "--queue", "gated", ids[2], ids[3], "--timeout", "300" }
    assert.are.equal(4, inorder.code, inorder.err)
    assert.are.same({ { job = ids[2], exit = cjson.null, state = "running" }, { job = ids[3], exit = 0, output = 6 } },
                    { cjson.decode(lines(inorder.out)[1]), cjson.decode(lines(inorder.out)[2]) })
    fs.write(gates[2], "")
    got = printed(3)
    assert.are.same({ job = ids[2], exit = 0, output = 4 }, cjson.decode(got[3]))
    os.execute("kill -TERM " .. pid)
  end)

  it("a batch of sharded jobs: --batch gives each its parts' outputs in one object", function()
    local p = dir .. "/inst.json"
    fs.write(p, cjson.encode { instances = { "a", "b", "c" },
                               plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.x" } },
                               output = "†state.x" })
    local batch = dir .. "/sharded.jsonl"
    fs.write(batch, '{"n": 1}\n{"n": 5}\n')
    local s = obelus { "submit", p, "--redis", redis.url, "--queue", "sh", "--tools", tools, "--batch", batch,
                       "--shard", "2" }
    assert.are.equal(0, s.code, s.err)
    local ids = lines(s.out)
    assert.are.equal(2, #ids)
    local b = s.err:match("batch (%d+): 2 jobs")
    assert.truthy(b, s.err)
    local w = obelus({ "worker", "--redis", redis.url, "--queue", "sh", "--tools", tools, "--drain", "--jobs", "4" },
                     { vm_kb = 4000000 })
    assert.are.equal(0, w.code, w.err)
    local r = obelus { "wait", "--redis", redis.url, "--queue", "sh", "--batch", b }
    assert.are.equal(0, r.code, r.err)
    local got = by_job(r.out)
    assert.are.same({ job = ids[1], exit = 0, output = { a = 2, b = 2, c = 2 } }, got[ids[1]])
    assert.are.same({ job = ids[2], exit = 0, output = { a = 10, b = 10, c = 10 } }, got[ids[2]])
    -- every part ended: none left, and the batch's record expires with the results (a day)
    assert.are.equal("0", redis.cli("hget 'ob:{sh}:batch:" .. b .. "' left"):match("%-?%d+"))
    local ttl = tonumber(redis.cli("ttl 'ob:{sh}:batch:" .. b .. "'"):match("%-?%d+"))
    assert.truthy(ttl > 86000 and ttl <= 86400, ttl)
    -- without --batch, submit says no batch: stderr stays empty
    local one = obelus { "submit", p, "--redis", redis.url, "--queue", "sh", "--input", '{"n": 1}' }
    assert.are.equal(0, one.code, one.err)
    assert.are.equal("", one.err)
  end)
end)
