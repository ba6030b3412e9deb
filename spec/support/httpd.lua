-- spec/support/httpd.lua -- the HTTP server of the tests' own, for the answers nginx
-- will not give on demand: `lua5.4 spec/support/httpd.lua PORTFILE` listens on a free
-- loopback port, writes the port to PORTFILE, and serves until it is killed:
--   /hello            200 "hello"
--   /echo             200 JSON {method, path, headers (lower-case), body}
--   /slow?ms=N        200 "slow" after N ms
--   /status/N         status N, body "status N"
--   /redirect?to=P    302 to P
--   /big?n=N          N bytes of "x"
--   /broken           promises 100 bytes, sends 10, closes
--   /json             200 {"ok":true,"n":42}
--   /peak?tag=T       200 {"peak":N}: the most /slow?...&tag=T requests waiting at once
--   /gate?n=N&tag=T   200 "gate" once N requests of tag T wait (then all of them): proof
--                     that N were in flight at once, with no clock (counted in /peak too)
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

local waiting, peak, gated = {}, {}, {} -- by tag

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
    t:start(tonumber(query(path, "ms")) or 1000, 0, function()
      t:close()
      waiting[tag] = waiting[tag] - 1
      if not client:is_closing() then answer(client, 200, "slow") end
    end)
  elseif route == "/gate" then
    local tag, n = query(path, "tag") or "", tonumber(query(path, "n")) or 1
    waiting[tag] = (waiting[tag] or 0) + 1
    if waiting[tag] > (peak[tag] or 0) then peak[tag] = waiting[tag] end
    gated[tag] = gated[tag] or {}
    table.insert(gated[tag], client)
    if #gated[tag] >= n then
      local all = gated[tag]
      gated[tag] = {}
      for _, c in ipairs(all) do
        waiting[tag] = waiting[tag] - 1
        if not c:is_closing() then answer(c, 200, "gate") end
      end
    end
  elseif route == "/peak" then
    answer(client, 200, cjson.encode { peak = peak[query(path, "tag") or ""] or 0 },
           { ["Content-Type"] = "application/json" })
  elseif route:match("^/status/%d+$") then
    local n = tonumber(route:match("%d+"))
    answer(client, n, "status " .. n)
  elseif route == "/redirect" then
    answer(client, 302, "", { Location = query(path, "to") or "/hello" })
  elseif route == "/big" then
    answer(client, 200, ("x"):rep(tonumber(query(path, "n")) or 0))
  elseif route == "/broken" then
    client:write("HTTP/1.1 200 X\r\nContent-Length: 100\r\n\r\n0123456789", function()
      client:close()
    end)
  else
    answer(client, 404, "not here")
  end
end

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
