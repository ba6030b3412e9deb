-- testtools.lua -- small tools the CLI specs run plans with. Each does one thing
-- a spec needs to observe: return a value, wait, fail, leave a marker, branch.
local obelus = require "obelus"

local function touch(path)
  local f = assert(io.open(path, "a"))
  f:write("ran\n")
  f:close()
end

return {
  { name = "echo", description = "returns its value param",
    run = function(call) return call.value end },

  { name = "sleepy", description = "sleeps `ms` then returns `value`",
    schema = { type = "object", properties = { ms = { type = "integer", minimum = 0 } }, required = { "ms" } },
    run = function(call)
      obelus.sleep(call.ms)
      return call.value
    end },

  { name = "marker", description = "appends a line to the file `file`, returns `value`",
    schema = { type = "object", properties = { file = { type = "string" } }, required = { "file" } },
    run = function(call)
      touch(call.file)
      return call.value
    end },

  { name = "fail", description = "raises a Lua error",
    run = function(call) error(call.message or "failed on purpose") end },

  { name = "fail_table", description = "raises a table as the error",
    run = function() error({ code = 7 }) end },

  { name = "recurse", description = "overflows the Lua stack",
    run = function()
      local function f(n) return f(n + 1) + 1 end
      return f(1)
    end },

  { name = "pick", description = "chooses an || alternative: obelus.branch(which, value)",
    run = function(call) return obelus.branch(call.which, call.value) end },

  { name = "messages", description = "places its own outputs",
    run = function(call)
      local out = {}
      for i, m in ipairs(call.list) do out[i] = obelus.message(m) end
      return out
    end },

  { name = "stall", description = "waits for a resume that never comes",
    run = function()
      obelus.await(function(_) end)
      return "never"
    end },

  { name = "yielder", description = "yields its coroutine directly (not allowed)",
    run = function()
      coroutine.yield("x")
      return 1
    end },

  { name = "uvtimer", description = "waits on a luv timer through obelus.await",
    run = function(call)
      local uv = obelus.uv
      local t = uv.new_timer()
      local got = obelus.await(function(resume)
        t:start(call.ms, 0, function() t:close(); resume("fired") end)
      end)
      return { got = got, value = call.value }
    end },

  { name = "syncawait", description = "resumes obelus.await synchronously",
    run = function(call)
      local a, b = obelus.await(function(resume) resume(call.value, 2) end)
      return { a = a, b = b }
    end },

  { name = "strict", description = "has a schema with an enum and a const output path",
    schema = { type = "object",
               properties = { color = { enum = { "red", "green" } },
                              _outputPath = { const = "†state.color" } },
               required = { "color" } },
    run = function(call) return call.color end },

  { name = "identity", description = "returns the whole call it received",
    run = function(call) return call end },

  { name = "latent_thing", description = "has no run function" },

  { name = "nested", description = "waits from inside a coroutine of its own (not allowed)",
    run = function(call)
      local inner = coroutine.wrap(function()
        if call.how == "sleep" then obelus.sleep(1) else obelus.await(function(r) r() end) end
      end)
      inner()
      return 1
    end },

  { name = "nothing", description = "returns nothing",
    run = function() end },

  { name = "steps", description = "sends {step, attempt} `n` times (obelus.emit), `ms` apart; " ..
      "fails its first attempt when `fail_first`; returns `n`",
    run = function(call, ctx)
      for i = 1, call.n do
        obelus.emit({ step = i, attempt = ctx.attempt })
        if call.ms then obelus.sleep(call.ms) end
      end
      if call.fail_first and ctx.attempt == 1 then error("first attempt fails") end
      return call.n
    end },

  { name = "failif", description = "raises `message` when `fail` is true, else returns `value`",
    run = function(call)
      if call.fail then error(call.message or "failed on purpose") end
      return call.value
    end },

  { name = "slowmark", description = "appends `tag` to the file `file`, sleeps `ms`, " ..
      "returns `value` (and ctx.instance as `instance` when `show_instance`)",
    run = function(call, ctx)
      local f = assert(io.open(call.file, "a"))
      f:write(tostring(call.tag), "\n")
      f:close()
      obelus.sleep(call.ms or 0)
      if call.show_instance then return { value = call.value, instance = ctx.instance } end
      return call.value
    end },
}
