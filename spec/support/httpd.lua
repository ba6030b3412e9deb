-- spec/support/httpd.lua -- the HTTP server of the tests' own, for the answers nginx
-- will not give on demand: `lua5.4 spec/support/httpd.lua PORTFILE` listens on a free
-- loopback port, writes the port to PORTFILE, and serves until it is killed:
--   /hello            200 "hello"
--   /echo             200 JSON {method, path, headers (lower-case), body}
--   /slow?ms=N        200 "slow" after N ms; with &until=K&tag=T, all of tag T waiting are
--                     answered at once when K of them wait together (a peak that does not
--                     hang on how fast they came)
--   /status/N         status N, body "status N"
--   /redirect?to=P    302 to P
--   /loop             302 to itself
--   /big?n=N          N bytes of "x"
--   /broken           promises 100 bytes, sends 10, closes
--   /json             200 {"ok":true,"n":42}
--   /hold?tag=T&n=N[&grace=MS]
--                     200 "held": held until N requests of tag T wait at once, then
--                     answered together GRACE ms (default 200) later; a request over N
--                     joins the batch; a batch short of N is answered after 60 s. A barrier rather than a clock: however slow the
--                     machine, the client's whole allowance of requests is in flight.
--   /peak?tag=T       200 {"peak":N}: the most /slow or /hold requests of tag T waiting at once
--   /trickle?ms=N     200, then one byte of body every N ms (500), never ending
--   /endless          200, a chunked body of 64 KB chunks, never ending
--   /gzip?file=F      200, the bytes of file F as a gzip-encoded body
--   /seen             200 JSON: every request line and header line received so far
--   /bighead?lines=N  200 with N header lines of 100 bytes each (5000: 500 KB of headers)
--   /onehead?bytes=N  200 with one header line of N bytes
-- One request a connection (Connection: close).
local uv = require "luv"
local cjson = require "cjson"

local portfile = assert(arg[1], "usage: httpd.lua PORTFILE")

