-- spec/support/proc.lua -- obelus as a process the specs stop: runs under a cap, in the
-- background with a handle to signal, and waits on evidence rather than a clock. What
-- stop_spec and exec_spec share.
--   proc.exists(path)            the file is there
--   proc.wait_for(ok)            until ok() holds, 20 s at most; false if it never did
--   proc.plan_file(calls, out)   a plan file of those calls (and output)
--   proc.run(args[, prefix])     `prefix obelus ARGS` under `timeout -s KILL 30` (and
--                                `ulimit -v` outside ASan): {code, out, err}; a cap hit
--                                shows as 137. args.watch_signal_ignored: started with
--                                the watchdog's signal ignored, as a host leaves it
--   proc.start(args)             obelus ARGS in the background (30 s cap), stdin
--                                args.stdin or /dev/null: a handle with pid, signal(sig)
--                                (sent from a process of its own, then waited for until
--                                taken: no longer pending) and wait() -> {code, out, err}
local cli = require "support.cli"
local cjson = require "cjson"

local M = {}
local ASAN = cli.bin:find("/asan/", 1, true) ~= nil
local q = cli.quote

function M.exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

function M.wait_for(ok)
  for _ = 1, 400 do
    if ok() then return true end
    os.execute("sleep 0.05")
  end
  return ok()
end

function M.plan_file(calls, output)
  return cli.tmpfile(cjson.encode { plan = calls, output = output }, ".json")
end

function M.run(args, prefix)
  local parts = { ASAN and "" or "ulimit -v 4000000;", "timeout -s KILL 30", prefix or "", q(cli.bin) }
  for _, a in ipairs(args) do parts[#parts + 1] = q(a) end
  local out, err = os.tmpname(), os.tmpname()
  local cmd = table.concat(parts, " ")
  -- the watchdog's signal ignored, as a process that hosted an engine leaves it (and exec
  -- keeps it so): obelus takes it all the same
  if args.watch_signal_ignored then cmd = "exec bash -c " .. q("trap '' RTMAX-2; " .. cmd) end
  local _, how, code = os.execute("(" .. cmd .. ") >" .. out .. " 2>" .. err .. " </dev/null")
  local r = { code = how == "exit" and code or 128 + code, out = cli.slurp(out), err = cli.slurp(err) }
  os.remove(out); os.remove(err)
  return r
end

function M.start(args)
  local pidf, rcf, out, err = os.tmpname(), os.tmpname(), os.tmpname(), os.tmpname()
  os.remove(rcf)
  local parts = {}
  for i, a in ipairs(args) do parts[i] = q(a) end
  os.execute(("(timeout -s KILL 30 sh -c 'echo $$ > %s; exec \"$0\" \"$@\"' %s %s >%s 2>%s <%s; echo $? >%s) &")
    :format(pidf, q(cli.bin), table.concat(parts, " "), out, err, args.stdin or "/dev/null", rcf))
  assert(M.wait_for(function() return cli.slurp(pidf):match("%d+") ~= nil end))
  local h = { pid = cli.slurp(pidf):match("%d+") }
  function h.wait()
    assert(M.wait_for(function() return cli.slurp(rcf):match("%d+") ~= nil end), "still running")
    local r = { code = tonumber(cli.slurp(rcf):match("%d+")), out = cli.slurp(out), err = cli.slurp(err) }
    for _, f in ipairs { pidf, rcf, out, err } do os.remove(f) end
    return r
  end
  function h.signal(sig)
    os.execute("kill -" .. sig .. " " .. h.pid .. " 2>/dev/null")
    M.wait_for(function()
      local st = cli.slurp("/proc/" .. h.pid .. "/status") or "" -- nil: it ended while read
      return st == "" or not st:match("ShdPnd:%s*0*[1-9a-f]")
    end)
  end
  return h
end

return M
