-- files.lua -- tools that wait on the world without blocking anyone: a file read
-- and a child process, both through obelus.uv (luv on the engine's loop).
local obelus = require "obelus"
local uv = obelus.uv

-- Reads a whole file; the call waits, every other call goes on.
local function read_file(path)
  return obelus.await(function(resume)
    uv.fs_open(path, "r", 420, function(err, fd)
      if err then return resume(nil, err) end
      uv.fs_fstat(fd, function(err2, stat)
        if err2 then uv.fs_close(fd); return resume(nil, err2) end
        uv.fs_read(fd, stat.size, 0, function(err3, data)
          uv.fs_close(fd)
          resume(data, err3)
        end)
      end)
    end)
  end)
end

-- Runs a program and collects what it prints, waiting without blocking.
local function run_program(file, args)
  return obelus.await(function(resume)
    local out, chunks = uv.new_pipe(false), {}
    local handle
    handle = uv.spawn(file, { args = args, stdio = { nil, out, nil } }, function(code)
      handle:close()
      resume(table.concat(chunks), code)
    end)
    if not handle then return resume(nil, -1) end
    out:read_start(function(err, chunk)
      if chunk then chunks[#chunks + 1] = chunk else out:close() end
      if err then out:close() end
    end)
  end)
end

return {
  {
    name = "readFile",
    description = "Reads a text file.",
    schema = { type = "object", properties = { path = { type = "string" } }, required = { "path" } },
    run = function(call)
      local text, err = read_file(call.path)
      if not text then error("cannot read " .. call.path .. ": " .. tostring(err), 0) end
      return { path = call.path, bytes = #text, lines = select(2, text:gsub("\n", "")) }
    end,
  },
  {
    name = "countWords",
    description = "Counts the words of a file with wc(1), in a child process.",
    schema = { type = "object", properties = { path = { type = "string" } }, required = { "path" } },
    run = function(call)
      local out, code = run_program("wc", { "-w", call.path })
      if code ~= 0 then error("wc failed on " .. call.path, 0) end
      return tonumber(out:match("%d+"))
    end,
  },
}
