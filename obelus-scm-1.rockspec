-- obelus-scm-1.rockspec -- the Lua module `obelus` (lua/obelus/*.lua) and its C half
-- `obelus.core` (lib/obelus/core.so: the whole engine, built by the Makefile).
--   luarocks --lua-version 5.4 make --local obelus-scm-1.rockspec
-- luv comes from the system (Debian: lua-luv, lua-luv-dev) and is linked as a library,
-- so it is an external dependency here rather than a rock.
rockspec_format = "3.0"
package = "obelus"
version = "scm-1"

source = {
  url = "git+file:///work/main",
  branch = "main",
}

description = {
  summary = "A plan execution engine: tool calls wired by data, run concurrently on libuv",
  detailed = [[
obelus runs plans: JSON lists of tool calls wired together by references. It derives
the dependency graph, runs every call whose inputs are ready concurrently on a libuv
loop, and records every result in an append-only message log. From Lua:
local engine = require("obelus").engine { tools = { "tools/" } }
local run = engine:run("plan.json", { input = { city = "Lisbon" } })
require("luv").run()
]],
  labels = { "luv", "libuv", "json", "scheduler" },
}

dependencies = {
  "lua >= 5.4, < 5.5",
}

external_dependencies = {
  JANSSON = { header = "jansson.h", library = "jansson" },
  LIBUV = { header = "uv.h", library = "uv" },
  PCRE2 = { header = "pcre2.h", library = "pcre2-8" },
  LUV = { header = "lua5.4/luv/luv.h", library = "lua5.4-luv" },
}

build = {
  type = "make",
  -- the Makefile finds every flag with pkg-config and compiles runtime.lua into the engine
  build_target = "lib/obelus/core.so",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LUA = "$(LUA)",
  },
  install_pass = false,
  install = {
    lua = {
      ["obelus.init"] = "lua/obelus/init.lua",
      ["obelus.meta"] = "lua/obelus/meta.lua",
    },
    lib = {
      ["obelus.core"] = "lib/obelus/core.so",
    },
  },
}
