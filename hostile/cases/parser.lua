-- hostile/cases/parser.lua -- issue 26, items 6, 7 and 8: what obelus makes of the text
-- and values it is given. It attacks the plan parser and validator (a 2 MB plan whose
-- _outputPath has 1,000,000 segments; nesting deeper than anything can hold; duplicate
-- keys; NUL bytes that would cut a name, a path or an id short; bytes that are not UTF-8
-- and lone surrogates), the values tools hand back (a NUL in a key, a key or string that
-- is not UTF-8, NaN, inf, a function, a table that holds itself) and what log, resume,
-- resolve and report make of the journal afterwards, `_retry`'s arithmetic and its bad
-- values, and schemas that do not compile (tool files, context messages, `obelus schema`).
-- Every case goes through the command a user would use (check, graph, run, resume, log,
-- resolve, report, tools, schema, mcp, loop, or the Lua module) and expects what the docs
-- promise: exit 2 naming the file, call, key and line before anything runs, exit 1 naming
-- the call when a value goes bad at run time, and a journal every reader can read.

-- --- what the cases share ---------------------------------------------------------------
local S = require "support"
local slurp, exists, all = S.slurp, S.exists, S.all
local function realpath(p)
  local h = io.popen("cd " .. p .. " && pwd")
  local r = h:read("l")
  h:close()
  return r
end
local HERE = debug.getinfo(1, "S").source:sub(2):match("(.*)/") or "."
local ROOT = realpath(HERE .. "/../..")

-- the tools of every case (t.lua in its folder): a marker that notes in ran.txt that a
-- call ran, and tools that return every kind of value a journal cannot hold
local TOOLS = [==[
local obelus = require "obelus"
local function mark(what)
  local f = assert(io.open("ran.txt", "a"))
  f:write(tostring(what), "\n")
  f:close()
end
local function nest(n)
  local t = 1
  for _ = 1, n do t = { t } end
  return t
end
local bad = {
  nulkey = function() return { ok = 1, inner = { ["a\0b"] = 1 } } end,
  utf8key = function() return { ["a\255b"] = 1 } end,
  utf8val = function() return { s = "a\255b" } end,
  nan = function() return { v = 0 / 0 } end,
  inf = function() return { v = { 1, math.huge } } end,
  func = function() return { f = print } end,
  cycle = function() local t = {}; t[1], t[2] = t, t; return t end,
  deep = function(c) return nest(c.depth) end,
  nulstr = function() return { s = "a\0b" } end,
  msgkind = function() return obelus.message { kind = "state\0junk", path = "x", value = 1 } end,
  msgpath = function() return obelus.message { path = "x\0junk", value = 1 } end,
  msgmethod = function() return obelus.message { path = "x", value = 1, method = "set\0junk" } end,
  branchpath = function() return obelus.branch("\u{2020}state.y\0junk", 5) end,
  errutf8 = function() error("bad \255 byte", 0) end,
  errnulkey = function() error({ ["a\0b"] = 1 }) end,
}
return {
  { name = "echo", description = "returns its value param",
    run = function(c) return c.value end },
  { name = "marker", description = "notes in ran.txt that it ran; returns its value param",
    run = function(c) mark(c.value == nil and "ran" or c.value); return c.value end },
  { name = "bad", description = "returns (or raises) the bad value named by `what`",
    run = function(c) return bad[c.what](c) end },
  { name = "always_fails", description = "raises an error on every attempt",
    run = function(_, ctx) error("failure " .. ctx.attempt, 0) end },
  { name = "num", description = "returns 123", run = function() return 123 end },
  { name = "typed", description = "wants a string s, and n.deep an integer",
    schema = { type = "object",
               properties = { s = { type = "string" },
                              n = { type = "object", properties = { deep = { type = "integer" } } } },
               required = { "s" } },
    run = function(c) mark("typed"); return c.s end },
  { name = "think", description = "a latent tool" },
}
]==]

-- a Lua script's opening that finds the module as the brief says
local MODULE = ("package.cpath = %q .. package.cpath\npackage.path = %q .. package.path\n"):format(
  ROOT .. "/lib/?.so;", ROOT .. "/lua/?.lua;" .. ROOT .. "/lua/?/init.lua;")

