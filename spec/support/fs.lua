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

return M
