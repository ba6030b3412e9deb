-- http_hostile_spec.lua -- obelus.http against hostile requests and servers (issue 26):
-- a method, header or URL that could split the request fails the call before anything is
-- sent; a server that trickles or stalls is cut off by the timeout and the low-speed
-- limit; a redirect (or a URL) to a link-local or metadata address is refused before a
-- socket is made, unless --http-allow-private; a gzip bomb and an endless chunked body
-- fail the call at max_bytes (64 MB by default, --http-max-bytes) instead of aborting.
-- Every obelus process runs under `timeout` (and `ulimit -v` outside ASan): a hang or a
-- runaway shows as a failed test, never as a stuck machine.
local cli = require "support.cli"
local cjson = require "cjson"
local servers = require "support.servers"

local TOOLS = "spec/cli/fixtures/http/hostile.lua"
local ASAN = cli.bin:find("asan") ~= nil

-- One `raw` call with opts; answers { code=, r= (the call's output), err= (its error
-- message, when it failed), stderr= }.
local function raw(opts, ...)
  local call = { _tool = "raw", _outputPath = "†state.r || †state.err" }
  for k, v in pairs(opts) do call[k] = v end
  local plan = cli.tmpfile(cjson.encode { plan = { call }, output = { r = "†state.r", err = "†state.err" } },
                           ".json")
  local args = { "run", plan, "--tools", TOOLS, ... }
  for i, a in ipairs(args) do args[i] = cli.quote(a) end
  local out, err = os.tmpname(), os.tmpname()
  local _, how, code = os.execute(("%s timeout -s KILL 30 %s %s >%s 2>%s"):format(
    ASAN and "" or "ulimit -v 4000000;", cli.quote(cli.bin), table.concat(args, " "), out, err))
  local r = { code = how == "exit" and code or 128 + code, stderr = cli.slurp(err) }
  local o = cli.slurp(out)
  os.remove(plan)
  os.remove(out)
  os.remove(err)
  local ok, v = pcall(cjson.decode, o)
  if ok and type(v) == "table" then
    r.r = v.r ~= cjson.null and v.r or nil
    r.err = v.err ~= cjson.null and v.err.error or nil
  end
  return r
end

