-- hostile/run.lua -- the attack list: bad plans, tools, journals, jobs and answers, each
-- run against the real obelus in a folder of its own, and the outcome classified.
--
--   lua5.4 hostile/run.lua [AREA...]     (make hostile; AREA: a file of hostile/cases/)
--   HOSTILE_ONLY=TEXT lua5.4 hostile/run.lua AREA   (only the cases whose name holds TEXT)
--
-- Each case (hostile/cases/AREA.lua returns a list of them) names the issue item it
-- attacks, the files it starts from and a shell command run in its folder, with `obelus`
-- on the PATH and $HTTP (the tests' own HTTP server, spec/support/httpd.lua) and $REDIS (a
-- redis-server of this run) in its environment. It says what a user should get: the exit
-- code, words on stderr, the output. Every run is capped: `timeout -s KILL` (default 30 s)
-- and `ulimit -v` (default 4 GB).
--
-- The outcome is one of:
--   ok      what the case expects: a clear error, or the right result
--   crash   killed by a signal it was not sent, or a sanitizer's or Lua's panic report
--   hang    still running at the cap (killed by the harness)
--   lost    a file that was there before changed or went, and the case did not allow it
--   wrong   anything else: exit 0 where an error was due, a wrong output, a vague message
-- and the tally is printed per area and in all, with every case that is not ok named.
-- Exit status: 0 when every case is ok, 1 otherwise.
--
-- A case:
--   { name = "...", item = N,              -- the issue's item (1-11)
--     files = { ["p.json"] = "...", ... }, -- written into the case's folder first
--     setup = "shell",                     -- run before (not judged), e.g. to make a FIFO
--     run = "obelus run p.json ...",       -- judged; its stdout and stderr are kept
--     secs = 30, vmem_kb = 4000000,        -- the caps
--     needs = "redis" | "http",            -- started once for the cases that need them
--     changes = { "j.jsonl", ... },        -- files the run may change (others: lost if so)
--     expect = { code = N | {N, ...},      -- the exit code(s)
--                err = "text" | {"text", ...},  -- each on stderr, plain text
--                out = "text" | function(out, dir) -> ok, why,
--                check = function(dir, r) -> ok, why } }  -- anything else (r: code, out, err)
local uv = require "luv"

local HERE = debug.getinfo(1, "S").source:sub(2):match("(.*)/") or "."
local ROOT = HERE .. "/.."
local BIN = os.getenv("OBELUS_BIN") or (ROOT .. "/bin/obelus")

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
do -- absolute: the cases run in folders of their own, and get it as $OBELUS_ROOT
  local p = assert(io.popen("cd " .. q(ROOT) .. " && pwd"))
  ROOT = p:read("l") or ROOT
  p:close()
end

local slurp = dofile(HERE .. "/support.lua").slurp

