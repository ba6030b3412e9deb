-- hostile/support.lua -- what the areas' cases (hostile/cases/*.lua) share to look at
-- what a case left in its folder: files read whole, their lines and sizes, the status a
-- command wrote, and checks made of checks.
local M = {}

-- the file's bytes, or nil when it cannot be read (the specs' support.fs.slurp gives "")
function M.slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- the file's size in bytes, or nil
function M.size(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local n = f:seek("end")
  f:close()
  return n
end

-- the file's non-empty lines ({} when it cannot be read)
function M.lines(path)
  local t = {}
  local s = M.slurp(path)
  if s then for l in s:gmatch("[^\n]+") do t[#t + 1] = l end end
  return t
end

-- a check: the exit status a command of the case wrote to dir/NAME (`echo $? >NAME`) is
-- want; if not, why, with the start of dir/NAME.err (NAME ending .rc) when there is one
function M.status(dir, name, want)
  local s = M.slurp(dir .. "/" .. name)
  if not s or not s:match("^" .. want .. "\n") then
    return false, name .. " is " .. tostring(s and s:gsub("\n", "") or "missing") .. ", expected " .. want ..
                  " (" .. (M.slurp(dir .. "/" .. name:gsub("%.rc$", ".err")) or ""):sub(1, 200) .. ")"
  end
  return true
end

-- a check made of checks, in order: the first that fails says why
function M.all(...)
  local fs = { ... }
  return function(...)
    for _, f in ipairs(fs) do
      local ok, why = f(...)
      if not ok then return false, why end
    end
    return true
  end
end

return M
