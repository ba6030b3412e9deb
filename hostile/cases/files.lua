-- hostile/cases/files.lua -- the journal and --events as destroyers of files, and journals
-- that were edited by hand (issue 26 item 1, and the journal-consistency part of item 11).
--
-- What it attacks, in the issue's order:
--   A. "--journal opens with O_TRUNC and no check": a --journal or --events path that is the
--      plan, a tool file (or a module it requires), an --input @file, a delegated plan (nested,
--      under --plans-root), a --latent/--planner file, stdout or stderr, a plan or input read
--      from stdin redirected from the file, or a symbolic or hard link to any of them; with
--      --overwrite; through run, loop, resume, --threads, the Lua module and `report -o`.
--   B. "--journal X --events X leaves X unreadable".
--   C. "Running again over an existing journal -- even a killed run's -- silently truncates
--      it": a finished or killed run's journal given to run/loop again, with and without
--      --overwrite; a run refused or killed never leaves a journal without its first record.
--   D. "There is no lock": run and resume (and run --overwrite, loop, two resumes, two runs,
--      the Lua module) on one journal at once; readers are not blocked.
--   E. "A full disk mid-run (64 KB tmpfs)": the write-ahead promise (no tool ran whose start
--      is not in the file), exit 4 naming the file, nothing printed, and a resume after it
--      that is exact (the re-runs reported are the calls that ran twice); also --fsync,
--      --threads, a delegated plan, a first record that does not fit, a resume that meets a
--      full disk, --events on the full disk, `ulimit -f` (EFBIG, SIGXFSZ), the Lua module.
--   F. "> /dev/full and --events /dev/full exit 0 with the output lost": run (stdout, --events,
--      --journal), resume, and the readers log, resolve, report -o.
--   G. (item 11) "a hand-edited journal (a settled record deleted) makes resume print a wrong
--      output with exit 0": a settled record deleted, an output message deleted, a state
--      edited, a call's lines doubled, an id or scope not in the plan (in a delegated plan
--      too), a truncated last line (torn, or cut with its newline kept), garbage lines, NUL
--      bytes, a journal of another plan (its plan line swapped, two journals concatenated, the
--      plan file replaced); through resume, log, resolve, report and engine:resume.
--
-- The full-disk cases mount a tmpfs (they run as root) in their folder and unmount it when
-- their command ends (a trap, so also on failure); the mounted journal is copied out first.

-- the repository, for the Lua module (lib/, lua/)
local S = require "support"
local slurp, lines, all = S.slurp, S.lines, S.all
local src = debug.getinfo(1, "S").source:sub(2)
local ROOT = (src:match("^(.*)/cases/[^/]*$") or "hostile") .. "/.."
if ROOT:sub(1, 1) ~= "/" then ROOT = io.popen("pwd"):read("l") .. "/" .. ROOT end

local LUA_PRELUDE = ("package.cpath = %q .. package.cpath\n" ..
                     "package.path = %q .. package.path\n"):format(
  ROOT .. "/lib/?.so;", ROOT .. "/lua/?.lua;" .. ROOT .. "/lua/?/init.lua;")

-- --- the tools every case shares --------------------------------------------------------
-- mark: appends its call id to ./marks (the side effect the write-ahead promise is about)
-- wait: marks, says it started (./started), then waits (yielding) until ./go exists
local TOOLS = [[
local obelus = require "obelus"
local function mark(id)
  local f = assert(io.open("marks", "a"))
  f:write(id, "\n")
  f:close()
end
return {
  { name = "mark", run = function(call, ctx)
      mark(ctx.id)
      return { id = ctx.id, pad = string.rep("x", call.pad or 10) }
    end },
  { name = "wait", run = function(call, ctx)
      mark(ctx.id)
      local g = assert(io.open("started", "w"))
      g:write(ctx.id)
      g:close()
      while true do
        local go = io.open("go")
        if go then go:close() break end
        obelus.sleep(20)
      end
      return ctx.id
    end },
}
]]

