-- spec/cli/shell_spec.lua -- shell habits: bash and zsh completion (commands, each
-- command's options, option values, --tools paths; generated from the table of commands
-- and options: spec/cli/cli_opts_spec.lua checks it whole), `obelus init DIR` (a project
-- whose plan runs and whose test passes), --version.
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"

local sh = cli.sh -- what a shell command printed

local function words(text)
  local t = {}
  for w in text:gmatch("%S+") do t[w] = true end
  return t
end

-- bash: the completion function called as bash would, with `obelus` on PATH
local BINDIR = cli.bin:match("^(.*)/[^/]*$") or "."
local bash_complete = cli.bash_complete

-- zsh: the completion function with zsh's own completers stood in for by printers
local function zsh_complete(line)
  local script = cli.tmpfile(([==[
PATH=%s:$PATH
compadd() { [[ $1 == -- ]] && shift; if [[ $1 == -a ]]; then print -l -- ${(P)2}; else print -l -- "$@"; fi }
compset() { return 0 }
_describe() { print -l -- ${${(P)2}%%%%:*} }
_files() { print FILES "$@" }
_alternative() { print ALTERNATIVE "$@" }
source completions/_obelus >/dev/null 2>&1
words=(%s)
CURRENT=${#words}
_obelus
]==]):format(cli.quote(BINDIR), line))
  local out = sh("zsh -f " .. script .. " 2>&1")
  os.remove(script)
  return out
end

-- every command the CLI knows: its dispatch table in core/cli/main.c, and the table of
-- commands and options (`obelus completion json`) the completions are made from
local function all_commands()
  local src = assert(io.open("core/cli/main.c")):read("a")
  local list, seen = {}, {}
  for name in src:gmatch('{"([%w]+)", [%w_]+}') do list[#list + 1] = name; seen[name] = true end
  assert(#list >= 20, "the command table was not found in core/cli/main.c")
  for _, c in ipairs(cjson.decode(cli.run({ "completion", "json" }).out).commands) do
    assert(seen[c.name], c.name .. " is in the table of options, not in main.c's")
    seen[c.name] = nil
  end
  assert(next(seen) == nil, "main.c has commands the table of options lacks")
  return list
end

describe("shell completion", function()
  it("bash: commands, each command's options, option values, .lua files and folders for --tools", function()
    local c = bash_complete("obelus ''")
    for _, cmd in ipairs(all_commands()) do assert.is_true(c[cmd], cmd) end
    local o = bash_complete("obelus run --j")
    assert.is_true(o["--journal"])
    local r = bash_complete("obelus worker --")
    assert.is_true(r["--claim-idle"] and r["--drain"] and r["--redis"])
    assert.is_nil(r["--journal"])
    assert.are.same({ never = true, batch = true, always = true }, bash_complete("obelus run --fsync ''"))
    assert.are.same({ trace = true, otlp = true, text = true }, bash_complete("obelus log x --format ''"))
    local t = bash_complete("obelus run p.json --tools plans/weather/")
    assert.is_true(t["plans/weather/tools"])
    assert.is_nil(t["plans/weather/plan.json"]) -- not a .lua file nor a folder
    local l = bash_complete("obelus run p.json --tools plans/weather/tools/s")
    assert.is_true(l["plans/weather/tools/suggest.lua"])
  end)

  it("zsh: the same from its function", function()
    if os.execute("command -v zsh >/dev/null 2>&1") ~= true then
      pending("zsh is not installed (make deps installs it)")
      return
    end
    assert.are.equal("", sh("zsh -n completions/_obelus 2>&1"))
    local c = words(zsh_complete("obelus ''"))
    for _, cmd in ipairs(all_commands()) do assert.is_true(c[cmd], cmd) end
    local o = words(zsh_complete("obelus run --j"))
    assert.is_true(o["--journal"] and o["--tools"])
    assert.are.same({ never = true, batch = true, always = true }, words(zsh_complete("obelus run --fsync ''")))
    assert.truthy(zsh_complete("obelus run p.json --tools ''"):match("ALTERNATIVE"))
  end)
end)

describe("obelus init", function()
  it("makes a project whose plan runs and whose test passes; never writes over files", function()
    local dir = fs.tmpdir() .. "/proj"
    local r = cli.run { "init", dir }
    assert.are.equal(0, r.code, r.err)
    for _, f in ipairs { "plan.json", "tools/greet.lua", "test/plan_spec.lua", "README.md" } do
      assert.is_true(fs.exists(dir .. "/" .. f), f)
    end
    local run = cli.run { "run", dir .. "/plan.json", "--tools", dir .. "/tools" }
    assert.are.equal(0, run.code, run.err)
    assert.are.same({ greeting = "Hello, world!", loud = "HELLO, HELLO, WORLD!!" }, cjson.decode(run.out))
    local test = sh(("cd %s && OBELUS=%s lua5.4 /usr/bin/busted test 2>&1; echo \"exit $?\""):format(
      cli.quote(dir), cli.quote(cli.bin:sub(1, 1) == "/" and cli.bin or os.getenv("PWD") .. "/" .. cli.bin)))
    assert.truthy(test:match("3 successes / 0 failures / 0 errors"), test)
    assert.truthy(test:match("exit 0\n$"), test)
    local again = cli.run { "init", dir }
    assert.are.equal(2, again.code)
    assert.truthy(again.err:match("not empty"))
    os.execute("rm -rf " .. cli.quote(dir:match("^(.*)/proj$")))
  end)

  it("--version", function()
    local r = cli.run { "--version" }
    assert.are.equal(0, r.code)
    -- and the git revision, when built from a checkout (spec/cli/package_spec.lua)
    assert.truthy(r.out:match("^obelus %d+%.%d+%.%d+\n$") or r.out:match("^obelus %d+%.%d+%.%d+ %(git %x+%)\n$"), r.out)
  end)
end)
