-- hostile/cases/memory.lua -- MEMORY: runaway memory from a plan, a tool, a library or a
-- server (issue 26, item 4, and "What to build": Memory; "Runaway C inside a library is
-- bounded by the memory account"; item 11's "--max-output does not bound error messages").
--
-- The attacks: a small plan that doubles an array (or a string) with concat writes; a tool
-- that builds a huge table, returns a huge string, a table of one shared string a thousand
-- times, or a hundred thousand writes to one path; many calls writing one path; reading
-- /dev/zero, a `yes` child's endless output and a 3 GB sparse file (async and sync
-- uv.fs_read); cjson.encode of a text of gigabytes; an HTTP gzip bomb and an endless chunked
-- body (default max_bytes, --http-max-bytes, max_bytes past --max-memory, a download); a
-- plan that expands to 25 million calls; a 50 MB error message; a delegation bomb's memory.
-- Each through run, and again through resume, a delegated plan, --threads 2, the Lua
-- module, and with no --max-memory under a low `ulimit -v` / `ulimit -d` (whose half is the
-- default limit). What a user should get every time: the call whose work would pass the
-- limit fails with "memory limit of N MB reached (--max-memory)" (or the limit named:
-- max_bytes, --max-output, --max-calls), the run goes on (the call "ok" still writes
-- "fine"), exit 1 (2 for a plan refused before anything runs), never an abort, a PANIC or a
-- hang. Every case has its own `ulimit -v` (vmem_kb) and, where it allocates without bound,
-- a --max-memory, so a regression fails the case and never takes the machine down.
local S = require "support"
local slurp, size, status = S.slurp, S.size, S.status
local cjson = require "cjson"