local function shq(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end



-- nothing ran: no call of the marker (or typed) wrote ran.txt
local function nothing_ran(dir)
  local s = slurp(dir .. "/ran.txt")
  if s then return false, "a call ran although the plan was invalid: ran.txt holds " .. s:sub(1, 80) end
  return true
end

local function absent(name)
  return function(dir)
    if exists(dir .. "/" .. name) then return false, name .. " exists: it should not" end
    return true
  end
end


-- stderr stays short, whatever the size of what it quotes
local function short_err(limit)
  return function(_, r)
    if #r.err > limit then return false, ("stderr holds %d bytes"):format(#r.err) end
    return true
  end
end

-- stdout is empty (exit 2: nothing ran, nothing printed)
local function empty_out(out)
  if out ~= "" then return false, "stdout is not empty: " .. out:sub(1, 100) end
  return true
end

-- after `obelus run ... --journal j.jsonl`: every reader takes the journal; resume ends
-- as the run did; the case exits with the run's status. expr: what resolve must find
-- (resolve's arguments after the file, shell-quoted here); resume_args: given to resume
local function readers(expr, resume_args)
  return "; r=$?; " ..
    "obelus log j.jsonl >/dev/null 2>log.err || " ..
    "{ echo 'obelus log refused the journal:' >&2; cat log.err >&2; exit 91; }; " ..
    "obelus resume j.jsonl " .. (resume_args or "") .. " >resume.out 2>resume.err; s=$?; " ..
    "[ $s = $r ] || { echo \"obelus resume exited $s, the run $r:\" >&2; cat resume.err >&2; exit 92; }; " ..
    "obelus resolve j.jsonl " .. expr .. " >/dev/null 2>resolve.err || " ..
    "{ echo 'obelus resolve refused the journal or found nothing:' >&2; cat resolve.err >&2; exit 93; }; " ..
    "obelus report j.jsonl -o r.html 2>report.err && [ -s r.html ] || " ..
    "{ echo 'obelus report refused the journal:' >&2; cat report.err >&2; exit 94; }; exit $r"
end

-- each command must exit 2 naming `needle`; the case exits 2 when all did (their stderr
-- then), else 1 saying which first
local function refuses_all(cmds, needle)
  local parts = {}
  for _, c in ipairs(cmds) do
    parts[#parts + 1] = c .. " >/dev/null 2>e.txt; c=$?; " ..
      "if [ $c != 2 ] || ! grep -qF -- " .. shq(needle) .. " e.txt; then printf '%s: exit %s, not 2 naming %s: ' " ..
      shq(c) .. " \"$c\" " .. shq(needle) .. " >&2; cat e.txt >&2; exit 1; fi; cat e.txt >> all.txt"
  end
  return table.concat(parts, "; ") .. "; cat all.txt >&2; exit 2"
end

-- a Lua script that makes j.jsonl from j0.jsonl: each edit replaces text (plain) on a
-- line; keep: the number of lines kept (all by default)
local function editor(edits, keep)
  local s = { "local t = {}", "for l in io.lines('j0.jsonl') do t[#t + 1] = l end" }
  for _, e in ipairs(edits) do
    s[#s + 1] = ("do local n, from, to = %d, %q, %q\n" ..
                 "  local i, j = t[n]:find(from, 1, true)\n" ..
                 "  assert(i, 'edit: ' .. from .. ' is not on line ' .. n)\n" ..
                 "  t[n] = t[n]:sub(1, i - 1) .. to .. t[n]:sub(j + 1) end"):format(e[1], e[2], e[3])
  end
  s[#s + 1] = "local f = assert(io.open('j.jsonl', 'wb'))"
  s[#s + 1] = ("for k = 1, %s do f:write(t[k], '\\n') end"):format(keep and tostring(keep) or "#t")
  s[#s + 1] = "f:close()"
  return table.concat(s, "\n") .. "\n"
end

local function rep(s, n) return string.rep(s, n) end

-- text nested n levels: arrays around 1
local function nested(n) return rep("[", n) .. "1" .. rep("]", n) end

-- a plan whose one call writes 1 to a path of n segments
local function segments(n) return "a" .. rep(".a", n - 1) end

-- the journal of a plan of one call, echo 1 to x: line 4 is its output message
local ONE = '[{"_tool":"echo","_id":"a","value":1,"_outputPath":"x"}]'
-- a journal of two calls: a (echo 1 to x), then b (marker, reads x); line 5 settles a
local TWO = '[{"_tool":"echo","_id":"a","value":1,"_outputPath":"x"},' ..
            '{"_tool":"marker","_id":"b","value":"\u{2020}state.x","_outputPath":"y"}]'
local JOURNAL_OF = "obelus run p.json --tools t.lua --journal j0.jsonl >/dev/null 2>&1; lua5.4 edit.lua; rm -f ran.txt"

local cases = {}
local function case(c)
  c.files = c.files or {}
  if c.files["t.lua"] == nil then c.files["t.lua"] = TOOLS end
  cases[#cases + 1] = c
end

-- =========================================================================================
-- Item 6: "A 2 MB plan with one 1,000,000-segment _outputPath SIGSEGVs check, graph and run
-- (recursive free in ob_plan.c)." What to build: "path depth and segment counts have limits
-- with clear errors; every recursive walk over plan-controlled depth is iterative or bounded."
-- =========================================================================================
local BIG = function()
  return '[{"_tool":"marker","value":1,"_outputPath":"' .. segments(1000000) .. '"}]'
end

case { name = "check of a 2 MB plan whose _outputPath has 1,000,000 segments", item = 6,
  files = { ["p.json"] = BIG },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "p.json: call #0 (marker): _outputPath", "a path has at most 1000 segments" },
             check = short_err(65536) } }

case { name = "graph of the 1,000,000-segment _outputPath: nothing drawn", item = 6,
  files = { ["p.json"] = BIG },
  run = "obelus graph p.json",
  expect = { code = 2, err = "a path has at most 1000 segments", out = empty_out, check = short_err(65536) } }

case { name = "run of the 1,000,000-segment _outputPath under --journal: nothing ran, no journal", item = 6,
  files = { ["p.json"] = BIG },
  run = "obelus run p.json --tools t.lua --journal j.jsonl",
  expect = { code = 2, err = "a path has at most 1000 segments", out = empty_out,
             check = all(nothing_ran, absent("j.jsonl"), short_err(65536)) } }

case { name = "300,000 bracketed segments x[\"\"][\"\"]... in an _outputPath", item = 6,
  files = { ["p.json"] = function()
    return '[{"_tool":"marker","value":1,"_outputPath":"x' .. rep('[\\"\\"]', 300000) .. '"}]'
  end },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "call #0 (marker): _outputPath", "a path has at most 1000 segments" } } }

case { name = "a 1,000,000-segment reference in the output template", item = 6,
  files = { ["p.json"] = function()
    return '{"plan":[{"_tool":"marker","value":1,"_outputPath":"x"}],"output":{"v":"\u{2020}state.' ..
           segments(1000000) .. '"}}'
  end },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = { "output", "a path has at most 1000 segments" }, check = nothing_ran } }

case { name = "a 1,000,000-segment _outputPath in a delegated plan: check of the parent", item = 6,
  files = { ["sub.json"] = BIG,
            ["p.json"] = '[{"_delegate":"sub.json","_id":"d","_outputPath":"r"}]' },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "call d", "sub.json", "a path has at most 1000 segments" } } }

case { name = "resolve over a log whose message has a 1,000,000-segment _path", item = 6,
  files = { ["log.json"] = function()
    return '[{"type":"data","kind":"state","data":{"a":1},"_path":"' .. segments(1000000) ..
           '","_call":{"_tool":"echo"}}]'
  end },
  run = "obelus resolve log.json '\u{2020}state.a'",
  expect = { code = 2, err = { "log.json", "a path has at most 1000 segments" }, out = empty_out } }

case { name = "an _outputPath of 1000 segments (the limit) runs, and every reader reads its journal", item = 6,
  files = { ["p.json"] = '[{"_tool":"echo","value":7,"_outputPath":"' .. segments(1000) .. '"}]' },
  run = "obelus run p.json --tools t.lua --journal j.jsonl >/dev/null" ..
        readers("'\u{2020}state." .. segments(1000) .. "'"),
  changes = { "j.jsonl" },
  expect = { code = 0 } }

