-- bridge_property_spec.lua -- property tests of the bridge: thousands of random JSON texts
-- (seeded; set OBELUS_SEED to replay) come back from decode+encode in their canonical form,
-- and decoded values changed in Lua encode with their original keys first.
local obelus = require "obelus"

local SEED = tonumber(os.getenv("OBELUS_SEED")) or (os.time() % 1000000)
local DOCS = 2500
local MAX_DEPTH = 6

-- A model of each generated value, kept beside its texts:
--   { t = "null" | "true" | "false" }, { t = "int", v = n }, { t = "real", v = x },
--   { t = "str", v = utf8_bytes }, { t = "arr", items }, { t = "obj", keys = {...}, vals = {k = node} }

local R = math.random

local function pick(list) return list[R(#list)] end

-- Bytewise order, spelled out so that no locale can change it.
local function bytes_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- --- generating ---------------------------------------------------------------

local SPECIAL_CODEPOINTS = {
  0x00, 0x01, 0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x1F, 0x22, 0x2F, 0x5C, 0x7F, 0x80, 0xE9, 0x7FF,
  0x800, 0x20AC, 0x2028, 0x2029, 0xD7FF, 0xE000, 0xFEFF, 0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF,
}

local function random_codepoint(allow_nul)
  local r = R(10)
  local cp
  if r <= 5 then cp = R(0x20, 0x7E)                 -- printable ASCII
  elseif r == 6 then cp = pick(SPECIAL_CODEPOINTS)
  elseif r == 7 then cp = R(0x80, 0x7FF)            -- 2 bytes
  elseif r == 8 then cp = R(0x800, 0xFFFF)          -- 3 bytes
  elseif r == 9 then cp = R(0x10000, 0x10FFFF)      -- 4 bytes
  else cp = R(0, 0x1F) end                          -- control characters
  if cp >= 0xD800 and cp <= 0xDFFF then cp = 0xFFFD end -- surrogates are not characters
  if cp == 0 and not allow_nul then cp = 0x30 end
  return cp
end

local function random_string(allow_nul, maxlen)
  local cps = {}
  local n = R(0, 4) == 0 and 0 or R(1, maxlen or 12)
  for i = 1, n do cps[i] = random_codepoint(allow_nul) end
  return utf8.char(table.unpack(cps)), cps
end

local INT_EXTREMES = { 0, 1, -1, math.maxinteger, math.mininteger, math.maxinteger - 1,
  math.mininteger + 1, 1 << 53, -(1 << 53), 1000000 }
local REAL_EXTREMES = { 0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e300, -1e300, 1.7976931348623157e308,
  2.2250738585072014e-308, 5e-324, -5e-324, 1e-10, 123456789012345680.0, 2 ^ 63, 1 / 3 }

local function random_real()
  local r = R(4)
  if r == 1 then return pick(REAL_EXTREMES) end
  if r == 2 then return (R(0, 1) == 0 and -1 or 1) * R(0, 100000) + 0.0 end -- integral floats
  if r == 3 then return (R() - 0.5) * 10 ^ R(-30, 30) end
  return R(-1000000, 1000000) / 1000
end

local gen

local function gen_object(depth)
  local n = R(6) == 1 and R(9, 24) or R(0, 6) -- some wider than the small-object form
  local keys, vals, seen = {}, {}, {}
  for _ = 1, n do
    local k = R(3) == 1 and pick { "a", "b", "c", "id", "name", "x", "" } or random_string(false, 6)
    if not seen[k] then
      seen[k] = true
      keys[#keys + 1] = k
      vals[k] = gen(depth + 1)
    end
  end
  return { t = "obj", keys = keys, vals = vals }
end

function gen(depth)
  local r = R(depth >= MAX_DEPTH and 8 or 11)
  if r == 1 then return { t = "null" }
  elseif r == 2 then return { t = R(2) == 1 and "true" or "false" }
  elseif r <= 4 then
    local v = R(2) == 1 and pick(INT_EXTREMES) or R(math.mininteger, math.maxinteger) // math.tointeger(10 ^ R(0, 18))
    return { t = "int", v = v }
  elseif r <= 6 then return { t = "real", v = random_real() }
  elseif r <= 8 then return { t = "str", v = random_string(true) }
  elseif r <= 9 then
    local items = {}
    for i = 1, (R(5) == 1 and 0 or R(1, 6)) do items[i] = gen(depth + 1) end
    return { t = "arr", items = items }
  else
    return gen_object(depth)
  end
end

-- --- writing: a noisy text a parser must accept, and the canonical one ------

local function ws()
  if R(3) ~= 1 then return "" end
  local out = {}
  for i = 1, R(3) do out[i] = pick { " ", "\t", "\n", "\r" } end
  return table.concat(out)
end

local SHORT_ESCAPES = { [0x08] = "\\b", [0x09] = "\\t", [0x0A] = "\\n", [0x0C] = "\\f", [0x0D] = "\\r",
  [0x22] = '\\"', [0x5C] = "\\\\", [0x2F] = "\\/" }

local function u_escape(cp)
  local s = string.format("\\u%04x", cp)
  return R(2) == 1 and s or s:upper():gsub("^\\U", "\\u")
end

local function noisy_string(s)
  local out = {}
  for _, cp in utf8.codes(s) do
    local r = R(4)
    if cp >= 0x10000 and r == 1 then -- a surrogate pair
      local v = cp - 0x10000
      out[#out + 1] = u_escape(0xD800 + (v >> 10)) .. u_escape(0xDC00 + (v & 0x3FF))
    elseif cp < 0x10000 and r == 1 then
      out[#out + 1] = u_escape(cp)
    elseif SHORT_ESCAPES[cp] and (r == 2 or cp < 0x20 or cp == 0x22 or cp == 0x5C) then
      out[#out + 1] = SHORT_ESCAPES[cp]
    elseif cp < 0x20 or cp == 0x22 or cp == 0x5C then
      out[#out + 1] = u_escape(cp)
    else
      out[#out + 1] = utf8.char(cp)
    end
  end
  return '"' .. table.concat(out) .. '"'
end

-- The C printer's rules: " \ and the control characters escaped (short forms
-- where JSON has them, else \u00xx lowercase), every other byte as it is.
local CANON_ESCAPES = { [0x08] = "\\b", [0x09] = "\\t", [0x0A] = "\\n", [0x0C] = "\\f", [0x0D] = "\\r",
  [0x22] = '\\"', [0x5C] = "\\\\" }

local function canonical_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local b = c:byte()
    if CANON_ESCAPES[b] then return CANON_ESCAPES[b] end
    if b < 0x20 then return string.format("\\u%04x", b) end
    return c -- DEL (0x7f) is a %c but needs no escape
  end) .. '"'
end

local function canonical_real(x)
  local s
  for prec = 15, 17 do
    s = string.format("%." .. prec .. "g", x)
    if tonumber(s) == x then break end
  end
  if not s:find("[%.eEn]") then s = s .. ".0" end
  return s
end

local function noisy_real(x)
  local s = string.format(pick { "%.17g", "%.17e", "%.20g" }, x)
  if not s:find("[%.eE]") then s = s .. pick { ".0", ".00", "e0", "E+0" } end
  if R(3) == 1 then s = s:gsub("e", "E") end
  return s
end

local function write(node, noisy)
  local t = node.t
  if t == "null" or t == "true" or t == "false" then return t end
  if t == "int" then
    if noisy and node.v == 0 and R(2) == 1 then return "-0" end
    return string.format("%d", node.v)
  end
  if t == "real" then return noisy and noisy_real(node.v) or canonical_real(node.v) end
  if t == "str" then return noisy and noisy_string(node.v) or canonical_string(node.v) end
  local parts = {}
  if t == "arr" then
    for i, item in ipairs(node.items) do
      parts[i] = noisy and (ws() .. write(item, true) .. ws()) or write(item, false)
    end
    return "[" .. table.concat(parts, ",") .. (noisy and #parts == 0 and ws() or "") .. "]"
  end
  for i, k in ipairs(node.keys) do
    if noisy then
      parts[i] = ws() .. noisy_string(k) .. ws() .. ":" .. ws() .. write(node.vals[k], true) .. ws()
    else
      parts[i] = canonical_string(k) .. ":" .. write(node.vals[k], false)
    end
  end
  return "{" .. table.concat(parts, ",") .. (noisy and #parts == 0 and ws() or "") .. "}"
end

-- --- changing a decoded value in Lua, and the model with it -----------------

-- A Lua value built by the tool (no recorded order), and its model (sorted keys).
local function fresh_value()
  local r = R(3)
  if r == 1 then
    local v = R(-5, 5)
    return v, { t = "int", v = v }
  end
  if r == 2 then return obelus.array { true, obelus.null }, { t = "arr", items = { { t = "true" }, { t = "null" } } } end
  return { zeta = 1, alpha = "x", Mid = false },
    { t = "obj", keys = { "Mid", "alpha", "zeta" },
      vals = { zeta = { t = "int", v = 1 }, alpha = { t = "str", v = "x" }, Mid = { t = "false" } } }
end

local function mutate(lv, node)
  if node.t == "arr" then
    for i, item in ipairs(node.items) do mutate(lv[i], item) end
    if R(4) == 1 then
      local v, m = fresh_value()
      lv[#lv + 1] = v
      node.items[#node.items + 1] = m
    end
  elseif node.t == "obj" then
    local kept, original = {}, {}
    for _, k in ipairs(node.keys) do original[k] = true end
    for _, k in ipairs(node.keys) do
      local r = R(8)
      if r == 1 then -- removed
        lv[k] = nil
        node.vals[k] = nil
      elseif r == 2 then -- replaced by a value built in Lua
        local v, m = fresh_value()
        lv[k] = v
        node.vals[k] = m
        kept[#kept + 1] = k
      else
        mutate(lv[k], node.vals[k])
        kept[#kept + 1] = k
      end
    end
    local added = {}
    for _ = 1, R(0, 3) do
      local k = random_string(false, 5)
      if not original[k] and lv[k] == nil then -- a removed key put back would return to its place
        local v = R(-1000, 1000)
        lv[k] = v
        node.vals[k] = { t = "int", v = v }
        added[#added + 1] = k
      end
    end
    table.sort(added, bytes_less)
    for _, k in ipairs(added) do kept[#kept + 1] = k end
    node.keys = kept
  end
end

describe("random JSON documents (seed " .. SEED .. ", replay with OBELUS_SEED=" .. SEED .. ")", function()
  print(string.format("\nbridge_property_spec: seed %d (replay with OBELUS_SEED=%d)", SEED, SEED))

  it("come back from decode + encode in canonical form", function()
    math.randomseed(SEED)
    local checked = 0
    for doc = 1, DOCS do
      local node = gen(0)
      local noisy, canonical = ws() .. write(node, true) .. ws(), write(node, false)
      local ok, got = pcall(function() return obelus.encode(obelus.decode(noisy)) end)
      if not ok or got ~= canonical then
        error(string.format("seed %d, document %d\n  text:     %s\n  expected: %s\n  got:      %s",
          SEED, doc, noisy, canonical, tostring(got)))
      end
      checked = checked + 1
    end
    assert.are.equal(DOCS, checked)
  end)

  it("keep original keys first, then added keys sorted, after changes in Lua", function()
    math.randomseed(SEED + 1)
    for doc = 1, DOCS do
      local node = gen_object(0) -- an object at the top, so that there are keys to keep
      local text = write(node, true)
      local value = obelus.decode(text)
      mutate(value, node)
      local expected = write(node, false)
      local ok, got = pcall(obelus.encode, value)
      if not ok or got ~= expected then
        error(string.format("seed %d, document %d\n  text:     %s\n  expected: %s\n  got:      %s",
          SEED, doc, text, expected, tostring(got)))
      end
    end
  end)

  it("are snapshots: changing the decoded value leaves a second decode alone", function()
    math.randomseed(SEED + 2)
    for doc = 1, 200 do
      local node = gen_object(0)
      local text = write(node, false)
      local a = obelus.decode(text)
      mutate(a, node)
      local b = obelus.encode(obelus.decode(text))
      if b ~= text then error(string.format("seed %d, document %d: %s became %s", SEED, doc, text, b)) end
    end
  end)
end)
