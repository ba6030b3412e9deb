-- parser_spec.lua -- hostile plans, inputs, journals and tool values (issue 26, items 6-8):
-- duplicate keys and NUL bytes are validation errors; a path has at most 1000 segments
-- (a 1,000,000-segment _outputPath once crashed check, graph and run); a tool value the
-- journal could not read back fails its call; _retry never waits NaN ms; a schema that
-- does not compile is an error where it is loaded, never a schema that checks nothing.
local cli = require "support.cli"
local cjson = require "cjson"

local TOOLS = "spec/cli/fixtures/parser"

local function tmp()
  local n = os.tmpname()
  os.remove(n)
  return n
end

local function write(text, suffix) return cli.tmpfile(text, suffix or ".json") end

local function lines(path)
  local t = {}
  local f = io.open(path)
  if not f then return t end
  for l in f:lines() do t[#t + 1] = l end
  f:close()
  return t
end

-- obelus CMD FILE --tools TOOLS ..., under a generous timeout (a crash or a hang shows)
local function on(cmd, text, ...)
  local file = write(text)
  local args = { cmd, file, "--tools", TOOLS }
  for _, a in ipairs { ... } do args[#args + 1] = a end
  local r = cli.run_for(30, args)
  os.remove(file)
  return r
end

describe("duplicate keys", function()
  it("in a call are a validation error naming the key, its line and column; nothing runs", function()
    local m = tmp()
    local r = on("run", '[{"_tool":"marker","file":"' .. m .. '","_tool":"echo"}]')
    assert.are.equal(2, r.code, r.err)
    assert.matches('duplicate object key near \'"_tool"\'', r.err, 1, true)
    assert.matches("line 1, column", r.err, 1, true)
    assert.are.same({}, lines(m))
    r = on("check", '{"plan":[{"_tool":"echo","value":{"a":1,"a":2}}]}')
    assert.are.equal(2, r.code, r.err)
    assert.matches('duplicate object key near \'"a"\'', r.err, 1, true)
  end)

  it("in an --input are an error", function()
    local r = on("run", '[{"_tool":"echo","value":"\\u2020input.a","_outputPath":"x"}]',
                 "--input", '{"a":1,"a":2}')
    assert.are.equal(2, r.code, r.err)
    assert.matches('--input: line 1, column %d+: duplicate object key near \'"a"\'', r.err)
  end)

  it("in a journal's line make log and resume refuse it, naming the line", function()
    local j = tmp()
    local plan = write('[{"_tool":"echo","value":1,"_outputPath":"x"}]')
    local r = cli.run { "run", plan, "--tools", TOOLS, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    local t = lines(j)
    t[#t] = t[#t]:gsub("^{", '{"journal":"x","journal":"end",', 1)
    local f = assert(io.open(j, "w"))
    f:write(table.concat(t, "\n"), "\n")
    f:close()
    for _, args in ipairs { { "log", j }, { "resume", j, "--tools", TOOLS } } do
      local cmd = args[1]
      r = cli.run_for(30, args)
      assert.are.equal(2, r.code, cmd .. ": " .. r.err)
      assert.matches(":" .. #t .. ":.*duplicate object key", r.err)
    end
    os.remove(j)
    os.remove(plan)
  end)
end)

describe("NUL bytes", function()
  local cases = {
    { '{"_tool":"echo\\u0000x","value":1}', "_tool holds a NUL byte" },
    { '{"_tool":"echo","_id":"a\\u0000b"}', "_id must be a non-empty string without '@' or a NUL byte" },
    { '{"_tool":"echo","_instance":"a\\u0000b"}', "_instance must be a non-empty string without a NUL byte" },
    { '{"_delegate":"sub.json\\u0000x"}', "_delegate holds a NUL byte" },
    { '{"_tool":"echo","_outputPath":"x[\\"a\\\\u0000b\\"]"}', "NUL byte) in a bracketed key" },
    { '{"_tool":"echo","value":"\\u2020state[\\"a\\\\u0000\\"]"}', "NUL byte) in a bracketed key" },
  }
  for _, c in ipairs(cases) do
    it("refuses " .. c[1], function()
      local m = tmp()
      local r = on("run", "[" .. c[1] .. ',{"_tool":"marker","file":"' .. m .. '"}]')
      assert.are.equal(2, r.code, r.err)
      assert.matches(c[2], r.err, 1, true)
      assert.are.same({}, lines(m)) -- nothing ran
    end)
  end

  it("in a context message's _instance is an error at check, and for resolve", function()
    local r = on("check", '{"context":[{"type":"state","_instance":"a\\u0000b","data":{"x":1}}],' ..
                          '"plan":[{"_tool":"echo","_instance":"a","value":"\\u2020state.x","_outputPath":"y"}]}')
    assert.are.equal(2, r.code, r.err)
    assert.matches('context[0]: "_instance" holds a NUL byte', r.err, 1, true)
    local log = write('[{"type":"state","_instance":"a\\u0000b","data":{"x":1}}]')
    r = cli.run_for(30, { "resolve", log, "\u{2020}state.x", "--instance", "a" })
    assert.are.equal(2, r.code, r.err)
    assert.matches('"_instance" holds a NUL byte', r.err, 1, true)
    os.remove(log)
  end)

  it("in a context message's kind is named as such, not as the name cut short", function()
    local r = on("check", '{"context":[{"type":"data","kind":"st\\u0000ate","data":{"x":1}}],"plan":[]}')
    assert.are.equal(2, r.code, r.err)
    assert.matches('context[0]: "kind" holds a NUL byte', r.err, 1, true)
    r = on("check", '{"context":[{"type":"data","kind":"st\\u001bate","data":{"x":1}}],"plan":[]}')
    assert.are.equal(2, r.code, r.err)
    assert.matches('"st\\x1bate" is not a kind name', r.err, 1, true)
  end)

  it("in the instances list is an error", function()
    local r = on("check", '{"instances":["a\\u0000b"],"plan":[{"_tool":"echo"}]}')
    assert.are.equal(2, r.code, r.err)
    assert.matches('"instances"[0] must be a non-empty string without a NUL byte', r.err, 1, true)
  end)
end)

describe("NUL bytes on the Lua side", function()
  it("in a tool's name: the tool file is refused, naming it (not loaded as the name cut short)", function()
    local t = write('return { { name = "marker\\0x", run = function() return 1 end } }', ".lua")
    local r = cli.run_for(30, { "tools", "--tools", t })
    assert.are.equal(2, r.code, r.err)
    assert.matches(t, r.err, 1, true)
    assert.matches('"name" holds a NUL byte', r.err, 1, true)
    os.remove(t)
  end)

  for _, what in ipairs { "kind", "path", "method" } do
    it("in an obelus.message's " .. what .. " fail the call", function()
      local r = on("run", '[{"_tool":"nul_message","what":"' .. what .. '","_outputPath":"x"}]')
      assert.are.equal(1, r.code, r.err)
      assert.matches("call #0 (nul_message)", r.err, 1, true)
      assert.matches("obelus.message: " .. what .. " must be a string without a NUL byte", r.err, 1, true)
    end)
  end

  it("in obelus.branch's alternative fail the call (not the alternative cut short)", function()
    local r = on("run", '[{"_tool":"nul_branch","_outputPath":"x || y"}]')
    assert.are.equal(1, r.code, r.err)
    assert.matches("call #0 (nul_branch)", r.err, 1, true)
    assert.matches("obelus.branch: an alternative as written holds no NUL byte", r.err, 1, true)
  end)
end)

describe("text that is not UTF-8", function()
  it("in resolve's expression is a malformed expression (exit 2), not a key found absent", function()
    local log = write('[{"type":"state","data":{"a":1}}]')
    local r = cli.run_for(30, { "resolve", log, "\u{2020}state.\255" })
    assert.are.equal(2, r.code, r.err)
    assert.matches("malformed expression: byte 10 (0xff) is not UTF-8", r.err, 1, true)
    os.remove(log)
  end)


  it("in a tool's name makes the tool file refused, naming it", function()
    local t = write('return { { name = "ec\\255ho", run = function() return 1 end } }', ".lua")
    local r = cli.run_for(30, { "tools", "--tools", t })
    assert.are.equal(2, r.code, r.err)
    assert.matches(t, r.err, 1, true)
    assert.matches('"name" is not valid UTF-8', r.err, 1, true)
    os.remove(t)
  end)
end)

describe("a journal edited by hand", function()
  -- a run of two calls (a, #1), its journal cut after a's "settled" (line 5), edited
  local function edited(n, from, to)
    local j = tmp()
    local plan = write('[{"_tool":"echo","_id":"a","value":1,"_outputPath":"x"},' ..
                       '{"_tool":"echo","value":2,"_outputPath":"y"}]')
    local r = cli.run { "run", plan, "--tools", TOOLS, "--journal", j }
    assert.are.equal(0, r.code, r.err)
    local t = lines(j)
    local i, k = t[n]:find(from, 1, true)
    assert(i, from .. " is not on line " .. n)
    t[n] = t[n]:sub(1, i - 1) .. to .. t[n]:sub(k + 1)
    local f = assert(io.open(j, "w"))
    f:write(table.concat(t, "\n", 1, 5), "\n")
    f:close()
    return j, plan
  end

  it("a NUL byte in a call's id makes resume refuse the journal, naming the line (not call a taken up)", function()
    local j, plan = edited(3, '"id":"a"', '"id":"a\\u0000junk"')
    local r = cli.run_for(30, { "resume", j, "--tools", TOOLS })
    assert.are.equal(2, r.code, r.err)
    assert.matches(j .. ':3: inconsistent journal: its record\'s "id" holds a NUL byte', r.err, 1, true)
    os.remove(j)
    os.remove(plan)
  end)

  it("with a message that does not go back into the log: resume names its line", function()
    local j, plan = edited(4, '"_path":"x"', '"_path":"x' .. string.rep(".a", 2000) .. '"')
    local r = cli.run_for(30, { "resume", j, "--tools", TOOLS })
    assert.are.equal(2, r.code, r.err)
    assert.matches(j .. ":4: the message does not go back into the log", r.err, 1, true)
    assert.matches("a path has at most 1000 segments", r.err, 1, true)
    os.remove(j)
    os.remove(plan)
  end)

  it("a NUL byte in a tool file's name makes resume refuse the journal (not the name cut short loaded)", function()
    local j, plan = edited(2, 'tools.lua"', 'tools.lua\\u0000junk"')
    local r = cli.run_for(30, { "resume", j })
    assert.are.equal(2, r.code, r.err)
    assert.matches(j .. ":2: inconsistent journal: the run's tool file 1 holds a NUL byte", r.err, 1, true)
    os.remove(j)
    os.remove(plan)
  end)
end)

describe("paths", function()
  local function deep_path(n) return "a" .. string.rep(".a", n - 1) end

  it("of 1,000,000 segments are refused by check, graph and run, without a crash", function()
    local text = cjson.encode { { _tool = "echo", value = 1, _outputPath = deep_path(1000000) } }
    for _, cmd in ipairs { "check", "graph", "run" } do
      local r = on(cmd, text)
      assert.are.equal(2, r.code, cmd .. ": " .. r.err)
      assert.matches("a path has at most 1000 segments", r.err, 1, true)
    end
  end)

  it("of 1000 segments are fine; 1001 are not, in a reference too", function()
    local r = on("run", cjson.encode { { _tool = "echo", value = 7, _outputPath = deep_path(1000) } })
    assert.are.equal(0, r.code, r.err)
    r = on("check", cjson.encode { { _tool = "echo", value = "\u{2020}state." .. deep_path(1001) } })
    assert.are.equal(2, r.code, r.err)
    assert.matches("a path has at most 1000 segments", r.err, 1, true)
  end)
end)

describe("a tool value the journal cannot hold", function()
  local function runs(tool, extra)
    local j = tmp()
    local r = on("run", '[{"_tool":"' .. tool .. '","_outputPath":"x"' .. (extra or "") .. '}]',
                 "--journal", j)
    local log = cli.run_for(30, { "log", j })
    os.remove(j)
    return r, log
  end

  it("a key holding a NUL byte fails the call at once, naming the key; the journal stays readable", function()
    local r, log = runs("nul_key")
    assert.are.equal(1, r.code, r.err)
    assert.matches('result.inner: key "a\\u0000b" holds a NUL byte', r.err, 1, true)
    assert.are.equal(0, log.code, log.err)
  end)

  it("a key or a string that is not UTF-8 fails the call; the journal stays readable", function()
    for _, tool in ipairs { "bad_utf8_key", "bad_utf8_value" } do
      local r, log = runs(tool)
      assert.are.equal(1, r.code, r.err)
      assert.matches("not valid UTF-8", r.err, 1, true)
      assert.are.equal(0, log.code, log.err)
    end
  end)

  it("an error message quoting bytes that are not UTF-8 is journaled readable", function()
    local r, log = runs("bad_error")
    assert.are.equal(1, r.code, r.err)
    assert.are.equal(0, log.code, log.err)
    assert.matches("bad \u{FFFD} byte", log.out, 1, true)
  end)

  it("a table that contains itself fails the call at once (twice in itself: no 2^4096 steps)", function()
    local r, log = runs("cycle")
    assert.are.equal(1, r.code, r.err)
    assert.matches("result[1]: a table that contains itself cannot be converted to JSON", r.err, 1, true)
    assert.are.equal(0, log.code, log.err)
  end)

  it("a value nested deeper than a journal's line can be read fails the call", function()
    local r, log = runs("nested", ',"depth":3000')
    assert.are.equal(1, r.code, r.err)
    assert.matches("nested 3002 levels deep at its path, and a journal's message holds at most 2040",
                   r.err, 1, true)
    assert.are.equal(0, log.code, log.err)
    r, log = runs("nested", ',"depth":2039')
    assert.are.equal(1, r.code, r.err)
    assert.matches("nested 2041 levels deep", r.err, 1, true)
    r, log = runs("nested", ',"depth":2038') -- the deepest that fits: the journal reads back
    assert.are.equal(0, r.code, r.err)
    assert.are.equal(0, log.code, log.err)
  end)

  it("an --input nested deeper than its journal could be read is refused, naming --input", function()
    local function input(depth)
      return write(string.rep("[", depth) .. "1" .. string.rep("]", depth))
    end
    local plan = '[{"_tool":"echo","value":1,"_outputPath":"x"}]'
    local deep, fits = input(2041), input(2040)
    local j = tmp()
    local r = on("run", plan, "--input", "@" .. deep, "--journal", j)
    assert.are.equal(2, r.code, r.err)
    assert.matches("--input #1: nested 2041 levels deep: at most 2040", r.err, 1, true)
    assert.is_nil(io.open(j)) -- no journal that log and resume could not read
    r = on("run", plan, "--input", "@" .. fits, "--journal", j)
    assert.are.equal(0, r.code, r.err)
    local rr = cli.run_for(30, { "log", j })
    assert.are.equal(0, rr.code, rr.err)
    rr = cli.run_for(30, { "resume", j, "--tools", TOOLS })
    assert.are.equal(0, rr.code, rr.err)
    os.remove(j)
    os.remove(deep)
    os.remove(fits)
  end)

  it("JSON text nested deeper than 2047 levels is an error that says so", function()
    local r = on("check", string.rep("[", 3000) .. string.rep("]", 3000))
    assert.are.equal(2, r.code, r.err)
    assert.matches("maximum parsing depth reached near '[' (JSON text may nest 2047 levels)", r.err, 1, true)
  end)

  it("a plan nested deeper than its journal could be read is a validation error", function()
    local function plan(depth)
      return '[{"_tool":"echo","value":' .. string.rep("[", depth - 2) .. "1" ..
             string.rep("]", depth - 2) .. ',"_outputPath":"x"}]'
    end
    local r = on("run", plan(2041))
    assert.are.equal(2, r.code, r.err)
    assert.matches("the plan is nested 2041 levels deep: at most 2040", r.err, 1, true)
    local j = tmp()
    r = on("run", plan(2040), "--journal", j)
    assert.are.equal(0, r.code, r.err)
    local log = cli.run_for(30, { "log", j })
    assert.are.equal(0, log.code, log.err)
    os.remove(j)
  end)
end)

describe("_retry arithmetic", function()
  it("never waits NaN ms: 1100 attempts without delay all run, each again in 0 ms", function()
    local r = on("run", '[{"_tool":"always_fails","_outputPath":"x",' ..
                        '"_retry":{"attempts":1100,"delay_ms":0,"jitter":false}}]')
    assert.are.equal(1, r.code, r.err)
    assert.matches("attempt 1025 of 1100 failed: failure 1025; again in 0 ms", r.err, 1, true)
    assert.matches("attempt 1099 of 1100 failed: failure 1099; again in 0 ms", r.err, 1, true)
    assert.matches("failure 1100", r.err, 1, true)
    assert.is_nil(r.err:find("9223372036854775808", 1, true))
  end)

  it("caps a wait that backoff makes huge at max_delay_ms", function()
    local r = on("run", '[{"_tool":"always_fails","_outputPath":"x","_retry":{"attempts":1100,' ..
                        '"delay_ms":1,"backoff":1000,"max_delay_ms":0,"jitter":false}}]')
    assert.are.equal(1, r.code, r.err)
    assert.matches("attempt 1050 of 1100 failed: failure 1050; again in 0 ms", r.err, 1, true)
  end)

  it("refuses more than 1000000 attempts", function()
    local r = on("check", '[{"_tool":"echo","_retry":1000001}]')
    assert.are.equal(2, r.code, r.err)
    assert.matches("from 1 to 1000000", r.err, 1, true)
  end)
end)

describe("schemas that do not compile", function()
  local broken = {
    { '{"type":"object","properties":{"s":{"type":"string","pattern":"(["}}}', "/properties/s: pattern: invalid regular expression" },
    { '{"type":"objekt"}', '(root): type: unknown type "objekt"' },
    { '{"type":5}', "(root): type: must be a type name or an array of them" },
    { '{"properties":{"s":{"$ref":"#/definitions/nope"}}}', '/properties/s: $ref: "#/definitions/nope" points to nothing' },
    { '{"properties":{"s":{"minimum":"3"}}}', "/properties/s: minimum: must be a number" },
    { '{"required":"s"}', "(root): required: must be an array of strings" },
    { '{"properties":5}', "(root): properties: must be an object" },
    { '{"properties":{"s":{"enum":3}}}', "/properties/s: enum: must be an array" },
    { '{"properties":{"s":{"items":3}}}', "/properties/s: items: must be a schema or an array of schemas" },
    { '{"additionalProperties":"no"}', "(root): additionalProperties: must be a schema" },
  }

  for _, b in ipairs(broken) do
    it("a state schema " .. b[1] .. " in the context: check and run refuse the plan", function()
      local m = tmp()
      local plan = '{"context":[{"type":"state","data":{},"schema":{"type":"object","properties":{"s":' ..
                   b[1] .. '}}}],"plan":[{"_tool":"marker","file":"' .. m ..
                   '","value":123,"_outputPath":"s"}]}'
      for _, cmd in ipairs { "check", "run" } do
        local r = on(cmd, plan)
        assert.are.equal(2, r.code, cmd .. ": " .. r.err)
        assert.matches("context[0]: the schema is not usable: /properties/s" ..
                       b[2]:gsub("^%(root%)", ""), r.err, 1, true)
      end
      assert.are.same({}, lines(m)) -- nothing ran, nothing was written
    end)

    it("the same schema " .. b[1] .. " in a tool file, and for obelus schema, exit 2", function()
      local tools = cli.tmpfile("local cjson = require 'cjson'\nreturn { { name = 't', schema = cjson.decode([[" ..
                                b[1] .. "]]), run = function(c) return c.s end } }\n", ".lua")
      local plan = write('[{"_tool":"t","s":123}]')
      local r = cli.run_for(30, { "check", plan, "--tools", tools })
      assert.are.equal(2, r.code, r.err)
      assert.matches("the schema is not usable: " .. b[2], r.err, 1, true)
      local schema, inst = write(b[1]), write('{"s":123}')
      r = cli.run_for(30, { "schema", schema, inst })
      assert.are.equal(2, r.code, r.err)
      assert.matches("unusable schema: " .. b[2], r.err, 1, true)
      for _, f in ipairs { tools, plan, schema, inst } do os.remove(f) end
    end)
  end

  it("a good state schema still refuses 123 where it wants a string", function()
    local r = on("run", '{"context":[{"type":"state","data":{},"schema":{"type":"object",' ..
                        '"properties":{"s":{"type":"string"}}}}],"plan":[{"_tool":"echo","value":123,' ..
                        '"_outputPath":"s"}]}')
    assert.are.equal(1, r.code, r.err)
    assert.matches("the write breaks the state schema: /s: type", r.err, 1, true)
  end)
end)