case { name = "resume of a journal whose line 4 has a 100,000-segment _path names the line", item = 6,
  files = { ["p.json"] = ONE,
            ["edit.lua"] = editor({ { 4, '"_path":"x"', '"_path":"x' .. rep(".a", 100000) .. '"' } }) },
  setup = JOURNAL_OF,
  run = refuses_all({ "obelus log j.jsonl", "obelus resolve j.jsonl '\u{2020}state'",
                      "obelus resume j.jsonl" }, "j.jsonl:4"),
  changes = { "j.jsonl" },
  expect = { code = 2 } }

-- =========================================================================================
-- Item 6 (brief): very deep nesting of arrays and objects in a plan, in a tool's result,
-- in an --input. docs/plan-format.md: 2,047 levels of text; 2,040 for a plan and a result under its
-- path; "every journal line stays readable".
-- =========================================================================================
case { name = "a plan text nested 100,000 levels: a parse error naming the line, no crash", item = 6,
  files = { ["p.json"] = function() return nested(100000) end },
  run = "obelus check p.json",
  expect = { code = 2, err = { "p.json", "line 1", "maximum parsing depth reached" } } }

case { name = "a call's param nested 2041 levels (parses, but no journal could hold it)", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","value":' .. nested(2039) .. ',"_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua --journal j.jsonl",
  expect = { code = 2, err = "the plan is nested 2041 levels deep: at most 2040",
             check = all(nothing_ran, absent("j.jsonl")) } }

case { name = "an --input nested 50,000 levels", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","value":"\u{2020}input","_outputPath":"x"}]',
            ["in.json"] = function() return nested(50000) end },
  run = "obelus run p.json --tools t.lua --input @in.json",
  expect = { code = 2, err = { "--input", "maximum parsing depth reached" }, check = nothing_ran } }

case { name = "an --input nested 2047 levels (the most text may nest) under --journal: " ..
              "refused, or a journal every reader reads", item = 6,
  files = { ["p.json"] = '[{"_tool":"echo","value":1,"_outputPath":"x"}]',
            ["in.json"] = nested(2047) },
  run = "obelus run p.json --tools t.lua --input @in.json --journal j.jsonl >/dev/null 2>run.err; r=$?; " ..
        "cat run.err >&2; if [ $r = 2 ]; then grep -q -- --input run.err && exit 0; exit 2; fi; " ..
        "obelus log j.jsonl >/dev/null && obelus resume j.jsonl >/dev/null",
  expect = { code = 0 } }

case { name = "a tool's result nested 100,000 levels fails its call; log, resume, resolve, report read the journal",
  item = 6,
  files = { ["p.json"] = '[{"_tool":"bad","what":"deep","depth":100000,"_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua --journal j.jsonl" .. readers("'\u{2020}error.id'"),
  changes = { "j.jsonl" },
  expect = { code = 1, err = { "call #0 (bad)", "nested", "levels" } } }

case { name = "a tool's result nested 2038 levels (the deepest a journal holds) is written and read back",
  item = 6,
  files = { ["p.json"] = '[{"_tool":"bad","what":"deep","depth":2038,"_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua --journal j.jsonl >/dev/null" .. readers("'\u{2020}state.x'"),
  changes = { "j.jsonl" },
  expect = { code = 0 } }

case { name = "a delegated plan's result too deep for its parent's path fails the delegating call",
  item = 6,
  files = { ["sub.json"] = '[{"_tool":"bad","what":"deep","depth":2036,"_outputPath":"x"}]',
            ["p.json"] = '[{"_delegate":"sub.json","_id":"d","_outputPath":"r.s.t"}]' },
  run = "obelus run p.json --tools t.lua --journal j.jsonl" .. readers("'\u{2020}error.id'"),
  changes = { "j.jsonl" },
  expect = { code = 1, err = { "call d", "levels deep" } } }

case { name = "a journal line nested 5000 levels: log, resolve, report and resume refuse it naming the line",
  item = 6,
  files = { ["p.json"] = ONE,
            ["edit.lua"] = editor({ { 4, '"_outputMethod":"set"', '"_outputMethod":"set","z":' .. nested(5000) } }) },
  setup = JOURNAL_OF,
  run = refuses_all({ "obelus log j.jsonl", "obelus resolve j.jsonl '\u{2020}state.x'",
                      "obelus report j.jsonl -o r.html", "obelus resume j.jsonl" }, "j.jsonl:4"),
  changes = { "j.jsonl" },
  expect = { code = 2 } }

-- =========================================================================================
-- Item 6: "Duplicate keys are last-wins ({"_tool":"nosuch","_tool":"echo"} runs echo)."
-- What to build: "Duplicate keys ... in plan keys ... are validation errors." Brief:
-- duplicate keys anywhere in a plan (call keys, params, context, output template).
-- =========================================================================================
case { name = "the issue's plan: _tool given twice runs neither", item = 6,
  files = { ["p.json"] = '[{"_tool":"nosuch","_tool":"marker"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = { "p.json", "line 1, column", "duplicate object key near '\"_tool\"'" },
             out = empty_out, check = nothing_ran } }

case { name = "a duplicate key spelt with an escape (\"\\u005ftool\" is \"_tool\")", item = 6,
  files = { ["p.json"] = '[{"_tool":"nosuch","\\u005ftool":"marker"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = "duplicate object key", check = nothing_ran } }

case { name = "\"plan\" given twice at the top: graph draws nothing", item = 6,
  files = { ["p.json"] = '{"plan":[{"_tool":"echo","value":1,"_outputPath":"x"}],' ..
                         '"plan":[{"_tool":"echo","value":2,"_outputPath":"y"}]}' },
  run = "obelus graph p.json",
  expect = { code = 2, err = "duplicate object key near '\"plan\"'", out = empty_out } }

case { name = "a duplicate key in a context message's data", item = 6,
  files = { ["p.json"] = '{"context":[{"type":"state","data":{"limit":1,"limit":1000000}}],' ..
                         '"plan":[{"_tool":"marker","value":"\u{2020}state.limit","_outputPath":"x"}]}' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = "duplicate object key near '\"limit\"'", check = nothing_ran } }

case { name = "a duplicate key in --input @FILE names the file", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","value":"\u{2020}input.a","_outputPath":"x"}]',
            ["in.json"] = '{"a":1,"a":2}' },
  run = "obelus run p.json --tools t.lua --input @in.json",
  expect = { code = 2, err = { "--input", "in.json", "duplicate object key near '\"a\"'" }, check = nothing_ran } }

case { name = "a duplicate key in a delegated plan: check and run of the parent refuse it", item = 6,
  files = { ["sub.json"] = '[{"_tool":"nosuch","_tool":"marker","value":1,"_outputPath":"x"}]',
            ["p.json"] = '[{"_delegate":"sub.json","_id":"d","_outputPath":"r"}]' },
  run = refuses_all({ "obelus check p.json --tools t.lua", "obelus run p.json --tools t.lua" }, "sub.json"),
  expect = { code = 2, err = "duplicate object key", check = nothing_ran } }

case { name = "a delegated plan rewritten with a duplicate key while the run goes: the call fails, " ..
              "its calls do not run", item = 6,
  files = { ["w.lua"] = 'return { { name = "write", run = function(c) local f = assert(io.open(c.file, "w")) ' ..
                        'f:write(c.text) f:close() return true end } }',
            ["sub.json"] = '[{"_tool":"echo","value":1,"_outputPath":"x"}]',
            ["p.json"] = '[{"_tool":"write","_id":"w","file":"sub.json","text":' ..
                         '"[{\\"_tool\\":\\"nosuch\\",\\"_tool\\":\\"marker\\",\\"_outputPath\\":\\"x\\"}]",' ..
                         '"_outputPath":"written"},' ..
                         '{"_delegate":"sub.json","_id":"d","after":"\u{2020}state.written","_outputPath":"r"}]' },
  run = "obelus run p.json --tools t.lua --tools w.lua",
  changes = { "sub.json" },
  expect = { code = 1, err = { "call d", "duplicate object key" }, check = nothing_ran } }

case { name = "a duplicate key in a journal line: log, resolve, report and resume refuse it naming the line",
  item = 6,
  files = { ["p.json"] = ONE,
            ["edit.lua"] = editor({ { 4, '"kind":"state"', '"kind":"error","kind":"state"' } }) },
  setup = JOURNAL_OF,
  run = refuses_all({ "obelus log j.jsonl", "obelus resolve j.jsonl '\u{2020}state.x'",
                      "obelus report j.jsonl -o r.html", "obelus resume j.jsonl" }, "j.jsonl:4"),
  changes = { "j.jsonl" },
  expect = { code = 2, err = "duplicate object key" } }

case { name = "run_plan over MCP with a duplicate _tool: a parse error, and the server goes on", item = 6,
  files = { ["in.jsonl"] = table.concat({
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",' ..
      '"capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_plan","arguments":' ..
      '{"plan":[{"_tool":"nosuch","_tool":"marker","_outputPath":"x"}]}}}',
    '{"jsonrpc":"2.0","id":3,"method":"ping"}' }, "\n") .. "\n" },
  run = "obelus mcp --tools t.lua < in.jsonl",
  expect = { code = 0, out = function(out)
    if not out:find("duplicate object key", 1, true) then return false, "no answer names the duplicate key" end
    if not out:find('"id":3,"result"', 1, true) then return false, "the ping after it got no answer" end
    return true
  end, check = nothing_ran } }

-- =========================================================================================
-- Item 6: "a NUL truncates ("_tool":"echo\u0000x" runs echo; a _delegate with a NUL escapes
-- its check)". What to build: "NUL bytes in plan keys, tool names, paths and ids are
-- validation errors." Brief: in keys, tool names, _id, _outputPath, references, _delegate.
-- =========================================================================================
case { name = "_tool \"marker\\u0000x\" does not run marker", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker\\u0000x","value":1,"_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = { "call #0", "_tool holds a NUL byte" }, check = nothing_ran } }