local function write(path, text)
  local dir = path:match("(.*)/")
  if dir then os.execute("mkdir -p " .. q(dir)) end
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- every regular file under dir (relative name -> bytes' digest), links as their target
local function snapshot(dir)
  local t = {}
  for line in sh("cd " .. q(dir) .. " && find . -type f -o -type l | sort"):gmatch("[^\n]+") do
    local name = line:sub(3)
    local sum = sh("cd " .. q(dir) .. " && { [ -L " .. q(name) .. " ] && readlink " .. q(name) ..
                   " || sha1sum < " .. q(name) .. "; } 2>/dev/null")
    t[name] = sum
  end
  return t
end

local function absolute(p)
  return p:sub(1, 1) == "/" and p or (uv.cwd() .. "/" .. p)
end

-- --- servers, started when a case needs them --------------------------------------
local servers = {}
local function free_port()
  local s = uv.new_tcp()
  s:bind("127.0.0.1", 0)
  local port = s:getsockname().port
  s:close()
  uv.run("nowait")
  return port
end

local function wait_file(path, ms)
  for _ = 1, ms / 20 do
    if slurp(path) and slurp(path) ~= "" then return true end
    uv.sleep(20)
  end
  return false
end

local function start(kind, scratch)
  if servers[kind] then return servers[kind] end
  local dir = scratch .. "/server-" .. kind
  os.execute("mkdir -p " .. q(dir))
  if kind == "http" then
    os.execute(("cd %s && lua5.4 spec/support/httpd.lua %s/port >%s/log 2>&1 & echo $! >%s/pid")
      :format(q(ROOT), q(dir), q(dir), q(dir)))
    assert(wait_file(dir .. "/port", 10000), "hostile: the HTTP server did not start")
    servers.http = { env = "HTTP=http://127.0.0.1:" .. slurp(dir .. "/port"):match("%d+"),
                     pid = slurp(dir .. "/pid"):match("%d+") }
  elseif kind == "redis" then
    local port = free_port()
    os.execute(("redis-server --port %d --bind 127.0.0.1 --dir %s --save '' --appendonly no " ..
                "--daemonize yes --pidfile %s/pid --logfile %s/log"):format(port, q(dir), q(dir), q(dir)))
    assert(wait_file(dir .. "/pid", 10000), "hostile: redis-server did not start")
    servers.redis = { env = "REDIS=redis://127.0.0.1:" .. port, pid = slurp(dir .. "/pid"):match("%d+") }
  end
  return servers[kind]
end

local function stop_servers()
  for _, s in pairs(servers) do os.execute("kill " .. s.pid .. " 2>/dev/null") end
end

-- --- judging ------------------------------------------------------------------------
local function list(x) return type(x) == "table" and x or { x } end

local CRASH_WORDS = { "AddressSanitizer", "runtime error:", "PANIC:", "Segmentation fault",
                      "core dumped", "Aborted", "stack overflow", "LeakSanitizer" }

-- the outcome of one case, and why when it is not ok
local function judge(case, r, before, after)
  for _, w in ipairs(CRASH_WORDS) do
    if r.err:find(w, 1, true) then return "crash", "stderr says " .. w end
  end
  local codes = list(case.expect.code or 0)
  local expected = false
  for _, c in ipairs(codes) do if c == r.code then expected = true end end
  if r.code == 137 and not expected then return "hang", "killed at the cap of " .. (case.secs or 30) .. " s" end
  if r.code > 128 and not expected then return "crash", "killed by signal " .. (r.code - 128) end
  local may = {}
  for _, f in ipairs(case.changes or {}) do may[f] = true end
  for name, sum in pairs(before) do
    if not may[name] and after[name] ~= sum then
      return "lost", name .. (after[name] and " changed" or " is gone")
    end
  end
  if not expected then
    return "wrong", ("exit %d, expected %s; stderr: %s"):format(r.code, table.concat(codes, " or "),
                                                               r.err:sub(1, 300))
  end
  for _, e in ipairs(list(case.expect.err or {})) do
    if not r.err:find(e, 1, true) then
      return "wrong", ("stderr lacks %q; it says: %s"):format(e, r.err:sub(1, 300))
    end
  end
  local out = case.expect.out
  if type(out) == "string" and not r.out:find(out, 1, true) then
    return "wrong", ("stdout lacks %q; it says: %s"):format(out, r.out:sub(1, 300))
  elseif type(out) == "function" then
    local ok, why = out(r.out, r.dir)
    if not ok then return "wrong", why or "stdout is not what it should be" end
  end
  if case.expect.check then
    local ok, why = case.expect.check(r.dir, r)
    if not ok then return "wrong", why or "the check failed" end
  end
  return "ok"
end

local function run_case(case, scratch, bindir)
  local dir = scratch .. "/" .. case.id
  os.execute("mkdir -p " .. q(dir))
  for name, text in pairs(case.files or {}) do
    write(dir .. "/" .. name, type(text) == "function" and text() or text)
  end
  local env = { "PATH=" .. bindir .. ":$PATH", "TMPDIR=" .. q(dir), "OBELUS_ROOT=" .. q(ROOT) }
  if case.needs then
    for _, n in ipairs(list(case.needs)) do env[#env + 1] = start(n, scratch).env end
  end
  local prelude = "export " .. table.concat(env, " ") .. "; cd " .. q(dir) .. "; "
  if case.setup then os.execute(prelude .. case.setup .. " >/dev/null 2>&1") end
  local before = snapshot(dir)
  local out, err = scratch .. "/" .. case.id .. ".out", scratch .. "/" .. case.id .. ".err"
  local script = scratch .. "/" .. case.id .. ".sh"
  write(script, prelude .. case.run .. "\n")
  local limit = os.getenv("HOSTILE_NO_ULIMIT") and "" or ("ulimit -v " .. (case.vmem_kb or 4000000) .. "; ")
  local _, how, code = os.execute(("%stimeout -s KILL %d sh %s >%s 2>%s </dev/null"):format(
    limit, case.secs or 30, q(script), q(out), q(err)))
  local r = { code = how == "exit" and code or 128 + code, out = slurp(out) or "", err = slurp(err) or "",
              dir = dir }
  local after = snapshot(dir)
  local outcome, why = judge(case, r, before, after)
  return outcome, why, r
end

-- --- main ---------------------------------------------------------------------------
local areas = { ... }
if #areas == 0 then
  for f in sh("ls " .. q(HERE .. "/cases")):gmatch("([%w_]+)%.lua") do areas[#areas + 1] = f end
end
package.path = HERE .. "/?.lua;" .. ROOT .. "/spec/?.lua;" .. package.path

local scratch = sh("mktemp -d /tmp/obelus-hostile.XXXXXX"):match("[^\n]+")
local bindir = scratch .. "/bin"
os.execute("mkdir -p " .. q(bindir) .. " && ln -s " .. q(absolute(BIN)) .. " " .. q(bindir .. "/obelus"))

local ORDER = { "ok", "crash", "hang", "lost", "wrong" }
local total, bad = {}, {}
for _, k in ipairs(ORDER) do total[k] = 0 end
local ok_run, err_run = pcall(function()
  for _, area in ipairs(areas) do
    local cases = dofile(HERE .. "/cases/" .. area .. ".lua")
    local tally = {}
    for _, k in ipairs(ORDER) do tally[k] = 0 end
    local only = os.getenv("HOSTILE_ONLY")
    if only then
      local kept = {}
      for _, case in ipairs(cases) do
        if case.name:find(only, 1, true) then kept[#kept + 1] = case end
      end
      cases = kept
    end
    for i, case in ipairs(cases) do
      case.id = area .. "-" .. i
      local outcome, why = run_case(case, scratch, bindir)
      tally[outcome] = tally[outcome] + 1
      total[outcome] = total[outcome] + 1
      io.write(("%-5s %s %s (item %s)%s\n"):format(outcome, area, case.name, tostring(case.item),
                                                  why and (": " .. why:gsub("\n", " ")) or ""))
      io.flush()
      if outcome ~= "ok" then bad[#bad + 1] = ("%s: %s / %s: %s"):format(outcome, area, case.name, why) end
    end
    local parts = {}
    for _, k in ipairs(ORDER) do parts[#parts + 1] = tally[k] .. " " .. k end
    io.write(("# %s: %d cases: %s\n"):format(area, #cases, table.concat(parts, ", ")))
  end
end)
stop_servers()
if not ok_run then
  io.stderr:write("hostile: ", tostring(err_run), "\n")
  os.exit(2)
end
if not os.getenv("HOSTILE_KEEP") then os.execute("rm -rf " .. q(scratch)) end
local n, parts = 0, {}
for _, k in ipairs(ORDER) do n = n + total[k]; parts[#parts + 1] = total[k] .. " " .. k end
io.write(("hostile: %d cases: %s\n"):format(n, table.concat(parts, ", ")))
if #bad > 0 then
  io.write("not ok:\n")
  for _, b in ipairs(bad) do io.write("  ", b, "\n") end
end
os.exit(#bad == 0 and 0 or 1)
