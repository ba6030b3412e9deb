-- spec/support/fs.lua -- small file helpers the specs share.
local M = {}

-- A fresh temporary folder; its name.
function M.tmpdir()
  local p = assert(io.popen("mktemp -d"))
  local d = p:read("l")
  p:close()
  return d
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- Removes path and everything under it.
function M.rmtree(path)
  os.execute("rm -rf '" .. path .. "'")
end

-- Makes the folder path (and its parents).
function M.mkdir(path)
  os.execute("mkdir -p '" .. path .. "'")
end

-- Writes text to path (replacing it).
function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- The file's bytes, or "" when it does not exist.
function M.slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

-- Calls f(...), which must raise; returns the error as text.
function M.fails(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

return M
