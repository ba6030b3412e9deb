-- obelus-0.1.0-1.rockspec -- the Lua module `obelus` (lua/obelus/*.lua) and its C half
-- `obelus.core` (lib/obelus/core.so: the whole engine, built by the Makefile).
--   luarocks --lua-version 5.4 make --local obelus-0.1.0-1.rockspec   (in a checkout)
--   luarocks --lua-version 5.4 install obelus                          (the release)
-- The version is the Makefile's VERSION (spec/cli/package_spec.lua checks they agree);
-- the source is the release tag's tarball, as GitHub serves it (it unpacks to obelus-0.1.0/).
-- luv comes from the system (Debian: lua-luv, lua-luv-dev) and is linked as a library,
-- so it is an external dependency here rather than a rock.
rockspec_format = "3.0"
package = "obelus"
version = "0.1.0-1"

source = {
  url = "https://github.com/obelus-engine/obelus/archive/refs/tags/v0.1.0.tar.gz",
  dir = "obelus-0.1.0",
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
  homepage = "https://github.com/obelus-engine/obelus",
  license = "MIT",
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