-- a chain a -> b -> c (its journal's lines come in a fixed order)
local CHAIN = [[{"plan":[
 {"_tool":"mark","_id":"a","_outputPath":"†state.a"},
 {"_tool":"mark","_id":"b","x":"†state.a","_outputPath":"†state.b"},
 {"_tool":"mark","_id":"c","x":"†state.b","_outputPath":"†state.c"}],
 "output":{"a":"†state.a.id","c":"†state.c.id"}}]]

-- a then a waiting call
local WAITP = [[{"plan":[
 {"_tool":"mark","_id":"a","_outputPath":"†state.a"},
 {"_tool":"wait","_id":"w","x":"†state.a","_outputPath":"†state.w"}],
 "output":{"w":"†state.w"}}]]

-- 30 quick calls and one that waits (the issue's "17 of 30 calls run twice")
local function waitp30()
  local t = {}
  for i = 1, 29 do
    t[#t + 1] = ('{"_tool":"mark","_id":"q%d","_outputPath":"†state.q%d"}'):format(i, i)
  end
  t[#t + 1] = '{"_tool":"wait","_id":"w","x":"†state.q29","_outputPath":"†state.w"}'
  return '{"plan":[' .. table.concat(t, ",\n") .. '],"output":{"w":"†state.w","q1":"†state.q1.id"}}'
end

-- n independent calls, each writing ~pad bytes; the output names every id
local function many(n, prefix, pad)
  local t, o = {}, {}
  for i = 1, n do
    t[#t + 1] = ('{"_tool":"mark","_id":"%s%d","pad":%d,"_outputPath":"†state.%s%d"}')
      :format(prefix, i, pad, prefix, i)
    o[#o + 1] = ('"%s%d":"†state.%s%d.id"'):format(prefix, i, prefix, i)
  end
  return '{"plan":[' .. table.concat(t, ",\n") .. '],\n"output":{' .. table.concat(o, ",") .. '}}'
end

-- a plan with n instances, two calls each
local function instances(n)
  local ids = {}
  for i = 1, n do ids[i] = '"i' .. i .. '"' end
  return '{"instances":[' .. table.concat(ids, ",") .. '],"plan":[' ..
    '{"_tool":"mark","_id":"a","pad":2000,"_outputPath":"†state.a"},' ..
    '{"_tool":"mark","_id":"b","x":"†state.a.id","_outputPath":"†state.b"}],"output":"†state.b.id"}'
end

local PLANNER = [[
return function(ctx)
  local v = ctx:resolve("†state.a")
  if v then return { output = v.id } end
  return { calls = { { _tool = "mark", _id = "a", _outputPath = "†state.a" } } }
end
]]

-- --- helpers for checks -----------------------------------------------------------------


local function counts(path)
  local c = {}
  for _, l in ipairs(lines(path)) do c[l] = (c[l] or 0) + 1 end
  return c
end

-- the ids with a start record in a journal
local function starts(path)
  local s = {}
  for _, l in ipairs(lines(path)) do
    local id = l:match('^{"journal":"start".-"id":"([^"]+)"')
    if id then s[id] = true end
  end
  return s
end

local function trim(s) return (s or ""):gsub("%s+$", "") end

-- every side effect of the first run had its start record in the file (write-ahead)
local function write_ahead(dir, journal, marks)
  local st = starts(dir .. "/" .. journal)
  for id in pairs(counts(dir .. "/" .. marks)) do
    if not st[id] then
      return false, ("call %s ran (marks) but %s has no start record for it: the write-ahead " ..
                     "promise is broken"):format(id, journal)
    end
  end
  return true
end

-- the resume was exact: every call of ids ran (marks0: a killed run's, and marks) once more
-- than a resume reported it as run again (in the stderr files errs, or the text)
local function exact(dir, ids, errs, text)
  local reported = {}
  local said = { text or "" }
  for _, e in ipairs(errs) do said[#said + 1] = slurp(dir .. "/" .. e) or "" end
  for _, t in ipairs(said) do
    for id in t:gmatch("call (%S+) %([^)]*%)[^\n]-had started") do
      reported[id] = (reported[id] or 0) + 1
    end
  end
  local c = counts(dir .. "/marks")
  for id, n in pairs(counts(dir .. "/marks0")) do c[id] = (c[id] or 0) + n end
  for _, id in ipairs(ids) do
    local want = 1 + (reported[id] or 0)
    if (c[id] or 0) ~= want then
      return false, ("call %s ran %d times; resume reported it as run again %d times (exact " ..
                     "would be %d runs)"):format(id, c[id] or 0, reported[id] or 0, want)
    end
  end
  return true
end

local function idlist(prefix, n)
  local t = {}
  for i = 1, n do t[i] = prefix .. i end
  return t
end

local function all_ids_out(prefix, n)
  return function(out)
    for i = 1, n do
      if not out:find(('"%s%d": "%s%d"'):format(prefix, i, prefix, i), 1, true) then
        return false, ("the output lacks %s%d"):format(prefix, i)
      end
    end
    return true
  end
end

local function file_is(dir, name, want)
  local got = trim(slurp(dir .. "/" .. name))
  if got ~= tostring(want) then
    return false, ("%s is %q, expected %q"):format(name, got, tostring(want))
  end
  return true
end

local function absent(dir, name)
  if slurp(dir .. "/" .. name) then return false, name .. " exists: something ran" end
  return true
end

-- checks in order, the first failure's reason

-- --- shell fragments ------------------------------------------------------------------
-- waits (at most 20 s) for ./started, written by the wait tool once its start is journaled
local WAIT_STARTED = "i=0; while [ ! -s started ] && [ $i -lt 400 ]; do i=$((i+1)); sleep 0.05; done; "

-- a killed run's journal j.jsonl of WAITP (setup): started, then kill -9
local KILLED = "obelus run pw.json --tools tools --journal j.jsonl & P=$!; " .. WAIT_STARTED ..
  "kill -9 $P; wait $P; rm -f started; mv marks marks0"

-- a finished run's journal j.jsonl of CHAIN (setup)
local FINISHED = "obelus run p.json --tools tools --journal j.jsonl; rm -f marks"

-- a tmpfs of SIZE on ./mnt, unmounted when the command ends however it ends
local function mount(size)
  return "mkdir -p mnt && mount -t tmpfs -o size=" .. size .. " tmpfs mnt || " ..
         "{ echo 'hostile: cannot mount a tmpfs (not root?)' >&2; exit 99; }; " ..
         "trap 'umount mnt 2>/dev/null' EXIT; "
end

-- A full disk mid-run: run on a 64 KB tmpfs (-> rc1, out1, err1, j1.jsonl, marks1), then
-- room (remount 8 MB) and resume (-> its status, out, err2, j2.jsonl).
local function fulldisk(runargs, resumeargs)
  return mount("64k") ..
    "obelus run p.json --tools tools --journal mnt/j.jsonl " .. runargs .. " >out1 2>err1; echo $? >rc1; " ..
    "cp mnt/j.jsonl j1.jsonl 2>/dev/null; cp marks marks1 2>/dev/null; " ..
    "mount -o remount,size=8m mnt; " ..
    "obelus resume mnt/j.jsonl " .. (resumeargs or "") .. " 2>err2; rc=$?; " ..
    "cp mnt/j.jsonl j2.jsonl 2>/dev/null; cat err2 >&2; exit $rc"
end

local function first_run_failed(journal)
  return function(dir)
    local ok, why = file_is(dir, "rc1", 4)
    if not ok then return false, "the run on the full disk: " .. why .. "; its stderr: " ..
                                  trim(slurp(dir .. "/err1")):sub(1, 200) end
    local err = slurp(dir .. "/err1") or ""
    if not err:find(journal, 1, true) or not err:find("No space left on device", 1, true) then
      return false, "the full disk's stderr does not name " .. journal .. " and the reason: " .. err:sub(1, 200)
    end
    if (slurp(dir .. "/out1") or "") ~= "" then
      return false, "the run stopped by its journal printed an output: " .. slurp(dir .. "/out1"):sub(1, 100)
    end
    return true
  end
end

local function lua_script(body) return LUA_PRELUDE .. body end

-- --- the cases --------------------------------------------------------------------------
local cases = {}
local function case(c)
  c.item = c.item or 1
  -- the harness appends ">/dev/null 2>&1" to the setup: it must apply to all of it
  if c.setup then c.setup = "{ " .. c.setup .. "\n}" end
  cases[#cases + 1] = c
end

local base = function(extra)
  local f = { ["p.json"] = CHAIN, ["tools/t.lua"] = TOOLS }
  for k, v in pairs(extra or {}) do f[k] = v end
  return f
end

-- A. a --journal or --events path that is a file the run reads -----------------------
case { name = "--journal is the plan",
  files = base(), run = "obelus run p.json --tools tools --journal p.json",
  expect = { code = 2, err = { "p.json", "plan" }, check = function(d) return absent(d, "marks") end } }

case { name = "--journal is a symlink to the plan (--overwrite)",
  files = base(), setup = "ln -s p.json run.jsonl",
  run = "obelus run p.json --tools tools --journal run.jsonl --overwrite",
  expect = { code = 2, err = { "run.jsonl", "p.json" } } }

case { name = "--journal is a hard link to the plan (--overwrite)",
  files = base(), setup = "ln p.json run.jsonl",
  run = "obelus run p.json --tools tools --journal run.jsonl --overwrite",
  expect = { code = 2, err = { "run.jsonl", "p.json" } } }

case { name = "--journal is a tool file of the --tools folder (--overwrite)",
  files = base(), run = "obelus run p.json --tools tools --journal tools/t.lua --overwrite",
  expect = { code = 2, err = { "tools/t.lua", "tool" } } }

case { name = "--journal is a helper module the tool file requires (tools/lib/h.lua)",
  files = base { ["tools/lib/h.lua"] = "return { x = 1 }\n",
                 ["tools/t.lua"] = 'local h = require "lib.h"\n' .. TOOLS },
  run = "obelus run p.json --tools tools --journal tools/lib/h.lua --overwrite",
  expect = { code = 2, err = { "tools/lib/h.lua" } } }

case { name = "--journal is the --input @file",
  files = base { ["in.json"] = '{"city":"Oslo"}' },
  run = "obelus run p.json --tools tools --input @in.json --journal in.json --overwrite",
  expect = { code = 2, err = { "in.json", "input" } } }

local DELEG = {
  ["tools/t.lua"] = TOOLS,
  ["sub/d.json"] = '{"plan":[{"_tool":"mark","_id":"s","_outputPath":"†state.s"}],"output":"†state.s.id"}',
  ["sub/p.json"] = '{"plan":[{"_delegate":"d.json","_id":"del","_outputPath":"†state.d"}],"output":"†state.d"}',
}

case { name = "--journal is a delegated plan (resolved against the plan's folder)",
  files = DELEG, run = "obelus run sub/p.json --tools tools --journal sub/d.json --overwrite",
  expect = { code = 2, err = { "sub/d.json", "delegate" }, check = function(d) return absent(d, "marks") end } }

case { name = "--journal is a plan delegated to at depth 2, run from another folder",
  files = {
    ["tools/t.lua"] = TOOLS,
    ["sub/deep/e.json"] = '{"plan":[{"_tool":"mark","_id":"z","_outputPath":"†state.z"}],"output":"†state.z.id"}',
    ["sub/d1.json"] = '{"plan":[{"_delegate":"deep/e.json","_id":"d2","_outputPath":"†state.d"}],"output":"†state.d"}',
    ["sub/p.json"] = '{"plan":[{"_delegate":"d1.json","_id":"d1","_outputPath":"†state.d"}],"output":"†state.d"}',
  },
  setup = "mkdir elsewhere",
  run = "cd elsewhere && obelus run ../sub/p.json --tools ../tools --journal ../sub/deep/e.json --overwrite",
  expect = { code = 2, err = { "e.json", "delegate" } } }

case { name = "--journal is a plan delegated to under --plans-root",
  files = {
    ["tools/t.lua"] = TOOLS,
    ["root/x/r.json"] = '{"plan":[{"_tool":"mark","_id":"r","_outputPath":"†state.r"}],"output":"†state.r.id"}',
    ["p.json"] = '{"plan":[{"_delegate":"root/x/r.json","_id":"dr","_outputPath":"†state.d"}],"output":"†state.d"}',
  },
  run = "obelus run p.json --tools tools --plans-root root --journal root/x/r.json --overwrite",
  expect = { code = 2, err = { "root/x/r.json", "delegate" } } }

case { name = "--events is the plan (opened for writing)",
  files = base(), run = "obelus run p.json --tools tools --events p.json",
  expect = { code = 2, err = { "--events", "p.json" }, check = function(d) return absent(d, "marks") end } }

case { name = "--events is a symlink to a tool file",
  files = base(), setup = "ln -s tools/t.lua ev.jsonl",
  run = "obelus run p.json --tools tools --events ev.jsonl",
  expect = { code = 2, err = { "ev.jsonl", "t.lua" } } }

case { name = "--journal is the --latent file",
  files = base { ["latent.lua"] = "-- a latent script\nreturn nil\n" },
  run = "obelus run p.json --tools tools --latent latent.lua --journal latent.lua --overwrite",
  expect = { code = 2, err = { "latent.lua" } } }

case { name = "--events is the plan read from stdin (run - < p.json)",
  files = base(), run = "obelus run - --tools tools --events p.json < p.json",
  expect = { code = 2, err = { "--events", "p.json" }, check = function(d) return absent(d, "marks") end } }

case { name = "--journal --overwrite is the plan read from stdin (run - < p.json)",
  files = base(), run = "obelus run - --tools tools --journal p.json --overwrite < p.json",
  expect = { code = 2, err = "p.json", check = function(d) return absent(d, "marks") end } }

case { name = "--journal --overwrite is the --input @- read from stdin",
  files = base { ["in.json"] = '{"k":1}' },
  run = "obelus run p.json --tools tools --input @- --journal in.json --overwrite < in.json",
  expect = { code = 2, err = "in.json", check = function(d) return absent(d, "marks") end } }

case { name = "--journal is stdout's file (>> j.jsonl)",
  files = base(),
  run = "obelus run p.json --tools tools --journal j.jsonl >> j.jsonl; rc=$?; cat j.jsonl; exit $rc",
  expect = { code = 2, err = { "j.jsonl", "stdout" } } }

case { name = "--events is stderr's file (2>> ev.jsonl)",
  files = base(),
  run = "obelus run p.json --tools tools --events ev.jsonl 2>> ev.jsonl; rc=$?; cat ev.jsonl >&2; exit $rc",
  expect = { code = 2, err = { "ev.jsonl", "stderr" } } }

-- B. --journal X --events X ---------------------------------------------------------
case { name = "--journal X --events X (a new file)",
  files = base(), run = "obelus run p.json --tools tools --journal x.jsonl --events x.jsonl",
  expect = { code = 2, err = { "--events", "x.jsonl" }, check = function(d)
    if slurp(d .. "/x.jsonl") then return false, "x.jsonl was made by a refused run" end
    return absent(d, "marks") end } }

case { name = "resume J --events J (the journal being appended to)",
  files = base { ["pw.json"] = WAITP }, setup = KILLED,
  run = "touch go; obelus resume j.jsonl --events j.jsonl",
  expect = { code = 2, err = { "--events", "j.jsonl" } } }

-- A, continued: through loop, --threads, report -o and the Lua module ------------------
case { name = "loop --journal is the --planner file (--overwrite)",
  files = { ["p.json"] = '{"plan":[]}', ["planner.lua"] = PLANNER, ["tools/t.lua"] = TOOLS },
  run = "obelus loop p.json --planner planner.lua --tools tools --journal planner.lua --overwrite",
  expect = { code = 2, err = { "planner.lua" } } }

case { name = "--threads 2 with --journal the plan (--overwrite)",
  files = { ["p.json"] = instances(4), ["tools/t.lua"] = TOOLS },
  run = "obelus run p.json --tools tools --threads 2 --journal p.json --overwrite",
  expect = { code = 2, err = { "p.json", "plan" } } }

case { name = "report J -o J (the report over its own journal)",
  files = base(), setup = FINISHED,
  run = "obelus report j.jsonl -o j.jsonl",
  expect = { code = 2, err = { "j.jsonl" } } }

case { name = "--overwrite on a hard link to an unrelated file replaces the name, not the file",
  files = base { ["keep.txt"] = "precious\n" }, setup = "ln keep.txt j.jsonl",
  changes = { "j.jsonl" },
  run = "obelus run p.json --tools tools --journal j.jsonl --overwrite",
  expect = { code = 0, out = '"c": "c"', check = function(d)
    if slurp(d .. "/keep.txt") ~= "precious\n" then return false, "keep.txt was overwritten" end
    if not (slurp(d .. "/j.jsonl") or ""):find('"type":"plan"', 1, true) then
      return false, "j.jsonl is not the new journal" end
    return true end } }

case { name = "Lua module: journal = a tool file of the engine, overwrite = true",
  files = base { ["l.lua"] = lua_script [[
local obelus = require "obelus"
local e = obelus.engine { tools = { "tools" } }
local ok, err = pcall(e.run, e, "p.json", { journal = "tools/t.lua", overwrite = true })
if ok then local r = err; r:wait(); print("ran"); os.exit(0) end
io.stderr:write(tostring(err), "\n"); os.exit(2)
]] },
  run = "lua5.4 l.lua",
  expect = { code = 2, err = { "tools/t.lua" } } }

case { name = "Lua module: journal = a delegated plan, overwrite = true",
  files = {
    ["tools/t.lua"] = TOOLS, ["sub/d.json"] = DELEG["sub/d.json"], ["sub/p.json"] = DELEG["sub/p.json"],
    ["l.lua"] = lua_script [[
local obelus = require "obelus"
local e = obelus.engine { tools = { "tools" } }
local ok, err = pcall(e.run, e, "sub/p.json", { journal = "sub/d.json", overwrite = true })
if ok then local r = err; r:wait(); print("ran"); os.exit(0) end
io.stderr:write(tostring(err), "\n"); os.exit(2)
]] },
  run = "lua5.4 l.lua",
  expect = { code = 2, err = { "sub/d.json" } } }

-- C. an existing journal given to run again ---------------------------------------------
case { name = "a finished run's journal given to run again",
  files = base(), setup = FINISHED,
  run = "obelus run p.json --tools tools --journal j.jsonl",
  expect = { code = 2, err = { "j.jsonl", "obelus resume j.jsonl", "--overwrite" },
             check = function(d) return absent(d, "marks") end } }

case { name = "a killed run's journal given to run again, then resumed",
  files = base { ["pw.json"] = WAITP }, setup = KILLED .. "; cp j.jsonl j.before",
  changes = { "j.jsonl" },
  run = "obelus run pw.json --tools tools --journal j.jsonl >out1 2>err1; echo $? >rc1; " ..
        "cmp -s j.jsonl j.before && echo same >cmp1; touch go; obelus resume j.jsonl",
  expect = { code = 0, out = '"w": "w"', err = { "call w", "runs again" }, check = all(
    function(d) return file_is(d, "rc1", 2) end,
    function(d, r) return exact(d, { "a", "w" }, {}, r.err) end,
    function(d) return file_is(d, "cmp1", "same") end,
    function(d)
      local e = slurp(d .. "/err1") or ""
      if not e:find("obelus resume j.jsonl", 1, true) then
        return false, "the refused run does not name `obelus resume j.jsonl`: " .. e end
      return true end) } }

case { name = "a killed run's journal, run again with --overwrite",
  files = base { ["pw.json"] = WAITP }, setup = KILLED,
  changes = { "j.jsonl" },
  run = "touch go; obelus run pw.json --tools tools --journal j.jsonl --overwrite",
  expect = { code = 0, out = '"w": "w"', check = function(d)
    local l = lines(d .. "/j.jsonl")
    if #l == 0 or not l[1]:find('"type":"plan"', 1, true) then return false, "j.jsonl has no plan line" end
    local n = 0
    for _, x in ipairs(l) do if x:find('"journal":"run"', 1, true) then n = n + 1 end end
    if n ~= 1 then return false, ("j.jsonl holds %d run records: not replaced"):format(n) end
    return true end } }

case { name = "loop over an existing journal",
  files = { ["p.json"] = '{"plan":[]}', ["planner.lua"] = PLANNER, ["tools/t.lua"] = TOOLS },
  setup = "obelus loop p.json --planner planner.lua --tools tools --journal j.jsonl; rm -f marks",
  run = "obelus loop p.json --planner planner.lua --tools tools --journal j.jsonl",
  expect = { code = 2, err = { "j.jsonl", "obelus resume j.jsonl", "--overwrite" } } }

case { name = "a run refused (invalid plan) leaves no journal, not even an empty one",
  files = { ["p.json"] = '{"plan":[{"_tool":"nosuch","_id":"a","_outputPath":"†state.a"}]}',
            ["tools/t.lua"] = TOOLS },
  run = "obelus run p.json --tools tools --journal j.jsonl",
  expect = { code = 2, err = "nosuch", check = function(d)
    local left = io.popen("cd '" .. d .. "' && ls -A | grep -v -x -e p.json -e tools"):read("a")
    if left ~= "" then return false, "a refused run left files: " .. left:gsub("\n", " ") end
    return true end } }

case { name = "a run killed at its first tool leaves a journal with its first records",
  files = base { ["pw.json"] = WAITP }, changes = {},
  run = KILLED .. "; cat j.jsonl | tr -d '\\000'; ls -A",
  expect = { code = 0, check = function(d)
    local l = lines(d .. "/j.jsonl")
    if not (l[1] or ""):find('^{"type":"plan"') then
      return false, "the killed run's journal has no plan line first" end
    if not (l[2] or ""):find('"journal":"run"', 1, true) then
      return false, "the killed run's journal has no run record" end
    local left = io.popen("cd '" .. d .. "' && ls -A | " ..
                          "grep -v -x -e pw.json -e p.json -e tools -e j.jsonl -e marks0"):read("a")
    if left ~= "" then return false, "the killed run left other files: " .. left:gsub("\n", " ") end
    return true end } }

-- D. one writer at a time --------------------------------------------------------------
-- a run that waits holds j.jsonl; SECOND is tried meanwhile (its status is the command's);
-- then the run goes on: it must end 0, each call run once, its journal readable
local function held(second, extra_files)
  local f = base { ["pw.json"] = WAITP }
  for k, v in pairs(extra_files or {}) do f[k] = v end
  return {
    files = f,
    run = "obelus run pw.json --tools tools --journal j.jsonl >out1 2>err1 & P=$!; " .. WAIT_STARTED ..
          second .. " ; rc=$?; touch go; wait $P; echo $? >rc1; " ..
          "obelus log j.jsonl >/dev/null 2>logerr; echo $? >rclog; exit $rc",
    check = all(
      function(d) return file_is(d, "rc1", 0) end,
      function(d) return file_is(d, "rclog", 0) end,
      function(d) return exact(d, { "a", "w" }, {}) end),
  }
end

local function held_case(name, second, err, extra_files)
  local h = held(second, extra_files)
  case { name = name, files = h.files, run = h.run,
    expect = { code = 2, err = err, check = h.check } }
end

held_case("run and resume on one journal at once", "obelus resume j.jsonl",
  { "j.jsonl", "being written by another obelus (pid" })
held_case("run and run --overwrite on one journal at once",
  "obelus run pw.json --tools tools --journal j.jsonl --overwrite",
  { "j.jsonl", "being written by another obelus (pid" })
held_case("resume through a symlink to the journal a run holds", "ln -s j.jsonl jl.jsonl; obelus resume jl.jsonl",
  { "jl.jsonl", "being written by another obelus" })
held_case("Lua module: engine:run (overwrite = true) on a journal a run holds",
  "lua5.4 l.lua", { "j.jsonl", "being written by another obelus" },
  { ["l.lua"] = lua_script [[
local obelus = require "obelus"
local e = obelus.engine { tools = { "tools" } }
local ok, err = pcall(e.run, e, "p.json", { journal = "j.jsonl", overwrite = true })
if ok then local r = err; r:wait(); print("ran"); os.exit(0) end
io.stderr:write(tostring(err), "\n"); os.exit(2)
]] })

case { name = "run and resume at once on a 30-call plan: no call runs twice",
  files = base { ["pw.json"] = waitp30() },
  run = held("obelus resume j.jsonl").run,
  expect = { code = 2, err = "being written by another obelus", check = all(
    function(d) return file_is(d, "rc1", 0) end,
    function(d) return file_is(d, "rclog", 0) end,
    function(d) local ids = idlist("q", 29); ids[30] = "w"; return exact(d, ids, {}) end) } }

case { name = "two resumes of a killed run at once",
  files = base { ["pw.json"] = WAITP }, setup = KILLED, changes = { "j.jsonl" },
  run = "obelus resume j.jsonl >out1 2>err1 & P=$!; " .. WAIT_STARTED ..
        "obelus resume j.jsonl; rc=$?; touch go; wait $P; echo $? >rc1; exit $rc",
  expect = { code = 2, err = { "j.jsonl", "being written by another obelus" }, check = all(
    function(d) return file_is(d, "rc1", 0) end,
    function(d) return exact(d, { "a", "w" }, { "err1" }) end) } }

case { name = "readers (log, resolve, report, graph --journal) while a run writes",
  files = base { ["pw.json"] = WAITP },
  run = "obelus run pw.json --tools tools --journal j.jsonl >out1 2>err1 & P=$!; " .. WAIT_STARTED ..
        "obelus log j.jsonl >/dev/null && obelus resolve j.jsonl '†state.a.id' && " ..
        "obelus report j.jsonl -o r.html && obelus graph pw.json --journal j.jsonl >/dev/null; " ..
        "rc=$?; touch go; wait $P; echo $? >rc1; exit $rc",
  expect = { code = 0, out = '"a"', check = function(d) return file_is(d, "rc1", 0) end } }

case { name = "two runs started together on one new journal: one runs",
  files = base { ["pw.json"] = WAITP },
  run = "obelus run pw.json --tools tools --journal j.jsonl >o1 2>e1 & A=$!; " ..
        "obelus run pw.json --tools tools --journal j.jsonl >o2 2>e2 & B=$!; " .. WAIT_STARTED ..
        "touch go; wait $A; echo $? >ra; wait $B; echo $? >rb; cat e1 e2 >&2",
  expect = { code = 0, check = function(d)
    local a, b = trim(slurp(d .. "/ra")), trim(slurp(d .. "/rb"))
    local ok = (a == "0" and (b == "2" or b == "4")) or (b == "0" and (a == "2" or a == "4"))
    if not ok then return false, ("the two runs exited %s and %s: one 0 and one refused expected"):format(a, b) end
    return exact(d, { "a", "w" }, {}) end } }

-- E. a journal that cannot be written --------------------------------------------------
case { name = "a full disk mid-run (64 KB tmpfs), then resume once there is room",
  files = { ["p.json"] = many(60, "c", 2000), ["tools/t.lua"] = TOOLS }, secs = 60,
  run = fulldisk(""),
  expect = { code = 0, out = all_ids_out("c", 60), check = all(
    first_run_failed("mnt/j.jsonl"),
    function(d) return write_ahead(d, "j1.jsonl", "marks1") end,
    function(d) return exact(d, idlist("c", 60), { "err2" }) end) } }

case { name = "a full disk mid-run with --fsync always",
  files = { ["p.json"] = many(60, "c", 2000), ["tools/t.lua"] = TOOLS }, secs = 60,
  run = fulldisk("--fsync always", "--fsync always"),
  expect = { code = 0, out = all_ids_out("c", 60), check = all(
    first_run_failed("mnt/j.jsonl"),
    function(d) return write_ahead(d, "j1.jsonl", "marks1") end,
    function(d) return exact(d, idlist("c", 60), { "err2" }) end) } }

case { name = "a full disk mid-run with --threads 2 (40 instances)",
  files = { ["p.json"] = instances(40), ["tools/t.lua"] = TOOLS }, secs = 60,
  run = fulldisk("--threads 2"),
  expect = { code = 0, out = '"i40": "b@i40"', check = function(d)
    local ok, why = first_run_failed("mnt/j.jsonl")(d)
    if not ok then return ok, why end
    ok, why = write_ahead(d, "j1.jsonl", "marks1")
    if not ok then return ok, why end
    local ids = {}
    for i = 1, 40 do ids[#ids + 1] = "a@i" .. i; ids[#ids + 1] = "b@i" .. i end
    return exact(d, ids, { "err2" }) end } }

case { name = "a full disk mid-run inside a delegated plan",
  files = { ["p.json"] = '{"plan":[{"_delegate":"d.json","_id":"del","_outputPath":"†state.d"}],"output":"†state.d"}',
            ["d.json"] = many(60, "s", 2000), ["tools/t.lua"] = TOOLS }, secs = 60,
  run = fulldisk(""),
  expect = { code = 0, out = all_ids_out("s", 60), check = all(
    first_run_failed("mnt/j.jsonl"),
    function(d) return write_ahead(d, "j1.jsonl", "marks1") end,
    function(d) return exact(d, idlist("s", 60), { "err2" }) end) } }

case { name = "a first record that does not fit the disk: exit 4, no journal, nothing ran",
  files = { ["p.json"] = '{"context":[{"type":"input","data":{"blob":"' .. string.rep("y", 100000) ..
                         '"}}],"plan":[{"_tool":"mark","_id":"a","_outputPath":"†state.a"}],"output":"†state.a.id"}',
            ["tools/t.lua"] = TOOLS },
  run = mount("64k") .. "obelus run p.json --tools tools --journal mnt/j.jsonl; rc=$?; ls -A mnt > inmnt; exit $rc",
  expect = { code = 4, err = { "mnt/j.jsonl", "No space left on device" }, check = all(
    function(d) return absent(d, "marks") end,
    function(d) return file_is(d, "inmnt", "") end) } }

case { name = "a resume that meets a full disk too, then one with room",
  files = { ["p.json"] = many(60, "c", 2000), ["tools/t.lua"] = TOOLS }, secs = 60,
  run = mount("64k") ..
    "obelus run p.json --tools tools --journal mnt/j.jsonl >out1 2>err1; echo $? >rc1; " ..
    "cp mnt/j.jsonl j1.jsonl; cp marks marks1; " ..
    "obelus resume mnt/j.jsonl >outr 2>errr; echo $? >rcr; " ..
    "mount -o remount,size=8m mnt; obelus resume mnt/j.jsonl 2>err2; rc=$?; cat errr err2 >&2; exit $rc",
  expect = { code = 0, out = all_ids_out("c", 60), check = all(
    first_run_failed("mnt/j.jsonl"),
    function(d) return file_is(d, "rcr", 4) end,
    function(d) return file_is(d, "outr", "") end,
    function(d) return exact(d, idlist("c", 60), { "errr", "err2" }) end) } }

case { name = "--events on a full disk (64 KB tmpfs)",
  files = { ["p.json"] = many(600, "c", 10), ["tools/t.lua"] = TOOLS },
  run = mount("64k") .. "obelus run p.json --tools tools --events mnt/ev.jsonl >/dev/null",
  expect = { code = 4, err = { "mnt/ev.jsonl", "No space left on device" } } }

case { name = "ulimit -f: the journal grows past the file-size limit, then resume",
  files = { ["p.json"] = many(60, "c", 2000), ["tools/t.lua"] = TOOLS },
  changes = {},
  run = "(ulimit -f 40; exec obelus run p.json --tools tools --journal j.jsonl) >out1 2>err1; echo $? >rc1; " ..
        "cp j.jsonl j1.jsonl; cp marks marks1; obelus resume j.jsonl 2>err2; rc=$?; cat err1 err2 >&2; exit $rc",
  expect = { code = 0, out = all_ids_out("c", 60), err = { "j.jsonl", "File too large" }, check = all(
    function(d) return file_is(d, "rc1", 4) end,
    function(d) return file_is(d, "out1", "") end,
    function(d) return write_ahead(d, "j1.jsonl", "marks1") end,
    function(d) return exact(d, idlist("c", 60), { "err2" }) end) } }

case { name = "Lua module: a journal on a full disk stops the run (run:wait() nil, reason)",
  files = { ["p.json"] = many(60, "c", 2000), ["tools/t.lua"] = TOOLS, ["l.lua"] = lua_script [[
local obelus = require "obelus"
local e = obelus.engine { tools = { "tools" } }
local r = e:run("p.json", { journal = "mnt/j.jsonl" })
local st, why = r:wait()
io.stderr:write(tostring(st), " ", tostring(why), "\n")
os.exit(st == nil and 4 or st)
]] },
  run = mount("64k") .. "lua5.4 l.lua; rc=$?; cp mnt/j.jsonl j1.jsonl; exit $rc",
  expect = { code = 4, err = "No space left on device",
             check = function(d) return write_ahead(d, "j1.jsonl", "marks") end } }

-- F. /dev/full ------------------------------------------------------------------------
case { name = "run > /dev/full",
  files = base(), run = "obelus run p.json --tools tools > /dev/full",
  expect = { code = 4, err = "stdout" } }

case { name = "run --events /dev/full",
  files = base(), run = "obelus run p.json --tools tools --events /dev/full",
  expect = { code = 4, err = { "/dev/full", "events" } } }

case { name = "run --journal /dev/full: nothing runs",
  files = base(), run = "obelus run p.json --tools tools --journal /dev/full",
  expect = { code = 4, err = "/dev/full", check = function(d) return absent(d, "marks") end } }

case { name = "resume > /dev/full",
  files = base { ["pw.json"] = WAITP }, setup = KILLED, changes = { "j.jsonl" },
  run = "touch go; obelus resume j.jsonl > /dev/full",
  expect = { code = 4, err = "stdout" } }

local function nonzero_said(_, r)
  if trim(r.err) == "" then return false, "exit " .. r.code .. " but nothing on stderr" end
  return true
end

case { name = "log J > /dev/full",
  files = base(), setup = FINISHED, run = "obelus log j.jsonl > /dev/full",
  expect = { code = { 1, 2, 4 }, check = nonzero_said } }

case { name = "resolve J EXPR > /dev/full",
  files = base(), setup = FINISHED, run = "obelus resolve j.jsonl '†state.c' > /dev/full",
  expect = { code = { 1, 2, 4 }, check = nonzero_said } }

case { name = "report J -o /dev/full",
  files = base(), setup = FINISHED, run = "obelus report j.jsonl -o /dev/full",
  expect = { code = { 1, 2, 4 }, check = nonzero_said } }

-- G. (item 11) a journal edited by hand ------------------------------------------------
-- FINISHED's j.jsonl of CHAIN, line by line:
--   1 plan  2 run  3 start a  4 out a  5 settled a  6 start b  7 out b  8 settled b
--   9 start c  10 out c  11 settled c  12 end
local function edited(sed) return FINISHED .. "; sed -i '" .. sed .. "' j.jsonl" end
local NO_END = '/"journal":"end"/d'

case { name = "settled record deleted (a finished run): resume", item = 11,
  files = base(), setup = edited('/"settled","id":"b"/d'),
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:8", "inconsistent journal" } } }

case { name = "settled record deleted (a killed run): resume", item = 11,
  files = base(), setup = edited('/"settled","id":"b"/d;' .. NO_END),
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:8", "inconsistent journal" },
             check = function(d) return absent(d, "marks") end } }

case { name = "output message deleted: resume", item = 11,
  files = base(), setup = edited('/"_path":"b"/d;' .. NO_END),
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:7", "inconsistent journal", "call b" },
             check = function(d) return absent(d, "marks") end } }

case { name = "output message deleted: resolve says absent", item = 11,
  files = base(), setup = edited('/"_path":"b"/d'),
  run = "obelus resolve j.jsonl '†state.b'",
  expect = { code = 1 } }

case { name = "settled state edited done -> failed (no error message): resume", item = 11,
  files = base(), setup = edited('/"settled","id":"b"/s/"done"/"failed"/;' .. NO_END),
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = "inconsistent journal", check = function(_, r)
    if not r.err:find("j.jsonl:[78]:") then return false, "the refusal names neither line 7 nor 8" end
    return true end } }

case { name = "a call's lines each doubled (it settled twice): resume", item = 11,
  files = base(), setup = edited('/"journal":"start","id":"b"/,/"settled","id":"b"/p;' .. NO_END),
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:", "inconsistent journal" } } }

case { name = "a call id not in the plan: resume", item = 11,
  files = base(), setup = edited('s/"id":"c"/"id":"ghost"/;' .. NO_END),
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:9", "ghost" } } }

case { name = "a scope not in the plan: resume", item = 11,
  files = base(), setup = edited('/"start","id":"c"/s/"id":"c"/"scope":"#7","id":"c"/;' .. NO_END),
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:9", "#7" } } }

case { name = "torn last line (no newline): resume takes it up", item = 11,
  files = base(), setup = FINISHED .. "; head -c -4 j.jsonl > t && mv t j.jsonl", changes = { "j.jsonl" },
  run = "obelus resume j.jsonl",
  expect = { code = 0, out = '"c": "c"', err = { "j.jsonl:12", "torn" } } }

case { name = "torn last line: log reports and ignores it", item = 11,
  files = base(), setup = FINISHED .. "; head -c -4 j.jsonl > t && mv t j.jsonl",
  run = "obelus log j.jsonl",
  expect = { code = 0, out = "†state.c", err = { "j.jsonl:12", "torn" } } }

case { name = "torn last line: report reports and ignores it", item = 11,
  files = base(), setup = FINISHED .. "; head -c -4 j.jsonl > t && mv t j.jsonl",
  run = "obelus report j.jsonl -o r.html",
  expect = { code = 0, err = { "j.jsonl:12", "torn" } } }

case { name = "last line cut with its newline kept (an editor's save): resume", item = 11,
  files = base(), setup = FINISHED .. "; head -c -4 j.jsonl > t && echo >> t && mv t j.jsonl",
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = "j.jsonl:12" } }

case { name = "a garbage line: resume", item = 11,
  files = base(), setup = edited("6i hello, I edited this"),
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = "j.jsonl:6" } }

case { name = "a garbage line: log", item = 11,
  files = base(), setup = edited("6i hello, I edited this"),
  run = "obelus log j.jsonl",
  expect = { code = 2, err = "j.jsonl:6" } }

case { name = "NUL bytes in the middle of a journal: resume", item = 11,
  files = base(),
  setup = FINISHED .. "; { head -n 5 j.jsonl; head -c 64 /dev/zero; tail -n +6 j.jsonl; } > t && mv t j.jsonl",
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = "j.jsonl:6" } }

case { name = "an inconsistent journal with a torn tail: the refusal cuts nothing", item = 11,
  files = base(),
  setup = edited('/"settled","id":"b"/d;' .. NO_END) .. "; printf '{\"journal\":\"sett' >> j.jsonl",
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:8", "inconsistent journal" } } }

local OTHER = '{"plan":[{"_tool":"mark","_id":"x","_outputPath":"†state.x"},' ..
              '{"_tool":"mark","_id":"y","_outputPath":"†state.y"}],"output":"†state.y.id"}'

case { name = "a journal of another plan (its plan line swapped): resume", item = 11,
  files = base { ["q.json"] = OTHER },
  setup = FINISHED .. "; obelus run q.json --tools tools --journal jq.jsonl; rm -f marks; " ..
          "{ head -n 1 jq.jsonl; tail -n +2 j.jsonl | grep -v '\"journal\":\"end\"'; } > t && mv t j.jsonl",
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:3", "inconsistent journal" },
             check = function(d) return absent(d, "marks") end } }

case { name = "two journals concatenated: resume", item = 11,
  files = base { ["q.json"] = OTHER },
  setup = FINISHED .. "; obelus run q.json --tools tools --journal jq.jsonl; rm -f marks; " ..
          "cat jq.jsonl >> j.jsonl",
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = "j.jsonl:" } }

case { name = "the plan file replaced by another plan since the run: resume", item = 11,
  files = base { ["pw.json"] = WAITP, ["q.json"] = OTHER }, setup = KILLED .. "; cp q.json pw.json",
  run = "touch go; obelus resume j.jsonl",
  expect = { code = 2, err = { "pw.json", "changed" }, check = function(d) return absent(d, "marks") end } }

local DJ = {
  ["tools/t.lua"] = TOOLS,
  ["d.json"] = '{"plan":[{"_tool":"mark","_id":"s1","_outputPath":"†state.s1"},' ..
               '{"_tool":"mark","_id":"s2","x":"†state.s1","_outputPath":"†state.s2"}],"output":"†state.s2.id"}',
  ["p.json"] = '{"plan":[{"_tool":"mark","_id":"a","_outputPath":"†state.a"},' ..
               '{"_delegate":"d.json","_id":"del","x":"†state.a","_outputPath":"†state.d"}],' ..
               '"output":{"a":"†state.a.id","d":"†state.d"}}',
}
-- the delegating call del settled nothing: a killed run inside its delegated plan
local D_KILLED = "obelus run p.json --tools tools --journal j.jsonl; rm -f marks; " ..
  "sed -i '/\"journal\":\"end\"/d;/\"settled\",\"id\":\"del\"/d;/\"_path\":\"d\"/d' j.jsonl"

case { name = "a delegated plan's output message deleted: resume refuses before running", item = 11,
  files = DJ, setup = D_KILLED .. "; sed -i '/\"_path\":\"s2\"/d' j.jsonl",
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:15", "inconsistent journal" },
             check = function(d) return absent(d, "marks") end } }

case { name = "a delegated plan's record names a call not in it: resume refuses before running", item = 11,
  files = DJ, setup = D_KILLED .. "; sed -i 's/\"id\":\"s2\"/\"id\":\"nope\"/' j.jsonl",
  run = "obelus resume j.jsonl",
  expect = { code = 2, err = { "j.jsonl:14", "nope" }, check = function(d) return absent(d, "marks") end } }

case { name = "Lua module: engine:resume of a journal with a settled record deleted", item = 11,
  files = base { ["l.lua"] = lua_script [[
local obelus = require "obelus"
local e = obelus.engine { tools = { "tools" } }
local ok, err = pcall(e.resume, e, "j.jsonl")
if ok then local st = err:wait(); print("resumed", st, obelus.encode(err:output())); os.exit(0) end
io.stderr:write(tostring(err), "\n"); os.exit(2)
]] }, setup = edited('/"settled","id":"b"/d;' .. NO_END),
  run = "lua5.4 l.lua",
  expect = { code = 2, err = { "j.jsonl:8", "inconsistent" } } }

case { name = "resume of the plan file itself leaves it whole", item = 11,
  files = base(), run = "obelus resume p.json",
  expect = { code = 2, err = "p.json" } }

return cases
