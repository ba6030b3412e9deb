-- spec/support/tmp.lua -- busted's helper (spec/run-busted passes --helper): every name
-- the specs take from os.tmpname lies in one folder of this busted process, removed when
-- the process ends (busted closes the Lua state on exit, which runs the finaliser
-- below). Lua's own os.tmpname leaves a file /tmp/lua_XXXXXX behind each call, and a
-- run of the specs takes thousands; names derived from one (name .. ".json", a journal's
-- companions) land in the same folder and go with it.
-- (no "-" or "%" in its name: specs put paths into Lua patterns)
local fs = require "support.fs"

local p = assert(io.popen("mktemp -d /tmp/obelus_spec.XXXXXX"))
local dir = p:read("l")
p:close()
assert(dir and dir:match("^/tmp/obelus_spec%.") and not dir:find("'", 1, true),
       "spec/support/tmp.lua: mktemp -d failed")

-- and what the processes the specs start make in TMPDIR (a worker's scratch folder, which
-- a SIGKILL leaves behind; mktemp in a spec's shell line) lands there too
local has_luv, uv = pcall(require, "luv")
if has_luv then
  uv.os_setenv("TMPDIR", dir)
end

local taken = 0
function os.tmpname() -- luacheck: ignore (the specs' os.tmpname, on purpose)
  taken = taken + 1
  local name = dir .. "/t" .. taken
  local f = assert(io.open(name, "w")) -- made, as Lua's own makes it (mkstemp)
  f:close()
  return name
end

-- anchored in the registry, which busted's insulation of each spec file leaves alone
debug.getregistry()["obelus.spec.tmp"] = setmetatable({}, {
  __gc = function() fs.rmtree(dir) end,
})
