-- log_spec.lua -- the message log driven from Lua (obelus.core's log userdata): message
-- forms, output methods and their errors, instance views, time travel, snapshots, and
-- expression errors with their character positions (plan-format §1-4, 6).
local obelus = require "obelus"

local encode, null = obelus.encode, obelus.null

-- The document text at expr (as of `opts`), or "absent".
local function read(log, expr, opts)
  local v = log:resolve(expr, opts)
  if v == nil then return "absent" end
  return encode(v)
end

local function fails(f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return err
end

describe("the seeds' worked example", function()
  it("composes the output with the older context: newest wins where it writes", function()
    local log = obelus.log()
    assert.are.equal(0, log:append('{"type":"data","data":{"user":{"name":"Alex","status":"active"}}}'))
    assert.are.equal(1, log:append('{"type":"data","data":{"user":{"status":"inactive"}},' ..
      '"_call":{"_tool":"updateUserStatus","newStatus":"inactive","_outputPath":"†data.user.status"}}'))
    assert.are.equal("inactive", log:resolve("†data.user.status"))
    assert.are.equal("Alex", log:resolve("†data.user.name"))
    assert.are.same({ name = "Alex", status = "inactive" }, log:resolve("†data.user"))
    assert.are.equal('{"name":"Alex","status":"inactive"}', read(log, "†data.user"))
    assert.are.equal("active", log:resolve("†data.user.status", { at = 1 }))
  end)
end)

describe("log:append", function()
  it("returns 0-based positions and keeps each message as appended", function()
    local log = obelus.log()
    assert.are.equal(0, log:len())
    assert.are.equal(0, log:append { type = "state", data = { a = 1 } })
    assert.are.equal(1, log:append('{"type":"plan","plan":[]}'))
    assert.are.equal(2, log:len())
    assert.are.equal('{"data":{"a":1},"type":"state"}', encode(log:message(0)))
    assert.are.equal('{"type":"plan","plan":[]}', encode(log:message(1)))
    assert.is_nil(log:message(2))
    assert.is_nil(log:message(-1))
    assert.are.equal("obelus.log (2 messages)", tostring(log))
  end)

  it("refuses malformed messages and appends nothing", function()
    local log = obelus.log()
    log:append { type = "state", data = { a = 1 } }
    assert.matches("a message must be a JSON object", fails(log.append, log, obelus.array {}), 1, true)
    assert.matches('"type" must be a string', fails(log.append, log, { type = 1 }), 1, true)
    assert.matches("is not a kind name", fails(log.append, log, { type = "data", kind = "9x", data = {} }), 1, true)
    assert.matches("invalid JSON: line 1", fails(log.append, log, '{"type":'), 1, true)
    assert.matches("message.data.f: cannot convert a function", fails(log.append, log, { data = { f = print } }), 1, true)
    assert.are.equal(1, log:len())
    assert.are.equal('{"a":1}', read(log, "†state"))
  end)
end)

describe("context messages", function()
  it("compose in every accepted form", function()
    local log = obelus.log()
    log:append { type = "data", kind = "state", data = { a = 1 } }          -- canonical
    log:append { type = "state", data = { b = { c = 1 } } }                 -- type shorthand
    log:append('{"type":"state","data":{"b":{"d":2}}}')                     -- deep merge
    log:append { type = "input", customerId = "c1", _note = "meta" }        -- data-less shorthand
    log:append { data = { x = 1 } }                                         -- no type: kind data
    log:append { type = "data", data = { y = 2 } }                          -- missing kind = data
    assert.are.equal('{"a":1,"b":{"c":1,"d":2}}', read(log, "†state"))
    assert.are.equal('{"customerId":"c1"}', read(log, "†input"))
    assert.are.equal("c1", log:resolve("†input.customerId"))
    assert.is_nil(log:resolve("†input._note"))
    assert.are.equal('{"x":1,"y":2}', read(log, "†data"))
    assert.is_nil(log:resolve("†other"))
  end)

  it("may name their own output method", function()
    local log = obelus.log()
    log:append { type = "state", data = { cfg = { a = 1, b = 2 }, list = { 1 } } }
    log:append { type = "state", data = { cfg = { c = 3 } }, _outputMethod = "assign" }
    assert.are.equal('{"cfg":{"c":3},"list":[1]}', read(log, "†state"))
    log:append { type = "state", data = { list = { 2 }, cfg = { d = 4 } } } -- merge: arrays replace
    assert.are.equal('{"cfg":{"c":3,"d":4},"list":[2]}', read(log, "†state"))
    log:append { type = "state", data = { z = 1 }, _outputMethod = "set" }
    assert.are.equal('{"z":1}', read(log, "†state"))
    assert.matches("push onto object", fails(log.append, log, { type = "state", data = 1, _outputMethod = "push" }), 1, true)
    assert.matches("_outputMethod", fails(log.append, log, { type = "state", data = {}, _outputMethod = "nope" }), 1, true)
    assert.are.equal(4, log:len())
  end)
end)

describe("log:append_output", function()
  local function fresh()
    local log = obelus.log()
    log:append { type = "state", data = { s = "str", n = 5, o = { x = { p = 1 } }, l = obelus.array { 1 } } }
    return log
  end

  it("writes with every output method", function()
    local log = fresh()
    assert.are.equal(1, log:append_output { path = "o", method = "merge", value = { x = { q = 2 }, y = 3 } })
    assert.are.equal('{"x":{"p":1,"q":2},"y":3}', read(log, "†state.o"))
    log:append_output { path = "o", method = "assign", value = { x = { r = 1 } } }
    assert.are.equal('{"x":{"r":1},"y":3}', read(log, "†state.o"))
    log:append_output { path = "l", method = "push", value = obelus.array { 2, 3 } }
    log:append_output { path = "l", method = "concat", value = obelus.array { 4, 5 } }
    assert.are.equal("[1,[2,3],4,5]", read(log, "†state.l"))
    log:append_output { path = "l.4", value = 6 }  -- the index equal to the length appends
    log:append_output { path = "l.0", value = 0 }
    assert.are.equal("[0,[2,3],4,5,6]", read(log, "†state.l"))
    log:append_output { path = "s", value = null }  -- set
    assert.are.equal(null, log:resolve("†state.s"))
    log:append_output { path = "fresh.0.deep", value = true } -- missing intermediates: objects
    assert.are.equal('{"0":{"deep":true}}', read(log, "†state.fresh"))
    log:append_output { path = "p", method = "push", value = 1 }    -- absent counts as []
    log:append_output { path = "c", method = "concat", value = obelus.array { 1 } }
    log:append_output { path = "a", method = "assign", value = { k = 1 } } -- absent counts as {}
    assert.are.equal("[1]", read(log, "†state.p"))
    assert.are.equal("[1]", read(log, "†state.c"))
    assert.are.equal('{"k":1}', read(log, "†state.a"))
    log:append_output { kind = "result", path = '["a b"].c', value = 1 }
    assert.are.equal('{"a b":{"c":1}}', read(log, "†result"))
    log:append_output { kind = "whole", path = "", value = obelus.array {} }
    assert.are.equal("[]", read(log, "†whole"))
  end)

  it("records the output message in its canonical form", function()
    local log = obelus.log()
    log:append_output { kind = "data", instance = "i1", path = "user.status", method = "merge",
      value = "inactive", call = { _tool = "updateUserStatus", newStatus = "inactive" } }
    local m = log:message(0)
    assert.are.equal("data", m.type)
    assert.are.equal("data", m.kind)
    assert.are.equal("i1", m._instance)
    assert.are.same({ user = { status = "inactive" } }, m.data)
    assert.are.equal("user.status", m._path)
    assert.are.equal("merge", m._outputMethod)
    assert.are.same({ _tool = "updateUserStatus", newStatus = "inactive" }, m._call)
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$", m._date)
    -- and it replays: appended again as JSON, it writes the same value
    local again = obelus.log()
    again:append(encode(m))
    assert.are.equal("inactive", again:resolve("†data.user.status", { instance = "i1" }))
  end)

  it("refuses each write its method cannot make, appending nothing", function()
    local cases = {
      { { path = "s.x", value = 1 }, "cannot write through string" },
      { { path = "n", method = "push", value = 1 }, "push onto integer" },
      { { path = "n", method = "concat", value = obelus.array { 1 } }, "concat onto integer" },
      { { path = "l", method = "concat", value = 1 }, "concat needs an array" },
      { { path = "o", method = "assign", value = obelus.array {} }, "assign needs an object" },
      { { path = "n", method = "assign", value = { a = 1 } }, "assign onto integer" },
      { { path = "l.5", value = 1 }, "past the end of the array" },
      { { path = "l.x", value = 1 }, "not an array index" },
      { { path = "l.01", value = 1 }, "not an array index" },
      { { path = "a", method = "bogus", value = 1 }, '"method" must be one of' },
      { { path = "a..b", value = 1 }, "empty path segment at character 2" },
      { { path = "a", kind = "1x", value = 1 }, "not a kind name" },
      { { path = "a" }, '"value" is required' },
      { { value = 1 }, '"path" must be a string' },
      { { path = "a", value = print }, "value: cannot convert a function" },
      { { path = "a", value = 1, call = { f = print } }, "call.f: cannot convert a function" },
      { { path = "a", value = 1, instance = 7 }, '"instance" must be a string' },
    }
    for _, case in ipairs(cases) do
      local log = fresh()
      local before = read(log, "†state")
      assert.matches(case[2], fails(log.append_output, log, case[1]), 1, true)
      assert.are.equal(1, log:len())
      assert.are.equal(before, read(log, "†state"))
    end
  end)
end)

describe("instance views", function()
  local function seeded()
    local log = obelus.log()
    log:append { type = "input", data = { lang = "en", tone = "formal" } }
    log:append { type = "input", _instance = "①", data = { tone = "casual" } }
    log:append { type = "state", data = { list = obelus.array { 1, 2 }, cfg = { mode = "g" } } }
    return log
  end

  it("deep-merge the global document with the instance's, the instance winning", function()
    local log = seeded()
    assert.are.equal('{"lang":"en","tone":"casual"}', read(log, "†input", { instance = "①" }))
    assert.are.equal("en", log:resolve("†input.lang", { instance = "①" }))
    assert.are.equal('{"lang":"en","tone":"formal"}', read(log, "†input"))
  end)

  it("fall back to the global document for an instance with nothing of its own", function()
    local log = seeded()
    assert.are.equal('{"lang":"en","tone":"formal"}', read(log, "†input", { instance = "②" }))
    assert.are.equal('{"cfg":{"mode":"g"},"list":[1,2]}', read(log, "†state", { instance = "②" })) -- built in Lua: sorted
  end)

  it("compute an instance write from the view, leaving the global document alone", function()
    local log = seeded()
    log:append_output { instance = "①", path = "list", method = "push", value = 3 }
    assert.are.equal("[1,2,3]", read(log, "†state.list", { instance = "①" }))
    assert.are.equal("[1,2]", read(log, "†state.list"))
    assert.are.equal("[1,2]", read(log, "†state.list", { instance = "②" }))
    log:append_output { path = "list", method = "push", value = 4 } -- a later global write
    assert.are.equal("[1,2,4]", read(log, "†state.list"))
    assert.are.equal("[1,2,3]", read(log, "†state.list", { instance = "①" }))
  end)

  it("keep two instances writing the same path apart", function()
    local log = seeded()
    log:append_output { instance = "①", path = "cfg.mode", value = "one" }
    log:append_output { instance = "②", path = "cfg.mode", value = "two" }
    assert.are.equal("one", log:resolve("†state.cfg.mode", { instance = "①" }))
    assert.are.equal("two", log:resolve("†state.cfg.mode", { instance = "②" }))
    assert.are.equal("g", log:resolve("†state.cfg.mode"))
    log:append_output { path = "cfg.extra", value = 1 } -- global keys still show through
    assert.are.equal('{"mode":"one","extra":1}', read(log, "†state.cfg", { instance = "①" }))
  end)
end)

describe("time travel", function()
  it("at = N sees exactly the first N messages, for every N", function()
    local log = obelus.log()
    log:append { type = "state", data = { a = 1, list = obelus.array { 1 } } }
    log:append_output { path = "b", value = 2 }
    log:append_output { path = "list", method = "push", value = 2 }
    log:append { type = "state", data = { a = { x = 1 } } }
    log:append_output { path = "a.y", value = true }
    log:append { type = "state", _instance = "i1", data = { a = { x = 9 } } }
    local global = {
      [0] = "absent",
      '{"a":1,"list":[1]}',
      '{"a":1,"list":[1],"b":2}',
      '{"a":1,"list":[1,2],"b":2}',
      '{"a":{"x":1},"list":[1,2],"b":2}',
      '{"a":{"x":1,"y":true},"list":[1,2],"b":2}',
      '{"a":{"x":1,"y":true},"list":[1,2],"b":2}',
    }
    for n = 0, log:len() do
      assert.are.equal(global[n], read(log, "†state", { at = n }), "at = " .. n)
    end
    assert.are.equal(global[6], read(log, "†state"))
    assert.are.equal(global[6], read(log, "†state", { at = 1000 })) -- past the end: all of it
    assert.are.equal(global[5], read(log, "†state", { at = 5, instance = "i1" }))
    assert.are.equal('{"a":{"x":9,"y":true},"list":[1,2],"b":2}', read(log, "†state", { at = 6, instance = "i1" }))
    assert.are.equal("absent", read(log, "†state.b", { at = 1 }))
    assert.are.equal("2", read(log, "†state.b", { at = 2 }))
  end)

  it("rejects an `at` that is not a count", function()
    local log = obelus.log()
    assert.matches('"at" must be an integer', fails(log.resolve, log, "†state", { at = -1 }), 1, true)
    assert.matches('"at" must be an integer', fails(log.resolve, log, "†state", { at = 1.5 }), 1, true)
  end)
end)

describe("values handed out", function()
  it("are snapshots: changing them never changes the log", function()
    local log = obelus.log()
    log:append { type = "state", data = { list = obelus.array { 1 }, o = { k = "v" } } }
    local v = log:resolve("†state")
    v.list[1] = 99
    v.list[2] = 100
    v.o.k = nil
    v.new = true
    assert.are.equal('{"list":[1],"o":{"k":"v"}}', read(log, "†state"))
    local m = log:message(0)
    m.data.list[1] = 42
    m.type = "changed"
    assert.are.equal('{"data":{"list":[1],"o":{"k":"v"}},"type":"state"}', encode(log:message(0)))
  end)

  it("follow || and && with null, false and 0 counting as present", function()
    local log = obelus.log()
    log:append { type = "state", data = { n = null, f = false, z = 0, a = "A" } }
    assert.are.equal(null, log:resolve("†state.n || †state.a"))
    assert.are.equal(false, log:resolve("†state.f || †state.a"))
    assert.are.equal(0, log:resolve("†state.missing || †state.z"))
    assert.are.equal("A", log:resolve("†state.z && †state.a"))
    assert.is_nil(log:resolve("†state.a && †state.missing"))
    assert.is_nil(log:resolve("†state.missing || †other.x"))
  end)
end)

describe("malformed expressions", function()
  it("raise an error naming the character position", function()
    local log = obelus.log()
    local cases = {
      { "†state..x", 7 }, { "†state.a ||", 11 }, { "†", 1 }, { "†1abc", 1 },
      { "†state.a | †b", 9 }, { "state.a", 0 }, { "  †state.a.[0]", 11 }, { '†state["x', 6 },
    }
    for _, case in ipairs(cases) do
      local err = fails(log.resolve, log, case[1])
      assert.matches("at character " .. case[2] .. " ", err, 1, true)
    end
  end)
end)

describe("closing a log", function()
  it("works with <close> and by hand, and a closed log refuses use", function()
    local kept
    do
      local log <close> = obelus.log()
      log:append { type = "state", data = { a = 1 } }
      kept = log
    end
    assert.matches("the log is closed", fails(kept.len, kept), 1, true)
    assert.are.equal("obelus.log (closed)", tostring(kept))
    local log = obelus.log()
    log:close()
    log:close() -- twice is harmless
    assert.matches("the log is closed", fails(log.resolve, log, "†state"), 1, true)
  end)
end)
