-- .luacheckrc -- luacheck's settings: `luacheck lua/ plans/` runs in `make test`
-- (make test-luacheck). Lua 5.4's standard library and no globals: modules and tools
-- keep to locals.
std = "lua54"
max_line_length = 120

-- LuaLS annotations: functions with empty bodies, documented arguments, long types.
files["lua/obelus/meta.lua"] = { ignore = { "212", "241" }, max_line_length = false }

-- busted specs (`luacheck spec/`; not part of make test)
files["spec"] = { std = "+busted", max_line_length = false }
