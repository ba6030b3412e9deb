-- spec/support/ui.lua -- an `obelus ui` server for the ui specs (ui_spec, ui_live_spec,
-- ui_fleet_spec, ui_browser_spec): started on a port the system picks, its address read
-- from the line it says on stderr, stopped with SIGTERM; and curl's answer to a request.
local cli = require "support.cli"

local M = {}
local q = cli.quote

-- A new empty folder (its path).
function M.tmpdir()
  return (cli.sh("mktemp -d"):gsub("%s+$", ""))
end

-- A server on dir (extra: more arguments, as shell text): its base URL
-- (http://127.0.0.1:PORT/, whatever the address it listens on) and its pid.
function M.serve(dir, extra)
  local err = os.tmpname()
  local pid = cli.sh(("%s ui --journals %s --port 0 %s 2>%s >/dev/null & echo $!"):format(
    q(cli.bin), q(dir), extra or "", q(err))):gsub("%s+$", "")
  local port
  for _ = 1, 250 do
    port = cli.slurp(err):match("obelus ui: http://%S+:(%d+)/")
    if port then break end
    os.execute("sleep 0.02")
  end
  os.remove(err)
  assert(port, "the server said no URL")
  return "http://127.0.0.1:" .. port .. "/", pid
end

function M.stop(pid)
  os.execute("kill -TERM " .. pid .. " 2>/dev/null; wait " .. pid .. " 2>/dev/null")
end

-- Status and body of a request to url (args: more curl arguments; the path is sent as
-- it is, no .. folded by curl).
function M.req(url, args)
  local out = cli.sh(("curl -s --path-as-is -w '\\n%%{http_code}' %s %s"):format(args or "", q(url)))
  local body, code = out:match("^(.*)\n(%d+)$")
  return tonumber(code), body
end

-- A POST of body (a JSON text) to url: status and body, as M.req.
function M.post(url, body, extra)
  local f = cli.tmpfile(body, ".json")
  return M.req(url, ("-X POST --data-binary @%s %s"):format(q(f), extra or ""))
end

-- code and body, the body decoded when it is JSON.
function M.json(code, body)
  return code, body and body:match("^[%[{]") and require("cjson").decode(body) or body
end

-- Polls GET /api/runs/ID until pred(the run) holds (at most ~20 s): the run.
function M.wait_run(url, id, pred)
  local cjson = require "cjson"
  local r
  for _ = 1, 1000 do
    local code, body = M.req(url .. "api/runs/" .. id)
    r = code == 200 and cjson.decode(body) or nil
    if r and pred(r) then return r end
    os.execute("sleep 0.02")
  end
  error("the run never got there: " .. cjson.encode(r or {}))
end

-- The lines of the file at path that hold pat (plain text).
function M.count(path, pat)
  local n = 0
  for l in io.lines(path) do if l:find(pat, 1, true) then n = n + 1 end end
  return n
end

-- The report of a browser script (spec/browser/SCRIPT, its arguments as JSON): the one
-- JSON object it prints; fails when it prints none or says an error.
function M.browse(script, args)
  local cjson = require "cjson"
  local errf = os.tmpname()
  local out = cli.sh(("timeout -s KILL 150 node spec/browser/%s %s 2>%s"):format(
    script, q(cjson.encode(args)), q(errf)))
  local line = out:match("([^\n]+)\n*$") or ""
  local ok, r = pcall(cjson.decode, line)
  local err = cli.slurp(errf)
  os.remove(errf)
  assert(ok and type(r) == "table", script .. " printed no report: " .. out .. err)
  assert(r.error == nil, script .. ": " .. tostring(r.error))
  return r
end

return M
