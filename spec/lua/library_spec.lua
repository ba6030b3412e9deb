-- library_spec.lua -- the library is the library (docs/architecture.md): libobelus.a,
-- libobelus.so and core.so hold no command-line object, and the shared objects export
-- what obelus.h declares (plus luaopen_obelus_core for Lua's require), nothing of the
-- engine's inside. Run where `make all` has built lib/ (the release specs).
local function lines(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  local ok = p:close()
  assert(ok, cmd .. " failed:\n" .. table.concat(out, "\n"))
  return out
end

-- the functions obelus.h declares, read from the header itself
local function declared()
  local set, f = {}, assert(io.open("core/obelus.h"))
  for l in f:lines() do
    local name = l:match("^[%w_ %*]-[%s%*](obelus_[%w_]+)%(")
    if name then set[name] = true end
  end
  f:close()
  return set
end

-- the defined dynamic symbols of a shared object
local function exported(so)
  local names = {}
  for _, l in ipairs(lines("nm -D --defined-only " .. so)) do
    names[#names + 1] = l:match("%S+$")
  end
  return names
end

describe("the library", function()
  it("has no object of cli/ in libobelus.a", function()
    local members = lines("ar t lib/libobelus.a")
    assert.is_true(#members > 40)
    local cli = {}
    for f in io.popen("ls core/cli"):lines() do
      if f:match("%.c$") then cli[f:gsub("%.c$", ".o")] = true end
    end
    assert.is_not_nil(next(cli))
    for _, m in ipairs(members) do
      assert.is_nil(cli[m], m .. " is a command-line object in libobelus.a")
      assert.is_nil(m:match("^ob_cmd_"), m)
    end
  end)

  it("defines no ob_cmd_ or ob_cli_ function in libobelus.a", function()
    for _, l in ipairs(lines("nm --defined-only lib/libobelus.a")) do
      assert.is_nil(l:match(" [TtDdBbRr] (ob_cmd_%S*)$"), l)
      assert.is_nil(l:match(" [TtDdBbRr] (ob_cli_%S*)$"), l)
    end
  end)

  for _, so in ipairs({ "lib/libobelus.so", "lib/obelus/core.so" }) do
    it("exports from " .. so .. " only obelus.h's functions and luaopen_obelus_core", function()
      local api, names = declared(), exported(so)
      assert.is_true(#names > 0)
      local seen = {}
      for _, n in ipairs(names) do
        assert.is_true(api[n] or n == "luaopen_obelus_core", so .. " exports " .. n)
        seen[n] = true
      end
      assert.is_true(seen.luaopen_obelus_core)
      assert.is_true(seen.obelus_engine_new and seen.obelus_run_new and true or false)
    end)
  end

  it("links every function obelus.h declares into libobelus.so", function()
    local have = {}
    for _, n in ipairs(exported("lib/libobelus.so")) do have[n] = true end
    local missing = {}
    for n in pairs(declared()) do
      if not have[n] then missing[#missing + 1] = n end
    end
    table.sort(missing)
    assert.are.same({}, missing)
  end)
end)
