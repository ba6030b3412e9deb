-- files_spec.lua -- plans/files: a tool reading a file and a tool spawning a process,
-- both waiting through obelus.uv, run side by side.
local cli = require "support.cli"
local cjson = require "cjson"

describe("plans/files (obelus.uv: a file read and a child process)", function()
  it("reads the file and counts its words with wc(1)", function()
    local ev = os.tmpname()
    local r = cli.run { "run", "plans/files/plan.json", "--tools", "plans/files/tools", "--events", ev }
    assert.are.equal(0, r.code)
    assert.are.same({ file = { path = "plans/files/sample.txt", bytes = 44, lines = 3 }, words = 9 },
      cjson.decode(r.out))
    -- both started before either was done: neither blocked the loop
    local started, first_done = 0, nil
    for line in io.lines(ev) do
      local e = cjson.decode(line)
      if e.event == "started" then started = started + 1 end
      if e.event == "done" and not first_done then first_done = started end
    end
    assert.are.equal(2, first_done)
  end)

  it("fails clearly for a file that does not exist", function()
    local r = cli.run { "run", "plans/files/plan.json", "--tools", "plans/files/tools",
                        "--input", '{"path":"/nonexistent/file.txt"}' }
    assert.are.equal(1, r.code)
    assert.matches("cannot read /nonexistent/file.txt", r.err, 1, true)
    assert.matches("wc failed on /nonexistent/file.txt", r.err, 1, true)
  end)
end)