describe("obelus.http against hostile input", function()
  local s
  setup(function() s = assert(servers.httpd()) end)
  teardown(function() s.stop() end)

  local function seen()
    local p = io.popen("curl -s " .. s.url("/seen"))
    local heads = cjson.decode(p:read("a"))
    p:close()
    return table.concat(heads, "\n")
  end

  it("a method with CRLF (request splitting) fails the call; nothing reaches the server", function()
    local r = raw { url = s.url("/echo"), method = "GET /smuggled HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET" }
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.r)
    assert.matches('method "GET /smuggled HTTP/1.1\\r\\nX-Injected: 1\\r\\n\\r\\nGET" is not an HTTP method',
                   r.err, 1, true)
    for _, m in ipairs { "GET /x", "", "G\\0ET" } do
      r = raw { url = s.url("/echo"), method = m }
      assert.is_nil(r.r, m)
      assert.matches("method", r.err, 1, true)
    end
    local heads = seen()
    assert.is_nil(heads:find("smuggled", 1, true), heads)
    assert.is_nil(heads:find("X-Injected", 1, true), heads)
  end)

  it("a header value with NUL, CR or LF, or a name that is not a token, fails the call unsent", function()
    local cases = {
      { { ["X-Nul"] = "a\\0b" }, "header X-Nul: its value has a NUL byte" },
      { { ["X-Crlf"] = "a\r\nX-Injected: 1" }, 'header "X-Crlf": its value has a line break' },
      { { ["X-Lf"] = "a\nb" }, 'header "X-Lf": its value has a line break' },
      { { ["X Space"] = "1" }, 'header name "X Space" is not an HTTP token' },
      { { ["X-A:b"] = "1" }, 'header name "X-A:b" is not an HTTP token' },
      { { ["X-\r\nInjected"] = "1" }, 'header name "X-\\r\\nInjected" is not an HTTP token' },
    }
    for _, c in ipairs(cases) do
      local r = raw { url = s.url("/echo?nul-case"), headers = c[1] }
      assert.are.equal(0, r.code, r.stderr)
      assert.is_nil(r.r, c[2])
      assert.matches(c[2], r.err, 1, true)
    end
    assert.is_nil(seen():find("nul-case", 1, true))
    -- a good header still goes
    local r = raw { url = s.url("/echo"), headers = { ["X-Ok"] = "fine" } }
    assert.are.equal(200, r.r.status, r.err)
  end)

  it("a URL that is not http(s), or has a space or a control byte, fails the call unsent", function()
    local port = s.port
    local cases = {
      { "ftp://127.0.0.1:" .. port .. "/x", "only http:// and https:// URLs" },
      { "file:///etc/passwd", "only http:// and https:// URLs" },
      { "127.0.0.1:" .. port .. "/hello", "only http:// and https:// URLs" },
      { "http://127.0.0.1:" .. port .. "/url-case a", "no space, line break or control byte" },
      { "http://127.0.0.1:" .. port .. "/url-case\r\nX-Injected: 1", "\\r\\nX-Injected" },
      { "http://127.0.0.1:" .. port .. "/url-case\\0x", "url has a NUL byte" },
    }
    for _, c in ipairs(cases) do
      local r = raw { url = c[1] }
      assert.are.equal(0, r.code, r.stderr)
      assert.is_nil(r.r, c[1])
      assert.matches(c[2], r.err, 1, true)
    end
    assert.is_nil(seen():find("url-case", 1, true))
    -- a redirect to anything but http(s) is not followed; nor are more than 20
    local r = raw { url = s.url("/redirect?to=file:///etc/passwd") }
    assert.is_nil(r.r)
    assert.matches("file", r.err)
    r = raw { url = s.url("/loop") }
    assert.is_nil(r.r)
    assert.matches("Maximum (20) redirects followed", r.err, 1, true)
  end)

  it("a server that trickles a byte every 0.5 s is cut off by timeout_ms, or by the low-speed limit", function()
    local r = raw { url = s.url("/trickle?ms=500"), timeout_ms = 1500 }
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.r)
    assert.matches("GET .*/trickle%?ms=500: .*timed out", r.err)
    -- 2 bytes/s is under a limit of 100 bytes/s: stopped after low_speed_time (1 s)
    r = raw { url = s.url("/trickle?ms=500"), low_speed_limit = 100, low_speed_time = 1 }
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.r)
    assert.matches("GET .*/trickle%?ms=500: .*too slow", r.err)
  end)

  it("a redirect to 169.254.169.254 (cloud metadata) fails, naming the address; no socket is made", function()
    local r = raw { url = s.url("/redirect?to=http://169.254.169.254/latest/meta-data/"), timeout_ms = 20000 }
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.r)
    assert.matches("169.254.169.254 is a link-local (169.254.0.0/16: cloud metadata) address, denied " ..
                   "(--http-allow-private allows it) (redirected to http://169.254.169.254/latest/meta-data/)",
                   r.err, 1, true)
    -- at once: the denial is the error, not a connect that timed out
    assert.is_nil(r.err:find("timed out", 1, true))
  end)

  it("0.0.0.0 and other denied addresses fail directly too; --http-allow-private lets them through", function()
    local url = ("http://0.0.0.0:%d/hello"):format(s.port) -- Linux connects it to loopback
    local r = raw { url = url }
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.r)
    assert.matches("GET " .. url .. ": 0.0.0.0 is an unspecified (0.0.0.0/8) address, denied", r.err, 1, true)
    r = raw({ url = url }, "--http-allow-private")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.same({ status = 200, bytes = 5, url = url }, r.r)
    r = raw { url = ("http://[::ffff:169.254.169.254]:%d/"):format(s.port), timeout_ms = 20000 }
    assert.matches("is a link-local", r.err, 1, true)
    -- loopback stays allowed
    r = raw { url = s.url("/hello") }
    assert.are.same({ status = 200, bytes = 5, url = s.url("/hello") }, r.r)
  end)

  it("obelus mcp takes --http-allow-private and --http-max-bytes as run does", function()
    local function call(url, ...)
      local line = cjson.encode { jsonrpc = "2.0", id = 1, method = "tools/call",
                                  params = { name = "raw", arguments = { url = url } } }
      local args = { "mcp", "--tools", TOOLS, ... }
      args.stdin = line .. "\n"
      local r = cli.run(args)
      assert.are.equal(0, r.code, r.err)
      return cjson.decode(r.out).result.structuredContent
    end
    local zero = ("http://0.0.0.0:%d/hello"):format(s.port)
    assert.matches("0.0.0.0 is an unspecified (0.0.0.0/8) address, denied", call(zero).errors[1], 1, true)
    assert.are.same({ status = 200, bytes = 5, url = zero }, call(zero, "--http-allow-private").output)
    assert.matches("response body larger than 4 bytes", call(s.url("/hello"), "--http-max-bytes", "4").errors[1],
                   1, true)
  end)

  it("a gzip bomb fails the call at max_bytes, counted decoded: 64 MB by default", function()
    local bomb = os.tmpname()
    assert(os.execute(("head -c 70000000 /dev/zero | gzip -1 > %s"):format(bomb))) -- 70 MB in ~70 KB
    local url = s.url("/gzip?file=" .. bomb)
    local r = raw { url = url }
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.r)
    assert.matches("GET " .. url .. ": response body larger than 67108864 bytes (max_bytes)", r.err, 1, true)
    r = raw({ url = url }, "--http-max-bytes", "1000000")
    assert.matches("response body larger than 1000000 bytes (max_bytes)", r.err, 1, true)
    -- a request's own max_bytes wins over the option's
    local small = os.tmpname()
    assert(os.execute(("head -c 1500000 /dev/zero | gzip -1 > %s"):format(small)))
    r = raw({ url = s.url("/gzip?file=" .. small), max_bytes = 2000000 }, "--http-max-bytes", "1000000")
    assert.are.same({ status = 200, bytes = 1500000 }, { status = r.r.status, bytes = r.r.bytes })
    os.remove(bomb)
    os.remove(small)
  end)

  it("an endless chunked body fails the call at max_bytes instead of aborting", function()
    local r = raw { url = s.url("/endless") }
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.r)
    assert.matches("GET " .. s.url("/endless") .. ": response body larger than 67108864 bytes (max_bytes)",
                   r.err, 1, true)
    r = raw({ url = s.url("/endless") }, "--http-max-bytes", "100000")
    assert.matches("response body larger than 100000 bytes", r.err, 1, true)
  end)

  it("an answer's body is held in the run's memory account: past --max-memory the call fails", function()
    -- max_bytes lets 1 GB through; the account (16 MB) stops the endless body first
    local r = raw({ url = s.url("/endless"), max_bytes = 1 << 30 }, "--max-memory", "16")
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.r)
    assert.matches("GET " .. s.url("/endless") .. ": memory limit of 16 MB reached (--max-memory)",
                   r.err, 1, true)
  end)
end)
