-- notify.lua -- a fire-and-forget notification (plan-format §5): the call has no _outputPath,
-- so nothing waits for it and it writes nothing to the log. It sleeps (a slow mail
-- gateway), then appends one line to the file named in its params through libuv's
-- fs functions on the engine's loop. The run's result is ready long before; the
-- process drains this call before it exits (at most --drain-timeout ms).
local obelus = require "obelus"
local uv = obelus.uv

-- Runs a luv fs function with a callback and waits for it without blocking the loop.
local function fs(fn, ...)
  local args = table.pack(...)
  local err, res = obelus.await(function(resume)
    args[args.n + 1] = function(e, r) resume(e, r) end
    fn(table.unpack(args, 1, args.n + 1))
  end)
  if err then error(err, 0) end
  return res
end

return {
  name = "notify",
  description = "Sends a notification; here: appends it as a line to a file.",
  schema = {
    type = "object",
    properties = { file = { type = "string", minLength = 1 }, text = { type = "string" } },
    required = { "file", "text" },
  },
  run = function(call)
    obelus.sleep(200)
    local fd = fs(uv.fs_open, call.file, "a", tonumber("644", 8))
    fs(uv.fs_write, fd, "notified: " .. call.text .. "\n", -1)
    fs(uv.fs_close, fd)
  end,
}
