-- spec/support/cli.lua -- runs the obelus binary ($OBELUS_BIN, else bin/obelus)
-- and returns what it did: exit code, stdout, stderr.
local M = {}

M.bin = os.getenv("OBELUS_BIN") or "bin/obelus"

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.quote = shell_quote

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end
M.slurp = slurp

-- run{ "resolve", "file.json", "†x" , stdin = "..." } -> { code=, out=, err= }
function M.run(args)
  local parts = { shell_quote(M.bin) }
  for _, a in ipairs(args) do parts[#parts + 1] = shell_quote(a) end
  local out, err = os.tmpname(), os.tmpname()
  local cmd = table.concat(parts, " ") .. " >" .. out .. " 2>" .. err
  if args.stdin then
    local inp = os.tmpname()
    local f = assert(io.open(inp, "wb"))
    f:write(args.stdin)
    f:close()
    cmd = cmd .. " <" .. inp
  end
  local _, how, code = os.execute(cmd)
  local r = { code = (how == "exit") and code or 128 + (code or 0), out = slurp(out), err = slurp(err) }
  os.remove(out)
  os.remove(err)
  return r
end

-- The same under `timeout -s KILL secs` (default 30), for commands that could hang:
-- a command killed by it shows as 137.
function M.run_for(secs, args)
  local parts = {}
  for i, a in ipairs(args) do parts[i] = shell_quote(a) end
  local out, err = os.tmpname(), os.tmpname()
  local _, how, code = os.execute(("timeout -s KILL %d %s %s >%s 2>%s"):format(
    secs or 30, shell_quote(M.bin), table.concat(parts, " "), out, err))
  local r = { code = how == "exit" and code or 128 + code, out = slurp(out), err = slurp(err) }
  os.remove(out)
  os.remove(err)
  return r
end

-- Runs `obelus run ARGS... --journal J` (exit 0 or 1 expected) and returns J's name.
function M.journal_of(args)
  local j = os.tmpname()
  local full = { "run" }
  for _, a in ipairs(args) do full[#full + 1] = a end
  full[#full + 1] = "--journal"
  full[#full + 1] = j
  local r = M.run(full)
  assert(r.code == 0 or r.code == 1, r.err)
  return j
end

-- What a shell command printed on stdout.
function M.sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

-- What bash's completion of obelus offers for a command line (COMP_WORDS given as shell
-- words, the last the one completed), the obelus under test first on PATH: a set.
function M.bash_complete(line)
  local bin = M.bin:sub(1, 1) == "/" and M.bin or os.getenv("PWD") .. "/" .. M.bin
  local script = M.tmpfile(([[
PATH=%s:$PATH
source completions/obelus.bash
COMP_WORDS=(%s)
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_obelus
printf '%%s\n' "${COMPREPLY[@]}"
]]):format(shell_quote(bin:match("^(.*)/[^/]*$")), line))
  local out = M.sh("bash " .. script .. " 2>&1")
  os.remove(script)
  local t = {}
  for w in out:gmatch("[^\n]+") do t[w] = true end
  return t
end

-- The non-empty lines of a text (nil: none), in order.
function M.lines(text)
  local t = {}
  for l in (text or ""):gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end

-- The JSON lines of a file (a journal, --events) as values, in order; a line that does
-- not read (a SIGKILL's torn or zeroed tail) is not one.
function M.jsonl(path)
  local cjson = require "cjson"
  local out = {}
  for line in io.lines(path) do
    local ok, v = pcall(cjson.decode, line)
    if ok then out[#out + 1] = v end
  end
  return out
end

-- Writes text to a fresh temporary file and returns its name.
function M.tmpfile(text, suffix)
  local name = os.tmpname() .. (suffix or "")
  local f = assert(io.open(name, "wb"))
  f:write(text)
  f:close()
  return name
end

return M
