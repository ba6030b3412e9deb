-- http_spec.lua -- obelus.http against real servers: the tests' own (spec/support/httpd.lua:
-- slow, echo, redirect, status and broken answers) and Debian's nginx (static files, gzip,
-- a large download, HTTPS with a certificate made by openssl now, trusted through ca_file).
-- A transport failure is an error naming the method, the URL and the reason; an HTTP status
-- is data; a call that ends (its _timeout, SIGINT) stops its transfers at once.
local cli = require "support.cli"
local cjson = require "cjson"
local servers = require "support.servers"

local TOOLS = "spec/cli/fixtures/http/tools.lua"

local function run(plan, ...)
  local file = cli.tmpfile(cjson.encode(plan), ".json")
  local args = { "run", file, "--tools", TOOLS }
  for _, a in ipairs { ... } do args[#args + 1] = a end
  local r = cli.run_for(120, args) -- a run that hangs ends as 137
  os.remove(file)
  r.output = r.out ~= "" and cjson.decode(r.out) or nil
  return r
end

local function one(call)
  call._outputPath = "†state.r || †state.err"
  return run({ plan = { call }, output = { r = "†state.r", err = "†state.err" } })
end

describe("obelus.http against the tests' own server", function()
  local s
  setup(function() s = assert(servers.httpd()) end)
  teardown(function() s.stop() end)

  it("GETs: status, lower-case headers, body, the final URL", function()
    local r = one { _tool = "get", url = s.url("/hello") }
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ status = 200, body = "hello", type = "text/plain", url = s.url("/hello"),
                      version = "1.1" }, r.output.r)
  end)

  it("an HTTP status is data, not an error", function()
    for _, n in ipairs { 404, 418, 500, 503 } do
      local r = one { _tool = "get", url = s.url("/status/" .. n) }
      assert.are.equal(0, r.code)
      assert.are.equal(n, r.output.r.status)
      assert.are.equal("status " .. n, r.output.r.body)
      assert.are.equal(cjson.null, r.output.err)
    end
  end)

  it("POSTs a body with headers, any method with request, JSON both ways with json", function()
    local r = one { _tool = "post", url = s.url("/echo"), body = "a=1&b=2", headers = { ["X-Trace"] = "t-1" } }
    assert.are.equal(0, r.code, r.err)
    local echo = r.output.r.body
    assert.are.equal("POST", echo.method)
    assert.are.equal("a=1&b=2", echo.body)
    assert.are.equal("t-1", echo.headers["x-trace"])
    r = one { _tool = "request", url = s.url("/echo"), method = "PUT", body = "put it" }
    assert.are.same({ "PUT", "put it" }, { cjson.decode(r.output.r.body).method, cjson.decode(r.output.r.body).body })
    r = one { _tool = "json", url = s.url("/echo"), value = { list = { 1, 2 }, name = "x" } }
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ list = { 1, 2 }, name = "x" }, cjson.decode(r.output.r.body.body))
    assert.are.equal("application/json", r.output.r.body.headers["content-type"])
    r = one { _tool = "json", url = s.url("/json") }
    assert.are.same({ ok = true, n = 42 }, r.output.r.body)
  end)

  it("follows redirects, or not with follow = false", function()
    local r = one { _tool = "get", url = s.url("/redirect?to=/hello") }
    assert.are.same({ 200, "hello", s.url("/hello") }, { r.output.r.status, r.output.r.body, r.output.r.url })
    r = one { _tool = "get", url = s.url("/redirect?to=/hello"), follow = false }
    assert.are.same({ 302, "/hello" }, { r.output.r.status, r.output.r.location })
  end)

  it("a transport failure is an error naming the method, the URL and the reason", function()
    local dead = "http://127.0.0.1:" .. servers.free_port() .. "/x"
    local cases = {
      { { url = dead }, "GET " .. dead .. ": .*onnect" },
      { { url = s.url("/broken") }, "GET " .. s.url("/broken"):gsub("%p", "%%%0") .. ": .*remaining" },
      { { url = s.url("/big?n=5000"), max_bytes = 1000 }, "response body larger than 1000 bytes %(max_bytes%)" },
      { { url = s.url("/slow?ms=3000"), timeout_ms = 100 }, "GET .*/slow%?ms=3000: .*timed out" },
      -- (a machine without DNS may time out rather than fail to resolve)
      { { url = "http://no-such-host.invalid/", timeout_ms = 10000 },
        "GET http://no%-such%-host%.invalid/: %a" },
    }
    for _, c in ipairs(cases) do
      local call = c[1]
      call._tool = "get"
      local r = one(call)
      assert.are.equal(0, r.code, r.err) -- handled by the || alternative
      assert.are.equal(cjson.null, r.output.r)
      assert.matches(c[2], r.output.err.error)
    end
    -- without an alternative: a runtime error of the call, exit 1
    local r = run { plan = { { _id = "g", _tool = "get", url = dead, _outputPath = "†state.r" } } }
    assert.are.equal(1, r.code)
    assert.matches("call g %(get%) failed %(runtime%): GET " .. dead:gsub("%p", "%%%0"), r.err)
  end)

  it("a call's _timeout stops its transfer at once; the others go on", function()
    local r = run({ plan = {
      { _id = "slow", _tool = "get", url = s.url("/slow?ms=3600000"), _timeout = 200, _outputPath = "†state.a" },
      { _tool = "get", url = s.url("/hello"), _outputPath = "†state.b" },
    }, output = "†state.b.body" })
    assert.are.equal(1, r.code)
    assert.are.equal("hello", r.output)
    assert.matches("call slow (get) failed (runtime): timeout after 200 ms", r.err, 1, true)
    -- ended by itself (not by the cap's SIGKILL, 137): it did not wait for the hour-long answer
  end)

  it("goes through the proxy http_proxy names", function()
    local file = cli.tmpfile(cjson.encode { plan = {
      { _tool = "get", url = "http://example.invalid/hello", _outputPath = "†state.r" } },
      output = "†state.r" }, ".json")
    local out = os.tmpname()
    local _, _, code = os.execute(("http_proxy=%s %s run %s --tools %s >%s 2>&1")
      :format(s.url(""), cli.quote(cli.bin), file, TOOLS, out))
    local got = cli.slurp(out)
    assert.are.equal(0, code, got)
    -- the test server got "GET http://example.invalid/hello": a proxy's request line
    assert.are.same({ 404, "not here" }, { cjson.decode(got).status, cjson.decode(got).body })
    os.remove(file)
    os.remove(out)
  end)

  it("SIGINT ends a run with transfers in flight: exit 130, no crash", function()
    local file = cli.tmpfile(cjson.encode { plan = {
      { _tool = "get", url = s.url("/slow?ms=3600000"), _outputPath = "†state.a" },
      { _tool = "get", url = s.url("/slow?ms=3600000"), _outputPath = "†state.b" } } }, ".json")
    local out, ev = os.tmpname(), os.tmpname()
    os.remove(ev)
    -- SIGINT once both calls have started (their events written): their transfers are in flight
    local _, _, code = os.execute(("timeout -s KILL 120 %s run %s --tools %s --events %s >%s 2>&1 & pid=$!; " ..
      "i=0; until [ \"$(grep -c '\"started\"' %s 2>/dev/null)\" = 2 ] || [ $i -ge 1200 ]; do sleep 0.05; i=$((i+1)); done; " ..
      "kill -INT $pid; wait $pid"):format(cli.quote(cli.bin), file, TOOLS, ev, out, ev))
    os.remove(ev)
    assert.are.equal(130, code, cli.slurp(out))
    os.remove(file)
    os.remove(out)
  end)

  it("leaks nothing under valgrind: a transfer answered, one stopped by _timeout, one refused", function()
    if os.execute("command -v valgrind >/dev/null 2>&1") ~= true or cli.bin:find("/asan/", 1, true) then
      return pending("valgrind is not installed, or this is the ASan build")
    end
    local file = cli.tmpfile(cjson.encode { plan = {
      { _tool = "get", url = s.url("/hello"), _outputPath = "†state.a" },
      { _tool = "get", url = s.url("/slow?ms=3000"), _timeout = 100, _outputPath = "†state.b || †state.e1" },
      { _tool = "get", url = "http://127.0.0.1:" .. servers.free_port() .. "/", _outputPath = "†state.c || †state.e2" },
    } }, ".json")
    local log = os.tmpname()
    local _, _, code = os.execute(("valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect " ..
      "--error-exitcode=99 %s run %s --tools %s >/dev/null 2>%s"):format(cli.quote(cli.bin), file, TOOLS, log))
    assert.are.equal(0, code, cli.slurp(log))
    os.remove(file)
    os.remove(log)
  end)

  it("holds 10,000 requests in flight at once with --http-max 10000; 100 by default", function()
    local function peak(tag)
      local p = run({ plan = { { _tool = "get", url = s.url("/peak?tag=" .. tag), _outputPath = "†state.p" } },
                      output = "†state.p.body" })
      return cjson.decode(p.output).peak
    end
    -- the server holds each request until `batch` of them wait at once (a barrier, not a
    -- clock): the peak is the client's allowance however slow the machine is
    local function held(tag, n, batch, ...)
      local plan = {}
      for i = 1, n do
        plan[i] = { _tool = "size", url = s.url(("/hold?n=%d&tag=%s"):format(batch, tag)),
                    _outputPath = "†state.n" .. i }
      end
      local r = run({ plan = plan, output = "†state.n" .. n }, ...)
      assert.are.equal(0, r.code, r.err)
      assert.are.equal(4, r.output) -- #"held"
    end
    held("all", 10000, 10000, "--http-max", "10000")
    assert.are.equal(10000, peak("all"))
    held("default", 300, 100)
    assert.are.equal(100, peak("default"))
  end)

  it("fans out 300 requests at once, all answered", function()
    local plan = {}
    for i = 1, 300 do
      plan[i] = { _tool = "size", url = s.url("/big?n=" .. i), _outputPath = "†state.n" .. i }
    end
    local r = run { plan = plan }
    assert.are.equal(0, r.code, r.err)
    for i = 1, 300 do assert.are.equal(i, r.output["n" .. i]) end
  end)
end)

