-- layers_spec.lua -- `make layers`: the include rule of core/ (core/layers.awk) holds on
-- the tree, and catches an include that goes up a layer or sideways, naming the file,
-- the line and both layers.
local cli = require "support.cli"
local fs = require "support.fs"

local function awk(files)
  local out = os.tmpname()
  local _, _, code = os.execute(("awk -v map=core/layers.map -f core/layers.awk %s > %s 2>&1")
    :format(files, out))
  local text = cli.slurp(out)
  os.remove(out)
  return code, text
end

-- a copy of core/NAME (its layer is its name's) with one line added at the end
local function planted(name, line)
  local dir = fs.tmpdir()
  fs.write(dir .. "/" .. name, cli.slurp("core/" .. name) .. line .. "\n")
  return dir .. "/" .. name, dir
end

describe("make layers", function()
  it("finds no include of core/ going up or sideways", function()
    local code, text = awk("core/*.[ch]")
    assert.are.equal(0, code, text)
    assert.are.equal("", text)
  end)

  it("names an include that goes up: base including the engine", function()
    local file, dir = planted("ob_map.c", '#include "ob_run.h"')
    local code, text = awk(file)
    fs.rmtree(dir)
    assert.are.equal(1, code)
    assert.matches("ob_map.c:%d+: base %-> engine %(up%): #include \"ob_run.h\"", text)
  end)

  it("names an include that goes sideways: bridge including io", function()
    local file, dir = planted("ob_view.c", '#include "ob_redis.h"')
    local code, text = awk(file)
    fs.rmtree(dir)
    assert.are.equal(1, code)
    assert.matches("ob_view.c:%d+: bridge %-> io %(sideways%)", text)
  end)

  it("names a file the map does not place", function()
    local dir = fs.tmpdir()
    fs.write(dir .. "/ob_nowhere.c", '#include "ob_value.h"\n')
    local code, text = awk(dir .. "/ob_nowhere.c")
    fs.rmtree(dir)
    assert.are.equal(1, code)
    assert.matches("ob_nowhere.c: in no layer (give it a line in core/layers.map)", text, 1, true)
  end)
end)
