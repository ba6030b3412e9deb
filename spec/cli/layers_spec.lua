-- layers_spec.lua -- `make layers`: the include rule of core/ (core/layers.awk) holds on
-- the tree, and catches an include that goes up a layer or sideways, naming the file,
-- the line and both layers. A file's layer is the folder that holds it.
local cli = require "support.cli"
local fs = require "support.fs"

local function awk(files)
  local out = os.tmpname()
  local _, _, code = os.execute(("awk -f core/layers.awk %s > %s 2>&1"):format(files, out))
  local text = cli.slurp(out)
  os.remove(out)
  return code, text
end

-- a copy of core/LAYER/NAME in a folder LAYER of its own, with one line added at the end
local function planted(layer, name, line)
  local dir = fs.tmpdir()
  fs.mkdir(dir .. "/" .. layer)
  local path = dir .. "/" .. layer .. "/" .. name
  fs.write(path, cli.slurp("core/" .. layer .. "/" .. name) .. line .. "\n")
  return path, dir
end

describe("make layers", function()
  it("finds no include of core/ going up or sideways", function()
    local code, text = awk("core/obelus.h core/*/*.[ch]")
    assert.are.equal(0, code, text)
    assert.are.equal("", text)
  end)

  it("passes a copy of a file as it is", function()
    local file, dir = planted("base", "ob_map.c", "")
    local code, text = awk(file)
    fs.rmtree(dir)
    assert.are.equal(0, code, text)
  end)

  it("names an include that goes up: base including the engine", function()
    local file, dir = planted("base", "ob_map.c", '#include "engine/ob_run.h"')
    local code, text = awk(file)
    fs.rmtree(dir)
    assert.are.equal(1, code)
    assert.matches("base/ob_map.c:%d+: base %-> engine %(up%): #include \"engine/ob_run.h\"", text)
  end)

  it("names an include that goes sideways: bridge including io", function()
    local file, dir = planted("bridge", "ob_view.c", '#include "io/ob_redis.h"')
    local code, text = awk(file)
    fs.rmtree(dir)
    assert.are.equal(1, code)
    assert.matches("bridge/ob_view.c:%d+: bridge %-> io %(sideways%)", text)
  end)

  it("names an include that does not say its folder", function()
    local file, dir = planted("engine", "ob_run.c", '#include "ob_value.h"')
    local code, text = awk(file)
    fs.rmtree(dir)
    assert.are.equal(1, code)
    assert.matches("engine/ob_run.c:%d+: the include does not name its folder: ob_value.h", text)
  end)

  it("names a file outside the layer folders", function()
    local dir = fs.tmpdir()
    fs.mkdir(dir .. "/misc")
    fs.write(dir .. "/misc/ob_nowhere.c", '#include "base/ob_value.h"\n')
    local code, text = awk(dir .. "/misc/ob_nowhere.c")
    fs.rmtree(dir)
    assert.are.equal(1, code)
    assert.matches("misc/ob_nowhere.c: not in a layer folder", text, 1, true)
  end)
end)

-- Only cli/ speaks to the terminal: below it, what the engine has to say is an event, and
-- approval is a hook. The words are searched for in comments too, so that no file below
-- cli/ so much as plans to write to the terminal.
local function terminal_words(root) -- the lines of root/core/*/ outside cli/ that name one
  local out = os.tmpname()
  os.execute(("cd %s && grep -rn --include='*.[ch]' -e stderr -e /dev/tty -e 'system(' core " ..
              "| grep -v '^core/cli/' > %s"):format(root, out))
  local text = cli.slurp(out)
  os.remove(out)
  return text
end

describe("the layers below cli/", function()
  it("name no stderr, /dev/tty or system( (only cli/ prints, prompts or runs a program)", function()
    assert.are.equal("", terminal_words("."))
  end)

  it("would be named: a planted line below cli/ is found, one in cli/ is not", function()
    local dir = fs.tmpdir()
    fs.mkdir(dir .. "/core")
    fs.mkdir(dir .. "/core/engine")
    fs.mkdir(dir .. "/core/cli")
    fs.write(dir .. "/core/engine/x.c", 'static void f(void) { system("ls"); }\n')
    fs.write(dir .. "/core/cli/y.c", 'static void g(void) { fputs("y", stderr); }\n')
    local text = terminal_words(dir)
    fs.rmtree(dir)
    assert.are.equal('core/engine/x.c:1:static void f(void) { system("ls"); }\n', text)
  end)
end)
