-- spec/cli/cli_opts_spec.lua -- the command line's one table of commands and options
-- (core/cli/ob_cli_opts.c) and what reads it: --opt=value and -- for every command,
-- usage errors that name the nearest command or option (exit 2, one line and a hint,
-- never the whole usage), a missing value named; the table agrees with each command's
-- --help and parser; the completions are generated from it (the checked-in files are
-- `obelus completion`'s output) and offer every command and option in bash and zsh.
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"

local PLAN, TOOLS = "plans/weather/plan.json", "plans/weather/tools"
local TESTTOOLS = "spec/cli/tools"
local BIN = cli.bin:sub(1, 1) == "/" and cli.bin or os.getenv("PWD") .. "/" .. cli.bin

local function set(list)
  local t = {}
  for _, v in ipairs(list) do t[v] = true end
  return t
end

local function keys(t)
  local l = {}
  for k in pairs(t) do l[#l + 1] = k end
  table.sort(l)
  return l
end

-- the table, as `obelus completion json` prints it
local TABLE = cjson.decode((cli.run({ "completion", "json" }).out))
local CMDS, OPTS = {}, {} -- names in order; per command, option name -> its rows
for _, c in ipairs(TABLE.commands) do
  for _, o in ipairs(c.options) do -- JSON's null: nil here
    for _, k in ipairs { "alias", "value", "complete" } do
      if o[k] == cjson.null then o[k] = nil end
    end
  end
  CMDS[#CMDS + 1] = c.name
  OPTS[c.name] = {}
  for _, o in ipairs(c.options) do
    OPTS[c.name][o.name] = OPTS[c.name][o.name] or {}
    table.insert(OPTS[c.name][o.name], o)
    if o.alias then OPTS[c.name][o.alias] = OPTS[c.name][o.name] end
  end
end

-- the options a command's --help lists: in its usage lines and its option lines
local function help_options(cmd)
  local out = cli.run({ cmd, "--help" }).out
  local found, in_usage = {}, true
  for line in (out .. "\n"):gmatch("([^\n]*)\n") do
    if line == "" then in_usage = false end
    if in_usage or line:match("^  %-%-?[%w]") then
      for o in line:gmatch("%f[%w%-]%-%-[%a][%w%-]*") do found[o] = true end
      if line:match("^%s+%-o ") or line:match(" %-o ") then found["-o"] = true end
    end
  end
  return found
end

describe("--opt=value", function()
  it("is --opt value, for the run options and each command's own", function()
    local spaced = cli.run { "run", PLAN, "--tools", TOOLS, "--input", '{"city":"Oslo"}' }
    assert.are.equal(0, spaced.code, spaced.err)
    local joined = cli.run { "run", PLAN, "--tools=" .. TOOLS, '--input={"city":"Oslo"}' }
    assert.are.equal(0, joined.code, joined.err)
    assert.are.equal(spaced.out, joined.out)
    assert.are.equal(0, cli.run({ "check", PLAN, "--tools=" .. TOOLS, "--max-calls=10" }).code)
    assert.are.equal(cli.run({ "graph", PLAN, "--format", "mermaid" }).out,
                     cli.run({ "graph", PLAN, "--format=mermaid" }).out)
    local j = cli.journal_of { PLAN, "--tools", TOOLS }
    local a = cli.run { "log", j, "--at", "2" }
    assert.are.equal(0, a.code, a.err)
    assert.are.same(a, cli.run { "log", j, "--at=2" })
    assert.are.same(cli.run { "resolve", j, "†input", "--at", "1" }, cli.run { "resolve", j, "†input", "--at=1" })
    local t = cli.run { "tools", "--tools=" .. TOOLS, "--format=openai" }
    assert.are.equal(0, t.code, t.err)
    assert.are.same(cli.run({ "tools", "--tools", TOOLS, "--format", "openai" }).out, t.out)
    os.remove(j)
  end)

  it("splits at the first '=': the value may hold more", function()
    local r = cli.run { "run", PLAN, "--tools", TOOLS, '--input={"city":"a=b"}' }
    assert.are.equal(0, r.code, r.err)
    assert.truthy(r.out:find('"a=b"', 1, true), r.out)
  end)

  it("an empty value is a value, checked as any other; a flag given one is refused", function()
    local r = cli.run { "log", "x.jsonl", "--at=" }
    assert.are.equal(2, r.code)
    assert.are.equal("obelus log: --at needs a message count (0 or more)\n(try `obelus log --help`)\n", r.err)
    r = cli.run { "run", PLAN, "--tools", TOOLS, "--approve=yes" }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.are.equal("obelus run: --approve takes no value (--approve=yes)\n(try `obelus run --help`)\n", r.err)
  end)
end)

describe("--", function()
  local dir
  before_each(function()
    dir = fs.tmpdir()
    fs.write(dir .. "/-p.json", '[{"_tool":"echo","value":7,"_outputPath":"†state.a"}]')
  end)
  after_each(function() fs.rmtree(dir) end)

  local function run_in(args)
    local q = {}
    for i, a in ipairs(args) do q[i] = cli.quote(a) end
    local out, err = os.tmpname(), os.tmpname()
    local _, _, code = os.execute(("cd %s && %s %s >%s 2>%s"):format(cli.quote(dir), cli.quote(BIN),
      table.concat(q, " "), out, err))
    local r = { code = code, out = cli.slurp(out), err = cli.slurp(err) }
    os.remove(out)
    os.remove(err)
    return r
  end

  it("ends the options: a file named -p.json is an argument after it, refused before it", function()
    local tools = os.getenv("PWD") .. "/" .. TESTTOOLS
    local r = run_in { "check", "--tools", tools, "--", "-p.json" }
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("-p.json: ok, 1 call, 0 dependencies\n", r.out)
    r = run_in { "run", "--tools", tools, "--", "-p.json" }
    assert.are.equal(0, r.code, r.err)
    assert.are.same({ a = 7 }, cjson.decode(r.out))
    r = run_in { "run", "--tools", tools, "-p.json" }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.are.equal("obelus: unknown option -p.json for run (an argument that begins with -: put -- " ..
                     "before it)\n(try `obelus run --help`)\n", r.err)
  end)

  it("after it, --help and --tools are arguments too", function()
    local r = cli.run { "schema", "--", "--help", "x.json" }
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out) -- not the help
    assert.truthy(r.err:find("--help", 1, true), r.err)
    r = cli.run { "resolve", "--", "-", "--tools", stdin = '[{"type":"state","data":{"x":1}}]' }
    assert.are.equal(2, r.code) -- "--tools" is the expression, malformed
    assert.truthy(r.err:find("malformed expression", 1, true), r.err)
  end)

  it("a value that looks like an option is the option's value, and - is standard input", function()
    local r = cli.run { "run", "-", "--tools", TOOLS, "--input", "--", stdin = "[]" }
    assert.are.equal(2, r.code) -- "--" was --input's value: not JSON
    assert.truthy(r.err:find("obelus run: --input:", 1, true), r.err)
    r = cli.run { "check", "-", "--tools", TESTTOOLS, stdin = '[{"_tool":"echo","value":1}]' }
    assert.are.equal(0, r.code, r.err)
  end)
end)

describe("an unknown command", function()
  it("gets the nearest command and a hint, not the whole usage, exit 2", function()
    for word, best in pairs { runn = "run", chekc = "check", worekr = "worker", completoin = "completion" } do
      local r = cli.run { word, "x" }
      assert.are.equal(2, r.code, word)
      assert.are.equal("", r.out)
      assert.are.equal(("obelus: unknown command '%s'; did you mean '%s'?\n(`obelus --help` says what each does)\n")
                       :format(word, best), r.err)
    end
    local r = cli.run { "frobnicate" }
    assert.are.equal(2, r.code)
    -- nothing near: the names of the commands, every one
    local names = r.err:match("^obelus: unknown command 'frobnicate'; the commands are (.-)\n%(`obelus %-%-help` says what each does%)\n$")
    assert.truthy(names, r.err)
    for _, cmd in ipairs { "run", "check", "graph", "log", "submit", "worker", "wait", "status" } do
      assert.truthy((" " .. names .. ","):find(" " .. cmd .. "[, ]"), cmd)
    end
  end)

  it("an option before the command is said so; help names a command's help", function()
    local r = cli.run { "--verison" }
    assert.are.equal(2, r.code)
    assert.are.equal("obelus: unknown option --verison; did you mean --version?\n(options go after the " ..
                     "command: `obelus --help` lists the commands)\n", r.err)
    r = cli.run { "--tools", "x", "run" }
    assert.are.equal(2, r.code)
    assert.matches("^obelus: unknown option %-%-tools\n", r.err)
    local h = cli.run { "help", "run" }
    assert.are.equal(0, h.code)
    assert.are.equal(cli.run({ "run", "--help" }).out, h.out)
    assert.are.equal(cli.run({ "--help" }).out, cli.run({ "help" }).out)
    r = cli.run { "help", "runn" }
    assert.are.equal(2, r.code)
    assert.matches("did you mean 'run'?", r.err, 1, true)
  end)

  it("no command at all: the usage on stderr, exit 2; --help on stdout, exit 0", function()
    local r = cli.run {}
    assert.are.equal(2, r.code)
    assert.are.equal("", r.out)
    assert.matches("^usage: obelus COMMAND", r.err)
    local h = cli.run { "--help" }
    assert.are.equal(0, h.code)
    assert.are.equal(r.err, h.out)
    assert.matches("-- ends the options", h.out, 1, true)
  end)
end)

describe("an unknown option", function()
  local cases = {
    { { "run", PLAN, "--tols", TOOLS }, "obelus: unknown option --tols for run; did you mean --tools?\n" ..
      "(try `obelus run --help`)\n" },
    { { "graph", PLAN, "--fromat", "dot" }, "obelus: unknown option --fromat for graph; did you mean --format?\n" ..
      "(try `obelus graph --help`)\n" },
    { { "worker", "--redis", "redis://127.0.0.1:1", "--jbos", "2" },
      "obelus: unknown option --jbos for worker; did you mean --jobs?\n(try `obelus worker --help`)\n" },
    { { "report", "j.jsonl", "--otuput", "r.html" },
      "obelus: unknown option --otuput for report; did you mean --output?\n(try `obelus report --help`)\n" },
    { { "log", "j.jsonl", "--colour" }, "obelus: unknown option --colour for log\n(try `obelus log --help`)\n" },
    -- another command's: which take it
    { { "run", PLAN, "--planner", "p.lua" }, "obelus: unknown option --planner for run (loop takes it)\n" ..
      "(try `obelus run --help`)\n" },
    { { "tools", "--tools", TOOLS, "--events", "-" }, "obelus: unknown option --events for tools (run, check, " ..
      "loop, resume and fork take it)\n(try `obelus tools --help`)\n" },
    { { "resume", "j.jsonl", "--journal", "k.jsonl" }, "obelus: unknown option --journal for resume (run, " ..
      "check, loop, graph and fork take it)\n(try `obelus resume --help`)\n" },
    -- as --opt=value: the option's name alone
    { { "check", PLAN, "--tool=" .. TOOLS }, "obelus: unknown option --tool for check; did you mean --tools?\n" ..
      "(try `obelus check --help`)\n" },
  }
  for _, c in ipairs(cases) do
    it(table.concat(c[1], " ") .. ": said with the nearest, exit 2, nothing done", function()
      local r = cli.run(c[1])
      assert.are.equal(2, r.code)
      assert.are.equal("", r.out)
      assert.are.equal(c[2], r.err)
    end)
  end
end)

describe("an option without its value", function()
  it("is named, with the value it wants, exit 2", function()
    for _, c in ipairs {
      { { "run", PLAN, "--tools" }, "obelus run: --tools needs a value: --tools PATH\n(try `obelus run --help`)\n" },
      { { "log", "j.jsonl", "--at" }, "obelus log: --at needs a value: --at N\n(try `obelus log --help`)\n" },
      { { "report", "j.jsonl", "-o" }, "obelus report: -o needs a value: -o FILE.html\n(try `obelus report --help`)\n" },
      { { "wait", "--redis" }, "obelus wait: --redis needs a value: --redis URL\n(try `obelus wait --help`)\n" },
      { { "fork", "j.jsonl", "--from" }, "obelus fork: --from needs a value: --from ID\n(try `obelus fork --help`)\n" },
      { { "mcp", "--tools", TOOLS, "--port" }, "obelus mcp: --port needs a value: --port N\n(try `obelus mcp --help`)\n" },
    } do
      local r = cli.run(c[1])
      assert.are.equal(2, r.code, table.concat(c[1], " "))
      assert.are.equal("", r.out)
      assert.are.equal(c[2], r.err)
    end
  end)
end)

describe("the table", function()
  it("lists every command of `obelus --help`, and `obelus --help` every command of it", function()
    local listed = {}
    for name in cli.run({ "--help" }).out:gmatch("\n  (%l+) ") do listed[name] = true end
    assert.are.same(set(CMDS), listed)
    for _, c in ipairs { "run", "check", "loop", "resume", "fork", "tools", "mcp", "ui", "report", "log",
                         "graph", "resolve", "schema", "init", "submit", "worker", "wait", "status",
                         "completion", "help" } do
      assert.is_truthy(OPTS[c], c)
    end
  end)

  it("gives each command the options its --help lists", function()
    for _, c in ipairs(CMDS) do
      for o in pairs(help_options(c)) do
        assert.is_truthy(OPTS[c][o], ("obelus %s --help lists %s, the table does not"):format(c, o))
      end
    end
  end)

  it("gives --lenient-schemas to every command that loads tools", function()
    for _, c in ipairs { "run", "check", "resume", "loop", "tools", "mcp", "ui", "submit", "worker", "fork", "graph" } do
      assert.is_truthy(OPTS[c]["--lenient-schemas"], c)
    end
    for _, c in ipairs { "log", "resolve", "schema", "report", "init", "wait", "status" } do
      assert.is_nil(OPTS[c]["--lenient-schemas"], c)
    end
  end)

  it("and each command's parser agree: every option is taken (its help after it: exit 0 or a bad value)", function()
    for _, c in ipairs(CMDS) do
      assert.are.equal(0, cli.run({ c, "--help" }).code, c)
      for name, rows in pairs(OPTS[c]) do
        local args = { c, name }
        if rows[1].value then
          local words = rows[1].complete and not rows[1].complete:match("^@") and rows[1].complete
          args[3] = words and words:match("^(%S+)") or (name == "--input" and "{}") or "100"
        end
        args[#args + 1] = "--help"
        local r = cli.run_for(20, args)
        assert.is_true(r.code == 0 or r.code == 2, table.concat(args, " ") .. ": " .. r.code)
        assert.is_nil(r.err:find("unknown option", 1, true), table.concat(args, " ") .. ": " .. r.err)
        assert.is_nil(r.err:find("not taken here", 1, true), table.concat(args, " ") .. ": " .. r.err)
        if r.code == 0 then assert.matches("usage: obelus", r.out, 1, true) end
      end
    end
  end)

  it("is printed as JSON: a name, usage, summary and options (name, value or null, help) for each", function()
    for _, c in ipairs(TABLE.commands) do
      assert.is_string(c.usage)
      assert.is_string(c.summary)
      for _, o in ipairs(c.options) do
        assert.matches("^%-%-[a-z][a-z-]*$", o.name)
        assert.is_string(o.help)
        assert.is_true(o.value == nil or type(o.value) == "string")
      end
    end
    assert.are.same({ "--help", "--version" }, TABLE.options)
    assert.are.equal(2, cli.run({ "completion", "fish" }).code)
    assert.are.equal(2, cli.run({ "completion" }).code)
  end)
end)

-- bash: the completion function called as bash calls it, with obelus on PATH
local bash_complete = cli.bash_complete

-- zsh: the function with zsh's own completers stood in for by printers
local function zsh_complete(words)
  local script = cli.tmpfile(([==[
compadd() { [[ $1 == -- ]] && shift; print -l -- "$@" }
_describe() { print -l -- ${${(P)2}%%%%:*} }
_files() { print FILES "$@" }
_alternative() { print ALTERNATIVE "$@" }
compset() { return 0 }
source completions/_obelus >/dev/null 2>&1
words=(%s)
CURRENT=${#words}
_obelus
]==]):format(words))
  local out = cli.sh("zsh -f " .. script .. " 2>&1")
  os.remove(script)
  local t = {}
  for w in out:gmatch("[^\n]+") do t[w] = true end
  return t, out
end

local function has_zsh() return os.execute("command -v zsh >/dev/null 2>&1") == true end

describe("the completions", function()
  it("checked in are `obelus completion bash` and `zsh`'s output (make completions)", function()
    assert.are.equal(cli.run({ "completion", "bash" }).out, fs.slurp("completions/obelus.bash"))
    assert.are.equal(cli.run({ "completion", "zsh" }).out, fs.slurp("completions/_obelus"))
  end)

  it("bash: every command, and every option of each that the table and its --help list", function()
    local c = bash_complete("obelus ''")
    for _, name in ipairs(CMDS) do assert.is_true(c[name], name) end
    assert.is_true(c["--help"] and c["--version"])
    for _, name in ipairs(CMDS) do
      local got = bash_complete(("obelus %s -"):format(name))
      for o in pairs(OPTS[name]) do
        if o:match("^%-%-") then assert.is_true(got[o], ("bash: obelus %s %s"):format(name, o)) end
      end
      for o in pairs(help_options(name)) do
        assert.is_true(got[o] or o == "-o" and got["--output"], ("bash: obelus %s %s (its --help)"):format(name, o))
      end
      for o in pairs(got) do assert.is_truthy(OPTS[name][o], ("bash offers obelus %s %s"):format(name, o)) end
    end
  end)

  it("bash: values as the command takes them, --opt=value, nothing after an option that takes a number", function()
    assert.are.same(set { "dot", "mermaid", "svg" }, bash_complete("obelus graph p.json --format ''"))
    assert.are.same(set { "json-schema", "openai", "anthropic", "mcp" }, bash_complete("obelus tools --format ''"))
    assert.are.same(set { "text", "trace", "otlp" }, bash_complete("obelus log j --format ''"))
    assert.are.same(set { "bash", "zsh", "json" }, bash_complete("obelus completion ''"))
    -- bash cuts --fsync=b at '=' (COMP_WORDBREAKS): words --fsync, =, b
    assert.are.same(set { "batch" }, bash_complete("obelus run p.json --fsync = b"))
    assert.are.same(set { "never", "batch", "always" }, bash_complete("obelus run p.json --fsync ="))
    -- or, without '=' in COMP_WORDBREAKS, one word
    assert.are.same(set { "--fsync=batch" }, bash_complete("obelus run p.json --fsync=b"))
    assert.are.same({}, bash_complete("obelus run p.json --concurrency ''"))
    local t = bash_complete("obelus run p.json --tools plans/weather/")
    assert.is_true(t["plans/weather/tools"])
    assert.is_nil(t["plans/weather/plan.json"])
    -- after --, arguments only: files, never options
    local a = bash_complete("obelus check -- plans/weather/p")
    assert.is_true(a["plans/weather/plan.json"])
    assert.are.same({}, bash_complete("obelus check -- --to"))
  end)

  it("zsh: the script parses, names every command and option, and offers each", function()
    if not has_zsh() then
      pending("zsh is not installed (make deps installs it)")
      return
    end
    assert.are.equal("", cli.sh("zsh -n completions/_obelus 2>&1"))
    local text = fs.slurp("completions/_obelus")
    for _, c in ipairs(TABLE.commands) do
      assert.truthy(text:find("'" .. c.name .. ":", 1, true), c.name)
      for _, o in ipairs(c.options) do assert.truthy(text:find("'" .. o.name .. ":", 1, true), o.name) end
    end
    local got = zsh_complete("obelus ''")
    for _, name in ipairs(CMDS) do assert.is_true(got[name], name) end
    for _, name in ipairs(CMDS) do
      local opts = zsh_complete(("obelus %s -"):format(name))
      local want = {}
      for o in pairs(OPTS[name]) do if o:match("^%-%-") then want[o] = true end end
      assert.are.same(keys(want), keys(opts), "zsh: obelus " .. name)
    end
    assert.are.same(set { "dot", "mermaid", "svg" }, (zsh_complete("obelus graph p.json --format ''")))
    assert.are.same(set { "text", "trace", "otlp" }, (zsh_complete("obelus log j --format=")))
    assert.are.same(set { "FILES" }, (zsh_complete("obelus check -- --to")))
  end)
end)
