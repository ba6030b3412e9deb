-- plans/http/tools/weather.lua -- tools that call a weather API over HTTP with
-- obelus.http: every request waits on the engine's loop, so the fan-out's requests
-- are all in flight at once.
local obelus = require "obelus"
local http = obelus.http

return {
  { name = "weather", description = "GETs {base}/weather/{city}: the city's weather, or an error",
    schema = { type = "object", required = { "base", "city" },
               properties = { base = { type = "string" }, city = { type = "string" } } },
    run = function(call)
      local r = http.json { url = call.base .. "/weather/" .. call.city, timeout_ms = 5000 }
      if r.status ~= 200 then
        error(("%s: the service answered %d"):format(call.city, r.status), 0)
      end
      return r.body
    end },

  { name = "summary", description = "joins the cities' weather into one line",
    run = function(call)
      local parts = {}
      for _, w in pairs(call.weather) do
        parts[#parts + 1] = ("%s %s %d°C"):format(w.city, w.sky, w.temp)
      end
      table.sort(parts)
      return table.concat(parts, "; ")
    end },
}