case { name = "an _id holding a NUL byte: graph refuses it", item = 6,
  files = { ["p.json"] = '[{"_tool":"echo","_id":"a\\u0000b","value":1,"_outputPath":"x"}]' },
  run = "obelus graph p.json",
  expect = { code = 2, err = "NUL byte", out = empty_out } }

case { name = "a _delegate with a NUL byte before ../ does not escape its check", item = 6,
  files = { ["sub.json"] = '[{"_tool":"marker","value":1,"_outputPath":"x"}]',
            ["p.json"] = '[{"_delegate":"sub.json\\u0000/../../../../etc/passwd","_id":"d","_outputPath":"r"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = { "call d", "_delegate holds a NUL byte" }, check = nothing_ran } }

case { name = "a NUL byte in a bracketed key of an _outputPath", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","value":1,"_outputPath":"x[\\"a\\\\u0000b\\"]"}]' },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "call #0 (marker): _outputPath", "NUL byte" } } }

case { name = "a NUL byte in a reference's bracketed key, deep in a param", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","value":{"k":["\u{2020}state[\\"a\\\\u0000\\"]"]},"_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = { "call #0 (marker)", "NUL byte" }, check = nothing_ran } }

case { name = "a NUL byte in a param's key", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","a\\u0000b":1,"_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = { "p.json", "NUL byte in object key" }, check = nothing_ran } }

case { name = "a NUL byte in a context message's kind is named as such (not cut to \"st\")", item = 6,
  files = { ["p.json"] = '{"context":[{"type":"data","kind":"st\\u0000ate","data":{"x":1}}],' ..
                         '"plan":[{"_tool":"marker","value":1,"_outputPath":"y"}]}' },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "context[0]", "NUL" } } }

case { name = "a NUL byte in a context message's _instance", item = 6,
  files = { ["p.json"] = '{"context":[{"type":"state","_instance":"a\\u0000b","data":{"x":1}}],' ..
                         '"plan":[{"_tool":"marker","_instance":"a","value":"\u{2020}state.x","_outputPath":"y"}]}' },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "context[0]", "NUL byte" } } }

case { name = "resolve --instance over a log whose message's _instance holds a NUL byte", item = 6,
  files = { ["log.json"] = '[{"type":"state","_instance":"a\\u0000b","data":{"x":1}}]' },
  run = "obelus resolve log.json '\u{2020}state.x' --instance a",
  expect = { code = 2, err = { "log.json", "NUL byte" } } }