-- the tools every case loads (t.lua)
local TOOLS = [=[
local obelus = require "obelus"
local uv = obelus.uv

local function tool(name, run) return { name = name, description = name, run = run } end

-- reads n bytes at offset 0 of path with uv.fs_read, with a callback or without
local function read(path, n, async)
  local fd = assert(uv.fs_open(path, "r", 420))
  local ok, res = pcall(function()
    if not async then return #assert(uv.fs_read(fd, n, 0)) end
    return obelus.await(function(resume)
      uv.fs_read(fd, n, 0, function(err, data) resume(data and #data or ("error: " .. tostring(err))) end)
    end)
  end)
  uv.fs_close(fd)
  if not ok then error(res, 0) end
  return res
end

local function http_url(call)
  if call.gzip then return os.getenv("HTTP") .. "/gzip?file=" .. uv.cwd() .. "/" .. call.gzip end
  return os.getenv("HTTP") .. call.path
end

return {
  tool("ok", function(call) obelus.sleep(call.ms or 0) return call.v end),
  tool("echo", function(call) return call.v end),
  tool("rep", function(call) return ("x"):rep(call.n) end),
  tool("dbl", function(call) return call.s .. call.s end),
  tool("strings", function(call)
    local t = {}
    for i = 1, call.n do t[i] = ("x"):rep(1000) .. i end
    return #t
  end),
  tool("shared", function(call)
    local s, t = ("s"):rep(call.size), {}
    for i = 1, call.n do t[i] = s end
    return t
  end),
  tool("writes", function(call)
    local s, m = ("w"):rep(call.size), {}
    for i = 1, call.n do m[i] = obelus.message { kind = "state", path = "x", value = s, method = call.method } end
    return m
  end),
  tool("zero", function()
    local f = assert(io.open("/dev/zero", "rb"))
    local s = f:read("a")
    f:close()
    return #s
  end),
  tool("yes", function()
    local chunks = {}
    return obelus.await(function(resume)
      local out = uv.new_pipe(false)
      local h = uv.spawn("yes", { args = { ("y"):rep(100) }, stdio = { nil, out, nil } }, function() end)
      assert(h, "no yes")
      out:read_start(function(err, chunk)
        if chunk then chunks[#chunks + 1] = chunk else resume(#chunks) end
      end)
    end)
  end),
  tool("aread", function(call) return read(call.path, call.n, true) end),
  tool("sread", function(call) return read(call.path, call.n, false) end),
  tool("encode", function(call)
    local cjson = require(call.safe and "cjson.safe" or "cjson")
    local s, t = ("y"):rep(1024), {}
    for i = 1, call.n do t[i] = s end
    local text, err = cjson.encode(t)
    if not text then error(err, 0) end
    return #text
  end),
  tool("raise", function(call) error(("e"):rep(call.n), 0) end),
  -- says it started (the file `started`), then waits until the file `go` exists
  tool("hold", function(call)
    local f = assert(io.open("started", "w"))
    f:write("x\n")
    f:close()
    while not io.open("go") do obelus.sleep(20) end
    return call.n
  end),
  tool("get", function(call)
    local r = obelus.http.request { url = http_url(call), max_bytes = call.max_bytes }
    return { status = r.status, bytes = r.bytes }
  end),
  tool("download", function(call)
    local r = obelus.http.download(http_url(call), call.file, { max_bytes = call.max_bytes })
    return { status = r.status, bytes = r.bytes }
  end),
}
]=]

-- the well-behaved call that must go on whatever the other does
local OK = { _id = "ok", _tool = "ok", ms = 20, v = "fine", _outputPath = "†state.fine" }

-- a plan file's text: the calls given, then OK; the output "†state.fine"
local function plan(...)
  local calls = { ... }
  calls[#calls + 1] = OK
  return cjson.encode { plan = calls, output = "†state.fine" }
end

-- the plan of the issue: an array ["x"] doubled 30 times by concat writes (2^30 elements);
-- each level's two calls read the level below and concat it onto the next path
local function doubling_calls()
  local calls = { { _id = "seed", _tool = "echo", v = { "x" }, _outputPath = "†state.a0" } }
  for k = 1, 30 do
    for _, ab in ipairs { "a", "b" } do
      calls[#calls + 1] = { _id = "d" .. k .. ab, _tool = "echo", v = "†state.a" .. (k - 1),
                            _outputPath = "†state.a" .. k, _outputMethod = "concat" }
    end
  end
  return calls
end
local function doubling(extra)
  local calls = doubling_calls()
  calls[#calls + 1] = OK
  local p = { plan = calls, output = "†state.fine" }
  for k, v in pairs(extra or {}) do p[k] = v end
  return cjson.encode(p)
end

local function files(t)
  t["t.lua"] = TOOLS
  return t
end



-- the check that a status file (written by `echo $? >F`) holds want

local LIMIT64 = "memory limit of 64 MB reached (--max-memory)"

local cases = {}
local function add(c) cases[#cases + 1] = c end

-- "An 8.8 KB plan that doubles a string with concat writes reaches 4 GB and SIGABRTs
-- under --max-memory 64" ---------------------------------------------------------------
add { name = "a plan doubling an array 30 times with concat writes, --max-memory 64", item = 4,
      files = files { ["p.json"] = doubling() },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = { "failed (runtime): " .. LIMIT64 } } }

add { name = "a plan doubling a string 30 times (each call returns s .. s), --max-memory 64", item = 4,
      files = files { ["p.json"] = (function()
        local calls = { { _id = "s0", _tool = "echo", v = ("s"):rep(1024), _outputPath = "†state.s0" } }
        for k = 1, 30 do
          calls[#calls + 1] = { _id = "s" .. k, _tool = "dbl", s = "†state.s" .. (k - 1), _outputPath = "†state.s" .. k }
        end
        return plan(table.unpack(calls))
      end)() },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = LIMIT64 } }

add { name = "the doubling plan under --journal: the journal stays readable, resume says the same", item = 4,
      files = files { ["p.json"] = doubling() },
      run = "obelus run p.json --tools t.lua --max-memory 64 --journal j.jsonl >run.out 2>run.err; echo $? >run.rc; " ..
            "obelus log j.jsonl >/dev/null 2>log.err; echo $? >log.rc; " ..
            "obelus resume j.jsonl --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"',
                 check = function(dir)
                   local ok, why = status(dir, "run.rc", "1")
                   if not ok then return ok, why .. ": " .. (slurp(dir .. "/run.err") or ""):sub(1, 300) end
                   ok, why = status(dir, "log.rc", "0")
                   if not ok then return ok, why .. ": " .. (slurp(dir .. "/log.err") or ""):sub(1, 300) end
                   if not (slurp(dir .. "/run.err") or ""):find(LIMIT64, 1, true) then
                     return false, "the run's stderr does not name the limit"
                   end
                   -- no message holds more than --max-output; the whole is a few times the limit
                   local n = size(dir .. "/j.jsonl") or 0
                   if n > 256 * 1024 * 1024 then return false, "the journal is " .. n .. " bytes" end
                   return true
                 end } }

add { name = "a run killed (SIGKILL) before its 40 MB result, resumed under --max-memory 64", item = 4,
      files = files { ["p.json"] = plan({ _id = "hold", _tool = "hold", n = 40 * 1024 * 1024, _outputPath = "†state.n" },
                                        { _id = "big", _tool = "rep", n = "†state.n", _outputPath = "†state.a" }) },
      run = "obelus run p.json --tools t.lua --max-memory 64 --journal j.jsonl >/dev/null 2>&1 & p=$!\n" ..
            "i=0; while [ ! -e started ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done\n" ..
            "kill -KILL $p; wait $p; echo $? >kill.rc; touch go\n" ..
            "obelus resume j.jsonl --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = "call big (rep) failed (runtime): " .. LIMIT64,
                 check = function(dir) return status(dir, "kill.rc", "137") end } }

-- the run's limit is shared out: each of the 2 engines has 32 MB of the 64
add { name = "the doubling plan in 4 instances over --threads 2: each engine's share of the limit stops it", item = 4,
      files = files { ["p.json"] = doubling { instances = { "i1", "i2", "i3", "i4" } } },
      run = "obelus run p.json --tools t.lua --max-memory 64 --threads 2",
      vmem_kb = 3000000,
      expect = { code = 1, err = { "@i1 (echo) failed (runtime): memory limit of 32 MB reached (--max-memory)",
                                   "@i4 (echo) failed (runtime): memory limit of 32 MB reached (--max-memory)" },
                 out = function(out)
                   local ok, v = pcall(cjson.decode, out)
                   if not ok or type(v) ~= "table" then return false, "stdout is not JSON: " .. out:sub(1, 200) end
                   for _, i in ipairs { "i1", "i2", "i3", "i4" } do
                     if v[i] ~= "fine" then return false, "instance " .. i .. " did not go on: " .. out:sub(1, 200) end
                   end
                   return true
                 end } }

add { name = "the doubling plan run as a delegated plan, --max-memory 64", item = 4,
      files = files { ["sub.json"] = cjson.encode { plan = doubling_calls() },
                      ["p.json"] = plan { _id = "sub", _delegate = "sub.json", _outputPath = "†state.sub" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = { "call sub (delegate) failed (runtime)", LIMIT64 } } }

-- "--max-memory bounds the run's memory -- Lua heap, values, message log ..." -----------
add { name = "a tool building a huge table of distinct strings (the Lua heap)", item = 4,
      files = files { ["p.json"] = plan { _id = "big", _tool = "strings", n = 100000000, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = "call big (strings) failed (runtime): " .. LIMIT64 } }

add { name = "a tool returning a 40 MB string: its copy out of Lua passes --max-memory 64", item = 4,
      files = files { ["p.json"] = plan { _id = "big", _tool = "rep", n = 40 * 1024 * 1024, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = { "call big (rep) failed (runtime)", LIMIT64 } } }

add { name = "a tool returning one 1 MB string a thousand times in a table (1 GB once copied)", item = 4,
      files = files { ["p.json"] = plan { _id = "shared", _tool = "shared", n = 1000, size = 1024 * 1024,
                                          _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = { "call shared (shared) failed (runtime)", LIMIT64 } } }

add { name = "100,000 writes of 1 KB to one path from one call (the message log)", item = 4,
      files = files { ["p.json"] = plan { _id = "w", _tool = "writes", n = 100000, size = 1024, _outputPath = "x" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = { "call w (writes) failed (runtime)", LIMIT64 } } }

add { name = "1,000,000 pushes onto one path from one call", item = 4,
      files = files { ["p.json"] = plan { _id = "w", _tool = "writes", n = 1000000, size = 1, method = "push",
                                          _outputPath = "x" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = { "call w (writes) failed (runtime)", LIMIT64 } } }

add { name = "600 calls each writing 200 KB to one path: the log passes the limit, the run goes on", item = 4,
      files = files { ["p.json"] = (function()
        local calls = {}
        for i = 1, 600 do calls[i] = { _id = "w" .. i, _tool = "rep", n = 200 * 1024, _outputPath = "†state.x" } end
        return plan(table.unpack(calls))
      end)() },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = LIMIT64 } }

add { name = "a tool reading /dev/zero to its end (io.read)", item = 4,
      files = files { ["p.json"] = plan { _id = "z", _tool = "zero", _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = "call z (zero) failed (runtime): " .. LIMIT64 } }

add { name = "a tool keeping a `yes` child's endless output from a luv pipe callback", item = 4,
      files = files { ["p.json"] = plan { _id = "yes", _tool = "yes", _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      secs = 15, vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = { "call yes (yes) failed (runtime)", LIMIT64 } } }

-- "an async uv.fs_read of 3 GB ends in PANIC: unprotected error" ------------------------
-- (the sparse file is made and removed by the command, so the harness never hashes it)
local function with_big(cmd)
  return "truncate -s 3G big && " .. cmd .. "; rc=$?; rm -f big; exit $rc"
end
local GB3 = 3 * 1024 * 1024 * 1024

add { name = "an async uv.fs_read of a 3 GB sparse file, --max-memory 64", item = 4,
      files = files { ["p.json"] = plan { _id = "r", _tool = "aread", path = "big", n = GB3, _outputPath = "†state.a" } },
      run = with_big "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 4000000,
      expect = { code = 1, out = '"fine"', err = "call r (aread) failed (runtime): " .. LIMIT64 } }

add { name = "an async uv.fs_read of 3 GB with no --max-memory under ulimit -v 2 GB (half is the default)", item = 4,
      files = files { ["p.json"] = plan { _id = "r", _tool = "aread", path = "big", n = GB3, _outputPath = "†state.a" } },
      run = with_big "obelus run p.json --tools t.lua",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"',
                 err = "call r (aread) failed (runtime): memory limit of 976 MB reached (--max-memory)" } }

add { name = "a sync uv.fs_read of 3 GB (luv's buffer, then a Lua string), --max-memory 64", item = 4,
      files = files { ["p.json"] = plan { _id = "r", _tool = "sread", path = "big", n = GB3, _outputPath = "†state.a" } },
      run = with_big "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = "call r (sread) failed (runtime)" } }

-- "Runaway C inside a library (cjson on a huge value) is bounded by the memory account" --
add { name = "cjson.encode of a 100 MB text (100,000 references to one 1 KB string), --max-memory 64", item = 4,
      files = files { ["p.json"] = plan { _id = "e", _tool = "encode", n = 100000, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = "call e (encode) failed (runtime): " .. LIMIT64 } }

add { name = "cjson.safe's encode of the same: its error, not a text", item = 4,
      files = files { ["p.json"] = plan { _id = "e", _tool = "encode", n = 100000, safe = true, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --max-memory 64",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = "call e (encode) failed (runtime): " .. LIMIT64 } }

add { name = "cjson.encode of a 3 GB text with no --max-memory under ulimit -v 2 GB", item = 4,
      files = files { ["p.json"] = plan { _id = "e", _tool = "encode", n = 3 * 1024 * 1024, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"',
                 err = "call e (encode) failed (runtime): memory limit of 976 MB reached (--max-memory)" } }

-- "an HTTP gzip bomb and an endless chunked body SIGABRT at 2.1 GB"; HTTP max_bytes'
-- default --------------------------------------------------------------------------------
-- 300 MB decoded, 1.3 MB sent (in braces: the harness appends its own redirections to setup)
local BOMB = "{ head -c 300000000 /dev/zero | gzip -1 > bomb.gz; }"

add { name = "an HTTP gzip bomb (300 MB decoded) with the defaults: max_bytes 64 MB", item = 4, needs = "http",
      files = files { ["p.json"] = plan { _id = "bomb", _tool = "get", gzip = "bomb.gz", _outputPath = "†state.a" } },
      setup = BOMB,
      run = "obelus run p.json --tools t.lua",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"',
                 err = { "call bomb (get) failed (runtime): GET ", "response body larger than 67108864 bytes (max_bytes)" } } }

add { name = "an HTTP gzip bomb with max_bytes 1 GB: --max-memory 32 stops it", item = 4, needs = "http",
      files = files { ["p.json"] = plan { _id = "bomb", _tool = "get", gzip = "bomb.gz", max_bytes = 1 << 30,
                                          _outputPath = "†state.a" } },
      setup = BOMB,
      run = "obelus run p.json --tools t.lua --max-memory 32",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"',
                 err = { "call bomb (get) failed (runtime): GET ", "memory limit of 32 MB reached (--max-memory)" } } }

add { name = "an endless chunked body with the defaults", item = 4, needs = "http",
      files = files { ["p.json"] = plan { _id = "endless", _tool = "get", path = "/endless", _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"',
                 err = { "call endless (get) failed (runtime): GET ", "/endless: response body larger than 67108864 bytes (max_bytes)" } } }

add { name = "an endless chunked body under --http-max-bytes 100000", item = 4, needs = "http",
      files = files { ["p.json"] = plan { _id = "endless", _tool = "get", path = "/endless", _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --http-max-bytes 100000",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = "/endless: response body larger than 100000 bytes (max_bytes)" } }

add { name = "an endless chunked body through http.download (to a file)", item = 4, needs = "http",
      files = files { ["p.json"] = plan { _id = "dl", _tool = "download", path = "/endless", file = "endless.bin",
                                          _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --http-max-bytes 1000000; rc=$?; rm -f endless.bin; exit $rc",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = { "call dl (download) failed (runtime)", "larger than 1000000 bytes" } } }

add { name = "an endless body with max_bytes 1 GB and no --max-memory under ulimit -v 400 MB", item = 4, needs = "http",
      files = files { ["p.json"] = plan { _id = "endless", _tool = "get", path = "/endless", max_bytes = 1 << 30,
                                          _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua",
      vmem_kb = 400000,
      expect = { code = 1, out = '"fine"', err = { "call endless (get) failed (runtime): GET ",
                                                   "memory limit of 195 MB reached (--max-memory)" } } }

-- "ulimit -v" (or -d) low, no --max-memory ---------------------------------------------
add { name = "a huge table under ulimit -v 400 MB, no --max-memory: half of it is the limit", item = 4,
      files = files { ["p.json"] = plan { _id = "big", _tool = "strings", n = 100000000, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua",
      vmem_kb = 400000,
      expect = { code = 1, out = '"fine"',
                 err = "call big (strings) failed (runtime): memory limit of 195 MB reached (--max-memory)" } }

add { name = "the doubling plan under ulimit -d 600 MB, no --max-memory", item = 4,
      files = files { ["p.json"] = doubling() },
      run = "ulimit -d 600000; obelus run p.json --tools t.lua",
      vmem_kb = 4000000,
      expect = { code = 1, out = '"fine"', err = "memory limit of 292 MB reached (--max-memory)" } }

add { name = "a delegation bomb with every default under ulimit -v 600 MB: a clear end, no abort", item = 4,
      files = files { ["bomb.json"] = [[{"plan":[{"_delegate":"bomb.json","_outputPath":"a"},{"_delegate":"bomb.json","_outputPath":"b"},
        {"_delegate":"bomb.json","_outputPath":"c"},{"_delegate":"bomb.json","_outputPath":"d"}]}]] },
      run = "obelus run bomb.json",
      secs = 60, vmem_kb = 600000,
      expect = { code = 1, err = "call #0 (delegate) failed (runtime)" } }

add { name = "a delegation bomb under --max-memory 64 (--max-calls lifted): the account stops it", item = 4,
      files = files { ["bomb.json"] = [[{"plan":[{"_delegate":"bomb.json","_outputPath":"a"},{"_delegate":"bomb.json","_outputPath":"b"},
        {"_delegate":"bomb.json","_outputPath":"c"},{"_delegate":"bomb.json","_outputPath":"d"}]}]] },
      run = "obelus run bomb.json --max-memory 64 --max-calls 100000000",
      secs = 60, vmem_kb = 600000,
      expect = { code = 1, err = LIMIT64 } }

-- "--max-calls and --max-output have no defaults" ---------------------------------------
add { name = "--max-output's default (64 MB): a 65 MB result fails its call", item = 4,
      files = files { ["p.json"] = plan { _id = "big", _tool = "rep", n = 65 * 1024 * 1024, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua",
      vmem_kb = 4000000,
      expect = { code = 1, out = '"fine"',
                 err = "call big (rep) failed (runtime): the result written to state is over 65536 KB (--max-output 65536)" } }

add { name = "--max-output 100000 lets the same 65 MB result through", item = 4,
      files = files { ["p.json"] = plan { _id = "big", _tool = "rep", n = 65 * 1024 * 1024, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --max-output 100000",
      vmem_kb = 4000000,
      expect = { code = 0, out = '"fine"' } }

add { name = "a 50 MB error message: cut at 64 KB on stderr and in the journal", item = 11,
      files = files { ["p.json"] = plan { _id = "r", _tool = "raise", n = 50 * 1024 * 1024, _outputPath = "†state.a" } },
      run = "obelus run p.json --tools t.lua --journal j.jsonl",
      vmem_kb = 2000000,
      expect = { code = 1, out = '"fine"', err = "(error message cut at 64 KB of 51200 KB)",
                 check = function(dir, r)
                   if #r.err > 300 * 1024 then return false, "stderr is " .. #r.err .. " bytes" end
                   local n = size(dir .. "/j.jsonl") or 0
                   if n > 200 * 1024 then return false, "the journal is " .. n .. " bytes" end
                   return true
                 end } }

-- 1,001 instances x 1,000 calls
local function instances_plan(ninst, ncalls)
  local inst, calls = {}, {}
  for i = 1, ninst do inst[i] = "i" .. i end
  for i = 1, ncalls do calls[i] = { _tool = "echo", v = i, _outputPath = "†state.v" .. i } end
  return cjson.encode { instances = inst, plan = calls }
end

add { name = "--max-calls' default (1,000,000): 1,001 instances x 1,000 calls refused before anything runs", item = 4,
      files = files { ["p.json"] = instances_plan(1001, 1000) },
      run = "obelus run p.json --tools t.lua",
      vmem_kb = 4000000,
      expect = { code = 2, out = "", err = "more than --max-calls 1000000" } }

add { name = "a 357 KB plan of 5,000 instances x 5,000 calls (25 M calls): check refuses it", item = 4,
      files = files { ["p.json"] = instances_plan(5000, 5000) },
      run = "obelus check p.json --tools t.lua",
      vmem_kb = 2000000,
      expect = { code = 2, err = "more than --max-calls 1000000" } }

add { name = "the 25 M-call plan through run --max-calls 10", item = 4,
      files = files { ["p.json"] = instances_plan(5000, 5000) },
      run = "obelus run p.json --tools t.lua --max-calls 10",
      vmem_kb = 2000000,
      expect = { code = 2, out = "", err = "more than --max-calls 10" } }

add { name = "limits given as 0 or past their range are usage errors", item = 4,
      files = files { ["p.json"] = plan() },
      run = "for o in '--max-memory 0' '--max-memory 2000000' '--max-output 0' '--max-calls 0' '--http-max-bytes 0'; do " ..
            "obelus run p.json --tools t.lua $o; echo \"$o: $?\" >>rcs; done; cat rcs >&2; " ..
            "[ $(grep -c ': 2$' rcs) = 5 ] && exit 2; exit 1",
      expect = { code = 2, out = "", err = { "--max-memory needs megabytes", "--max-output needs kilobytes",
                                             "--max-calls needs a number of calls", "--http-max-bytes needs a number of bytes" } } }

-- the same limits from the Lua module -----------------------------------------------------
local LUA_PRELUDE = [[
local R = assert(os.getenv("R"))
package.cpath = R .. "/lib/?.so;" .. package.cpath
package.path = R .. "/lua/?.lua;" .. R .. "/lua/?/init.lua;" .. package.path
local obelus = require "obelus"
local function errors(run)
  local t = {}
  for _, m in ipairs(run:messages()) do if m.kind == "error" then t[#t + 1] = m.data.error end end
  return table.concat(t, " | ")
end
]]
-- the repository's root, from the obelus on PATH (a link to its bin/obelus)
local LUA = [[R=$OBELUS_ROOT lua5.4 ]]

add { name = "Lua module: engine{max_memory_mb = 64}, a 40 MB result fails its call, the run goes on", item = 4,
      files = files { ["m.lua"] = LUA_PRELUDE .. [[
local e = obelus.engine { tools = { "t.lua" }, max_memory_mb = 64 }
local run = e:run({ plan = { { _id = "big", _tool = "rep", n = 40 * 1024 * 1024, _outputPath = "†state.a" },
  { _id = "ok", _tool = "ok", v = "fine", _outputPath = "†state.b" } }, output = "†state.b" })
print(run:wait(), obelus.encode(run:output()), errors(run))
e:close()
]] },
      run = LUA .. "m.lua",
      vmem_kb = 2000000,
      expect = { code = 0, out = function(out)
                   if not out:find('^1\t"fine"\t') then return false, "wanted status 1 and \"fine\": " .. out:sub(1, 300) end
                   if not out:find(LIMIT64, 1, true) then return false, "the error does not name the limit: " .. out:sub(1, 300) end
                   return true
                 end } }

add { name = "Lua module defaults: max_output_kb 64 MB, and max_calls given refuses a larger plan", item = 4,
      files = files { ["m.lua"] = LUA_PRELUDE .. [[
local e = obelus.engine { tools = { "t.lua" } }
local run = e:run({ plan = { { _id = "big", _tool = "rep", n = 65 * 1024 * 1024, _outputPath = "†state.a" } } })
print(run:wait(), errors(run))
local ok, err = pcall(e.run, e, { plan = { { _tool = "echo", v = 1 }, { _tool = "echo", v = 2 },
  { _tool = "echo", v = 3 }, { _tool = "echo", v = 4 } } }, { max_calls = 3 })
print(ok, err)
e:close()
]] },
      run = LUA .. "m.lua",
      vmem_kb = 4000000,
      expect = { code = 0, out = function(out)
                   if not out:find("^1\t[^\n]*over 65536 KB %(%-%-max%-output 65536%)") then
                     return false, "the 65 MB result did not fail at the default: " .. out:sub(1, 300)
                   end
                   if not out:find("\nfalse\t[^\n]*more than %-%-max%-calls 3") then
                     return false, "max_calls = 3 did not refuse 4 calls: " .. out:sub(1, 300)
                   end
                   return true
                 end } }

add { name = "Lua module: an endless body at the default http_max_bytes", item = 4, needs = "http",
      files = files { ["m.lua"] = LUA_PRELUDE .. [[
local e = obelus.engine { tools = { "t.lua" } }
local run = e:run({ plan = { { _id = "endless", _tool = "get", path = "/endless", _outputPath = "†state.a" } } })
print(run:wait(), errors(run))
e:close()
]] },
      run = LUA .. "m.lua",
      vmem_kb = 2000000,
      expect = { code = 0, out = function(out)
                   if not out:find("^1\t[^\n]*response body larger than 67108864 bytes %(max_bytes%)") then
                     return false, "wanted status 1 and max_bytes' default: " .. out:sub(1, 300)
                   end
                   return true
                 end } }

return cases
