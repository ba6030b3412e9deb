-- docs_spec.lua -- the documentation stands alone and its examples work: the code blocks
-- of README.md and docs/*.md marked runnable are run against the build under test, every
-- relative link leads to a file of the repository (and a #section to a heading of it),
-- and no file of the repository points outside it.
--
-- THE CONVENTION. A fenced code block is run when the line just before its opening fence
-- is the HTML comment (invisible on a rendered page)
--
--     <!-- runnable -->            or       <!-- runnable: OPTION OPTION ... -->
--
-- with OPTIONs among:
--     exit=N            the exit status the block must end with (default 0)
--     cd=DIR            run it in DIR, a folder an earlier block of the page made
--     needs=PROG[,PROG] programs it needs (redis-server, dot, busted): pending without
--     timeout=SECONDS   its cap (default 60; killed past it, which fails it)
--     dry               `make` runs as `make -n` in the repository (a block that builds
--                       or installs: package_spec.lua and `make test` do that for real)
-- A ```sh block runs in `sh -e`: when some of its lines begin with "$ ", only those are
-- commands (a trailing \ continues one) and the other lines are output shown to the
-- reader; otherwise every line is. A ```lua block runs with lua5.4.
--
-- WHERE. Each page has a folder of its own, which is also $HOME: the repository's
-- top-level entries appear in it as symbolic links, but bin/, which holds obelus, a link
-- to $OBELUS_BIN. PATH starts there, so `obelus` and `bin/obelus` are the build under test
-- (bin/obelus or build/asan/obelus). A page's blocks run in order, each in a fresh shell
-- starting in the page's folder, and see what the blocks before made (obelus init hello,
-- a journal). Each runs under `timeout -s KILL` and `ulimit -v` (not under ASan, whose
-- shadow memory needs more address space than any cap), with stdin from /dev/null.
local cli = require "support.cli"
local fs = require "support.fs"

local sh = cli.sh -- what a shell command printed

local REPO = sh("pwd"):gsub("\n$", "")
local BIN = cli.bin:sub(1, 1) == "/" and cli.bin or REPO .. "/" .. cli.bin
local ASAN = BIN:find("/asan/", 1, true) ~= nil

local function lines_of(path)
  local t = {}
  for line in io.lines(path) do t[#t + 1] = line end
  return t
end

-- The pages: README.md and docs/*.md, sorted.
local PAGES = { "README.md" }
for name in sh("ls docs"):gmatch("[^\n]+") do
  if name:match("%.md$") then PAGES[#PAGES + 1] = "docs/" .. name end
end

-- The fenced blocks of a page: {line =, lang =, text = {...}, marker = "..."|nil}.
local function blocks_of(page)
  local L, out, i = lines_of(page), {}, 1
  while i <= #L do
    local fence, lang = L[i]:match("^(```+)%s*([%w_-]*)")
    if fence then
      local b = { line = i, lang = lang, text = {}, marker = (L[i - 1] or ""):match("^<!%-%- runnable(.-)%-%->%s*$") }
      i = i + 1
      while i <= #L and not L[i]:match("^" .. fence .. "%s*$") do
        b.text[#b.text + 1] = L[i]
        i = i + 1
      end
      out[#out + 1] = b
    end
    i = i + 1
  end
  return out
end

local function options(marker)
  local o = { exit = 0, timeout = 60, needs = {} }
  for word in (marker:gsub("^:", "")):gmatch("%S+") do
    local k, v = word:match("^([%w_]+)=(.+)$")
    if k == "exit" or k == "timeout" then
      o[k] = assert(tonumber(v), "runnable: " .. word .. " is not a number")
    elseif k == "cd" then
      o.cd = v
    elseif k == "needs" then
      for p in v:gmatch("[^,]+") do o.needs[#o.needs + 1] = p end
    elseif word == "dry" then
      o.dry = true
    else
      error("runnable: unknown option " .. word)
    end
  end
  return o
end

-- The script a block stands for.
local function script_of(b, o)
  local cmds, prompted = {}, false
  for _, l in ipairs(b.text) do
    if l:match("^%$ ") then prompted = true end
  end
  if prompted then
    local cont = false
    for _, l in ipairs(b.text) do
      if cont then
        cmds[#cmds + 1] = l
        cont = l:match("\\$") ~= nil
      elseif l:match("^%$ ") then
        cmds[#cmds + 1] = l:sub(3)
        cont = l:match("\\$") ~= nil
      end
    end
  else
    cmds = b.text
  end
  local head = {}
  if o.dry then head[#head + 1] = 'make() { MAKEFLAGS= MAKELEVEL= command make -C "$OBELUS_REPO" -n "$@" >/dev/null; }' end
  if o.cd then head[#head + 1] = "cd " .. cli.quote(o.cd) end
  return table.concat(head, "\n") .. "\n" .. table.concat(cmds, "\n") .. "\n"
end

-- A folder standing for the repository, with bin/obelus the build under test.
local function page_dir()
  local d = fs.tmpdir()
  for name in sh("ls -A " .. cli.quote(REPO)):gmatch("[^\n]+") do
    if name ~= "bin" and name ~= ".git" then
      os.execute(("ln -s %s %s"):format(cli.quote(REPO .. "/" .. name), cli.quote(d .. "/" .. name)))
    end
  end
  fs.mkdir(d .. "/bin")
  os.execute(("ln -s %s %s"):format(cli.quote(BIN), cli.quote(d .. "/bin/obelus")))
  return d
end

local function run_block(dir, b, o)
  local file = dir .. "/.block-" .. b.line .. (b.lang == "lua" and ".lua" or ".sh")
  fs.write(file, b.lang == "lua" and table.concat(b.text, "\n") .. "\n" or script_of(b, o))
  local runner = b.lang == "lua" and ("lua5.4 " .. cli.quote(file)) or ("sh -e " .. cli.quote(file))
  local out, err = os.tmpname(), os.tmpname()
  local cmd = ("cd %s && HOME=%s PATH=%s OBELUS_REPO=%s NO_COLOR=1 timeout -s KILL %d sh -c %s </dev/null >%s 2>%s")
      :format(cli.quote(dir), cli.quote(dir), cli.quote(dir .. "/bin:" .. os.getenv("PATH")), cli.quote(REPO),
              o.timeout, cli.quote((ASAN and "" or "ulimit -v 4000000; ") .. runner), out, err)
  local _, how, code = os.execute(cmd)
  local r = { code = how == "exit" and code or 128 + code, out = cli.slurp(out), err = cli.slurp(err) }
  os.remove(out)
  os.remove(err)
  return r, file
end

local function tail(s, n)
  local t = {}
  for l in s:gmatch("[^\n]*\n?") do if l ~= "" then t[#t + 1] = l end end
  return table.concat(t, "", math.max(1, #t - n + 1))
end

for _, page in ipairs(PAGES) do
  describe(page .. "'s runnable blocks", function()
    local dir
    setup(function() dir = page_dir() end)
    for _, b in ipairs(blocks_of(page)) do
      if b.marker then
        local o = options(b.marker)
        it(("%s:%d (%s%s) exits %d"):format(page, b.line, b.lang, o.dry and ", dry" or "", o.exit), function()
          for _, p in ipairs(o.needs) do
            if sh("command -v " .. p .. " 2>/dev/null") == "" then
              return pending(p .. " is not installed")
            end
          end
          local r, file = run_block(dir, b, o)
          assert(r.code == o.exit, ("%s:%d exited %d, not %d\n--- the script (%s)\n%s--- stdout (end)\n%s--- stderr (end)\n%s")
            :format(page, b.line, r.code, o.exit, file, cli.slurp(file), tail(r.out, 20), tail(r.err, 20)))
        end)
      end
    end
  end)
end

describe("the documentation", function()
  it("marks blocks runnable in README.md and every docs page a reader types commands from", function()
    local counted = {}
    for _, page in ipairs(PAGES) do
      for _, b in ipairs(blocks_of(page)) do
        if b.marker then counted[page] = (counted[page] or 0) + 1 end
      end
    end
    for _, page in ipairs { "README.md", "docs/plan-format.md", "docs/tools.md", "docs/cli.md",
                            "docs/operations.md", "docs/llm.md", "docs/embedding.md", "docs/fleet.md" } do
      assert(counted[page], page .. " has no runnable block")
    end
    assert(counted["README.md"] >= 6, "the README's quick start is not all runnable")
  end)

  -- GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens;
  -- the n-th repeat of a heading gets "-n".
  local DROP = { ["§"] = true, ["—"] = true, ["–"] = true, ["·"] = true, ["→"] = true, ["’"] = true,
                 ["“"] = true, ["”"] = true, ["…"] = true, ["×"] = true }
  local function slug(heading)
    local s = {}
    for ch in heading:lower():gmatch("[%z\1-\127\194-\244][\128-\191]*") do
      if ch == " " then s[#s + 1] = "-"
      elseif #ch == 1 then
        if ch:match("[%w_%-]") then s[#s + 1] = ch end
      elseif not DROP[ch] then s[#s + 1] = ch end
    end
    return table.concat(s)
  end
  local anchors_cache = {}
  local function anchors(path)
    if anchors_cache[path] then return anchors_cache[path] end
    local set, seen, fence = {}, {}, false
    for _, l in ipairs(lines_of(path)) do
      if l:match("^```") then fence = not fence end
      local h = not fence and l:match("^#+%s+(.-)%s*$")
      if h then
        local a = slug(h)
        if seen[a] then seen[a] = seen[a] + 1; a = a .. "-" .. seen[a] else seen[a] = 0 end
        set[a] = true
      end
    end
    anchors_cache[path] = set
    return set
  end

  -- The links of a page outside code: {line =, target =}.
  local function links_of(page)
    local out, fence = {}, false
    for n, l in ipairs(lines_of(page)) do
      if l:match("^```") then fence = not fence
      elseif not fence then
        local text = l:gsub("`[^`]*`", "")
        for target in text:gmatch("%]%(([^)%s]+)%)") do out[#out + 1] = { line = n, target = target } end
      end
    end
    return out
  end

  it("has every relative link lead to a file of the repository, and every #section to a heading", function()
    local bad = {}
    for _, page in ipairs(PAGES) do
      local folder = page:match("^(.*)/") or "."
      for _, link in ipairs(links_of(page)) do
        local t = link.target
        if not t:match("^%a[%w+.-]*:") then -- not http:, https:, mailto:
          local file, anchor = t:match("^([^#]*)#?(.*)$")
          local path = file == "" and page or (folder == "." and file or folder .. "/" .. file)
          path = path:gsub("/$", "")
          if not fs.exists(path) and sh("test -d " .. cli.quote(path) .. " && echo yes") == "" then
            bad[#bad + 1] = ("%s:%d: %s: no such file"):format(page, link.line, t)
          elseif anchor ~= "" and path:match("%.md$") and not anchors(path)[anchor] then
            bad[#bad + 1] = ("%s:%d: %s: no heading #%s in %s"):format(page, link.line, t, anchor, path)
          end
        end
      end
    end
    assert(#bad == 0, "broken links:\n" .. table.concat(bad, "\n"))
  end)

  it("links every docs page from the README", function()
    local readme = cli.slurp("README.md")
    for _, page in ipairs(PAGES) do
      if page ~= "README.md" then
        assert(readme:find("(" .. page .. ")", 1, true), page .. " is not linked from README.md")
      end
    end
  end)

  it("points nowhere outside the repository: no file mentions the old contract, its folder or its section numbers", function()
    -- the strings are made here, so that this file does not hold them
    local words = { "SPEC" .. ".md", ".." .. "/shared" }
    -- and the old contract's section numbers, now plan-format's ("plan-format §9")
    local patterns = { "SPEC" .. " %d", "SPEC" .. " §%d", "%(" .. "SPEC:" }
    local files = sh("git ls-files 2>/dev/null")
    if files == "" then -- a tarball of `make dist`: no git, the same files
      files = sh("find . -type f -not -path './.git/*' -not -path './build/*' -not -path './bin/*'"
                 .. " -not -path './lib/*' -not -path '*/node_modules/*' | sed 's|^./||'")
    end
    local bad = {}
    for f in files:gmatch("[^\n]+") do
      local text = cli.slurp(f)
      local function note(at, what)
        local line = select(2, text:sub(1, at):gsub("\n", "")) + 1
        bad[#bad + 1] = ("%s:%d: %s"):format(f, line, what)
      end
      for _, w in ipairs(words) do
        local at = text:find(w, 1, true)
        if at then note(at, w) end
      end
      for _, p in ipairs(patterns) do
        local at, to = text:find(p)
        if at then note(at, text:sub(at, to)) end
      end
    end
    assert(#bad == 0, "files that point outside the repository:\n" .. table.concat(bad, "\n"))
  end)
end)
