-- spec/cli/mcp_http_spec.lua -- `obelus mcp --http`: the Model Context Protocol over
-- Streamable HTTP, driven by the official MCP SDK's StreamableHTTPClientTransport
-- (spec/mcp/http_client.mjs; the SDK installed with npm into spec/mcp/node_modules, not
-- committed): sessions, list, calls, progress on an event stream, concurrent calls,
-- cancellation, a second client, DELETE; and by curl: the transport's statuses (400
-- without a session, 404 for one ended, 202, 405, 413, 406), a parse error, JSON or an
-- event stream by Accept, a batch at 2025-03-26, Origin (403), the token (401), a token
-- made for 0.0.0.0, a client leaving mid-stream, SIGTERM with calls running. A real
-- server on a port the system picks.
local cjson = require "cjson"
local cli = require "support.cli"

local q = cli.quote
local sh = cli.sh
local TOOLS = "spec/cli/tools"

-- a server (extra: more arguments); its URL, the server (for stop), and what it said
-- on stderr
local function serve(extra)
  local err, pidf, status = os.tmpname(), os.tmpname(), os.tmpname()
  os.remove(status)
  os.execute(("(%s mcp --http --port 0 --tools %s %s 2>%s >/dev/null & echo $! >%s; wait $!; " ..
    "echo $? >%s) >/dev/null 2>&1 &"):format(q(cli.bin), TOOLS, extra or "", q(err), q(pidf), q(status)))
  local url, said
  for _ = 1, 500 do
    said = cli.slurp(err)
    url = said:match("obelus mcp: (http://%S+/mcp)\n")
    if url then break end
    os.execute("sleep 0.02")
  end
  local pid = cli.slurp(pidf):match("%d+")
  os.remove(err)
  os.remove(pidf)
  assert(url, "the server said no URL: " .. said)
  return url, { pid = pid, status = status }, said
end

-- SIGTERM, then its exit status
local function stop(srv)
  os.execute("kill -TERM " .. srv.pid .. " 2>/dev/null")
  local code
  for _ = 1, 1500 do
    code = tonumber(cli.slurp(srv.status):match("%d+"))
    if code then break end
    os.execute("sleep 0.02")
  end
  os.remove(srv.status)
  return code
end

-- a request with curl (args after the URL, shell words): status, body, headers (lower case)
local function req(url, args)
  local hd, body = os.tmpname(), os.tmpname()
  local code = sh(("curl -s -D %s -o %s -w '%%{http_code}' %s %s"):format(q(hd), q(body), args or "", q(url)))
  local r = { tonumber(code), cli.slurp(body), cli.slurp(hd):lower() }
  os.remove(hd)
  os.remove(body)
  return r[1], r[2], r[3]
end

local function json_arg(v) return "-H 'content-type: application/json' --data-binary " .. q(cjson.encode(v)) end

local function init_msg(version)
  return { jsonrpc = "2.0", id = 1, method = "initialize",
           params = { protocolVersion = version or "2025-06-18", capabilities = {},
                      clientInfo = { name = "curl", version = "1" } } }
end

-- a session made with curl (more: more curl arguments): its id
local function session(url, version, more)
  local code, body, hd = req(url, json_arg(init_msg(version)) .. " " .. (more or ""))
  assert(code == 200, body)
  local sid = hd:match("mcp%-session%-id: (%x+)")
  assert(sid, hd)
  return sid
end