describe("plans/http", function()
  it("fans out to a weather API it serves itself and joins the answers into a summary", function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir .. " && (lua5.4 plans/http/server.lua " .. dir .. "/port & echo $! > " .. dir .. "/pid)")
    for _ = 1, 100 do
      if io.open(dir .. "/port") then break end
      os.execute("sleep 0.05")
    end
    local base = "http://127.0.0.1:" .. cli.slurp(dir .. "/port")
    local r = cli.run { "run", "plans/http/plan.json", "--tools", "plans/http/tools", "--input",
                        cjson.encode { base = base } }
    os.execute("kill $(cat " .. dir .. "/pid); rm -rf " .. dir)
    assert.are.equal(0, r.code, r.err)
    local out = cjson.decode(r.out)
    assert.are.equal("cairo clear 31°C; lisbon sunny 24°C; london rainy 12°C; oslo snow -3°C", out.summary)
    assert.are.same({ city = "oslo", sky = "snow", temp = -3 }, out.weather.oslo)
  end)
end)

describe("obelus.http against nginx", function()
  local s, why
  setup(function()
    s, why = servers.nginx()
    if s then
      s.file("small.txt", ("small text "):rep(100))
      local big = {}
      for i = 1, 200000 do big[i] = ("%08d\n"):format(i) end
      s.file("big.bin", table.concat(big))
    end
  end)
  teardown(function() if s then s.stop() end end)

  it("serves static files, gzip-encoded text decoded", function()
    assert(s, why)
    local r = one { _tool = "get", url = s.url("/small.txt") }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(("small text "):rep(100), r.output.r.body)
    assert.are.equal("gzip", r.output.r.encoding)
  end)

  it("downloads a large file into a path, streamed", function()
    assert(s, why)
    local path = os.tmpname()
    local r = one { _tool = "download", url = s.url("/big.bin"), path = path }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(200, r.output.r.status)
    local got = cli.slurp(path)
    assert.are.equal(1800000, #got)
    assert.are.equal(cli.slurp(s.dir .. "/www/big.bin"), got)
    os.remove(path)
  end)

  it("HTTPS with the CA file given; without it the certificate is refused", function()
    assert(s, why)
    local r = one { _tool = "get", url = s.tls_url("/small.txt"), ca_file = s.ca_file }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(200, r.output.r.status)
    assert.are.equal("2", r.output.r.version) -- HTTP/2, negotiated over TLS
    r = one { _tool = "get", url = s.tls_url("/small.txt") }
    assert.matches("GET https://localhost:%d+/small%.txt: .*certificate", r.output.err.error)
  end)
end)
