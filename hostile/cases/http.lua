-- hostile/cases/http.lua -- issue 26 item 9 (and "What to build": HTTP): obelus.http as a
-- hostile plan or tool and a hostile server would use it.
--   * what a request may not carry: a method with CRLF, a space, a NUL; header names and
--     values with CR, LF, NUL; URLs with control bytes or of another scheme. The call fails
--     before anything is sent: the tests' server ($HTTP/seen) never saw the marker.
--   * what a server may not do: trickle a byte every 0.5 s (timeout_ms, the low-speed
--     abort, the call's _timeout, a signal), huge headers, a body over max_bytes, a gzip
--     bomb, an endless chunked body.
--   * where a redirect may not go: file://, gopher://, link-local and metadata
--     addresses in every spelling (decimal, IPv4-mapped, userinfo, a proxy), 0.0.0.0,
--     IPv6 link-local and metadata; more than 20 hops. Loopback
--     (127.0.0.1, localhost, [::1]) stays allowed; --http-allow-private lifts the list.
--   * the same through http.json, http.download, a delegated plan, --threads, the MCP
--     server and the Lua module.
-- Every case's call routes its error to the last `||` alternative, so the output shows
-- what the tool got: {"r": the answer or null, "err": {"error": ...} or null}. Cases
-- needing an answer $HTTP lacks (huge headers, a server on [::1]) start srv.lua, a
-- tiny lua5.4+luv server of their own on a free loopback port, which ends by itself.
local cjson = require "cjson"

local DAG = "\xE2\x80\xA0" -- †

-- The tools. `req` passes the call's params to obelus.http as options, with "\0" in a
-- string turned into a NUL byte (a plan cannot carry one) and {name} in the url filled
-- from the input ({PORT}: $HTTP's port); `fn` picks request, json, get or download;
-- `marker` writes a file once the tool runs (for the signal case). `seen` answers
-- whether $HTTP has received a request head containing `marker`.
local TOOLS = [==[
local obelus = require "obelus"
local function nul(s)
  if type(s) == "string" then return (s:gsub("\\0", "\0")) end
  return s
end
local SKIP = { input = true, fn = true, file = true, marker = true, after = true }
return {
  { name = "req", run = function(call)
      local c = obelus.totable(call)
      local input = c.input or {}
      local o = {}
      for k, v in pairs(c) do
        if k:sub(1, 1) ~= "_" and not SKIP[k] then o[k] = nul(v) end
      end
      if c.headers then
        o.headers = {}
        for k, v in pairs(c.headers) do o.headers[nul(k)] = nul(v) end
      end
      o.url = nul((c.url or ""):gsub("{(%w+)}", function(k)
        local v = input[k]
        if v == nil and k == "PORT" then v = (input.base or ""):match(":(%d+)$") end
        return v ~= nil and tostring(v) or nil
      end))
      if c.marker then
        local f = assert(io.open(c.marker, "w"))
        f:write("started\n")
        f:close()
      end
      local r
      if c.fn == "json" then
        r = obelus.http.json(o)
      elseif c.fn == "get" then
        r = obelus.http.get(o.url, o)
      elseif c.fn == "download" then
        r = obelus.http.download(o.url, c.file, o)
      else
        r = obelus.http.request(o)
      end
      return { status = r.status, bytes = r.bytes or (r.body and #r.body), url = r.url }
    end },
  { name = "seen", run = function(call)
      local r = obelus.http.get(call.base .. "/seen")
      return { found = r.body:find(call.marker, 1, true) ~= nil }
    end },
}
]==]

-- lua5.4 srv.lua MODE PORTFILE [HOST]: bighead (20,000 header lines, 2 MB), onehead (one
-- 2 MB header line), midhead (500 KB of header lines: over libcurl's 300 KB), hello.
-- One request a connection; it exits by itself after 30 s.
local SERVER = [==[
local uv = require "luv"
local mode, portfile, host = arg[1], arg[2], arg[3] or "127.0.0.1"
local server = uv.new_tcp()
assert(server:bind(host, 0))
local f = assert(io.open(portfile .. ".tmp", "w"))
f:write(server:getsockname().port)
f:close()
os.rename(portfile .. ".tmp", portfile)
local sigpipe = uv.new_signal()
sigpipe:start("sigpipe", function() end)
sigpipe:unref()
local function lines(n)
  local t = {}
  for i = 1, n do t[#t + 1] = ("X-Pad-%05d: %s\r\n"):format(i, ("p"):rep(90)) end
  return table.concat(t)
end
server:listen(128, function()
  local client = uv.new_tcp()
  server:accept(client)
  local data = ""
  client:read_start(function(err, chunk)
    if err or not chunk then
      if not client:is_closing() then client:close() end
      return
    end
    data = data .. chunk
    if not data:find("\r\n\r\n", 1, true) then return end
    client:read_stop()
    local head = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n"
    if mode == "bighead" then head = head .. lines(20000)
    elseif mode == "midhead" then head = head .. lines(5000)
    elseif mode == "onehead" then head = head .. "X-Huge: " .. ("h"):rep(2000000) .. "\r\n" end
    client:write(head .. "\r\nhello", function() if not client:is_closing() then client:close() end end)
  end)
end)
local t = uv.new_timer()
t:start(30000, 0, function() os.exit(0) end)
t:unref()
uv.run()
]==]

-- starts srv.lua MODE on HOST; its port in the file `port`, its pid in `srv.pid`
local function serve(mode, host)
  return ("lua5.4 srv.lua %s port %s >/dev/null 2>&1 </dev/null & echo $! > srv.pid; " ..
          "i=0; while [ ! -s port ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done"):format(mode, host or "")
end

-- a plan: the attack call (its error to †state.err), and, with a marker, a call after
-- its error asking $HTTP whether it ever received the marker
local function plan(opts, marker)
  local call = { _tool = "req", _id = "attack", input = DAG .. "input",
                 _outputPath = DAG .. "state.r || " .. DAG .. "state.err" }
  for k, v in pairs(opts) do call[k] = v end
  local calls = { call }
  local output = { r = DAG .. "state.r", err = DAG .. "state.err" }
  if marker then
    calls[2] = { _tool = "seen", _id = "seen", base = DAG .. "input.base", marker = marker,
                 after = DAG .. "state.err", _outputPath = DAG .. "state.seen" }
    output.seen = DAG .. "state.seen"
  end
  return (cjson.encode { plan = calls, output = output }:gsub("\\/", "/"))
end

local function decode(out)
  local ok, v = pcall(cjson.decode, out)
  if ok and type(v) == "table" then return v end
end

-- the call failed, its error holds every text; with a marker, $HTTP never saw it
local function fails(texts, marker)
  if type(texts) ~= "table" then texts = { texts } end
  return function(out)
    local v = decode(out)
    if not v then return false, "stdout is not a JSON object: " .. out:sub(1, 200) end
    if v.r ~= cjson.null then return false, "the request was made: " .. cjson.encode(v.r) end
    if type(v.err) ~= "table" then return false, "no error reached the call: " .. out:sub(1, 200) end
    local e = tostring(v.err.error)
    for _, t in ipairs(texts) do
      if not e:find(t, 1, true) then return false, ("its error lacks %q: %s"):format(t, e:sub(1, 300)) end
    end
    if marker and (type(v.seen) ~= "table" or v.seen.found ~= false) then
      return false, "the server received " .. marker .. " (or was not asked)"
    end
    return true
  end
end

-- the call got an answer with this status (and, if given, this many bytes)
local function answers(status, bytes)
  return function(out)
    local v = decode(out)
    if not v then return false, "stdout is not a JSON object: " .. out:sub(1, 200) end
    if type(v.r) ~= "table" then
      return false, "no answer: " .. (type(v.err) == "table" and tostring(v.err.error) or out:sub(1, 200))
    end
    if v.r.status ~= status then return false, "status " .. tostring(v.r.status) end
    if bytes and v.r.bytes ~= bytes then return false, "bytes " .. tostring(v.r.bytes) end
    return true
  end
end

-- 70 MB of zeros in about 70 KB (the harness sends setup's last command's output to
-- /dev/null: end with a command of its own)
local BOMB = "head -c 70000000 /dev/zero | gzip -1 > bomb.gz; true"

local INPUT = [[--input "{\"base\":\"$HTTP\",\"dir\":\"$PWD\"}"]]
local RUN = "obelus run p.json --tools t.lua " .. INPUT
-- the same against the case's own server (srv.lua), and $HTTP for /redirect
local RUN_OWN = [[obelus run p.json --tools t.lua --input "{\"base\":\"http://127.0.0.1:$(cat port)\",\"own\":\"$(cat port)\"}"; ]] ..
                [[rc=$?; kill $(cat srv.pid) 2>/dev/null; exit $rc]]
local RUN_OWN6 = [[obelus run p.json --tools t.lua --input "{\"base\":\"$HTTP\",\"own\":\"$(cat port)\"}"; ]] ..
                 [[rc=$?; kill $(cat srv.pid) 2>/dev/null; exit $rc]]

local function case(name, opts, marker, expect_out, extra)
  local c = { name = name, item = 9, needs = "http", secs = 20,
              files = { ["p.json"] = plan(opts, marker), ["t.lua"] = TOOLS },
              run = RUN, expect = { code = 0, out = expect_out } }
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

-- a redirect from $HTTP to `to`, refused naming `why` and the redirect
local function redirect_denied(name, to, why)
  return case(name, { url = "{base}/redirect?to=" .. to, timeout_ms = 5000 }, nil,
              fails { why, "denied", "(redirected to " })
end

-- `n` nested /redirect hops ending at /hello
local function chain(n)
  local s = "/hello"
  for _ = 1, n do s = "/redirect?to=" .. s end
  return s
end

local LUA_MODULE = [[lua5.4 -e '
package.cpath = os.getenv("OBELUS_ROOT") .. "/lib/?.so;" .. package.cpath
package.path = os.getenv("OBELUS_ROOT") .. "/lua/?.lua;" .. os.getenv("OBELUS_ROOT") .. "/lua/?/init.lua;" .. package.path
local obelus = require "obelus"
local engine = obelus.engine { tools = { "t.lua" } %s }
local run = engine:run("p.json", { input = { base = os.getenv("HTTP"), dir = os.getenv("PWD") } })
local status = run:wait()
io.write(obelus.encode(run:output()), "\n")
os.exit(status == 0 and 0 or 1)']]

local cases = {
  -- "A `method` containing CRLF is sent as is (request splitting: the server saw another
  -- path and an injected header)"; What to build: "`method` must be an HTTP token"
  case("a method with CRLF (request splitting) fails unsent",
       { url = "{base}/echo?m-crlf", method = "GET /hostile-http-smuggled HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET" },
       "hostile-http-smuggled", fails { "is not an HTTP method", "\\r\\n" }),
  case("a method with a space (another request line) fails unsent",
       { url = "{base}/echo?m-space", method = "GET /hostile-http-space" },
       "hostile-http-space", fails "is not an HTTP method"),
  case("a method with a NUL (cut to GET in C) fails unsent",
       { url = "{base}/echo?hostile-http-mnul", method = "GET\\0 /x" },
       "hostile-http-mnul", fails "method"),
  case("http.json with a CRLF method fails unsent",
       { fn = "json", url = "{base}/echo?m-json", body = { a = 1 },
         method = "POST /hostile-http-json HTTP/1.1\r\nX-Injected: 1\r\n\r\nPOST" },
       "hostile-http-json", fails "is not an HTTP method"),
  case("http.download with a CRLF method fails unsent and writes no file",
       { fn = "download", file = "got.bin", url = "{base}/hello?m-dl",
         method = "GET /hostile-http-dl HTTP/1.1\r\n\r\nGET" },
       "hostile-http-dl", fails "is not an HTTP method",
       { expect = { code = 0, out = fails "is not an HTTP method",
                    check = function(dir)
                      if io.open(dir .. "/got.bin") then return false, "got.bin was written" end
                      return true
                    end } }),

  -- "a NUL in a header value is silently cut"; What to build: "header names and values
  -- with CR, LF or NUL are refused"
  case("a header value with CRLF (header injection) fails unsent",
       { url = "{base}/echo?hostile-http-hcrlf", headers = { ["X-A"] = "1\r\nX-Injected: 1" } },
       "hostile-http-hcrlf", fails "its value has a line break"),
  case("a header value with a NUL is refused, not cut",
       { url = "{base}/echo?hostile-http-hnul", headers = { ["X-Nul"] = "visible\\0hidden" } },
       "hostile-http-hnul", fails "NUL"),
  case("a header value with a lone CR fails unsent",
       { url = "{base}/echo?hostile-http-hcr", headers = { ["X-Cr"] = "a\rX-Injected: 1" } },
       "hostile-http-hcr", fails "line break"),
  case("a header name with CRLF fails unsent",
       { url = "{base}/echo?hostile-http-hname", headers = { ["X-A\r\nX-Injected"] = "1" } },
       "hostile-http-hname", fails "is not an HTTP token"),
  case("a header name with a colon (X-A:b, a smuggled value) fails unsent",
       { url = "{base}/echo?hostile-http-hcolon", headers = { ["X-A:b"] = "1" } },
       "hostile-http-hcolon", fails "is not an HTTP token"),

  -- URLs (What to build: "redirects only to http/https"; docs/tools.md: a URL with a space, a
  -- control byte or a NUL, or not http(s), fails before anything is sent)
  case("a URL with CRLF fails unsent",
       { url = "{base}/echo?hostile-http-ucrlf HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET /x" },
       "hostile-http-ucrlf", fails "a URL has no space, line break or control byte"),
  case("a URL with a NUL fails unsent",
       { url = "{base}/echo?hostile-http-unul\\0/../x" },
       "hostile-http-unul", fails "NUL"),
  case("a file:// URL fails: only http and https",
       { url = "file:///etc/passwd" }, nil, fails "only http:// and https:// URLs"),

  -- redirects to another scheme
  case("a redirect to file:///etc/passwd is not followed",
       { url = "{base}/redirect?to=file:///etc/passwd" }, nil, fails "file"),
  case("a redirect to gopher:// (an injected request) is not followed",
       { url = "{base}/redirect?to=gopher://127.0.0.1:{PORT}/_GET%20/hostile-http-gopher2%20HTTP/1.0%0d%0a%0d%0a" },
       "hostile-http-gopher2", fails "gopher"),

  -- "redirects are followed to 169.254.169.254 (cloud metadata)"; What to build: "a deny
  -- list for link-local and metadata addresses by default"
  redirect_denied("a redirect to 169.254.169.254 (cloud metadata) is refused",
                  "http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local"),
  redirect_denied("a redirect to 169.254.169.254 spelt as one decimal number is refused",
                  "http://2852039166/latest/meta-data/", "169.254.169.254"),
  redirect_denied("a redirect to an IPv4-mapped IPv6 metadata address is refused",
                  "http://[::ffff:169.254.169.254]/", "169.254.169.254"),
  redirect_denied("a redirect to fd00:ec2::254 (IPv6 metadata) is refused",
                  "http://[fd00:ec2::254]/", "fd00:ec2::254"),
  redirect_denied("a redirect to fe80::1 (IPv6 link-local) is refused",
                  "http://[fe80::1]/", "fe80::1"),
  redirect_denied("a redirect to 0.0.0.0 (reaches loopback on Linux) is refused",
                  "http://0.0.0.0:{PORT}/hello", "0.0.0.0 is an unspecified"),
  redirect_denied("a redirect hiding the metadata host behind userinfo (127.0.0.1@...) is refused",
                  "http://127.0.0.1:{PORT}@169.254.169.254/", "169.254.169.254"),
  case("a URL straight to 169.254.169.254 is refused, naming the address",
       { url = "http://169.254.169.254/latest/meta-data/iam/", timeout_ms = 5000 }, nil,
       fails { "GET http://169.254.169.254/latest/meta-data/iam/: 169.254.169.254 is a link-local",
               "--http-allow-private" }),
  case("a proxy at the metadata address (http_proxy) is refused: the proxy's address is checked",
       { url = "{base}/hello", timeout_ms = 5000 }, nil, fails { "169.254.169.254", "denied" },
       { run = "http_proxy=http://169.254.169.254:80 HTTP_PROXY=http://169.254.169.254:80 no_proxy= NO_PROXY= " .. RUN }),
  -- loopback stays allowed (docs/tools.md: "Loopback and private networks ... stay allowed")
  case("a redirect to 127.0.0.1 is followed (loopback is allowed)",
       { url = "{base}/redirect?to=http://127.0.0.1:{PORT}/hello" }, nil, answers(200, 5)),
  case("a redirect to localhost is followed (loopback is allowed)",
       { url = "{base}/redirect?to=http://localhost:{PORT}/hello" }, nil, answers(200, 5)),
  case("a redirect to [::1] is followed (loopback is allowed)",
       { url = "{base}/redirect?to=http://[::1]:{own}/hello" }, nil, answers(200, 5),
       { setup = serve("hello", "::1"), files = { ["p.json"] = plan { url = "{base}/redirect?to=http://[::1]:{own}/hello" },
                                                 ["t.lua"] = TOOLS, ["srv.lua"] = SERVER },
         run = RUN_OWN6 }),
  case("--http-allow-private lifts the deny list (a redirect to 0.0.0.0 is followed)",
       { url = "{base}/redirect?to=http://0.0.0.0:{PORT}/hello" }, nil, answers(200, 5),
       { run = RUN .. " --http-allow-private" }),

  -- redirect loops (more than 20)
  case("a redirect loop stops at 20 hops", { url = "{base}/loop" }, nil, fails "Maximum (20) redirects"),
  case("a chain of exactly 20 redirects is followed", { url = "{base}" .. chain(20) }, nil, answers(200, 5)),
  case("a chain of 21 redirects fails, naming the limit", { url = "{base}" .. chain(21) }, nil, fails "20"),

  -- "a server that trickles a byte every 0.5 s holds a call forever"; What to build: "a
  -- default overall timeout and a low-speed abort (each overridable)"
  case("a trickle (a byte every 0.5 s) is cut off by timeout_ms",
       { url = "{base}/trickle?ms=500", timeout_ms = 1500 }, nil, fails "timed out"),
  case("a trickle under low_speed_limit for low_speed_time is cut off as too slow",
       { url = "{base}/trickle?ms=500", low_speed_limit = 100, low_speed_time = 1 }, nil, fails "too slow"),
  case("a stalled answer is cut off by the default low_speed_limit (low_speed_time alone given)",
       { url = "{base}/trickle?ms=600000", low_speed_time = 2 }, nil, fails "too slow"),
  case("a trickle is stopped by the call's _timeout",
       { url = "{base}/trickle?ms=500", _timeout = 1500 }, nil, fails "timeout after 1500 ms"),
  case("a call waiting on a trickle does not hold off SIGTERM",
       { url = "{base}/trickle?ms=500", marker = "started" }, nil, nil,
       { run = RUN .. [[ >out 2>err & pid=$!
i=0; while [ ! -s started ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; sleep 0.3
kill -TERM $pid; wait $pid 2>/dev/null; rc=$?; cat err >&2; exit $rc]],
         expect = { code = 143, err = "interrupted by SIGTERM" } }),
  { name = "run --help names the HTTP timeout and low-speed defaults", item = 9,
    run = "obelus run --help",
    expect = { code = 0, out = function(out)
      local o = out:lower()
      if (o:find("http[^\n]*time") or o:find("time[^\n]*http") or o:find("timeout_ms", 1, true))
         and (o:find("low.speed") or o:find("too slow", 1, true) or o:find("bytes/s", 1, true)) then
        return true
      end
      return false, "run --help says nothing of obelus.http's default timeout (300 s) and low-speed abort (1 byte/s for 60 s)"
    end } },

  -- huge headers (docs/tools.md: more than 300 KB of header lines, or a line over 100 KB,
  -- libcurl's own limits, is a transport failure naming the limit)
  case("2 MB of header lines fail the call, naming the header limit",
       { url = "{base}/x" }, nil, fails "header limit: 300 KB in all",
       { setup = serve("bighead"), files = { ["p.json"] = plan { url = "{base}/x" }, ["t.lua"] = TOOLS, ["srv.lua"] = SERVER },
         run = RUN_OWN }),
  case("one 2 MB header line fails the call, naming the header limit (not 'out of memory')",
       { url = "{base}/x" }, nil, fails "header limit: 100 KB a line",
       { setup = serve("onehead"), files = { ["p.json"] = plan { url = "{base}/x" }, ["t.lua"] = TOOLS, ["srv.lua"] = SERVER },
         run = RUN_OWN }),
  case("500 KB of header lines (over libcurl's 300 KB) fail the call, naming the 300 KB limit",
       { url = "{base}/x" }, nil, fails "header limit: 300 KB in all",
       { setup = serve("midhead"), files = { ["p.json"] = plan { url = "{base}/x" }, ["t.lua"] = TOOLS, ["srv.lua"] = SERVER },
         run = RUN_OWN }),

  -- bodies over the byte limit; "an HTTP gzip bomb and an endless chunked body SIGABRT at
  -- 2.1 GB"
  case("a body over --http-max-bytes fails the call, naming the limit",
       { url = "{base}/big?n=2000000" }, nil, fails "response body larger than 1000000 bytes (max_bytes)",
       { run = RUN .. " --http-max-bytes 1000000" }),
  case("a gzip bomb (70 MB of zeros) fails at the default 64 MB, counted decoded",
       { url = "{base}/gzip?file={dir}/bomb.gz" }, nil, fails "response body larger than 67108864 bytes (max_bytes)",
       { setup = BOMB }),
  case("a gzip bomb with max_bytes of 1 GB fails at --max-memory, never aborts",
       { url = "{base}/gzip?file={dir}/bomb.gz", max_bytes = 1073741824 }, nil, fails "memory limit of 16 MB reached",
       { setup = BOMB, run = RUN .. " --max-memory 16" }),
  case("an endless chunked body fails at max_bytes",
       { url = "{base}/endless" }, nil, fails "response body larger than 67108864 bytes"),
  case("http.download of an endless body fails at --http-max-bytes",
       { fn = "download", file = "got.bin", url = "{base}/endless" }, nil,
       fails "response body larger than 5000000 bytes", { run = RUN .. " --http-max-bytes 5000000" }),

  -- the same through other doors
  { name = "a CRLF method in a delegated plan fails its call; the run reports it", item = 9, needs = "http",
    files = { ["t.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_delegate":"sub/s.json","_id":"outer","_outputPath":"' .. DAG .. 'state.s"}]}',
              ["sub/s.json"] = cjson.encode { plan = { { _tool = "req", _id = "inner", url = "http://127.0.0.1:1/x",
                                                         method = "GET /hostile-http-sub HTTP/1.1\r\n\r\nGET",
                                                         _outputPath = DAG .. "state.r" } } }:gsub("\\/", "/") },
    run = RUN,
    expect = { code = 1, err = { "inner", "is not an HTTP method" } } },
  { name = "--threads 2: every instance's CRLF header fails unsent", item = 9, needs = "http",
    files = { ["t.lua"] = TOOLS,
              ["p.json"] = (cjson.encode {
                instances = { "i1", "i2", "i3", "i4" },
                plan = { { _tool = "req", _id = "attack", input = DAG .. "input", url = "{base}/echo?hostile-http-threads",
                           headers = { ["X-A"] = "1\r\nX-Injected: 1" },
                           _outputPath = DAG .. "state.r || " .. DAG .. "state.err" } },
                output = { r = DAG .. "state.r", err = DAG .. "state.err.error" } }):gsub("\\/", "/") },
    run = RUN .. " --threads 2",
    expect = { code = 0, out = function(out)
      local v = decode(out)
      if not v then return false, "stdout is not JSON: " .. out:sub(1, 200) end
      for _, i in ipairs { "i1", "i2", "i3", "i4" } do
        local o = v[i]
        if type(o) ~= "table" or o.r ~= cjson.null or not tostring(o.err):find("line break", 1, true) then
          return false, i .. ": " .. cjson.encode(o)
        end
      end
      return true
    end } },
  { name = "the Lua module's engine denies a redirect to 169.254.169.254 too", item = 9, needs = "http",
    files = { ["t.lua"] = TOOLS, ["p.json"] = plan { url = "{base}/redirect?to=http://169.254.169.254/", timeout_ms = 5000 } },
    run = LUA_MODULE:format(""),
    expect = { code = 0, out = fails { "169.254.169.254 is a link-local", "denied" } } },
  { name = "the Lua module's engine{http_max_bytes} bounds a gzip bomb", item = 9, needs = "http",
    setup = BOMB,
    files = { ["t.lua"] = TOOLS, ["p.json"] = plan { url = "{base}/gzip?file={dir}/bomb.gz" } },
    run = LUA_MODULE:format(", http_max_bytes = 1000000"),
    expect = { code = 0, out = fails "response body larger than 1000000 bytes" } },
  { name = "obelus mcp: a tools/call whose request redirects to 169.254.169.254 is an error result", item = 9,
    needs = "http", files = { ["t.lua"] = TOOLS },
    run = [[printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"req\",]] ..
          [[\"arguments\":{\"url\":\"$HTTP/redirect?to=http://169.254.169.254/\",\"timeout_ms\":5000}}}" ]] ..
          [['{"jsonrpc":"2.0","id":2,"method":"ping"}' | obelus mcp --tools t.lua]],
    expect = { code = 0, out = function(out)
      local got = {}
      for l in out:gmatch("[^\n]+") do
        local v = decode(l)
        if v and v.id ~= nil then got[v.id] = v end
      end
      local one = got[1]
      if not (one and type(one.result) == "table" and one.result.isError == true) then
        return false, "id 1 is not an error result: " .. out:sub(1, 300)
      end
      if not cjson.encode(one.result):find("169.254.169.254 is a link-local", 1, true) then
        return false, "the result does not name the denied address: " .. out:sub(1, 300)
      end
      if not got[2] then return false, "the server stopped serving" end
      return true
    end } },
}

return cases
