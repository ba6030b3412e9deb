-- bench/http_tools.lua -- the tool of the HTTP benchmark: GETs its url, answers the
-- body's length.
local http = require("obelus").http
return {
  { name = "fetch", run = function(call) return #http.get(call.url).body end },
}
