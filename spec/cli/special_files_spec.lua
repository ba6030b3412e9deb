-- spec/cli/special_files_spec.lua -- a FIFO, a device or a directory where a plan names a
-- file (a _delegate) or in a tools folder is refused at once with a clear error, never
-- waited for: check, run and the MCP server go on. A FIFO named on the command line
-- (--input @FIFO, the plan) is read: the user chose it (process substitution).
local cjson = require "cjson"
local cli = require "support.cli"

local sh = cli.sh -- what a shell command printed

describe("special files", function()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. " && mkfifo " .. dir .. "/fifo.json && ln -s /dev/zero " .. dir .. "/zero.json"))
    local f = assert(io.open(dir .. "/plan.json", "w"))
    f:write('{"plan":[{"_delegate":"fifo.json","_outputPath":"a"},' ..
      '{"_delegate":"zero.json","_outputPath":"b"},{"_delegate":".","_outputPath":"c"}]}')
    f:close()
  end)
  after_each(function()
    os.execute("rm -rf " .. dir)
  end)

  it("refuses a FIFO, a device and a directory as _delegate: check and run end", function()
    for _, cmd in ipairs { "check", "run" } do
      local r = cli.run_for(30, { cmd, dir .. "/plan.json", "--tools", "spec/cli/tools", "--plans-root", "/" })
      assert.are_not.equal(137, r.code, cmd .. " hung")
      assert.is_true(r.code == 1 or r.code == 2, r.err)
      assert.matches("fifo.json: is a FIFO (named pipe), not a regular file", r.err, 1, true)
      assert.matches("zero.json: is a character device, not a regular file", r.err, 1, true)
      assert.matches("is a directory, not a regular file", r.err, 1, true)
    end
  end)

  it("answers a run_plan delegating to a FIFO with an error, and the MCP server goes on", function()
    local plan = '{"plan":[{"_delegate":"fifo.json","_outputPath":"a"}]}'
    local lines = {
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_plan","arguments":{"plan":' .. plan .. '}}}',
      '{"jsonrpc":"2.0","id":2,"method":"ping"}',
    }
    local out = sh(("cd %s && printf '%%s\\n' %s %s | timeout -s KILL 30 %s mcp --tools %s/spec/cli/tools; echo \"exit $?\"")
      :format(cli.quote(dir), cli.quote(lines[1]), cli.quote(lines[2]),
        cli.quote(cli.bin:sub(1, 1) == "/" and cli.bin or os.getenv("PWD") .. "/" .. cli.bin), os.getenv("PWD")))
    local got = {}
    for l in out:gmatch("[^\n]+") do got[#got + 1] = l end
    assert.are.equal("exit 0", got[#got], out)
    local one = cjson.decode(got[1])
    assert.are.equal(1, one.id)
    assert.is_true(one.result.isError)
    assert.matches("is a FIFO", one.result.content[1].text, 1, true)
    assert.are.same({ jsonrpc = "2.0", id = 2, result = {} }, cjson.decode(got[2]))
  end)

  it("refuses a FIFO in a tools folder; reads a FIFO named by --input @", function()
    assert(os.execute("mkfifo " .. dir .. "/t.lua"))
    local r = cli.run_for(30, { "tools", "--tools", dir })
    assert.are.equal(2, r.code, r.err)
    assert.matches("t.lua: is a FIFO (named pipe), not a regular file", r.err, 1, true)
    local p = cli.tmpfile('{"plan":[{"_tool":"echo","value":"†input.x","_outputPath":"x"}]}')
    local out = sh(("(printf '{\"x\":7}' > %s/fifo.json &) ; timeout -s KILL 30 %s run %s --tools spec/cli/tools --input @%s/fifo.json")
      :format(dir, cli.quote(cli.bin), p, dir))
    os.remove(p)
    assert.are.same({ x = 7 }, cjson.decode(out))
  end)
end)
