-- engine_reload_spec.lua -- a host that drops luv and requires it again (as busted does
-- between spec files, or a host reloading its modules) keeps working: the engines stay
-- on a loop that lives. Run in a child lua5.4, since it empties package.loaded.
local fs = require "support.fs"

describe("reloading luv", function()
  it("after an engine was made and closed, a new engine runs a plan, and nothing crashes", function()
    local dir = fs.tmpdir()
    fs.write(dir .. "/t.lua", 'return { { name = "now", run = function() return 7 end } }')
    fs.write(dir .. "/host.lua", ([[
      package.cpath = "lib/?.so;" .. package.cpath
      package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
      local obelus = require "obelus"
      coroutine.wrap(function() obelus.engine({ tools = %q }):close() end)()
      package.loaded.luv, package.loaded.obelus, package.loaded["obelus.core"] = nil, nil, nil
      collectgarbage(); collectgarbage()
      local uv = require "luv"
      local again = require "obelus"
      local e = again.engine { tools = %q }
      local r = e:run({ { _tool = "now", _outputPath = "x" } })
      io.write(r:wait(), " ", again.encode(r:output()), "\n")
      e:close()
      collectgarbage(); collectgarbage()
      uv.run()
      io.write("end\n")
    ]]):format(dir .. "/t.lua", dir .. "/t.lua"))
    local p = io.popen("lua5.4 " .. dir .. "/host.lua 2>&1; echo status $?")
    local out = p:read("a")
    p:close()
    os.execute("rm -rf " .. dir)
    assert.are.equal('0 {"x":7}\nend\nstatus 0\n', out)
  end)
end)
