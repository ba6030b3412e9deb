-- package_spec.lua -- the release (issue 30): one version everywhere and `obelus
-- --version` with the git revision; `make dist`'s tarball, unpacked elsewhere, builds the
-- program and runs a plan; `make deb`'s package, unpacked with dpkg-deb -x, runs a plan
-- with its program and with its Lua module, and builds the host of obelus.h's opening
-- comment with -std=c11 from its header and obelus.pc alone; `luarocks make` of the
-- rockspec installs a module lua5.4 runs a plan with.
-- Fast by design: `make deb` and `luarocks make` reuse the built tree (nothing is
-- compiled again), and the tarball's bin/obelus is built unoptimised (-O0, no LTO, no
-- PGO: ~10 s on 2 cores); `make dist-check` runs the full `make test` in the tarball.
-- Not under ASan: what is checked is the package, which holds the release build.
-- Every file goes to a folder of this run (specs run side by side share none).
local cli = require "support.cli"
local fs = require "support.fs"

local ASAN = cli.bin:find("/asan/", 1, true) ~= nil
local it_rel = ASAN and pending or it

local function pwd()
  local p = assert(io.popen("pwd"))
  local d = p:read("l")
  p:close()
  return d
end
local ROOT = pwd()

-- sh(CMD): runs CMD with sh; true when it exited 0, and what it printed (both streams)
local function sh(cmd)
  local out = os.tmpname()
  local ok = os.execute("{ " .. cmd .. "\n} >" .. out .. " 2>&1")
  local text = fs.slurp(out)
  os.remove(out)
  return ok == true, text
end