case { name = "a NUL byte inside a string value is kept, through run, the journal and resume", item = 6,
  files = { ["p.json"] = '[{"_tool":"echo","value":"a\\u0000b","_outputPath":"x"},' ..
                         '{"_tool":"bad","what":"nulstr","_outputPath":"y"}]' },
  run = "obelus run p.json --tools t.lua --journal j.jsonl >run.out" .. readers("'\u{2020}state.y.s'"),
  changes = { "j.jsonl" },
  expect = { code = 0, check = function(dir)
    local a, b = slurp(dir .. "/run.out") or "", slurp(dir .. "/resume.out") or ""
    if not a:find('"x": "a\\u0000b"', 1, true) then return false, "the output lost the NUL: " .. a end
    if not a:find('"s": "a\\u0000b"', 1, true) then return false, "the tool's NUL was lost: " .. a end
    if a ~= b then return false, "resume printed another output: " .. b end
    return true
  end } }

case { name = "a tool file whose tool's name holds a NUL byte is refused, not loaded as \"marker\"", item = 6,
  files = { ["nt.lua"] = 'return { { name = "marker\\0x", run = function(c) ' ..
                         'local f = io.open("ran.txt", "a") f:write("ran\\n") f:close() return 1 end } }',
            ["p.json"] = '[{"_tool":"marker","_outputPath":"x"}]' },
  run = "obelus run p.json --tools nt.lua",
  expect = { code = 2, err = { "nt.lua", "NUL" }, check = nothing_ran } }

case { name = "the Lua module: a plan table with a NUL in _tool or in a key is refused", item = 6,
  files = { ["m.lua"] = MODULE .. [[
local obelus = require "obelus"
local e = obelus.engine { tools = { "t.lua" } }
local bad = 0
for _, p in ipairs {
  { { _tool = "marker\0x", value = 1, _outputPath = "x" } },
  { { _tool = "marker", ["a\0b"] = 1, _outputPath = "x" } },
  { { _tool = "marker", value = 1, _outputPath = "x\0y" } },
} do
  local ok, err = pcall(e.run, e, p)
  if ok or not (tostring(err):find("NUL", 1, true) or tostring(err):find("\\u0000", 1, true)) then
    io.stderr:write("not refused for a NUL: ", tostring(err), "\n"); bad = bad + 1
  end
end
require("luv").run()
os.exit(bad == 0 and 0 or 1)
]] },
  run = "lua5.4 m.lua",
  expect = { code = 0, check = nothing_ran } }

