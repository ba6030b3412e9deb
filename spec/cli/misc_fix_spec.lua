-- spec/cli/misc_fix_spec.lua -- what the attack list (hostile/cases/misc.lua, http.lua)
-- found after issue 26's first round: a resume that waited on the FIFO its run's plan
-- came from; ids and file names printed raw by resume and graph; C1 controls in graph's
-- drawings; report's inline JSON opened by "<!--<script>"; MCP error messages cut
-- silently inside a character; HTTP header limits that named none.
local cjson = require "cjson"
local cli = require "support.cli"
local fs = require "support.fs"
local write, tmpdir = fs.write, fs.tmpdir

local ESC = "\27"
local DAG = "\xE2\x80\xA0"
local TOOLS = "spec/cli/tools"

local sh = cli.sh -- what a shell command printed



describe("after the attack list", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf " .. cli.quote(dir)) end)

  it("resumes a run whose plan was read from a FIFO without waiting on the FIFO", function()
    local fifo, j = dir .. "/p.json", dir .. "/j.jsonl"
    assert(os.execute("mkfifo " .. cli.quote(fifo)))
    write(dir .. "/src.json", '[{"_tool":"echo","value":7,"_outputPath":"' .. DAG .. 'state.a"}]')
    -- a writer that gives up after 10 s, so that nothing is left behind
    os.execute(("timeout 10 sh -c 'cat %s > %s' &"):format(cli.quote(dir .. "/src.json"), cli.quote(fifo)))
    local r = cli.run_for(20, { "run", fifo, "--tools", TOOLS, "--journal", j })
    assert.are.equal(0, r.code, r.err)
    -- the FIFO has no writer now: opening it to compare would wait forever
    r = cli.run_for(20, { "resume", j })
    assert.are_not.equal(137, r.code, "resume hung on the FIFO")
    assert.are.equal(0, r.code, r.err)
    assert.matches('"a": 7', r.out, 1, true)
  end)

  it("resume's report of a call that runs again prints its id escaped", function()
    local p, j = dir .. "/p.json", dir .. "/j.jsonl"
    write(p, '{"plan":[{"_id":"x\\u001b[31mRED","_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.a"}]}')
    local r = cli.run { "run", p, "--tools", TOOLS, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    -- the plan, the run and the call's start: a run killed while the call ran
    local lines = {}
    for line in io.lines(j) do lines[#lines + 1] = line end
    write(j, table.concat(lines, "\n", 1, 3) .. "\n")
    r = cli.run { "resume", j }
    assert.are.equal(0, r.code, r.err)
    assert.is_nil(r.err:find(ESC, 1, true))
    assert.matches("call x\\x1b[31mRED (echo) had started (attempt 1) and did not settle: it runs again",
                   r.err, 1, true)
  end)

  it("graph --journal's warning prints the journal's plan file name escaped", function()
    local named = dir .. "/a" .. ESC .. "[2Jb.json"
    write(named, '{"plan":[{"_id":"a","_tool":"echo","value":1,"_outputPath":"x"}]}')
    write(dir .. "/other.json", '{"plan":[{"_id":"a","_tool":"echo","value":2,"_outputPath":"x"}]}')
    local j = dir .. "/j.jsonl"
    local r = cli.run { "run", named, "--tools", TOOLS, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    r = cli.run { "graph", dir .. "/other.json", "--tools", TOOLS, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    assert.matches("is the journal of a run of", r.err, 1, true)
    assert.matches("a\\x1b[2Jb.json", r.err, 1, true)
    assert.is_nil(r.err:find(ESC, 1, true))
  end)

  it("graph writes no C1 control (U+0080..U+009F) in dot or mermaid", function()
    local p = dir .. "/p.json"
    write(p, '{"plan":[{"_id":"c\\u009b2J\\u0085x","_tool":"echo","value":1,"_outputPath":"' .. DAG .. 'state.a"},' ..
             '{"_id":"d","_tool":"echo","value":"' .. DAG .. 'state.a","_outputPath":"' .. DAG .. 'state.b"}]}')
    for _, format in ipairs { "dot", "mermaid" } do
      local r = cli.run { "graph", p, "--tools", TOOLS, "--format", format }
      assert.are.equal(0, r.code, r.err)
      assert.is_nil(r.out:find("\xC2[\x80-\x9F]"), format)
      assert.matches("c 2J x", r.out, 1, true)
    end
  end)

  it("report's inline JSON escapes every '<': \"<!--<script>\" in an _id cannot break the page", function()
    local p, j, html = dir .. "/p.json", dir .. "/j.jsonl", dir .. "/r.html"
    write(p, '{"plan":[{"_id":"<!--<script>","_tool":"fail","message":"</script><b>","_outputPath":"x"}]}')
    local r = cli.run { "run", p, "--tools", TOOLS, "--journal", j }
    assert.are.equal(1, r.code, r.err)
    r = cli.run { "report", j, "-o", html }
    assert.are.equal(0, r.code, r.err)
    local page = cli.slurp(html)
    local data = page:match('<script type="application/json" id="obelus%-run">(.-)</script>')
    assert.is_truthy(data, "no data script")
    assert.is_nil(data:find("<", 1, true))
    assert.is_nil(page:find("<!--", 1, true))
    local run = cjson.decode(data)
    assert.matches("\\u003c!--\\u003cscript>", data, 1, true)
    assert.is_truthy(run)
  end)

  it("MCP says when it cuts a name, never inside a character, and keeps the engine's error whole", function()
    local id = ("\xC3\xA9"):rep(1500) -- 3,000 bytes of é
    local msg = ("\xC3\xA9"):rep(1000) -- 2,000 bytes: more than the old 1,200-byte cut
    local req = cjson.encode { jsonrpc = "2.0", id = 1, method = "tools/call", params = {
      name = "run_plan", arguments = { plan = { plan = {
        { _id = id, _tool = "fail", message = msg, _outputPath = DAG .. "state.x" } } } } } }
    write(dir .. "/in", req .. "\n")
    local out = sh(("timeout -s KILL 30 %s mcp --tools %s < %s 2>/dev/null"):format(
      cli.quote(cli.bin), TOOLS, cli.quote(dir .. "/in")))
    local v = cjson.decode(out)
    assert.are.equal(1, v.id)
    assert.is_true(v.result.isError)
    local text = v.result.content[#v.result.content].text
    assert.matches(msg, text, 1, true)
    assert.matches("(id cut at 1 KB of 3 KB)", text, 1, true)
    assert.is_nil(out:find("\\ufffd", 1, true))
    assert.is_nil(out:find("\xEF\xBF\xBD", 1, true))
  end)

  it("run --help names obelus.http's own timeout and low-speed defaults", function()
    local r = cli.run { "run", "--help" }
    assert.are.equal(0, r.code, r.err)
    assert.matches("timeout_ms 300000", r.out, 1, true)
    assert.matches("low_speed_limit 1 byte/s", r.out, 1, true)
    assert.matches("low_speed_time 60 s", r.out, 1, true)
  end)

  describe("HTTP response headers past libcurl's limits", function()
    local httpd
    setup(function() httpd = assert(require("support.servers").httpd()) end)
    teardown(function() httpd.stop() end)

    local function get_with(route)
      local t = dir .. "/t.lua"
      write(t, 'local obelus = require "obelus"\n' ..
               'return { { name = "get", run = function(c) return obelus.http.get(c.url).status end } }\n')
      local p = dir .. "/p.json"
      write(p, cjson.encode { plan = { { _tool = "get", url = httpd.url(route), _outputPath = DAG .. "state.a" } } })
      return cli.run_for(30, { "run", p, "--tools", t, "--http-allow-private" })
    end

    it("one 2 MB header line fails the call naming the limit, not 'Out of memory'", function()
      local r = get_with("/onehead?bytes=2000000")
      assert.are.equal(1, r.code, r.err)
      assert.matches("a response header line longer than 100 KB (the header limit: 100 KB a line, 300 KB in all)",
                     r.err, 1, true)
      assert.is_nil(r.err:find("Out of memory", 1, true))
    end)

    it("500 KB of header lines fail the call naming the 300 KB limit", function()
      local r = get_with("/bighead?lines=5000")
      assert.are.equal(1, r.code, r.err)
      assert.matches("response headers larger than 300 KB (the header limit: 300 KB in all, 100 KB a line)",
                     r.err, 1, true)
    end)
  end)
end)
