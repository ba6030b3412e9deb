-- spec/cli/report_spec.lua -- `obelus report JOURNAL -o run.html`, loaded in a real
-- headless Chromium (Debian's chromium): the page draws itself with nothing from the
-- network, every call is in its DOM with its outcome, and a run of 10,000 calls loads too.
local cjson = require "cjson"
local cli = require "support.cli"

local function have_chromium()
  return os.execute("command -v chromium >/dev/null 2>&1") == true
end

local function chromium(args, url)
  local p = assert(io.popen(("timeout 120 chromium --headless --no-sandbox --disable-gpu " ..
    "--disable-dev-shm-usage --user-data-dir=%s %s %s 2>/dev/null"):format(
      cli.quote(os.tmpname() .. ".profile"), args, cli.quote(url))))
  local out = p:read("a")
  p:close()
  return out
end

local function report_of(args)
  local j, html = cli.journal_of(args), os.tmpname() .. ".html"
  local rep = cli.run { "report", j, "-o", html }
  assert.are.equal(0, rep.code, rep.err)
  os.remove(j)
  return html
end

-- the calls the page shows: data-call -> data-state, from the DOM after its script ran
local function rows(dom)
  local t, n = {}, 0
  for call, state in dom:gmatch('<tr class="call [^"]*" data%-call="([^"]*)" data%-state="([^"]*)"') do
    t[call] = state
    n = n + 1
  end
  return t, n
end

describe("obelus report", function()
  it("is one self-contained file: no script, style or font from elsewhere", function()
    local html = report_of { "plans/weather/plan.json", "--tools", "plans/weather/tools", "--input", '{"city":"Lisbon"}' }
    local text = cli.slurp(html)
    assert.is_nil(text:find("<script src", 1, true))
    assert.is_nil(text:find("<link", 1, true))
    assert.is_nil(text:find("@import", 1, true))
    for url in text:gmatch("https?://[%w%./%-]+") do -- namespace names, never fetched
      assert.truthy(url == "http://www.w3.org/2000/svg" or url == "http://www.w3.org/1999/xlink", url)
    end
    os.remove(html)
  end)

  it("in headless Chromium: every call with its outcome in the table and the graph", function()
    if not have_chromium() then return pending("chromium is not installed (make deps installs it)") end
    local html = report_of { "plans/translate/plan.json", "--tools", "plans/translate/tools",
                             "--input", '{"text":"hello my friend the cat sleeps"}' }
    local dom = chromium("--dump-dom", "file://" .. html)
    assert.truthy(dom:find('data-ready="1"', 1, true), "the page's script did not finish")
    local states, n = rows(dom)
    assert.are.equal(3, n)
    assert.are.same({ fr = "done", de = "failed", es = "done" }, states)
    -- the graph's nodes carry the same outcomes
    local nodes = 0
    -- (Graphviz's nodes, or the app's: <g class="node ..." id=... data-call=... data-state=...>)
    for g in dom:gmatch('<g [^>]*>') do
      if g:match('class="node[ "]') and g:match('data%-call="') and g:match('data%-state="') then nodes = nodes + 1 end
    end
    assert.are.equal(3, nodes)
    local shot = os.tmpname() .. ".png"
    chromium("--window-size=1100,800 --screenshot=" .. cli.quote(shot), "file://" .. html)
    local png = cli.slurp(shot)
    assert.are.equal("\137PNG", png:sub(1, 4))
    assert.is_true(#png > 5000)
    os.remove(shot)
    os.remove(html)
  end)

  -- a 10,000-call run under ASan is slow and adds nothing the small ones do not check
  local big_it = cli.bin:match("/asan/") and pending or it
  big_it("stays usable for 10,000 calls (table whole, the graph's first 2,000 calls)", function()
    if not have_chromium() then return pending("chromium is not installed (make deps installs it)") end
    local calls = {}
    for i = 1, 10000 do calls[i] = { _id = "c" .. i, _tool = "echo", value = i, _outputPath = "†state.n" .. i } end
    local plan = cli.tmpfile(cjson.encode { plan = calls, output = "†state.n1" }, ".json")
    local html = report_of { plan, "--tools", "spec/cli/tools" }
    local dom = chromium("--dump-dom", "file://" .. html)
    assert.truthy(dom:find('data-ready="1"', 1, true))
    local states, n = rows(dom)
    assert.are.equal(10000, n)
    assert.are.equal("done", states.c1)
    assert.are.equal("done", states.c10000)
    assert.truthy(dom:find("8000 more", 1, true), "the graph counts the calls it leaves out")
    os.remove(plan)
    os.remove(html)
  end)
end)
