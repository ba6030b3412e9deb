-- bench/measure.lua -- what the whole-process benchmarks (http.lua, fleet.lua, peers.lua,
-- threads.lua, run.lua's one-call run) share: local m = dofile("measure.lua") from bench/.
local M = {}

-- The median of xs (the upper one of an even count); xs is left as it was.
function M.median(xs)
  local t = {}
  for i, x in ipairs(xs) do t[i] = x end
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- A new, empty temporary folder (its path); the caller removes it.
function M.tmpdir()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  return dir
end

-- Writes text to the file name in folder dir; returns its path.
function M.write(dir, name, text)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- Runs cmd (a shell command) under GNU time: its wall seconds, peak RSS (KB) and the
-- first line of its stdout; raises, with its stderr, when it fails.
function M.timed(cmd)
  local tf, of, ef, wf = os.tmpname(), os.tmpname(), os.tmpname(), os.tmpname()
  -- the wall time in nanoseconds around the command (time's %e has 10 ms steps);
  -- the peak RSS is time's, the largest of the command's processes
  local sf = os.tmpname()
  local script = io.open(sf, "w")
  script:write(("s=$(date +%%s%%N)\n%s\nrc=$?\ne=$(date +%%s%%N)\necho $((e - s)) >%s\nexit $rc\n")
    :format(cmd, wf))
  script:close()
  local ok = os.execute(("/usr/bin/time -f '%%e %%M' -o %s sh %s >%s 2>%s"):format(tf, sf, of, ef))
  os.remove(sf)
  local function slurp(path, how)
    local f = io.open(path)
    local s = f and f:read(how) or ""
    if f then f:close() end
    os.remove(path)
    return s or ""
  end
  local kb = slurp(tf, "a"):match("[%d.]+ (%d+)%s*$")
  local ns = tonumber(slurp(wf, "a"):match("%d+"))
  local out, err = slurp(of, "l"), slurp(ef, "a")
  if not ok or not kb or not ns then error(cmd .. " failed: " .. err) end
  return ns / 1e9, tonumber(kb), out
end

return M
