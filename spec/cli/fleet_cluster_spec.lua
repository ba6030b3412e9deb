-- spec/cli/fleet_cluster_spec.lua -- a queue against a Redis Cluster: three
-- redis-server --cluster-enabled nodes started here (free loopback ports, one temporary
-- folder, no persistence) and joined by redis-cli --cluster create. Three queues whose
-- hash tags {Q} land on the three different nodes are each driven -- submit, worker
-- --drain, wait, status -- through the URL of a node that does NOT own the queue's slot:
-- the commands must find the owner (MOVED) and keep every key of the queue there.
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"
local servers = require "support.servers"

local q = cli.quote

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

local function out(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local s = p:read("a")
  p:close()
  return s
end

local N_JOBS = 50

describe("a queue on a 3-node Redis Cluster", function()
  local dir, ports, why_not = nil, {}, nil

  local function rcli(port, args) return out(("timeout 10 redis-cli -p %d %s"):format(port, args)) end

  setup(function()
    dir = fs.tmpdir()
    sh("mkdir -p " .. q(dir .. "/tools"))
    fs.write(dir .. "/tools/step.lua", cli.slurp("spec/cli/fixtures/fleet/step.lua"))
    for i = 1, 3 do
      local port = servers.free_port()
      local d = ("%s/node%d"):format(dir, i)
      sh("mkdir -p " .. q(d))
      ports[i] = port
      local ok = sh(("redis-server --port %d --bind 127.0.0.1 --dir %s --cluster-enabled yes " ..
        "--cluster-config-file %s/nodes.conf --save '' --appendonly no --daemonize yes " ..
        "--pidfile %s/pid --logfile %s/log >%s/start.log 2>&1"):format(port, q(d), q(d), q(d), q(d), q(d)))
      local up = false
      for _ = 1, 250 do
        if ok and rcli(port, "ping"):match("PONG") then up = true break end
        os.execute("sleep 0.02")
      end
      if not up then
        local log = (fs.slurp(d .. "/start.log") or "") .. (fs.slurp(d .. "/log") or "")
        -- a redis-server built without cluster support refuses the directive
        if log:match("Bad directive") or log:match("cluster%-enabled") then
          why_not = "this redis-server has no cluster support: " .. log
          return
        end
        error("redis-server (cluster node) did not start: " .. log)
      end
    end
    local addrs = {}
    for i, p in ipairs(ports) do addrs[i] = "127.0.0.1:" .. p end
    local created = out(("timeout 60 redis-cli --cluster create %s --cluster-replicas 0 --cluster-yes")
      :format(table.concat(addrs, " ")))
    assert(created:match("All 16384 slots covered"), created)
    -- every node must know the whole map before a redirect can be trusted
    for _, p in ipairs(ports) do
      local ok = false
      for _ = 1, 250 do
        if rcli(p, "cluster info"):match("cluster_state:ok") then ok = true break end
        os.execute("sleep 0.04")
      end
      assert(ok, "the cluster did not come up on port " .. p)
    end
  end)

  teardown(function()
    for i = 1, 3 do
      local pid = (fs.slurp(("%s/node%d/pid"):format(dir, i)) or ""):gsub("%s", "")
      if pid ~= "" then sh("kill -9 " .. pid .. " 2>/dev/null") end
    end
    sh("rm -rf " .. q(dir))
  end)

  -- The port of the node that owns slot, from CLUSTER NODES.
  local function owner(slot)
    for line in rcli(ports[1], "cluster nodes"):gmatch("[^\n]+") do
      local port = tonumber(line:match("^%S+ [%d.]+:(%d+)"))
      for a, b in line:gmatch(" (%d+)%-(%d+)") do
        if slot >= tonumber(a) and slot <= tonumber(b) then return port end
      end
      for a in line:gmatch(" (%d+)$") do -- a single slot
        if slot == tonumber(a) then return port end
      end
    end
  end

  it("runs a batch on each of three queues held by three different nodes, through another node's URL", function()
    if why_not then return pending(why_not) end
    -- one queue per node: the first names whose {Q} slot lands there
    local queues, on = {}, {}
    for i = 1, 200 do
      local name = "cq" .. i
      local slot = tonumber(rcli(ports[1], ("cluster keyslot %s"):format(q("{" .. name .. "}"))))
      local port = owner(slot)
      assert(port, "no node owns slot " .. tostring(slot))
      if not on[port] then
        on[port] = name
        queues[#queues + 1] = { name = name, port = port }
      end
      if #queues == 3 then break end
    end
    assert.are.equal(3, #queues)

    local plan = dir .. "/plan.json"
    fs.write(plan, cjson.encode { plan = { { _tool = "step", n = "†input.n", _outputPath = "†state.a" } },
                                  output = "†state.a" })
    local batch = dir .. "/batch.jsonl"
    local b = {}
    for n = 1, N_JOBS do b[n] = ('{"n": %d}'):format(n) end
    fs.write(batch, table.concat(b, "\n") .. "\n")

    for k, qu in ipairs(queues) do
      -- the URLs of the two nodes that do not own this queue
      local others = {}
      for _, p in ipairs(ports) do
        if p ~= qu.port then others[#others + 1] = ("redis://127.0.0.1:%d"):format(p) end
      end
      local tools = dir .. "/tools"
      local s = cli.run_for(30, { "submit", plan, "--redis", others[1], "--queue", qu.name, "--tools", tools,
                                  "--batch", batch })
      assert.are.equal(0, s.code, s.err)
      local ids = cli.lines(s.out)
      assert.are.equal(N_JOBS, #ids)
      -- the queue lives on its slot's node: asked there, no redirect
      assert.are.equal(tostring(N_JOBS), rcli(qu.port, ("get %s"):format(q("ob:{" .. qu.name .. "}:seq"))):match("%S+"))

      local w = cli.run_for(60, { "worker", "--redis", others[2], "--queue", qu.name, "--tools", tools,
                                  "--drain", "--jobs", "4" })
      assert.are.equal(0, w.code, w.err)
      assert.truthy(w.err:match(N_JOBS .. " done, 0 failed"), w.err)

      local args = { "wait", "--redis", others[k % 2 + 1], "--queue", qu.name }
      for _, id in ipairs(ids) do args[#args + 1] = id end
      local r = cli.run_for(30, args)
      assert.are.equal(0, r.code, r.err)
      local got = cli.lines(r.out)
      assert.are.equal(N_JOBS, #got)
      for n, line in ipairs(got) do
        assert.are.same({ job = ids[n], exit = 0, output = 2 * n }, cjson.decode(line))
      end

      local st = cli.run_for(30, { "status", "--redis", others[1], "--queue", qu.name, "--json" })
      assert.are.equal(0, st.code, st.err)
      local j = cjson.decode(st.out)
      assert.are.equal(N_JOBS, j.done)
      assert.are.equal(0, j.queued)
      assert.are.equal(0, j.running)
      assert.are.equal(0, j.failed)
      local human = cli.run_for(30, { "status", "--redis", others[2], "--queue", qu.name })
      assert.are.equal(0, human.code, human.err)
      assert.truthy(human.out:match("done " .. N_JOBS), human.out)
    end
  end)
end)
