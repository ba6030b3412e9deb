-- bridge_fidelity_spec.lua -- JSON <-> Lua through obelus.core keeps every value exactly
-- (plan-format §9): null, integers vs floats, arrays vs objects, key order, bytes; and refuses what
-- JSON cannot hold with a message that names the place.
local obelus = require "obelus"
local core = require "obelus.core"

local decode, encode = obelus.decode, obelus.encode

local function round(text) return encode(decode(text)) end

local function encode_error(value)
  local ok, err = pcall(encode, value)
  assert.is_false(ok, "encode should have failed")
  return err
end

describe("null", function()
  it("is the light userdata NULL, the same value as cjson.null", function()
    local cjson = require "cjson"
    assert.are.equal(cjson.null, obelus.null)
    assert.are.equal("userdata", type(obelus.null))
    assert.are.equal(obelus.null, decode("null"))
    assert.are.equal(obelus.null, decode("[null]")[1])
    assert.are.equal(obelus.null, decode('{"a":null}').a)
  end)

  it("encodes as null wherever it is, and cjson reads it back as its own null", function()
    assert.are.equal("null", encode(obelus.null))
    assert.are.equal('{"a":null,"b":[null]}', encode({ a = obelus.null, b = obelus.array { obelus.null } }))
    local cjson = require "cjson"
    assert.are.equal(cjson.null, cjson.decode(encode({ x = obelus.null })).x)
    assert.are.equal('{"x":null}', encode(cjson.decode('{"x":null}')))
  end)
end)

describe("numbers", function()
  it("keep integers and floats apart", function()
    assert.are.equal("integer", math.type(decode("1")))
    assert.are.equal("float", math.type(decode("1.0")))
    assert.are.equal("1", encode(1))
    assert.are.equal("1.0", encode(1.0))
    assert.are.equal("[1,1.0,2,2.5]", round("[1,1.0,2,2.5]"))
    assert.are.equal("float", math.type(decode("1e2")))
    assert.are.equal("100.0", round("1e2"))
  end)

  it("carry the integer extremes exactly", function()
    assert.are.equal(math.maxinteger, decode("9223372036854775807"))
    assert.are.equal(math.mininteger, decode("-9223372036854775808"))
    assert.are.equal("9223372036854775807", encode(math.maxinteger))
    assert.are.equal("-9223372036854775808", encode(math.mininteger))
    assert.are.equal("[9223372036854775807,-9223372036854775808]",
      round("[9223372036854775807,-9223372036854775808]"))
  end)

  it("keep -0.0, tiny and huge floats", function()
    local z = decode("-0.0")
    assert.are.equal("float", math.type(z))
    assert.are.equal(-math.huge, 1 / z)
    assert.are.equal("-0.0", encode(-0.0))
    assert.are.equal(1e300, decode("1e300"))
    assert.are.equal("1e+300", encode(1e300))
    assert.are.equal(5e-324, decode(encode(5e-324))) -- the smallest subnormal
    assert.are.equal(-2.2250738585072014e-308, decode(encode(-2.2250738585072014e-308)))
    assert.are.equal(0.1, decode(encode(0.1)))
    assert.are.equal("0.1", encode(0.1))
    assert.are.equal(1 / 3, decode(encode(1 / 3)))
    assert.are.equal("2.0", encode(2.0))
  end)

  it("refuse NaN and infinities, naming where", function()
    assert.matches("value.x: cannot convert NaN to JSON", encode_error({ x = 0 / 0 }), 1, true)
    assert.matches("value[2]: cannot convert inf to JSON", encode_error({ 1, math.huge }), 1, true)
    assert.matches("value: cannot convert -inf to JSON", encode_error(-math.huge), 1, true)
  end)
end)