-- lua5.4, in dir, with the Lua module installed under prefix (share/lua/5.4 and
-- lib/lua/5.4, before the system's): each of mods must load from there, then the
-- module runs examples/daemon-plans/sum.json; sh's answer (what the output printed)
local function lua_sum_from(dir, prefix, mods)
  return sh(("cd %s && LUA_PATH=%s LUA_CPATH=%s OBELUS_ROOT=%s OBELUS_PREFIX=%s OBELUS_MODS=%s lua5.4 -e %s"):format(
    cli.quote(dir), cli.quote(prefix .. "/share/lua/5.4/?.lua;" .. prefix .. "/share/lua/5.4/?/init.lua;;"),
    cli.quote(prefix .. "/lib/lua/5.4/?.so;;"), cli.quote(ROOT), cli.quote(prefix),
    cli.quote(table.concat(mods, " ")), cli.quote([[
      local root, prefix = os.getenv("OBELUS_ROOT"), os.getenv("OBELUS_PREFIX")
      local obelus, uv = require "obelus", require "luv"
      for m in os.getenv("OBELUS_MODS"):gmatch("%S+") do
        local from = package.searchpath(m, m == "obelus" and package.path or package.cpath)
        assert(from:sub(1, #prefix) == prefix, m .. " from " .. from)
      end
      local engine = obelus.engine { tools = { root .. "/examples/daemon-tools" } }
      local run = engine:run(root .. "/examples/daemon-plans/sum.json")
      uv.run()
      assert(run:status() == 0, "status " .. tostring(run:status()))
      io.write(obelus.encode(run:output()))]])))
end

-- make in the checkout, free of the outer make's flags (its jobserver, -k): the PGO
-- setting the tree was built with, so that nothing is built again
local PGO = fs.exists("build/pgo/trained") and "1" or "0"
local function make(args)
  return sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory PGO=" .. PGO .. " " .. args)
end

local function makefile_version()
  return assert(fs.slurp("Makefile"):match("\nVERSION := (%S+)\n"), "no VERSION := in the Makefile")
end
local V = makefile_version()

local IN_GIT = sh('[ "$(git rev-parse --show-toplevel 2>/dev/null)" -ef . ]')
local it_git = (IN_GIT and not ASAN) and it or pending

-- the C host of obelus.h's opening comment, as it is there
local function header_host(header)
  local text = fs.slurp(header)
  local body = assert(text:match("A complete host, on its own loop:\n(.-)\n %* Build:"), "no host in " .. header)
  return (body:gsub("\n %* ?", "\n"):gsub("^ %* ?", ""))
end

describe("the version", function()
  it("is the Makefile's in the rockspec, CHANGELOG.md and obelus --version", function()
    local rocks = {}
    for name in io.popen("ls"):lines() do
      if name:match("%.rockspec$") then rocks[#rocks + 1] = name end
    end
    assert.are.same({ "obelus-" .. V .. "-1.rockspec" }, rocks)
    local spec = fs.slurp(rocks[1])
    assert.truthy(spec:find('\nversion = "' .. V .. '-1"\n', 1, true), spec)
    assert.truthy(spec:find('url = "https://github.com/obelus-engine/obelus/archive/refs/tags/v' .. V ..
                            '.tar.gz"', 1, true), spec)
    assert.truthy(spec:find('dir = "obelus-' .. V .. '"', 1, true), spec)
    -- the newest release's section (an "Unreleased" one may come before it)
    local log = fs.slurp("CHANGELOG.md")
    local first = log:match("\n## (%d[^\n]*)")
    assert.are.equal(V .. " — 2026-11-28", first)
    local head = log:match("\n## ([^\n]*)")
    assert.truthy(head == first or head == "Unreleased", head)
    local r = cli.run { "--version" }
    assert.are.equal(0, r.code)
    assert.are.equal("obelus " .. V, r.out:match("^(obelus %S+)"))
  end)

  it("LICENSE is MIT, the obelus authors'", function()
    local text = fs.slurp("LICENSE")
    assert.truthy(text:match("^MIT License\n\nCopyright %(c%) 2026 the obelus authors\n"), text)
    assert.truthy(text:find("THE SOFTWARE IS PROVIDED \"AS IS\"", 1, true))
  end)

  it_git("names the git revision the program was built from", function()
    local ok, rev = sh("git rev-parse --short HEAD")
    assert.truthy(ok, rev)
    local r = cli.run { "--version" }
    assert.are.equal("obelus " .. V .. " (git " .. rev:gsub("%s+$", "") .. ")\n", r.out,
                     "(built before the last commit? make bin/obelus)")
  end)
end)

describe("make dist", function()
  it_git("a tarball of every tracked file, the same bytes each time", function()
    local dir = fs.tmpdir()
    local tgz = dir .. "/obelus-" .. V .. ".tar.gz"
    local ok, out = make("dist DIST_OUT=" .. cli.quote(dir))
    assert.truthy(ok, out)
    local first = fs.slurp(tgz)
    ok, out = make("dist DIST_OUT=" .. cli.quote(dir))
    assert.truthy(ok, out)
    assert.truthy(#first > 100000 and first == fs.slurp(tgz), "two tarballs differ")
    local lok, listed = sh("tar -tzf " .. cli.quote(tgz) .. " | LC_ALL=C sort")
    local gok, tracked = sh("git -c core.quotepath=off ls-files | while IFS= read -r f; do " ..
      "{ [ -e \"$f\" ] || [ -L \"$f\" ]; } && echo \"obelus-" .. V .. "/$f\"; done | LC_ALL=C sort")
    assert.truthy(lok and gok, listed .. tracked)
    assert.are.equal(tracked, listed)
    for _, f in ipairs { "Makefile", "LICENSE", "CHANGELOG.md", "core/obelus.h", "packaging/control.in" } do
      assert.truthy(listed:find("obelus-" .. V .. "/" .. f .. "\n", 1, true), f .. " not in the tarball")
    end
    fs.rmtree(dir)
  end)

  it_git("unpacked elsewhere, builds bin/obelus, which runs a plan", function()
    local dir = fs.tmpdir()
    local ok, out = make("dist DIST_OUT=" .. cli.quote(dir))
    assert.truthy(ok, out)
    local src = dir .. "/obelus-" .. V
    ok, out = sh(("tar -xzf %s -C %s && cd %s && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL " ..
                  "nice make --no-print-directory -j2 PGO=0 REL_LTO= CFLAGS=-O0 bin/obelus"):format(
                  cli.quote(src .. ".tar.gz"), cli.quote(dir), cli.quote(src)))
    assert.truthy(ok, out:sub(-3000))
    assert.is_false(fs.exists(src .. "/.git"))
    local vok, version = sh(cli.quote(src .. "/bin/obelus") .. " --version")
    assert.truthy(vok, version)
    assert.are.equal("obelus " .. V .. "\n", version) -- no git: no revision
    local rok, res = sh(("cd %s && bin/obelus run plans/weather/plan.json --tools plans/weather/tools " ..
                         "--input '{\"city\":\"Lisbon\"}'"):format(cli.quote(src)))
    assert.truthy(rok, res)
    assert.truthy(res:find("picnic in the park", 1, true), res)
    fs.rmtree(dir)
  end)
end)

describe("make deb", function()
  -- built and unpacked once, for the tests below: { dir, file, root, control }
  local made
  local function deb()
    if made then return made end
    local dir = fs.tmpdir()
    local ok, out = make("deb DEB_OUT=" .. cli.quote(dir))
    assert.truthy(ok, out)
    local _, arch = sh("dpkg --print-architecture")
    local file = ("%s/obelus_%s-1_%s.deb"):format(dir, V, arch:gsub("%s+$", ""))
    assert.truthy(fs.exists(file), out)
    local root = dir .. "/root"
    local xok, xout = sh(("dpkg-deb -x %s %s && dpkg-deb -e %s %s/DEBIAN"):format(
      cli.quote(file), cli.quote(root), cli.quote(file), cli.quote(root)))
    assert.truthy(xok, xout)
    made = { dir = dir, file = file, root = root, control = fs.slurp(root .. "/DEBIAN/control") }
    return made
  end
  teardown(function()
    if made then fs.rmtree(made.dir) end
  end)

  it_rel("says its name, version and what it needs", function()
    local c = deb().control
    assert.truthy(c:find("Package: obelus\n", 1, true), c)
    assert.truthy(c:find("Version: " .. V .. "-1\n", 1, true), c)
    local depends = assert(c:match("\nDepends: ([^\n]*)"), c)
    for _, p in ipairs { "libuv1", "libjansson4", "liblua5.4-0", "lua-cjson", "lua-luv", "libpcre2-8-0",
                         "libhiredis0.14", "graphviz", "libc6" } do
      assert.truthy((", " .. depends .. ","):find(", " .. p:gsub("%p", "%%%0") .. "[ ,]"), p .. " not in Depends: " .. depends)
    end
    local recommends = assert(c:match("\nRecommends: ([^\n]*)"), c)
    assert.truthy(recommends:find("libcurl4", 1, true) and recommends:find("libwebsockets17", 1, true), recommends)
    assert.truthy(tonumber(c:match("\nInstalled%-Size: (%d+)\n")) > 1000, c)
    -- dpkg-deb reads the package whole, and every file matches its md5sum
    local ok, out = sh("dpkg-deb --info " .. cli.quote(deb().file) .. " >/dev/null && cd " ..
                       cli.quote(deb().root) .. " && md5sum --quiet -c DEBIAN/md5sums")
    assert.truthy(ok, out)
  end)

  it_rel("holds the program, the libraries, header, .pc, Lua module, man page, completions", function()
    local ok, list = sh("dpkg-deb -c " .. cli.quote(deb().file))
    assert.truthy(ok, list)
    for _, f in ipairs { "usr/bin/obelus", "usr/lib/libobelus.a", "usr/lib/libobelus.so.0.1.0",
                         "usr/lib/libobelus.so.0 -> libobelus.so.0.1.0", "usr/lib/libobelus.so -> libobelus.so.0",
                         "usr/include/obelus.h", "usr/lib/pkgconfig/obelus.pc",
                         "usr/lib/lua/5.4/obelus/core.so", "usr/share/lua/5.4/obelus/init.lua",
                         "usr/share/man/man1/obelus.1.gz", "usr/share/bash-completion/completions/obelus",
                         "usr/share/zsh/site-functions/_obelus", "usr/share/doc/obelus/copyright",
                         "usr/share/doc/obelus/changelog.gz" } do
      assert.truthy(list:find(" %./" .. f:gsub("%p", "%%%0") .. "\n"), f .. " not in the package:\n" .. list)
    end
    for line in list:gmatch("[^\n]+") do
      assert.truthy(line:find(" root/root ", 1, true), line)
    end
    assert.truthy(sh("grep -qx 'prefix=/usr' " .. cli.quote(deb().root .. "/usr/lib/pkgconfig/obelus.pc")))
  end)

  it_rel("its program runs a plan", function()
    local bin = cli.quote(deb().root .. "/usr/bin/obelus")
    local ok, out = sh(bin .. " run plans/weather/plan.json --tools plans/weather/tools --input '{\"city\":\"Lisbon\"}'")
    assert.truthy(ok, out)
    assert.truthy(out:find("picnic in the park", 1, true), out)
    local vok, version = sh(bin .. " --version")
    assert.truthy(vok, version)
    assert.are.equal(cli.run({ "--version" }).out, version)
  end)

  it_rel("lua5.4 runs a plan with its Lua module", function()
    local ok, out = lua_sum_from(deb().dir, deb().root .. "/usr", { "obelus.core" })
    assert.truthy(ok, out)
    assert.are.equal([[{"total":42}]], out)
  end)

  it_rel("obelus.h's host builds with -std=c11 from its header and obelus.pc, and runs", function()
    local d, usr = deb().dir, deb().root .. "/usr"
    fs.write(d .. "/host.c", header_host(usr .. "/include/obelus.h"))
    -- the .pc as a sysroot-free copy: its /usr paths pointed at the unpacked tree
    fs.mkdir(d .. "/pc")
    fs.write(d .. "/pc/obelus.pc", (fs.slurp(usr .. "/lib/pkgconfig/obelus.pc"):gsub(
      "\n(%w+)=/usr", function(k) return "\n" .. k .. "=" .. usr end)))
    local pc = "PKG_CONFIG_PATH=" .. cli.quote(d .. "/pc") .. " pkg-config"
    local ok, flags = sh(pc .. " --cflags obelus")
    assert.truthy(ok, flags)
    assert.truthy(flags:find("-D_POSIX_C_SOURCE=200809L", 1, true), flags)
    assert.truthy(flags:find("-I" .. usr .. "/include", 1, true), flags)
    -- host_log is the host's own logger, which the comment leaves to the host
    local out
    ok, out = sh(("cd %s && cc -std=c11 -pedantic -Wall -Werror '-Dhost_log(...)=fprintf(stderr, __VA_ARGS__)' " ..
                  "-o host host.c $(%s --cflags --libs obelus) -Wl,-rpath,%s"):format(
                  cli.quote(d), pc, cli.quote(usr .. "/lib")))
    assert.truthy(ok, out)
    local lok, ldd = sh("ldd " .. cli.quote(d .. "/host"))
    assert.truthy(lok and ldd:find("libobelus.so.0 => " .. usr .. "/lib/libobelus.so.0", 1, true), ldd)
    fs.mkdir(d .. "/run/tools")
    local rok, res = sh("cd " .. cli.quote(d .. "/run") .. " && ../host")
    assert.truthy(rok, res)
    assert.are.equal('status 0, output {"hi":"hello"}\n', res)
  end)
end)

describe("luarocks make", function()
  local has = sh("command -v luarocks")
  local it_rocks = (has and not ASAN) and it or pending
  it_rocks("installs the module from the checkout, and lua5.4 runs a plan with it", function()
    local tree = fs.tmpdir()
    local ok, out = sh(("PGO=%s luarocks --lua-version 5.4 make --tree %s obelus-%s-1.rockspec"):format(
      PGO, cli.quote(tree), V))
    assert.truthy(ok, out)
    assert.truthy(out:find("obelus " .. V .. "-1 is now installed", 1, true), out)
    ok, out = lua_sum_from(tree, tree, { "obelus", "obelus.core" })
    assert.truthy(ok, out)
    assert.are.equal([[{"total":42}]], out)
    fs.rmtree(tree)
  end)
end)