case { name = "a tool's obelus.message with kind \"state\\0junk\" fails its call", item = 6,
  files = { ["p.json"] = '[{"_tool":"bad","what":"msgkind","_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 1, err = { "call #0 (bad)", "NUL" } } }

case { name = "a tool's obelus.message with path \"x\\0junk\" fails its call", item = 6,
  files = { ["p.json"] = '[{"_tool":"bad","what":"msgpath","_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 1, err = { "call #0 (bad)", "NUL" } } }

case { name = "a tool's obelus.message with method \"set\\0junk\" fails its call", item = 6,
  files = { ["p.json"] = '[{"_tool":"bad","what":"msgmethod","_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 1, err = { "call #0 (bad)", "NUL" } } }

case { name = "obelus.branch(\"\u{2020}state.y\\0junk\") does not pick \u{2020}state.y", item = 6,
  files = { ["p.json"] = '[{"_tool":"bad","what":"branchpath","_outputPath":"x || y"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 1, err = { "call #0 (bad)", "NUL" } } }

case { name = "resume of a journal whose records name the call \"a\\u0000junk\": not call a", item = 6,
  files = { ["p.json"] = TWO,
            ["edit.lua"] = editor({ { 3, '"id":"a"', '"id":"a\\u0000junk"' },
                                    { 5, '"id":"a"', '"id":"a\\u0000junk"' } }, 5) },
  setup = JOURNAL_OF,
  run = "obelus resume j.jsonl",
  changes = { "j.jsonl" },
  expect = { code = 2, err = { "j.jsonl:", "inconsistent journal" }, check = nothing_ran } }

case { name = "resume of a journal whose tool file is \"t.lua\\u0000junk\": not t.lua", item = 6,
  files = { ["p.json"] = TWO,
            ["edit.lua"] = editor({ { 2, 't.lua"', 't.lua\\u0000junk"' } }, 5) },
  setup = JOURNAL_OF,
  run = "obelus resume j.jsonl",
  changes = { "j.jsonl" },
  expect = { code = 2, err = { "j.jsonl", "NUL" }, check = nothing_ran } }

-- =========================================================================================
-- Brief: non-UTF-8 bytes and lone surrogates (docs/plan-format.md: "invalid UTF-8, lone surrogates,
-- integers beyond int64 ... are errors (never rounded, never a crash)").
-- =========================================================================================
case { name = "a byte 0xff in a plan's string", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","value":"a\255b","_outputPath":"x"}]' },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "p.json", "line 1", "0xff" } } }

case { name = "a lone surrogate \\ud800 in a plan", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","value":"\\ud800","_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = { "p.json", "invalid Unicode" }, check = nothing_ran } }

case { name = "an --input that is not UTF-8", item = 6,
  files = { ["p.json"] = '[{"_tool":"marker","value":"\u{2020}input.a","_outputPath":"x"}]',
            ["in.json"] = '{"a":"\255"}' },
  run = "obelus run p.json --tools t.lua --input @in.json",
  expect = { code = 2, err = { "--input", "0xff" }, check = nothing_ran } }

case { name = "a journal line that is not UTF-8: log, resolve, report and resume refuse it naming the line",
  item = 6,
  files = { ["p.json"] = ONE,
            ["edit.lua"] = editor({ { 4, '"_outputMethod":"set"', '"_outputMethod":"set","z":"\255"' } }) },
  setup = JOURNAL_OF,
  run = refuses_all({ "obelus log j.jsonl", "obelus resolve j.jsonl '\u{2020}state.x'",
                      "obelus report j.jsonl -o r.html", "obelus resume j.jsonl" }, "j.jsonl:4"),
  changes = { "j.jsonl" },
  expect = { code = 2 } }

case { name = "resolve of an expression whose key is not UTF-8 is malformed, not absent", item = 6,
  files = { ["log.json"] = '[{"type":"state","data":{"a":1}}]' },
  run = "obelus resolve log.json \"$(printf '\\342\\200\\240state.\\377')\"",
  expect = { code = 2, err = "UTF-8" } }

case { name = "a tool file whose tool's name is not UTF-8", item = 6,
  files = { ["nt.lua"] = 'return { { name = "ec\\255ho", run = function(c) return 1 end } }',
            ["p.json"] = '[{"_tool":"echo","value":1,"_outputPath":"x"}]' },
  run = "obelus tools --tools nt.lua",
  expect = { code = 2, err = { "nt.lua", "UTF-8" } } }

-- =========================================================================================
-- Item 6: "A tool returning {["a\0b"]=1} succeeds, and then log, resume, resolve and report
-- all refuse the journal." What to build: "A tool value the journal cannot hold (a NUL in
-- a key, a non-UTF-8 key) fails the call at once." Brief: a non-UTF-8 key, NaN/inf,
-- a function, a cyclic table; then log/resume/resolve/report on the journal.
-- =========================================================================================
local function bad_value(what, words, extra)
  case { name = "a tool returning " .. what .. " fails its call; log, resume, resolve, report read the journal",
    item = 6,
    files = { ["p.json"] = '[{"_tool":"bad","what":"' .. what .. '","_outputPath":"x"}' .. (extra or "") .. ']' },
    run = "obelus run p.json --tools t.lua --journal j.jsonl" .. readers("'\u{2020}error.id'"),
    changes = { "j.jsonl" },
    expect = { code = 1, err = words } }
end
bad_value("nulkey", { "call #0 (bad)", 'result.inner: key "a\\u0000b" holds a NUL byte' })
bad_value("utf8key", { "call #0 (bad)", "not valid UTF-8" })
bad_value("nan", { "call #0 (bad)", "result.v", "NaN" })
bad_value("inf", { "call #0 (bad)", "result.v[2]", "inf" })
bad_value("func", { "call #0 (bad)", "result.f", "function" })
bad_value("cycle", { "call #0 (bad)", "contains itself" })
bad_value("errutf8", { "call #0 (bad)" })

case { name = "a NUL key returned under --threads 2, one engine an instance: each copy fails; the journal reads",
  item = 6,
  files = { ["p.json"] = '{"instances":["i1","i2","i3"],"plan":[{"_tool":"bad","what":"nulkey","_outputPath":"x"}]}' },
  run = "obelus run p.json --tools t.lua --threads 2 --journal j.jsonl" ..
        readers("'\u{2020}error.id' --instance i3"),
  changes = { "j.jsonl" },
  expect = { code = 1, err = { "call #0@i1 (bad)", "call #0@i3 (bad)", "holds a NUL byte" } } }

case { name = "NaN returned in a delegated plan fails the delegating call; the journal reads", item = 6,
  files = { ["sub.json"] = '[{"_tool":"bad","what":"nan","_outputPath":"x"}]',
            ["p.json"] = '[{"_delegate":"sub.json","_id":"d","_outputPath":"r"}]' },
  run = "obelus run p.json --tools t.lua --journal j.jsonl" .. readers("'\u{2020}error.id'"),
  changes = { "j.jsonl" },
  expect = { code = 1, err = { "call d", "NaN" } } }

case { name = "a latent handler answering NaN and a NUL key fails the call; the journal reads", item = 6,
  files = { ["la.lua"] = 'local obelus = require "obelus"\n' ..
                         'obelus.set_latent(function() return { v = 0/0, ["k\\0"] = 1 } end)\n',
            ["p.json"] = '[{"_tool":"think","_id":"t","_outputPath":"x"}]' },
  run = "obelus run p.json --tools t.lua --latent la.lua --journal j.jsonl" ..
        readers("'\u{2020}error.id'", "--latent la.lua"),
  changes = { "j.jsonl" },
  expect = { code = 1, err = { "call t (think)" } } }

-- =========================================================================================
-- Item 7: "_retry":{"attempts":1100,"delay_ms":0} waits 9223372036854775808 ms after attempt
-- 1025 (0 x 2^1024 is NaN). docs/plan-format.md: the wait is never NaN nor infinite; bad values
-- (negative, zero attempts, more than 1,000,000, fractions, unknown keys, wrong types,
-- backoff below 1) are validation errors naming the call and the key.
-- =========================================================================================
case { name = "the issue's _retry: 1100 attempts with delay_ms 0 all run, each again in 0 ms", item = 7,
  files = { ["p.json"] = '[{"_tool":"always_fails","_outputPath":"x","_retry":{"attempts":1100,"delay_ms":0}}]' },
  run = "obelus run p.json --tools t.lua",
  secs = 20,
  expect = { code = 1, err = { "attempt 1025 of 1100 failed: failure 1025; again in 0 ms", "failure 1100" },
             check = function(_, r)
               if r.err:find("9223372036854775808", 1, true) then return false, "a wait of 2^63 ms" end
               local n = select(2, r.err:gsub("again in 0 ms", ""))
               if n ~= 1099 then return false, n .. " waits of 0 ms, not 1099" end
               return true
             end } }

case { name = "delay_ms 0 with backoff 1000 over 1100 attempts (0 x inf): journaled, the readers read it",
  item = 7,
  files = { ["p.json"] = '[{"_tool":"always_fails","_outputPath":"x","_retry":{"attempts":1100,"delay_ms":0,' ..
                         '"backoff":1000}}]' },
  run = "obelus run p.json --tools t.lua --journal j.jsonl 2>run.err" .. readers("'\u{2020}error.id'"),
  secs = 20,
  changes = { "j.jsonl" },
  expect = { code = 1, check = function(dir)
    local s = slurp(dir .. "/run.err") or ""
    local n = select(2, s:gsub("again in 0 ms", ""))
    if n ~= 1099 then return false, n .. " waits of 0 ms, not 1099: " .. s:sub(-300) end
    return true
  end } }

case { name = "the largest delay_ms with backoff 1000 and max_delay_ms 1: no wait passes 1 ms", item = 7,
  files = { ["p.json"] = '[{"_tool":"always_fails","_outputPath":"x","_retry":{"attempts":200,' ..
                         '"delay_ms":4294967295,"backoff":1000,"max_delay_ms":1,"jitter":true}}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 1, err = "failure 200", check = function(_, r)
    for ms in r.err:gmatch("again in (%d+) ms") do
      if tonumber(ms) > 1 then return false, "a wait of " .. ms .. " ms" end
    end
    return true
  end } }

case { name = "max_delay_ms 0 makes every wait 0 ms, whatever delay_ms", item = 7,
  files = { ["p.json"] = '[{"_tool":"always_fails","_outputPath":"x","_retry":{"attempts":4,' ..
                         '"delay_ms":100000,"max_delay_ms":0}}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 1, err = { "attempt 3 of 4 failed: failure 3; again in 0 ms", "failure 4" } } }

case { name = "backoff 1e308 is refused naming _retry.backoff, or capped at max_delay_ms", item = 7,
  files = { ["p.json"] = '[{"_tool":"always_fails","_id":"c1","_outputPath":"x","_retry":{"attempts":3,' ..
                         '"delay_ms":1,"backoff":1e308,"max_delay_ms":5,"jitter":false}}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = { 1, 2 }, check = function(_, r)
    if r.code == 2 then
      if r.err:find("call c1", 1, true) and r.err:find("_retry.backoff", 1, true) then return true end
      return false, "exit 2 without naming call c1 and _retry.backoff"
    end
    for ms in r.err:gmatch("again in (%d+) ms") do
      if tonumber(ms) > 5 then return false, "a wait of " .. ms .. " ms" end
    end
    return r.err:find("again in 5 ms", 1, true) ~= nil, "the waits are not capped at 5 ms"
  end } }

-- each value of _retry is a validation error naming call c1 and the key; nothing runs
local function bad_retry(what, values)
  local parts = {}
  for i, v in ipairs(values) do
    local plan = "p" .. i .. ".json"
    parts[#parts + 1] = "printf '%s' " .. shq('[{"_tool":"marker","_id":"c1","value":1,"_outputPath":"x","_retry":' ..
                          v[1] .. '}]') .. " > " .. plan .. "; " ..
      "obelus run " .. plan .. " --tools t.lua >/dev/null 2>e.txt; c=$?; " ..
      "if [ $c != 2 ] || ! grep -qF 'call c1' e.txt || ! grep -qF -- " .. shq(v[2]) .. " e.txt; then " ..
      "printf '_retry %s: exit %s, not 2 naming call c1 and %s: ' " .. shq(v[1]) .. " \"$c\" " .. shq(v[2]) ..
      " >&2; cat e.txt >&2; exit 1; fi; cat e.txt >> all.txt"
  end
  case { name = "_retry " .. what .. ": validation errors naming the call and the key", item = 7,
    run = table.concat(parts, "; ") .. "; cat all.txt >&2; exit 2",
    expect = { code = 2, check = nothing_ran } }
end
bad_retry("attempts -1, 0, 2.5, \"3\", true, 1000001, missing", {
  { '{"attempts":-1}', "_retry.attempts" }, { '{"attempts":0}', "_retry.attempts" },
  { '{"attempts":2.5}', "_retry.attempts" }, { '{"attempts":"3"}', "_retry.attempts" },
  { "true", "_retry" }, { "1000001", "1000000" }, { '{"delay_ms":5}', "_retry.attempts" } })
bad_retry("delay_ms -1 and 0.5, backoff 0.5, max_delay_ms -1, jitter \"yes\", a misspelt key", {
  { '{"attempts":3,"delay_ms":-1}', "_retry.delay_ms" }, { '{"attempts":3,"delay_ms":0.5}', "_retry.delay_ms" },
  { '{"attempts":3,"backoff":0.5}', "_retry.backoff" }, { '{"attempts":3,"max_delay_ms":-1}', "_retry.max_delay_ms" },
  { '{"attempts":3,"jitter":"yes"}', "_retry.jitter" }, { '{"attempts":3,"attempt":3}', '"attempt"' } })

case { name = "the Lua module: _retry = {attempts = 0/0} (a NaN only Lua can write) is refused", item = 7,
  files = { ["m.lua"] = MODULE .. [[
local obelus = require "obelus"
local e = obelus.engine { tools = { "t.lua" } }
local ok, err = pcall(e.run, e, { { _tool = "marker", value = 1, _outputPath = "x", _retry = { attempts = 0/0 } } })
require("luv").run()
if ok then io.stderr:write("a NaN _retry ran\n"); os.exit(1) end
io.stderr:write(tostring(err), "\n")
os.exit(tostring(err):find("_retry", 1, true) and 0 or 1)
]] },
  run = "lua5.4 m.lua",
  expect = { code = 0, check = nothing_ran } }

case { name = "resume of a journal whose plan line was edited to _retry attempts 0", item = 7,
  files = { ["p.json"] = TWO,
            ["edit.lua"] = editor({ { 1, '"_tool":"marker"', '"_tool":"marker","_retry":{"attempts":0}' } }, 5) },
  setup = JOURNAL_OF,
  run = "obelus resume j.jsonl",
  changes = { "j.jsonl" },
  expect = { code = 2, err = { "call b", "_retry.attempts" }, check = nothing_ran } }

-- =========================================================================================
-- Item 8: "Schemas that do not compile fail open: 8 of 10 broken schemas (a bad pattern,
-- "type":"objekt", a bad $ref) are ignored; check says ok; 123 is written where the
-- schema wanted a string." What to build: "a schema that does not compile is an error
-- where it is loaded (check, run, the tool file), naming the keyword and where it is."
-- =========================================================================================
local function ctx_plan(schema)
  return '{"context":[{"type":"state","data":{},"schema":{"type":"object","properties":{"s":' .. schema ..
         '}}}],"plan":[{"_tool":"marker","_id":"w","value":123,"_outputPath":"s"}]}'
end

case { name = "a context schema with a bad pattern: check says where", item = 8,
  files = { ["p.json"] = ctx_plan('{"type":"string","pattern":"(["}') },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "p.json: context[0]: the schema is not usable: /properties/s: pattern: " ..
                               "invalid regular expression" } } }

case { name = "a context schema of type \"objekt\": run refuses, 123 is not written", item = 8,
  files = { ["p.json"] = ctx_plan('{"type":"objekt"}') },
  run = "obelus run p.json --tools t.lua --journal j.jsonl",
  expect = { code = 2, err = { "context[0]: the schema is not usable", "type: unknown type \"objekt\"" },
             out = empty_out, check = all(nothing_ran, absent("j.jsonl")) } }

case { name = "a context schema whose $ref points to nothing: graph refuses", item = 8,
  files = { ["p.json"] = ctx_plan('{"$ref":"#/definitions/nope"}') },
  run = "obelus graph p.json",
  expect = { code = 2, err = { "context[0]: the schema is not usable", "$ref", "#/definitions/nope" },
             out = empty_out } }

case { name = "a context schema that is not an object (5)", item = 8,
  files = { ["p.json"] = '{"context":[{"type":"state","data":{},"schema":5}],' ..
                         '"plan":[{"_tool":"marker","value":123,"_outputPath":"s"}]}' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 2, err = { "context[0]", "the schema is not usable" }, check = nothing_ran } }

case { name = "a broken schema in a delegated plan's context: check of the parent names the sub-plan", item = 8,
  files = { ["sub.json"] = ctx_plan('{"minimum":"3"}'),
            ["p.json"] = '[{"_delegate":"sub.json","_id":"d","_outputPath":"r"}]' },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "call d", "sub.json", "context[0]: the schema is not usable", "minimum" } } }

case { name = "an instance's context schema \"objekt\" under --threads 2", item = 8,
  files = { ["p.json"] = '{"context":[{"type":"state","_instance":"i1","data":{},"schema":{"type":"objekt"}},' ..
                         '{"type":"state","_instance":"i2","data":{}}],"instances":"auto",' ..
                         '"plan":[{"_tool":"marker","value":123,"_outputPath":"s"}]}' },
  run = "obelus run p.json --tools t.lua --threads 2",
  expect = { code = 2, err = { "context[0]", "objekt" }, check = nothing_ran } }

local function tool_schema(schema)
  return 'local cjson = require "cjson"\nreturn { { name = "t", schema = ' .. schema ..
         ', run = function(c) local f = io.open("ran.txt", "a") f:write("t\\n") f:close() return c.s end } }\n'
end

case { name = "a tool file's schema with a bad pattern: check names the file, the tool and the keyword", item = 8,
  files = { ["st.lua"] = tool_schema('cjson.decode([[{"type":"object","properties":{"s":{"type":"string",' ..
                                     '"pattern":"(["}}}]])'),
            ["p.json"] = '[{"_tool":"t","s":123,"_outputPath":"x"}]' },
  run = "obelus check p.json --tools st.lua",
  expect = { code = 2, err = { "st.lua", "(t)", "the schema is not usable: /properties/s: pattern" } } }

case { name = "a tool file's schema of type \"objekt\": run refuses, nothing runs", item = 8,
  files = { ["st.lua"] = tool_schema('{ type = "objekt" }'),
            ["p.json"] = '[{"_tool":"t","s":123,"_outputPath":"x"}]' },
  run = "obelus run p.json --tools st.lua",
  expect = { code = 2, err = { "st.lua", "type: unknown type \"objekt\"" }, out = empty_out, check = nothing_ran } }

case { name = "a tool file whose schema is not a table (5): obelus tools refuses to list it", item = 8,
  files = { ["st.lua"] = tool_schema('5') },
  run = "obelus tools --tools st.lua",
  expect = { code = 2, err = { "st.lua", "the schema is not usable" }, out = empty_out } }

case { name = "a tool file's schema with minimum \"3\", loaded by the Lua module", item = 8,
  files = { ["st.lua"] = tool_schema('{ properties = { s = { minimum = "3" } } }'),
            ["m.lua"] = MODULE .. [[
local obelus = require "obelus"
local ok, err = pcall(obelus.engine, { tools = { "st.lua" } })
if ok then io.stderr:write("the engine loaded a schema that does not compile\n"); os.exit(1) end
io.stderr:write(tostring(err), "\n")
os.exit(0)
]] },
  run = "lua5.4 m.lua",
  expect = { code = 0, err = { "st.lua", "minimum" } } }

case { name = "obelus schema with a pattern that does not compile", item = 8,
  files = { ["s.json"] = '{"properties":{"s":{"pattern":"\\\\p{Foo}"}}}', ["i.json"] = '{"s":"x"}' },
  run = "obelus schema s.json i.json",
  expect = { code = 2, err = { "unusable schema", "/properties/s: pattern" } } }

case { name = "a good state schema still refuses 123 where it wants a string", item = 8,
  files = { ["p.json"] = ctx_plan('{"type":"string"}') },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 1, err = { "call w (marker)", "the write breaks the state schema: /s: type" },
             out = function(out)
               if out:find('"s"', 1, true) then return false, "123 was written: " .. out end
               return true
             end } }

-- =========================================================================================
-- Brief: a schema violation naming the call and the parameter (plan-format §5: validation reports
-- `file: call <id> (<tool>): <what>`; a resolved value that breaks it is a structural error).
-- =========================================================================================
case { name = "a literal param that breaks the tool's schema: check names the call and the param", item = 8,
  files = { ["p.json"] = '[{"_tool":"typed","_id":"c7","s":"ok","n":{"deep":"x"},"_outputPath":"o"}]' },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "p.json: call c7 (typed)", "n/deep", "integer" } } }

case { name = "a resolved param that breaks the schema at run time names the call and the param", item = 8,
  files = { ["p.json"] = '[{"_tool":"num","_id":"p","_outputPath":"v"},' ..
                         '{"_tool":"typed","_id":"c7","s":"\u{2020}state.v","_outputPath":"o"}]' },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 1, err = { "call c7 (typed)", "structural", "/s", "expected string" }, check = nothing_ran } }

case { name = "an --input value breaking the schema, in every instance copy under --threads 2", item = 8,
  files = { ["p.json"] = '{"instances":["i1","i2"],"plan":[{"_tool":"typed","_id":"c7","s":"\u{2020}input.s",' ..
                         '"_outputPath":"o"}]}' },
  run = "obelus run p.json --tools t.lua --threads 2 --input '{\"s\":5}'",
  expect = { code = 1, err = { "call c7@i1 (typed)", "call c7@i2 (typed)", "/s" }, check = nothing_ran } }

case { name = "a schema violation inside a delegated plan: check of the parent names the sub-plan's call", item = 8,
  files = { ["sub.json"] = '[{"_tool":"typed","_id":"c7","s":123,"_outputPath":"o"}]',
            ["p.json"] = '[{"_delegate":"sub.json","_id":"d","_outputPath":"r"}]' },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "sub.json", "call c7 (typed)", "parameter \"s\"" } } }

return cases