local function answer(client, status, body, headers)
  local head = { ("HTTP/1.1 %d X"):format(status), "Connection: close",
                 "Content-Length: " .. #body }
  for k, v in pairs(headers or {}) do head[#head + 1] = k .. ": " .. v end
  client:write(table.concat(head, "\r\n") .. "\r\n\r\n" .. body, function() client:close() end)
end

local function query(path, key)
  return path:match("[?&]" .. key .. "=([^&]*)")
end

local waiting, peak, held = {}, {}, {} -- by tag; held: the releases of those waiting
local batches = {} -- by tag: the /hold requests of the batch now forming
local seen = {} -- the head of every request, as received

-- Writes the next piece when the client has taken the last: never ending, until
-- the client goes (a write fails) or the test's server is killed.
local function forever(client, piece, every_ms)
  local t = every_ms and uv.new_timer()
  local function more()
    if client:is_closing() then
      if t then t:close() end
      return
    end
    client:write(piece, function(err)
      if err then
        if not client:is_closing() then client:close() end
        if t then t:close() end
      elseif t then
        t:start(every_ms, 0, more)
      else
        more()
      end
    end)
  end
  more()
end

local function serve(client, req)
  local method, path = req.method, req.path
  local route = path:match("^[^?]*")
  if route == "/hello" then
    answer(client, 200, "hello", { ["Content-Type"] = "text/plain" })
  elseif route == "/echo" then
    answer(client, 200, cjson.encode { method = method, path = path, headers = req.headers,
                                       body = req.body }, { ["Content-Type"] = "application/json" })
  elseif route == "/json" then
    answer(client, 200, '{"ok":true,"n":42}', { ["Content-Type"] = "application/json" })
  elseif route == "/slow" then
    local tag = query(path, "tag") or ""
    waiting[tag] = (waiting[tag] or 0) + 1
    if waiting[tag] > (peak[tag] or 0) then peak[tag] = waiting[tag] end
    local t = uv.new_timer()
    local function release()
      if t:is_closing() then return end
      t:close()
      waiting[tag] = waiting[tag] - 1
      if not client:is_closing() then answer(client, 200, "slow") end
    end
    held[tag] = held[tag] or {}
    local n = tonumber(query(path, "until"))
    if n and waiting[tag] >= n then -- all there at once: answered now, not at a time
      for _, r in ipairs(held[tag]) do r() end
      held[tag] = {}
      release()
      return
    end
    table.insert(held[tag], release)
    t:start(tonumber(query(path, "ms")) or 1000, 0, release)
  elseif route == "/hold" then
    local tag = query(path, "tag") or ""
    waiting[tag] = (waiting[tag] or 0) + 1
    if waiting[tag] > (peak[tag] or 0) then peak[tag] = waiting[tag] end
    local batch = batches[tag]
    if not batch then
      batch = { timer = uv.new_timer() }
      batches[tag] = batch
      -- never reached (a client that cannot hold N at once): answered after 60 s, so the
      -- test fails on its peak rather than hangs
      batch.timer:start(60000, 0, function() batch.release() end)
      function batch.release()
        batch.timer:close()
        if batches[tag] == batch then batches[tag] = nil end -- the next form the next batch
        for _, c in ipairs(batch) do
          waiting[tag] = waiting[tag] - 1
          if not c:is_closing() then answer(c, 200, "held") end
        end
      end
    end
    batch[#batch + 1] = client
    if #batch == (tonumber(query(path, "n")) or 1) then
      batch.timer:stop()
      batch.timer:start(tonumber(query(path, "grace")) or 200, 0, function() batch.release() end)
    end
  elseif route == "/peak" then
    answer(client, 200, cjson.encode { peak = peak[query(path, "tag") or ""] or 0 },
           { ["Content-Type"] = "application/json" })
  elseif route:match("^/status/%d+$") then
    local n = tonumber(route:match("%d+"))
    answer(client, n, "status " .. n)
  elseif route == "/loop" then
    answer(client, 302, "", { Location = "/loop" })
  elseif route == "/redirect" then
    answer(client, 302, "", { Location = query(path, "to") or "/hello" })
  elseif route == "/big" then
    answer(client, 200, ("x"):rep(tonumber(query(path, "n")) or 0))
  elseif route == "/trickle" then
    client:write("HTTP/1.1 200 X\r\nConnection: close\r\nContent-Length: 1000000\r\n\r\n")
    forever(client, "x", tonumber(query(path, "ms")) or 500)
  elseif route == "/endless" then
    client:write("HTTP/1.1 200 X\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n")
    forever(client, ("10000\r\n%s\r\n"):format(("x"):rep(0x10000)))
  elseif route == "/gzip" then
    local f = assert(io.open(query(path, "file"), "rb"))
    local body = f:read("a")
    f:close()
    answer(client, 200, body, { ["Content-Encoding"] = "gzip", ["Content-Type"] = "text/plain" })
  elseif route == "/bighead" then
    local head = { "HTTP/1.1 200 OK", "Connection: close", "Content-Length: 5" }
    for i = 1, tonumber(query(path, "lines")) or 5000 do
      head[#head + 1] = ("X-Pad-%05d: %s"):format(i, ("p"):rep(86))
    end
    client:write(table.concat(head, "\r\n") .. "\r\n\r\nhello", function() client:close() end)
  elseif route == "/onehead" then
    local huge = "X-Huge: " .. ("h"):rep(tonumber(query(path, "bytes")) or 2000000)
    client:write("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n" .. huge ..
                 "\r\n\r\nhello", function() client:close() end)
  elseif route == "/seen" then
    answer(client, 200, cjson.encode(seen), { ["Content-Type"] = "application/json" })
  elseif route == "/broken" then
    client:write("HTTP/1.1 200 X\r\nContent-Length: 100\r\n\r\n0123456789", function()
      client:close()
    end)
  else
    answer(client, 404, "not here")
  end
end

-- a client gone while an answer is still being written (/trickle, /endless) must
-- not take the server down with SIGPIPE: the write fails instead
local sigpipe = uv.new_signal()
sigpipe:start("sigpipe", function() end)
sigpipe:unref()

local server = uv.new_tcp()
assert(server:bind("127.0.0.1", 0))
local f = assert(io.open(portfile .. ".tmp", "w"))
f:write(server:getsockname().port)
f:close()
os.rename(portfile .. ".tmp", portfile)

server:listen(16384, function()
  local client = uv.new_tcp()
  server:accept(client)
  local data = ""
  client:read_start(function(err, chunk)
    if err or not chunk then
      if not client:is_closing() then client:close() end
      return
    end
    data = data .. chunk
    local head_end = data:find("\r\n\r\n", 1, true)
    if not head_end then return end
    local head = data:sub(1, head_end - 1)
    seen[#seen + 1] = head
    local method, path = head:match("^(%u+) (%S+)")
    local headers = {}
    for k, v in head:gmatch("\r\n([^:\r\n]+):%s*([^\r\n]*)") do headers[k:lower()] = v end
    local len = tonumber(headers["content-length"] or "0")
    local body = data:sub(head_end + 4)
    if #body < len then return end
    client:read_stop()
    serve(client, { method = method, path = path, headers = headers, body = body:sub(1, len) })
  end)
end)

uv.run()
