-- plans/http/server.lua -- the demo's weather service: `lua5.4 plans/http/server.lua
-- PORTFILE` listens on a free loopback port, writes it to PORTFILE and answers
-- GET /weather/<city> with JSON ({"city","sky","temp"}; 404 for a city it does not
-- know), each after a short delay, as a real API would, until it is killed.
local uv = require "luv"

local WEATHER = {
  lisbon = { sky = "sunny", temp = 24 }, oslo = { sky = "snow", temp = -3 },
  london = { sky = "rainy", temp = 12 }, cairo = { sky = "clear", temp = 31 },
}

local server = uv.new_tcp()
assert(server:bind("127.0.0.1", 0))
local f = assert(io.open(arg[1] .. ".tmp", "w"))
f:write(server:getsockname().port)
f:close()
os.rename(arg[1] .. ".tmp", arg[1])

server:listen(256, function()
  local c = uv.new_tcp()
  server:accept(c)
  local got = ""
  c:read_start(function(err, chunk)
    if err or not chunk then return c:close() end
    got = got .. chunk
    if not got:find("\r\n\r\n", 1, true) then return end
    c:read_stop()
    local city = got:match("^GET /weather/(%a+)")
    local w = city and WEATHER[city:lower()]
    local status, body = 404, '{"error":"no such city"}'
    if w then
      status = 200
      body = ('{"city":"%s","sky":"%s","temp":%d}'):format(city, w.sky, w.temp)
    end
    local t = uv.new_timer()
    t:start(50, 0, function()
      t:close()
      c:write(("HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" ..
               "Connection: close\r\n\r\n%s"):format(status, #body, body), function() c:close() end)
    end)
  end)
end)

uv.run()