-- the JSON messages of an event stream's data lines
local function events(body)
  local out = {}
  for d in body:gmatch("data: ([^\n]*)") do out[#out + 1] = cjson.decode(d) end
  return out
end

describe("obelus mcp --http", function()
  setup(function()
    -- once, under a lock: make test runs the specs in two processes at the same time
    local out = sh("cd spec/mcp && flock .npm-install.lock sh -c " ..
      "'[ -f node_modules/@modelcontextprotocol/sdk/package.json ] || " ..
      "timeout 300 npm install --no-audit --no-fund' 2>&1; echo \"exit $?\"")
    assert(out:match("exit 0\n$"), "npm install of @modelcontextprotocol/sdk failed: " .. out)
  end)

  local function sdk(url, token)
    local out = sh(("timeout 90 node spec/mcp/http_client.mjs %s %s 2>&1"):format(q(url), token and q(token) or ""))
    local ok, r = pcall(cjson.decode, out)
    assert.is_true(ok, out)
    return r, out
  end

  it("serves the official SDK's Streamable HTTP client: sessions, calls, progress, concurrency, cancel, DELETE", function()
    local url, pid = serve()
    local r, out = sdk(url)
    assert.are.equal(0, stop(pid))
    assert.are.equal("obelus", r.server.name)
    -- a session: an unguessable id (128 bits as hex); the second client's its own
    assert.matches("^%x+$", r.session)
    assert.are.equal(32, #r.session)
    assert.matches("^%x+$", r.second_session)
    assert.are_not.equal(r.session, r.second_session)
    local names = {}
    for _, n in ipairs(r.tools) do names[n] = true end
    assert.is_true(names.echo and names.sleepy and names.run_plan)
    assert.is_false(r.echo.isError)
    assert.are.same({ n = 42, s = "†not a reference" }, cjson.decode(r.echo.content[1].text))
    -- a plan with progress: one notification per settled call, then the answer
    assert.is_false(r.plan.isError)
    assert.are.same({ z = 1 }, cjson.decode(r.plan.content[1].text))
    assert.are.equal(3, #r.progress, out)
    for i, p in ipairs(r.progress) do
      assert.are.equal(i, p.progress)
      assert.are.equal(3, p.total)
    end
    assert.are.same({ '#0 progress {"attempt":1,"step":1}', '#0 progress {"attempt":1,"step":2}',
                      '#0 progress {"attempt":1,"step":3}', "#0 done" }, r.streamed)
    assert.are.equal("3", r.streamed_result.content[1].text)
    -- two calls at once: each answered as it finishes
    assert.are.same({ '"fast"', '"slow"' }, r.order)
    -- cancelled, and the session still serves
    assert.truthy(r.cancelled:match("^rejected"), r.cancelled)
    assert.are.equal('"still here"', r.after_cancel.content[1].text)
    assert.are.equal('"two"', r.second_echo.content[1].text)
    -- DELETE ended the first session (404 after), not the second; no session: 400
    assert.are.equal(404, r.after_delete)
    assert.are.equal('"two again"', r.second_after_delete.content[1].text)
    assert.are.equal(400, r.no_session)
    assert.are.same({}, r.errors)
  end)

  it("answers by the transport's rules: sessions, 202, JSON or an event stream, a batch, errors", function()
    local url, pid = serve()
    local sid = session(url)
    local S = "-H 'mcp-session-id: " .. sid .. "' "
    local ping = { jsonrpc = "2.0", id = 2, method = "ping" }
    local r = {}
    r.ping = { req(url, S .. json_arg(ping)) }
    r.none = { req(url, json_arg(ping)) }
    r.unknown = { req(url, "-H 'mcp-session-id: 0123456789abcdef0123456789abcdef' " .. json_arg(ping)) }
    r.note = { req(url, S .. json_arg({ jsonrpc = "2.0", method = "notifications/initialized" })) }
    r.parse = { req(url, S .. "-H 'content-type: application/json' --data-binary '{\"jsonrpc\": \"2.0\", \"id\": '") }
    r.invalid = { req(url, S .. json_arg({ jsonrpc = "1.0", method = "ping" })) }
    r.unknown_method = { req(url, S .. json_arg({ jsonrpc = "2.0", id = 3, method = "no/such" })) }
    r.get = { req(url, S) }
    r.other_path = { req(url:gsub("/mcp$", "/other"), S .. json_arg(ping)) }
    r.version = { req(url, S .. "-H 'mcp-protocol-version: 2024-01-01' " .. json_arg(ping)) }
    r.right_version = { req(url, S .. "-H 'mcp-protocol-version: 2025-06-18' " .. json_arg(ping)) }
    r.not_acceptable = { req(url, S .. "-H 'accept: text/html' " .. json_arg(ping)) }
    -- a call that runs: an event stream for a client that takes one, JSON for one that does not
    local call = { jsonrpc = "2.0", id = 4, method = "tools/call",
                   params = { name = "sleepy", arguments = { ms = 30, value = "v" }, _meta = { progressToken = "p" } } }
    r.sse = { req(url, S .. "-H 'accept: application/json, text/event-stream' " .. json_arg(call)) }
    r.json = { req(url, S .. "-H 'accept: application/json' " .. json_arg(call)) }
    r.sse_only = { req(url, S .. "-H 'accept: text/event-stream' " .. json_arg(ping)) }
    -- a batch, at 2025-03-26: one array, its call and its ping
    local old = session(url, "2025-03-26")
    r.batch = { req(url, "-H 'mcp-session-id: " .. old .. "' " .. json_arg({
      { jsonrpc = "2.0", id = 5, method = "tools/call", params = { name = "echo", arguments = { value = 5 } } },
      { jsonrpc = "2.0", id = 6, method = "ping" },
      { jsonrpc = "2.0", method = "notifications/no-such" } })) }
    r.batch_refused = { req(url, S .. json_arg({ ping, ping })) }
    r.delete_none = { req(url, "-X DELETE") }
    r.delete = { req(url, "-X DELETE " .. S) }
    r.after = { req(url, S .. json_arg(ping)) }
    r.delete_again = { req(url, "-X DELETE " .. S) }
    assert.are.equal(0, stop(pid))

    assert.are.equal(200, r.ping[1])
    assert.matches("content%-type: application/json", r.ping[3])
    assert.are.same({ jsonrpc = "2.0", id = 2, result = {} }, cjson.decode(r.ping[2]))
    assert.are.equal(400, r.none[1])
    assert.are.equal(404, r.unknown[1])
    assert.are.equal(202, r.note[1])
    assert.are.equal("", r.note[2])
    -- malformed JSON: a JSON-RPC parse error, id null, with 400
    assert.are.equal(400, r.parse[1])
    local e = cjson.decode(r.parse[2])
    assert.are.equal(-32700, e.error.code)
    assert.are.equal(cjson.null, e.id)
    -- not a JSON-RPC message: its error (id null) with 400; a method unknown: 200
    assert.are.equal(400, r.invalid[1])
    assert.are.equal(-32600, cjson.decode(r.invalid[2]).error.code)
    assert.are.equal(200, r.unknown_method[1])
    assert.are.equal(-32601, cjson.decode(r.unknown_method[2]).error.code)
    assert.are.equal(405, r.get[1])
    assert.matches("allow: post, delete", r.get[3])
    assert.are.equal(404, r.other_path[1])
    assert.are.equal(400, r.version[1])
    assert.are.equal(200, r.right_version[1])
    assert.are.equal(406, r.not_acceptable[1])
    -- the event stream: the progress notification, then the answer
    assert.are.equal(200, r.sse[1])
    assert.matches("content%-type: text/event%-stream", r.sse[3])
    local ev = events(r.sse[2])
    assert.are.equal(2, #ev, r.sse[2])
    assert.are.equal("notifications/progress", ev[1].method)
    assert.are.equal("p", ev[1].params.progressToken)
    assert.are.equal(4, ev[2].id)
    assert.are.equal('"v"', ev[2].result.content[1].text)
    -- JSON only: the answer alone
    assert.are.equal(200, r.json[1])
    assert.matches("content%-type: application/json", r.json[3])
    assert.are.equal('"v"', cjson.decode(r.json[2]).result.content[1].text)
    assert.matches("content%-type: text/event%-stream", r.sse_only[3])
    assert.are.same({ { jsonrpc = "2.0", id = 2, result = {} } }, events(r.sse_only[2]))
    -- the batch: one array, in one message
    local arr = events(r.batch[2])
    assert.are.equal(1, #arr, r.batch[2])
    local ids = {}
    for _, a in ipairs(arr[1]) do ids[#ids + 1] = a.id end
    table.sort(ids)
    assert.are.same({ 5, 6 }, ids)
    -- at 2025-06-18 a batch is refused: one error, id null, 400
    assert.are.equal(400, r.batch_refused[1])
    assert.are.equal(-32600, cjson.decode(r.batch_refused[2]).error.code)
    assert.are.equal(400, r.delete_none[1])
    assert.are.equal(200, r.delete[1])
    assert.are.equal(404, r.after[1])
    assert.are.equal(404, r.delete_again[1])
  end)

  it("refuses requests from web pages of other origins (403), takes this machine's", function()
    local url, pid = serve()
    local port = url:match(":(%d+)/mcp$")
    local function with_origin(o) return (req(url, "-H " .. q("Origin: " .. o) .. " " .. json_arg(init_msg()))) end
    local evil = with_origin("http://evil.example")
    local rebound = with_origin("http://evil.example:" .. port) -- a name made to point here
    local null = with_origin("null")
    local own = with_origin("http://127.0.0.1:" .. port)
    local localhost = with_origin("http://localhost:5173")
    local v6 = with_origin("http://[::1]:8080")
    assert.are.equal(0, stop(pid))
    assert.are.equal(403, evil)
    assert.are.equal(403, rebound)
    assert.are.equal(403, null)
    assert.are.equal(200, own)
    assert.are.equal(200, localhost)
    assert.are.equal(200, v6)
  end)

  it("wants its token when given one: 401 without it; a Bearer header, ?token=, the cookie", function()
    local url, pid = serve("--token s3cret")
    local none = req(url, json_arg(init_msg()))
    local wrong = req(url, "-H 'Authorization: Bearer nope' " .. json_arg(init_msg()))
    local hdr = req(url, "-H 'Authorization: Bearer s3cret' " .. json_arg(init_msg()))
    local jar = os.tmpname()
    local link = req(url .. "?token=s3cret", "-c " .. q(jar) .. " " .. json_arg(init_msg()))
    local cookie = req(url, "-b " .. q(jar) .. " " .. json_arg(init_msg()))
    os.remove(jar)
    local _, _, hd = req(url, json_arg(init_msg()))
    assert.are.equal(0, stop(pid))
    assert.are.equal(401, none)
    assert.matches("www%-authenticate: bearer", hd)
    assert.are.equal(401, wrong)
    assert.are.equal(200, hdr)
    assert.are.equal(200, link)
    assert.are.equal(200, cookie)
  end)

  it("makes a token for --bind 0.0.0.0 given none, says it, and wants it", function()
    local url, pid, said = serve("--bind 0.0.0.0")
    local token = said:match("obelus mcp: token (%x+)")
    assert.truthy(token, said)
    assert.are.equal(32, #token)
    assert.matches("^http://0%.0%.0%.0:%d+/mcp$", url)
    local local_url = url:gsub("0%.0%.0%.0", "127.0.0.1")
    local without = req(local_url, json_arg(init_msg()))
    local r, out = sdk(local_url, token)
    assert.are.equal(0, stop(pid))
    assert.are.equal(401, without)
    assert.are.equal('"two"', r.second_echo.content[1].text, out)
    assert.are.equal(3, #r.progress, out)
  end)

  it("answers a body past --max-line (default 16 MB) 413", function()
    local url, pid = serve("--max-line 1000")
    local big = os.tmpname()
    local f = assert(io.open(big, "w"))
    f:write('{"jsonrpc":"2.0","id":1,"method":"ping","x":"', ("x"):rep(2000), '"}')
    f:close()
    local small = req(url, "-H 'content-type: application/json' --data-binary @" .. q(big))
    assert.are.equal(0, stop(pid))
    url, pid = serve()
    f = assert(io.open(big, "w"))
    f:write('{"jsonrpc":"2.0","id":1,"method":"ping","x":"', ("x"):rep(17 * 1024 * 1024), '"}')
    f:close()
    local large = req(url, "-H 'content-type: application/json' --data-binary @" .. q(big))
    local after = req(url, json_arg(init_msg()))
    assert.are.equal(0, stop(pid))
    os.remove(big)
    assert.are.equal(413, small)
    assert.are.equal(413, large)
    assert.are.equal(200, after)
  end)

  it("goes on when a client leaves mid-stream, and ends at SIGTERM with 0, its calls cancelled", function()
    local url, pid = serve()
    local sid = session(url)
    local S = "-H 'mcp-session-id: " .. sid .. "' "
    local function call(id, ms)
      return json_arg({ jsonrpc = "2.0", id = id, method = "tools/call",
        params = { name = "steps", arguments = { n = 3, ms = ms }, _meta = { progressToken = id } } })
    end
    -- a client that reads the first event and leaves: its call's later events go nowhere
    local first = sh(("curl -sN %s %s | head -c 20"):format(S .. call(2, 200), q(url)))
    assert.matches("event: message", first)
    os.execute("sleep 1") -- its call ends, its answer dropped
    local code, body = req(url, S .. call(3, 1))
    assert.are.equal(200, code)
    local ev = events(body)
    assert.are.equal(3, ev[#ev].id, body) -- the answer, after its progress
    -- a call running, a session open: SIGTERM ends the server, the client's stream with it
    local out = os.tmpname()
    local curl = sh(("curl -sN %s %s >%s 2>/dev/null & echo $!"):format(S .. call(4, 20000), q(url), q(out))):gsub("%s+$", "")
    for _ = 1, 500 do
      if cli.slurp(out):match("progress") then break end
      os.execute("sleep 0.02")
    end
    assert.are.equal(0, stop(pid))
    sh("wait " .. curl .. " 2>/dev/null")
    for _ = 1, 500 do
      if sh("kill -0 " .. curl .. " 2>/dev/null && echo alive") == "" then break end
      os.execute("sleep 0.02")
    end
    assert.are.equal("", sh("kill -0 " .. curl .. " 2>/dev/null && echo alive"))
    local got = events(cli.slurp(out))
    os.remove(out)
    assert.are.equal(1, #got) -- its first step's progress; never an answer
    assert.are.equal("notifications/progress", got[1].method)
  end)

  it("ends a cancelled call's response without an answer, an event stream's or JSON's", function()
    local url, srv = serve()
    local sid = session(url)
    local S = "-H 'mcp-session-id: " .. sid .. "' "
    local function start(id, accept)
      local out = os.tmpname()
      local body = json_arg({ jsonrpc = "2.0", id = id, method = "tools/call",
        params = { name = "steps", arguments = { n = 1000, ms = 50 }, _meta = { progressToken = id } } })
      local pid = sh(("curl -sN -H %s %s %s %s >%s 2>/dev/null & echo $!"):format(
        q("accept: " .. accept), S, body, q(url), q(out))):gsub("%s+$", "")
      return out, pid
    end
    local sse_out, sse_pid = start(7, "text/event-stream")
    local json_out, json_pid = start(8, "application/json")
    for _ = 1, 500 do -- the event stream's call running
      if cli.slurp(sse_out):match("progress") then break end
      os.execute("sleep 0.02")
    end
    local function cancel(id)
      return req(url, S .. json_arg({ jsonrpc = "2.0", method = "notifications/cancelled",
        params = { requestId = id, reason = "enough" } }))
    end
    local function alive(pid) return sh("kill -0 " .. pid .. " 2>/dev/null && echo alive") ~= "" end
    -- cancelled (again, 202 each time, while the call lives: JSON's call shows nothing while
    -- it runs, and a cancel that reaches the server before its call is ignored, as the
    -- protocol says); true once its response has ended, false if it never did (50 s calls)
    local codes = {}
    local function ended(id, pid)
      for _ = 1, 30 do
        codes[#codes + 1] = cancel(id)
        for _ = 1, 50 do
          if not alive(pid) then return true end
          os.execute("sleep 0.02")
        end
      end
      os.execute("kill " .. pid)
      return false
    end
    local sse_ended, json_ended = ended(7, sse_pid), ended(8, json_pid)
    local sse_body, json_body = cli.slurp(sse_out), cli.slurp(json_out)
    os.remove(sse_out)
    os.remove(json_out)
    local after = req(url, S .. json_arg({ jsonrpc = "2.0", id = 9, method = "ping" }))
    assert.are.equal(0, stop(srv))
    for _, c in ipairs(codes) do assert.are.equal(202, c) end
    assert.is_true(sse_ended)
    assert.is_true(json_ended)
    for _, m in ipairs(events(sse_body)) do
      assert.are.equal("notifications/progress", m.method) -- never an answer
    end
    assert.are.equal("", json_body)
    assert.are.equal(200, after)
  end)

  it("keeps at most 256 sessions: a new one ends the one unused longest", function()
    local url, srv = serve()
    local ping = json_arg({ jsonrpc = "2.0", id = 2, method = "ping" })
    local first, second = session(url), session(url)
    local used = req(url, "-H 'mcp-session-id: " .. first .. "' " .. ping) -- second is now the older
    local made = sh(("n=0; for i in $(seq 1 255); do c=$(curl -s -o /dev/null -w '%%{http_code}' %s %s); " ..
      "[ \"$c\" = 200 ] && n=$((n+1)); done; echo $n"):format(json_arg(init_msg()), q(url)))
    local a = req(url, "-H 'mcp-session-id: " .. first .. "' " .. ping)
    local b = req(url, "-H 'mcp-session-id: " .. second .. "' " .. ping)
    assert.are.equal(0, stop(srv))
    assert.are.equal(200, used)
    assert.are.equal("255", made:match("%d+"))
    assert.are.equal(200, a)
    assert.are.equal(404, b)
  end)

  it("takes --bind, --port and --token with --http only; says a bad --port", function()
    local r = cli.run { "mcp", "--tools", TOOLS, "--bind", "0.0.0.0" }
    assert.are.equal(2, r.code)
    assert.matches("go with %-%-http", r.err)
    r = cli.run { "mcp", "--http", "--tools", TOOLS, "--port", "70000" }
    assert.are.equal(2, r.code)
    assert.matches("%-%-port needs a number", r.err)
    r = cli.run { "mcp", "--http", "--tools", TOOLS, "--bind", "example.com" }
    assert.are.equal(2, r.code)
    assert.matches("is not an IP address", r.err)
    r = cli.run { "mcp", "--help" }
    assert.are.equal(0, r.code)
    assert.matches("%-%-http", r.out)
  end)
end)