describe("arrays and objects", function()
  it("tell an empty array from an empty object in both directions", function()
    assert.are.equal("[]", round("[]"))
    assert.are.equal("{}", round("{}"))
    assert.are.equal('{"a":[],"o":{},"l":[[],{}]}', round('{"a":[],"o":{},"l":[[],{}]}'))
    assert.is_true(obelus.is_array(decode("[]")))
    assert.is_false(obelus.is_array(decode("{}")))
    assert.are.equal("{}", encode({}))
    assert.are.equal("[]", encode(obelus.array()))
    assert.are.equal("[]", encode(obelus.array {}))
  end)

  it("keeps a decoded array an array when Lua empties it", function()
    local a = decode("[1,2,3]")
    a[3], a[2], a[1] = nil, nil, nil
    assert.are.equal("[]", encode(a))
    local o = decode('{"x":1}')
    o.x = nil
    assert.are.equal("{}", encode(o))
  end)

  it("gives every array one shared metatable, exposed as array_mt", function()
    local v = decode('[[1],{"a":[]}]')
    assert.are.equal(obelus.array_mt, getmetatable(v))
    assert.are.equal(core.array_mt, getmetatable(v[1]))
    assert.are.equal(obelus.array_mt, getmetatable(v[2].a))
    -- an object carries its key order as its metatable: never the array one
    assert.are_not.equal(obelus.array_mt, getmetatable(v[2]))
    assert.is_false(obelus.is_array(v[2]))
    local t = {}
    assert.are.equal(t, obelus.array(t))
    assert.are.equal(obelus.array_mt, getmetatable(t))
    assert.has_error(function() obelus.array(setmetatable({}, {})) end)
  end)

  it("turns a plain table with keys exactly 1..n into an array", function()
    assert.are.equal("[1,2,3]", encode({ 1, 2, 3 }))
    assert.are.equal('["a",{"b":[true]}]', encode({ "a", { b = { true } } }))
    local t = {}
    for i = 10, 1, -1 do t[i] = i end -- filled backwards: the keys sit in the hash part
    assert.are.equal("[1,2,3,4,5,6,7,8,9,10]", encode(t))
  end)

  it("keeps the key order of a decoded object", function()
    local text = '{"zeta":1,"alpha":2,"mid":{"y":1,"x":2,"w":[{"c":1,"b":2,"a":3}]},"beta":3}'
    assert.are.equal(text, round(text))
    local wide = {}
    for i = 40, 1, -1 do wide[#wide + 1] = string.format('"k%02d":%d', i, i) end
    local wtext = "{" .. table.concat(wide, ",") .. "}"
    assert.are.equal(wtext, round(wtext))
  end)

  it("puts keys added in Lua after the original ones, sorted bytewise", function()
    local v = decode('{"z":1,"m":2,"a":3}')
    v.y, v.b, v.B = 4, 5, 6
    assert.are.equal('{"z":1,"m":2,"a":3,"B":6,"b":5,"y":4}', encode(v))
    v.m = nil -- a removed key leaves the order of the others alone
    assert.are.equal('{"z":1,"a":3,"B":6,"b":5,"y":4}', encode(v))
    v.m = 7 -- and comes back where it was
    assert.are.equal('{"z":1,"m":7,"a":3,"B":6,"b":5,"y":4}', encode(v))
  end)

  it("sorts the keys of a table built in Lua bytewise", function()
    assert.are.equal('{"":0,"A":1,"a":2,"aa":3,"b":4,"\xc3\xa9":5}',
      encode({ b = 4, aa = 3, a = 2, A = 1, [""] = 0, ["\xc3\xa9"] = 5 }))
  end)

  it("keeps records in an array apart though they share a shape", function()
    local v = decode('[{"n":1,"k":2},{"n":3,"k":4},{"k":5,"n":6}]')
    v[2].extra = true
    assert.are.equal('[{"n":1,"k":2},{"n":3,"k":4,"extra":true},{"k":5,"n":6}]', encode(v))
  end)

  it("hands out snapshots: decoding twice gives independent tables", function()
    local text = '{"a":[1,{"b":2}]}'
    local one, two = decode(text), decode(text)
    one.a[2].b = 99
    assert.are.equal(2, two.a[2].b)
    assert.are_not.equal(one.a, two.a)
  end)
end)

describe("strings", function()
  it("hold NUL bytes", function()
    local s = decode('"a\\u0000b"')
    assert.are.equal(3, #s)
    assert.are.equal("a\0b", s)
    assert.are.equal('"a\\u0000b"', encode("a\0b"))
    assert.are.equal('{"k":"\\u0000"}', round('{"k":"\\u0000"}'))
    -- not in a key: no JSON reader obelus uses could read it back (jansson refuses it)
    assert.matches('value: key "k\\u0000" holds a NUL byte', encode_error({ ["k\0"] = 1 }), 1, true)
  end)

  it("carry UTF-8 of every length, including 4-byte characters and surrogate pairs", function()
    local s = "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" -- A é € 😀
    assert.are.equal(s, decode('"A\\u00e9\\u20ac\\ud83d\\ude00"'))
    assert.are.equal(s, decode('"' .. s .. '"'))
    assert.are.equal('"' .. s .. '"', encode(s))
    assert.are.equal('{"' .. s .. '":"' .. s .. '"}', encode({ [s] = s }))
    assert.are.equal("\xf4\x8f\xbf\xbf", decode('"\\udbff\\udfff"')) -- U+10FFFF
  end)

  it("come back with exactly the escapes JSON needs", function()
    local all = {}
    for b = 0, 127 do all[#all + 1] = string.char(b) end
    local s = table.concat(all)
    local text = encode(s)
    assert.are.equal(s, decode(text))
    assert.matches('^"\\u0000\\u0001', text)
    assert.matches('\\b\\t\\n\\u000b\\f\\r', text, 1, true)
    assert.matches(' !\\"#', text, 1, true)
    assert.matches('Z[\\\\]', text, 1, true)
    assert.matches('/', text, 1, true) -- "/" needs no escape
    assert.are.equal('"/\\"\\\\"', round('"\\/\\"\\\\"'))
  end)

  it("refuse bytes that are not UTF-8, naming where", function()
    assert.matches('value.s: cannot convert a string that is not valid UTF-8 to JSON (byte 2)',
      encode_error({ s = "ok\xff" }), 1, true)
    assert.matches("not valid UTF-8", encode_error({ "\xed\xa0\x80" }), 1, true) -- a surrogate
    assert.matches("not valid UTF-8", encode_error("\xc0\x80"), 1, true)         -- overlong NUL
    assert.matches("not valid UTF-8", encode_error("\xf4\x90\x80\x80"), 1, true) -- above U+10FFFF
    assert.matches('value: key "\xff" is not valid UTF-8', encode_error({ ["\xff"] = 1 }), 1, true)
  end)
end)

describe("values JSON cannot hold", function()
  it("are refused with the place in the message", function()
    local cases = {
      { { result = { items = { 1, 2, print } } }, "value.result.items[3]: cannot convert a function to JSON" },
      { { co = coroutine.create(print) }, "value.co: cannot convert a thread to JSON" },
      { { f = io.stdout }, "value.f: cannot convert a userdata to JSON" },
      { { ["a b"] = { ["x.y"] = print } }, 'value["a b"]["x.y"]: cannot convert a function' },
      { print, "value: cannot convert a function to JSON" },
      { nil, "value: cannot convert nil to JSON" },
    }
    for _, case in ipairs(cases) do
      assert.matches(case[2], encode_error(case[1]), 1, true)
    end
  end)

  it("include mixed, sparse and oddly keyed tables", function()
    assert.matches("value.m: cannot convert a table with both", encode_error({ m = { 1, 2, x = 3 } }), 1, true)
    assert.matches("value[1]: cannot convert a table with both", encode_error({ { x = 3, 1 } }), 1, true)
    assert.matches("value.s: cannot convert a sparse array", encode_error({ s = { [1] = 1, [3] = 3 } }), 1, true)
    assert.matches("value.s: cannot convert a sparse array", encode_error({ s = { [2] = 2 } }), 1, true)
    assert.matches("value.s: cannot convert a sparse array", encode_error({ s = { [0] = 0, 1 } }), 1, true)
    assert.matches("value: cannot convert a table with key 1.5", encode_error({ [1.5] = 1 }), 1, true)
    assert.matches("value: cannot convert a table with a table key", encode_error({ [{}] = 1 }), 1, true)
    assert.matches("value: cannot convert a table with a boolean key", encode_error({ [true] = 1 }), 1, true)
  end)

  it("include arrays with holes or keys other than 1..n", function()
    assert.matches("value.a[2]: nil in an array of 3 elements",
      encode_error({ a = obelus.array { 1, nil, 3 } }), 1, true)
    local a = obelus.array { 1, 2 }
    a.name = "x"
    assert.matches('value: cannot convert an array with key "name"', encode_error(a), 1, true)
  end)

  it("include cycles and nesting deeper than 4096 levels", function()
    local t = {}
    t.self = t
    local err = encode_error(t)
    assert.matches("^value%.self: a table that contains itself cannot be converted to JSON", err)
    -- at once: a table holding itself twice would otherwise take 2^4096 steps
    local twice = {}
    twice[1], twice[2] = twice, twice
    assert.matches("value[1]: a table that contains itself", encode_error(twice), 1, true)
    local chain = {}
    for _ = 1, 5000 do chain = { x = chain } end
    assert.matches("nested deeper than 4096 levels", encode_error(chain), 1, true)
    local deep = {}
    for _ = 2, 4096 do deep = { deep } end
    -- 4095 arrays around an empty object: 4096 levels, the most a value may have
    assert.is_true(string.rep("[", 4095) .. "{}" .. string.rep("]", 4095) == encode(deep))
    assert.matches("value" .. string.rep("[1]", 20), encode_error({ deep }), 1, true)
  end)

  it("leave the value untouched and the module usable after an error", function()
    local v = { a = { 1, 2 }, b = print }
    encode_error(v)
    assert.are.same({ 1, 2 }, v.a)
    v.b = nil
    assert.are.equal('{"a":[1,2]}', encode(v))
  end)
end)

describe("decode", function()
  it("reports malformed JSON with the parser's position", function()
    local ok, err = pcall(decode, '{"a": [1, 2,]}')
    assert.is_false(ok)
    assert.matches("invalid JSON: line 1, column", err, 1, true)
    assert.has_error(function() decode("") end)
    assert.has_error(function() decode('"\\ud800"') end) -- a lone surrogate
  end)

  it("pretty-prints on request", function()
    assert.are.equal('{\n  "a": [\n    1\n  ]\n}', encode(decode('{"a":[1]}'), true))
  end)
end)
