-- hostile/cases/fleet.lua -- issue 26 item 2 (and "What to build": the fleet): jobs anyone
-- with Redis access could queue, and the queue's other keys as they could leave them.
--   * stream entries XADDed by hand with redis-cli next to jobs `obelus submit` queued:
--     `inputs` an object (the SIGSEGV of the issue), of every other wrong type, not JSON,
--     not Unicode, with duplicate or NUL keys, past the nesting and number limits, over
--     64 MB; the `job` id missing, a path, too long, with NUL or escape bytes, given twice;
--     the `plan` hash missing, malformed, naming no text, a text that is not JSON or not
--     a plan, of the wrong Redis type, over 64 MB, calling unknown tools or leaving the
--     plans root; the `name` with control bytes, not UTF-8, too long; unknown fields.
--   * jobs whose tools fail: an error, os.exit, a loop that never yields, a tool that
--     kills its worker every time (poison).
--   * one job id named by two or three entries (one worker and two), a finished job's
--     entry added again (as it was, malformed, for a failed job, for a sharded job).
--   * the queue's other keys: a job's hash or journal of the wrong type, junk in the set
--     of streams, the stats and the workers' hash, the jobs stream a string or deleted
--     under a worker, fake entries in the stream of finished jobs, 1,000 bad entries.
--   * the commands as docs/fleet.md and --help describe them: submit (limits, a broken
--     counter, no Redis), worker (a bad --queue, no Redis), wait, status (--json, junk
--     and escape sequences in what it prints), log --redis (why a job has no journal,
--     a stored error with terminal controls), `obelus queue` (there is none), and the
--     Lua module's q:wait.
-- In every case the worker (`obelus worker --drain`) must exit 0 by itself, every good
-- job around the bad ones must finish with its output (each run once: the `step` tool
-- appends n to ./marks), and every bad one must fail with a stored error naming what
-- was wrong, as `obelus wait` prints it. Each case has a queue of its own (fleet-N).
local S = require "support"
local slurp, all = S.slurp, S.all
local cjson = require "cjson"

-- step: the fleet specs' (spec/cli/fixtures/fleet/step.lua, beside this tree's hostile/);
-- TOOLS: the others, each misbehaving its own way
local STEP = assert(slurp(debug.getinfo(1, "S").source:sub(2):match("(.*)/") ..
                          "/../../spec/cli/fixtures/fleet/step.lua"))
local TOOLS = [==[
local obelus = require "obelus"
return {
  { name = "boom", schema = { type = "object" }, run = function() error("boom in the tool") end },
  { name = "quit", schema = { type = "object" }, run = function() os.exit(3) end },
  { name = "spin", schema = { type = "object" }, run = function() while true do end end },
  { name = "die", schema = { type = "object" },
    run = function()
      obelus.uv.kill(obelus.uv.os_getpid(), "sigkill")
      obelus.sleep(1000)
    end },
}
]==]

-- p.json: one call doubling input.n, marking each run; slow.json: the same, 400 ms long
local PLAN = '{"plan":[{"_tool":"step","n":"\xE2\x80\xA0input.n","mark":"marks",' ..
             '"_outputPath":"\xE2\x80\xA0state.a"}],"output":"\xE2\x80\xA0state.a"}'
local SLOW = '{"plan":[{"_tool":"step","n":"\xE2\x80\xA0input.n","mark":"marks","ms":400,' ..
             '"_outputPath":"\xE2\x80\xA0state.a"}],"output":"\xE2\x80\xA0state.a"}'

-- a plan calling one tool, its result the output (so that a failure makes exit 1)
local function one(tool)
  return ('{"plan":[{"_tool":"%s","_outputPath":"\xE2\x80\xA0state.a"}],"output":"\xE2\x80\xA0state.a"}')
    :format(tool)
end
-- a plan doubling a fixed n (marking its run when `mark`)
local function fixed(n, mark)
  return ('{"plan":[{"_tool":"step","n":%d,%s"_outputPath":"\xE2\x80\xA0state.a"}],"output":"\xE2\x80\xA0state.a"}')
    :format(n, mark and '"mark":"marks",' or "")
end

local function files(extra)
  local t = { ["tools/step.lua"] = STEP, ["tools/t.lua"] = TOOLS, ["p.json"] = PLAN, ["slow.json"] = SLOW }
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

-- The shell every case starts with: its queue, and helpers.
--   rc ARGS       redis-cli on $REDIS
--   add F V...    XADD a hand-made entry to the queue's stream (its id not printed)
--   addx F V...   the same, the last value read from stdin (bytes: NUL, 0xff...)
--   plan H TEXT   store TEXT as the plan of hash H
--   rep N C       N times the character C
--   sub N [PLAN]  obelus submit PLAN (p.json) with input {"n": N}: prints the job's id
--   work ARGS     obelus worker --drain: its stderr passed on; the case ends with its
--                 status unless it is 0 (a crash: 128 + the signal)
--   waitj IDS     obelus wait, at most 10 s
local nq = 0
local function prelude()
  nq = nq + 1
  return ([[
Q=fleet-%d; S="ob:{$Q}:jobs"
rc() { redis-cli -u "$REDIS" "$@"; }
add() { rc XADD "$S" '*' "$@" >/dev/null; }
addx() { rc -x XADD "$S" '*' "$@" >/dev/null; }
plan() { rc SET "ob:{$Q}:plan:$1" "$2" >/dev/null; }
rep() { head -c "$1" /dev/zero | tr '\0' "$2"; }
sub() { obelus submit "${2:-p.json}" --redis "$REDIS" --queue "$Q" --input "{\"n\": $1}"; }
work() {
  obelus worker --redis "$REDIS" --queue "$Q" --tools tools --drain "$@" 2>w.err; w=$?
  cat w.err >&2
  if [ $w -ne 0 ]; then echo "fleet case: the worker exited $w" >&2; exit $w; fi
}
waitj() { obelus wait --redis "$REDIS" --queue "$Q" --timeout 10000 "$@"; }
]]):format(nq)
end

-- --- judging ---------------------------------------------------------------------------

-- wait's lines, decoded
local function results(out)
  local t = {}
  for l in out:gmatch("[^\n]+") do
    local ok, v = pcall(cjson.decode, l)
    if not ok or type(v) ~= "table" then
      return nil, "wait printed a line that is not a JSON object: " .. l:sub(1, 200)
    end
    t[#t + 1] = v
  end
  return t
end

-- what a result says: its error, else its output as JSON
local function why_of(r)
  if type(r.error) == "string" then return r.error end
  local ok, s = pcall(cjson.encode, r.output)
  return ok and s or tostring(r.output)
end

-- one result as expected: { exit = N, output = V (optional), has = {"text", ...} }
local function result_ok(r, e, label)
  if e.any then return true end
  if r.exit ~= e.exit then
    return false, ("%s: exit %s, expected %s: %s"):format(label, tostring(r.exit), tostring(e.exit), cjson.encode(r))
  end
  if e.output ~= nil and r.output ~= e.output then
    return false, ("%s: output %s, expected %s"):format(label, cjson.encode(r.output), cjson.encode(e.output))
  end
  local why = why_of(r)
  for _, h in ipairs(e.has or {}) do
    if not why:find(h, 1, true) then
      return false, ("%s: its error does not say %q: %s"):format(label, h, cjson.encode(r))
    end
  end
  for _, h in ipairs(e.lacks or {}) do
    if why:find(h, 1, true) then
      return false, ("%s: its error says %q: %s"):format(label, h, cjson.encode(r))
    end
  end
  return true
end

-- wait's output is these results, in order
local function expect_results(list)
  return function(out)
    local got, err = results(out)
    if not got then return false, err end
    if #got ~= #list then
      return false, ("wait printed %d results, expected %d: %s"):format(#got, #list, out:sub(1, 400))
    end
    for i, e in ipairs(list) do
      local ok, why = result_ok(got[i], e, "result " .. i .. " (job " .. tostring(got[i].job) .. ")")
      if not ok then return false, why end
    end
    return true
  end
end

-- ./marks holds these n, each once (in any order): the runs of `step`
local function marks_are(ns)
  return function(dir)
    local got = {}
    for l in (slurp(dir .. "/marks") or ""):gmatch("[^\n]+") do got[#got + 1] = l end
    table.sort(got)
    local want = {}
    for i, n in ipairs(ns) do want[i] = tostring(n) end
    table.sort(want)
    if table.concat(got, ",") ~= table.concat(want, ",") then
      return false, ("step ran for n = {%s}, expected {%s} (each once)"):format(table.concat(got, ","),
                                                                             table.concat(want, ","))
    end
    return true
  end
end


-- the good jobs around the bad ones: n = 1 before, n = 5 after
local GOOD1 = { exit = 0, output = 2 }
local GOOD2 = { exit = 0, output = 10 }

-- A case: good job 1, the bad entries `add` makes (shell: $H is p.json's hash, $S the
-- stream), good job 5, one worker draining the queue; then wait for "$G1" `ids` "$G2",
-- each bad one as `bad` says. `marks`: the n that step must have run for.
local function among(t)
  local list = { GOOD1 }
  for _, b in ipairs(t.bad) do list[#list + 1] = b end
  list[#list + 1] = GOOD2
  local run = prelude() .. [[
G1=$(sub 1) || exit 90
H=$(rc HGET "ob:{$Q}:job:$G1" plan)
]] .. t.add .. [[

G2=$(sub 5) || exit 90
work ]] .. (t.worker or "") .. "\n" .. (t.after or "") .. [[
waitj "$G1" ]] .. t.ids .. [[ "$G2"; c=$?
]] .. (t.cleanup or "") .. "\n" .. [[
exit $c
]]
  return {
    name = t.name, item = 2, needs = "redis", secs = t.secs or 20,
    files = files(t.files),
    run = run,
    expect = {
      code = t.code or 1,
      err = t.err,
      out = expect_results(list),
      check = all(t.marks == false and function() return true end or marks_are(t.marks or { 1, 5 }),
                  t.check or function() return true end),
    },
  }
end

local cases = {}
local function add(c) cases[#cases + 1] = c end

-- =====================================================================================
-- "A stream entry whose `inputs` is an object instead of an array: SIGSEGV in the
-- worker ...; each crash re-runs that worker's other jobs; the job becomes poison only
-- after 3 workers died."
-- =====================================================================================
add(among {
  name = "inputs an object, not an array: the job fails naming the field, the worker goes on",
  add = [[add job bad plan "$H" inputs '{"n": 1}']],
  ids = "bad",
  bad = { { exit = 2, has = { '"inputs"', "object", "array" } } },
  err = { "bad", '"inputs"' },
})

add(among {
  name = "inputs an object with --jobs 4 (the bad job among running ones)",
  add = [[add job bad plan "$H" inputs '{"n": 1}'
G3=$(sub 3) || exit 90]],
  ids = 'bad "$G3"',
  worker = "--jobs 4",
  bad = { { exit = 2, has = { '"inputs"', "object" } }, { exit = 0, output = 6 } },
  marks = { 1, 3, 5 },
})

add {
  name = "inputs an object, two workers at once: both stay up, each good job runs once",
  item = 2, needs = "redis", secs = 30, files = files(),
  run = prelude() .. [[
for n in 1 2 3; do sub $n >>ids || exit 90; done
H=$(rc HGET "ob:{$Q}:job:$(head -1 ids)" plan)
add job bad plan "$H" inputs '{"n": 1}'
add job bad2 plan "$H" inputs '{"x": [1, {"y": 2}]}'
for n in 4 5 6; do sub $n >>ids || exit 90; done
obelus worker --redis "$REDIS" --queue "$Q" --tools tools --drain --jobs 2 2>w1.err & P1=$!
obelus worker --redis "$REDIS" --queue "$Q" --tools tools --drain --jobs 2 2>w2.err & P2=$!
wait $P1; w1=$?
wait $P2; w2=$?
cat w1.err w2.err >&2
[ $w1 -eq 0 ] || { echo "worker 1 exited $w1" >&2; exit $w1; }
[ $w2 -eq 0 ] || { echo "worker 2 exited $w2" >&2; exit $w2; }
waitj $(head -3 ids) bad bad2 $(tail -3 ids)
]],
  expect = {
    code = 1,
    out = expect_results {
      { exit = 0, output = 2 }, { exit = 0, output = 4 }, { exit = 0, output = 6 },
      { exit = 2, has = { '"inputs"', "object" } }, { exit = 2, has = { '"inputs"', "object" } },
      { exit = 0, output = 8 }, { exit = 0, output = 10 }, { exit = 0, output = 12 },
    },
    check = marks_are { 1, 2, 3, 4, 5, 6 },
  },
}

-- =====================================================================================
-- "Every field of a job ... is validated before use": `inputs`
-- =====================================================================================
add(among {
  name = "inputs a string, a number, null, true: each fails naming the field",
  add = [[add job s plan "$H" inputs '"abc"'
add job num plan "$H" inputs '42'
add job nul plan "$H" inputs 'null'
add job tru plan "$H" inputs 'true']],
  ids = "s num nul tru",
  bad = {
    { exit = 2, has = { '"inputs"', "array" } }, { exit = 2, has = { '"inputs"', "array" } },
    { exit = 2, has = { '"inputs"', "array" } }, { exit = 2, has = { '"inputs"', "array" } },
  },
})

add(among {
  name = "inputs not JSON: cut short, empty, valid JSON then a NUL byte and junk",
  add = [[add job cut plan "$H" inputs '[{"n": '
add job empty plan "$H" inputs ''
printf '[{"n": 2}]\000junk' | addx job trail plan "$H" inputs]],
  ids = "cut empty trail",
  bad = {
    { exit = 2, has = { '"inputs"', "not JSON" } }, { exit = 2, has = { '"inputs"' } },
    { exit = 2, has = { '"inputs"' } },
  },
})

add(among {
  name = "inputs that are not Unicode: raw 0xff 0xfe bytes in a string, a lone surrogate",
  add = [[printf '[{"n": 2, "s": "\377\376"}]' | addx job raw plan "$H" inputs
add job sur plan "$H" inputs '[{"n": 2, "s": "\ud800"}]']],
  ids = "raw sur",
  bad = { { exit = 2, has = { '"inputs"' } }, { exit = 2, has = { '"inputs"' } } },
})

add(among {
  name = "inputs objects no JSON reader takes: a key twice, a NUL in a key",
  add = [[add job dup plan "$H" inputs '[{"n": 1, "n": 4}]'
add job nulkey plan "$H" inputs '[{"n": 1, "a\u0000b": 4}]']],
  ids = "dup nulkey",
  bad = { { exit = 2, has = { '"inputs"', "duplicate" } }, { exit = 2, has = { '"inputs"', "NUL" } } },
})

add(among {
  name = "inputs past the limits: nested 5,000 deep, 1e999999, a 30-digit integer",
  add = [[{ printf '[{"n": 2, "d": '; rep 5000 '['; rep 5000 ']'; printf '}]'; } | addx job deep plan "$H" inputs
add job inf plan "$H" inputs '[{"n": 1e999999}]'
add job big plan "$H" inputs '[{"n": 123456789012345678901234567890}]']],
  ids = "deep inf big",
  bad = { { exit = 2, has = { '"inputs"' } }, { exit = 2, has = { '"inputs"' } }, { exit = 2, has = { '"inputs"' } } },
})

add(among {
  name = "inputs over 64 MB: refused by size, the worker goes on",
  secs = 60,
  add = [[{ printf '[{"n": 2, "pad": "'; rep 67200000 x; printf '"}]'; } | addx job huge plan "$H" inputs]],
  ids = "huge",
  bad = { { exit = 2, has = { '"inputs"', "64 MB" } } },
  cleanup = [[rc DEL "$S" >/dev/null]],
})

add(among {
  name = "inputs an array of numbers, not documents: the run fails as run --input 1 does (exit 1)",
  add = [[add job nums plan "$H" inputs '[1, 2, 3]']],
  ids = "nums",
  bad = { { exit = 1 } },
})

-- =====================================================================================
-- the `job` field (the id: it names a key and a file in the worker's folder)
-- =====================================================================================
add(among {
  name = "no job field: failed under the entry's id, saying so",
  add = [[E=$(rc XADD "$S" '*' plan "$H" inputs '[{"n": 2}]')]],
  ids = '"$E"',
  bad = { { exit = 2, has = { '"job"' } } },
})

add(among {
  name = "a job id that is a path (../../../tmp/evil): failed under the entry's id, no file outside",
  add = [[E=$(rc XADD "$S" '*' job ../../../tmp/evil plan "$H" inputs '[{"n": 2}]')]],
  ids = '"$E"',
  bad = { { exit = 2, has = { '"job"', "not a job id" } } },
  check = function()
    for _, p in ipairs { "/tmp/evil", "/tmp/evil.jsonl", "/tmp/evil.json" } do
      if io.open(p) then return false, p .. " exists" end
    end
    return true
  end,
})

add(among {
  name = "a job id of 65 characters fails; one of 64 runs",
  add = [[I64=$(printf 'a%.0s' $(seq 64)); I65=$(printf 'b%.0s' $(seq 65))
add job "$I64" plan "$H" inputs '[{"n": 2}]'
E=$(rc XADD "$S" '*' job "$I65" plan "$H" inputs '[{"n": 3}]')]],
  ids = '"$I64" "$E"',
  bad = { { exit = 0, output = 4 }, { exit = 2, has = { '"job"', "not a job id" } } },
  marks = { 1, 2, 5 },
})

add(among {
  name = "a job id with a NUL, escape bytes, 0xff: not an id, nothing stored under a cut one",
  add = [[E1=$(printf 'a\000b' | rc -x XADD "$S" '*' plan "$H" inputs '[{"n": 2}]' job)
E2=$(printf 'x\033[31my' | rc -x XADD "$S" '*' plan "$H" inputs '[{"n": 2}]' job)
E3=$(printf 'z\377' | rc -x XADD "$S" '*' plan "$H" inputs '[{"n": 2}]' job)]],
  after = [[for k in a x z; do [ "$(rc EXISTS "ob:{$Q}:job:$k")" = 0 ] || echo "job $k exists" >&2; done
]],
  ids = '"$E1" "$E2" "$E3"',
  bad = {
    { exit = 2, has = { "not a job id" } }, { exit = 2, has = { "not a job id" } },
    { exit = 2, has = { "not a job id" } },
  },
  check = function(_, r)
    if r.err:find("exists", 1, true) then return false, "a job was stored under a cut id: " .. r.err end
    if r.err:find("\27", 1, true) then return false, "stderr carries a raw ESC byte" end
    return true
  end,
})

add(among {
  name = "the job field given twice (two ids): fails, saying so; the second id never runs",
  add = [[add job twice1 job twice2 plan "$H" inputs '[{"n": 2}]']],
  after = [[[ "$(rc HGET "ob:{$Q}:job:twice2" state)" = "" ] || echo "job twice2 has a state" >&2
]],
  ids = "twice1",
  bad = { { exit = 2, has = { '"job"', "more than once" } } },
  check = function(_, r)
    if r.err:find("twice2 has a state", 1, true) then return false, "the second id was used" end
    return true
  end,
})

-- =====================================================================================
-- the `plan` field (a hash naming the plan's text in Redis) and the text it names:
-- "a plan that is not JSON, a plan naming unknown tools"
-- =====================================================================================
add(among {
  name = "no plan field; a plan hash upper case, 17 digits, 16 then a NUL and junk",
  add = [[add job noplan inputs '[{"n": 2}]'
UP=$(printf %s "$H" | tr a-f A-F)
add job upper plan "$UP" inputs '[{"n": 2}]'
add job long plan "${H}0" inputs '[{"n": 2}]'
printf '%s\000zz' "$H" | addx job nulh inputs '[{"n": 2}]' plan]],
  ids = "noplan upper long nulh",
  bad = {
    { exit = 2, has = { '"plan"' } }, { exit = 2, has = { '"plan"', "hash" } },
    { exit = 2, has = { '"plan"', "hash" } }, { exit = 2, has = { '"plan"', "hash" } },
  },
})

add(among {
  name = "a plan hash whose text is not in Redis: the job fails, the plan is gone",
  add = [[add job gone plan 0123456789abcdef inputs '[{"n": 2}]']],
  ids = "gone",
  bad = { { exit = 2, has = { "plan", "gone" } } },
})

add(among {
  name = "plan texts that are not plans: garbage bytes with a NUL, empty, a JSON string, {}",
  add = [[printf '\000\377garbage{{' | rc -x SET "ob:{$Q}:plan:00000000000000a1" >/dev/null
plan 00000000000000a2 ''
plan 00000000000000a3 '"just a string"'
plan 00000000000000a4 '{}'
add job garbage plan 00000000000000a1
add job empty plan 00000000000000a2
add job str plan 00000000000000a3
add job obj plan 00000000000000a4]],
  ids = "garbage empty str obj",
  bad = {
    { exit = 2, has = { "plan", "not JSON" } }, { exit = 2, has = { "plan", "not JSON" } },
    { exit = 2, has = { "plan" } }, { exit = 2, has = { "plan" } },
  },
})

add(among {
  name = "a plan key of the wrong Redis type (a hash): the job fails saying so, not that it is gone",
  add = [[rc HSET "ob:{$Q}:plan:00000000000000b1" _tool step >/dev/null
add job wrongtype plan 00000000000000b1]],
  ids = "wrongtype",
  bad = { { exit = 2, has = { "plan" }, lacks = { "gone" } } },
})

add(among {
  name = "a plan text over 64 MB: refused by size",
  secs = 60,
  add = [[{ printf '{"plan":[{"_tool":"step","n":1,"pad":"'; rep 67200000 x; printf '"}]}'; } |
  rc -x SET "ob:{$Q}:plan:00000000000000c1" >/dev/null
add job hugeplan plan 00000000000000c1]],
  ids = "hugeplan",
  bad = { { exit = 2, has = { "plan", "64 MB" } } },
  cleanup = [[rc DEL "ob:{$Q}:plan:00000000000000c1" >/dev/null]],
})

add(among {
  name = "a plan naming a tool no worker has: exit 2 naming the tool, nothing runs",
  add = [[plan 00000000000000d1 '[{"_tool": "nosuch", "n": 1}, {"_tool": "step", "n": 7, "mark": "marks"}]'
add job unknown plan 00000000000000d1]],
  ids = "unknown",
  bad = { { exit = 2, has = { "nosuch" } } },
})

add(among {
  name = "plan texts with a key twice, a NUL in _tool: exit 2, step never runs",
  add = [[plan 00000000000000e1 '[{"_tool": "nosuch", "_tool": "step", "n": 7, "mark": "marks"}]'
plan 00000000000000e2 '[{"_tool": "step\u0000x", "n": 8, "mark": "marks"}]'
add job dupkey plan 00000000000000e1
add job nultool plan 00000000000000e2]],
  ids = "dupkey nultool",
  bad = { { exit = 2, has = { "duplicate" } }, { exit = 2, has = { "NUL" } } },
})

add(among {
  name = "a queued plan delegating to /etc/passwd and ../..: outside the plans root, exit 2",
  add = [[plan 00000000000000f1 '[{"_delegate": "/etc/passwd"}]'
plan 00000000000000f2 '[{"_delegate": "../../../../etc/passwd"}]'
add job abs plan 00000000000000f1
add job up plan 00000000000000f2]],
  ids = "abs up",
  bad = { { exit = 2, has = { "plans root" } }, { exit = 2, has = { "plans root" } } },
  check = function(_, r)
    if r.err:find("root:", 1, true) or r.out:find("root:x", 1, true) then return false, "/etc/passwd is quoted" end
    return true
  end,
})

-- =====================================================================================
-- the `name` field (printed in messages) and fields obelus does not know
-- =====================================================================================
add(among {
  name = "a name with an escape sequence and a NUL, a name not UTF-8: fail, nothing raw on stderr",
  add = [[printf '\033[31mx\000y' | addx job esc plan "$H" inputs '[{"n": 2}]' name
printf 'plan\377.json' | addx job nonutf plan "$H" inputs '[{"n": 2}]' name]],
  ids = "esc nonutf",
  bad = { { exit = 2, has = { '"name"' } }, { exit = 2, has = { '"name"' } } },
  check = function(_, r)
    if r.err:find("\27", 1, true) then return false, "stderr carries a raw ESC byte" end
    return true
  end,
})

add(among {
  name = "a name of 1,025 bytes fails; 1,024 bytes runs",
  add = [[N1024=$(rep 1019 n).json; N1025=$(rep 1020 n).json
add job n1024 plan "$H" inputs '[{"n": 2}]' name "$N1024"
add job n1025 plan "$H" inputs '[{"n": 3}]' name "$N1025"]],
  ids = "n1024 n1025",
  bad = { { exit = 0, output = 4 }, { exit = 2, has = { '"name"' } } },
  marks = { 1, 2, 5 },
})

add(among {
  name = "unknown fields (one of 10 MB, one with a NUL in its name) are ignored: the job runs",
  add = [[rep 10000000 x | addx job extra plan "$H" inputs '[{"n": 2}]' zz
printf 'v' | rc -x XADD "$S" '*' job extra2 plan "$H" inputs '[{"n": 3}]' "$(printf 'in\001puts')" >/dev/null]],
  ids = "extra extra2",
  code = 0,
  bad = { { exit = 0, output = 4 }, { exit = 0, output = 6 } },
  marks = { 1, 2, 3, 5 },
})

-- =====================================================================================
-- "a job that crashes its tool": the job fails, the worker and the next job go on
-- =====================================================================================
add(among {
  name = "tools that raise an error and call os.exit: their jobs exit 1, the worker goes on",
  add = [[plan 0000000000000a01 ']] .. one("boom") .. [['
plan 0000000000000a02 ']] .. one("quit") .. [['
add job boom plan 0000000000000a01
add job quit plan 0000000000000a02]],
  ids = "boom quit",
  bad = { { exit = 1 }, { exit = 1 } },
  err = { "boom in the tool", "os.exit called by a tool" },
})

add(among {
  name = "a tool that never yields (worker --max-slice 300): the job exits 1, the next one runs",
  add = [[plan 0000000000000a03 ']] .. one("spin") .. [['
add job spin plan 0000000000000a03]],
  ids = "spin",
  worker = "--max-slice 300",
  bad = { { exit = 1 } },
  err = { "without yielding" },
})

add {
  name = "a job that kills its worker every time: poison after --max-deliveries 2, the next job runs",
  item = 2, needs = "redis", secs = 30, files = files(),
  run = prelude() .. [[
G1=$(sub 1) || exit 90
plan 0000000000000a05 ']] .. one("die") .. [['
add job die plan 0000000000000a05
G2=$(sub 5) || exit 90
# each worker that takes it dies of SIGKILL (that is the attack); the next takes it over
for i in 1 2 3 4; do
  obelus worker --redis "$REDIS" --queue "$Q" --tools tools --drain --claim-idle 200 --max-deliveries 2 2>>w.err
done
cat w.err >&2
waitj "$G1" die "$G2"
]],
  expect = {
    code = 1,
    err = "poison",
    out = expect_results { GOOD1, { exit = 1, has = { "poison" } }, GOOD2 },
    check = marks_are { 1, 5 },
  },
}

-- =====================================================================================
-- "Two entries with one job id run concurrently": a job id runs once
-- =====================================================================================
add {
  name = "two more entries of a submitted job's id, two workers: it runs once, the others are acked",
  item = 2, needs = "redis", secs = 30, files = files(),
  run = prelude() .. [[
G=$(sub 3 slow.json) || exit 90
H=$(rc HGET "ob:{$Q}:job:$G" plan)
add job "$G" plan "$H" inputs '[{"n": 3}]'
add job "$G" plan "$H" inputs '[{"n": 3}]'
obelus worker --redis "$REDIS" --queue "$Q" --tools tools --drain --jobs 2 2>w1.err & P1=$!
obelus worker --redis "$REDIS" --queue "$Q" --tools tools --drain --jobs 2 2>w2.err & P2=$!
wait $P1; w1=$?
wait $P2; w2=$?
cat w1.err w2.err >&2
[ $w1 -eq 0 ] || exit $w1
[ $w2 -eq 0 ] || exit $w2
echo "pending: $(rc XPENDING "$S" workers | head -1)" >&2
waitj "$G"
]],
  expect = {
    code = 0,
    err = { "ignored", "pending: 0" },
    out = expect_results { { exit = 0, output = 6 } },
    check = marks_are { 3 },
  },
}

add {
  name = "three entries of one id on one worker with --jobs 4: it runs once",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
G=$(sub 3 slow.json) || exit 90
H=$(rc HGET "ob:{$Q}:job:$G" plan)
add job "$G" plan "$H" inputs '[{"n": 3}]'
add job "$G" plan "$H" inputs '[{"n": 3}]'
work --jobs 4
waitj "$G"
]],
  expect = {
    code = 0,
    err = "2 ignored",
    out = expect_results { { exit = 0, output = 6 } },
    check = marks_are { 3 },
  },
}

add {
  name = "entries of a running job's id with other inputs and malformed ones: the first entry's result stands",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
G=$(sub 3 slow.json) || exit 90
H=$(rc HGET "ob:{$Q}:job:$G" plan)
add job "$G" plan "$H" inputs '[{"n": 9}]'
add job "$G" plan "$H" inputs '{"n": 9}'
add job "$G" plan ffffffffffffffff
work --jobs 4
waitj "$G"
]],
  expect = {
    code = 0,
    out = expect_results { { exit = 0, output = 6 } },
    check = marks_are { 3 },
  },
}

-- =====================================================================================
-- "re-adding a finished job's entry replaces its result with an error"
-- =====================================================================================
add {
  name = "a finished job's entry added again as it was: acked and ignored, its result and time kept",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
G=$(sub 3) || exit 90
work
H=$(rc HGET "ob:{$Q}:job:$G" plan)
F=$(rc HGET "ob:{$Q}:job:$G" finished)
add job "$G" plan "$H" inputs '[{"n": 3}]' name p.json
work
[ "$(rc HGET "ob:{$Q}:job:$G" finished)" = "$F" ] || echo "its finished time changed" >&2
waitj "$G"
]],
  expect = {
    code = 0,
    err = "already finished",
    out = expect_results { { exit = 0, output = 6 } },
    check = function(dir, r)
      if r.err:find("finished time changed", 1, true) then return false, "the job's record was rewritten" end
      return marks_are { 3 }(dir)
    end,
  },
}

add {
  name = "a finished job's entry added again malformed (inputs an object, a plan gone, other inputs): result kept",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
G=$(sub 3) || exit 90
work
H=$(rc HGET "ob:{$Q}:job:$G" plan)
add job "$G" plan "$H" inputs '{"n": 3}'
add job "$G" plan ffffffffffffffff
add job "$G" plan "$H" inputs '[{"n": 5}]'
work
waitj "$G"
]],
  expect = {
    code = 0,
    err = "3 ignored",
    out = expect_results { { exit = 0, output = 6 } },
    check = marks_are { 3 },
  },
}

add {
  name = "a failed job's entry added again: it stays failed and does not run again",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
plan 0000000000000b01 ']] .. one("boom") .. [['
add job f1 plan 0000000000000b01
work
G=$(sub 3) || exit 90
H=$(rc HGET "ob:{$Q}:job:$G" plan)
add job f1 plan "$H" inputs '[{"n": 4}]'
work
waitj f1 "$G"
]],
  expect = {
    code = 1,
    err = "already finished",
    out = expect_results { { exit = 1 }, { exit = 0, output = 6 } },
    check = marks_are { 3 },
  },
}

add {
  name = "a job failed as malformed, then a good entry of its id: it stays failed with its error",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
G=$(sub 3) || exit 90
H=$(rc HGET "ob:{$Q}:job:$G" plan)
add job m1 plan "$H" inputs '{"n": 4}'
work
add job m1 plan "$H" inputs '[{"n": 4}]'
work
waitj "$G" m1
]],
  expect = {
    code = 1,
    out = expect_results { { exit = 0, output = 6 }, { exit = 2, has = { '"inputs"', "object" } } },
    check = marks_are { 3 },
  },
}

add {
  name = "entries naming a sharded job's whole and a finished part: ignored, the merged output stands",
  item = 2, needs = "redis", files = files {
    ["sh.json"] = '{"plan":[{"_tool":"step","n":"\xE2\x80\xA0input.n","mark":"marks",' ..
                  '"_outputPath":"\xE2\x80\xA0state.a"}],"instances":["x","y","z"],"output":"\xE2\x80\xA0state.a"}',
  },
  run = prelude() .. [[
G=$(obelus submit sh.json --redis "$REDIS" --queue "$Q" --shard 2 --input '{"n": 2}') || exit 90
work
H=$(rc HGET "ob:{$Q}:job:$G.1" plan)
add job "$G" plan "$H" inputs '[{"n": 9}]'
add job "$G.1" plan "$H" inputs '[{"n": 9}]'
work
waitj "$G"
]],
  expect = {
    code = 0,
    err = "2 ignored",
    out = function(out)
      local got, e = results(out)
      if not got then return false, e end
      local o = got[1] and got[1].output
      if #got ~= 1 or got[1].exit ~= 0 or type(o) ~= "table" or o.x ~= 4 or o.y ~= 4 or o.z ~= 4 then
        return false, "wait printed: " .. out
      end
      return true
    end,
    check = marks_are { 2, 2, 2 },
  },
}

add {
  name = "hand-made entries squatting ids 1 and 2 before any submit: the submitted jobs get their own results",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
plan 0000000000000c01 ']] .. fixed(333) .. [['
add job 1 plan 0000000000000c01
add job 2 plan 0000000000000c01
work
G1=$(sub 1) || exit 90
G2=$(sub 5) || exit 90
work
waitj "$G1" "$G2"
]],
  expect = {
    code = 0,
    out = expect_results { GOOD1, GOOD2 },
    check = marks_are { 1, 5 },
  },
}

-- =====================================================================================
-- nested junk: the queue's other keys as anyone with Redis access could leave them;
-- "the worker must go on"
-- =====================================================================================
add(among {
  name = "a job whose hash is a string (WRONGTYPE): it fails readably, the worker goes on",
  add = [[rc SET "ob:{$Q}:job:jh" "a string" >/dev/null
add job jh plan "$H" inputs '[{"n": 2}]']],
  ids = "jh",
  bad = { { exit = 2 } },
})

add(among {
  name = "a job whose journal key is a hash: it fails naming the journal, or its journal is readable",
  add = [[rc HSET "ob:{$Q}:journal:jj" a b >/dev/null
add job jj plan "$H" inputs '[{"n": 3}]']],
  after = [[obelus log --redis "$REDIS" --queue "$Q" jj >jj.log 2>&1; echo $? >jj.rc
]],
  ids = "jj",
  code = { 0, 1 },
  bad = { { any = true } }, -- judged by check
  marks = false,
  check = function(dir, r)
    local got = results(r.out) or {}
    local jj, log, lrc = got[2] or {}, slurp(dir .. "/jj.log") or "", (slurp(dir .. "/jj.rc") or ""):match("%d+")
    if jj.exit == 2 and why_of(jj):find("journal", 1, true) then return true end
    if jj.exit == 0 and jj.output == 6 and lrc == "0" then return true end
    return false, ("job jj: %s; log --redis jj: exit %s: %s"):format(cjson.encode(jj), tostring(lrc), log:sub(1, 200))
  end,
})

add(among {
  name = "junk in the set of streams (a string key, a missing key, another queue's): workers' claims go on",
  add = [[rc SADD "ob:{$Q}:streams" "ob:{$Q}:seq" nokey "ob:{other}:jobs" "ob:{$Q}:jobs:0123456789abcdef" >/dev/null
add job ok3 plan "$H" inputs '[{"n": 3}]']],
  worker = "--claim-idle 100",
  ids = "ok3",
  code = 0,
  bad = { { exit = 0, output = 6 } },
  marks = { 1, 3, 5 },
})

add {
  name = "the jobs stream is a string: the worker says so and exits, no busy loop",
  item = 2, needs = "redis", secs = 10, files = files(),
  run = prelude() .. [[
rc SET "$S" "not a stream" >/dev/null
obelus worker --redis "$REDIS" --queue "$Q" --tools tools --drain 2>w.err; w=$?
head -c 2000 w.err >&2
exit $w
]],
  expect = { code = { 1, 2, 3 }, err = "WRONGTYPE" },
}

add {
  name = "the jobs stream deleted under a running worker, then a hand-made entry: the worker takes it",
  item = 2, needs = "redis", secs = 30, files = files(),
  run = prelude() .. [[
plan 0000000000000d01 ']] .. fixed(4, true) .. [['
obelus worker --redis "$REDIS" --queue "$Q" --tools tools 2>w.err & P=$!
i=0
until rc XINFO GROUPS "$S" 2>/dev/null | grep -q workers; do
  i=$((i + 1)); [ $i -gt 400 ] && break; sleep 0.05
done
rc DEL "$S" >/dev/null
add job after plan 0000000000000d01
# until a worker has taken it (a hand-made entry's job has no record before)
i=0
until [ -n "$(rc HGET "ob:{$Q}:job:after" state)" ]; do
  i=$((i + 1)); [ $i -gt 400 ] && break; sleep 0.05
done
waitj after; c=$?
kill -TERM $P; wait $P; w=$?
cat w.err >&2
[ $w -eq 0 ] || exit $w
exit $c
]],
  expect = {
    code = 0,
    out = expect_results { { exit = 0, output = 8 } },
    check = marks_are { 4 },
  },
}

add(among {
  name = "the stats hash holds junk: the job's result is stored and the worker does not call it failed",
  add = [[rc HSET "ob:{$Q}:stats" done abc failed -5 >/dev/null
add job st plan "$H" inputs '[{"n": 3}]']],
  ids = "st",
  code = 0,
  bad = { { exit = 0, output = 6 } },
  marks = { 1, 3, 5 },
  err = "3 done, 0 failed",
  check = function(_, r)
    if r.err:find("could not be stored", 1, true) then
      return false, "the worker says a stored result was not stored"
    end
    return true
  end,
})

add {
  name = "1,000 malformed entries, then a good job: all fail, counted; the good one runs",
  item = 2, needs = "redis", secs = 30, files = files(),
  run = prelude() .. [[
G1=$(sub 1) || exit 90
H=$(rc HGET "ob:{$Q}:job:$G1" plan)
i=0
while [ $i -lt 1000 ]; do
  case $((i % 4)) in
    0) echo "XADD $S * job b$i plan $H inputs {}" ;;
    1) echo "XADD $S * job b$i plan zz$H" ;;
    2) echo "XADD $S * plan $H inputs [1" ;;
    3) echo "XADD $S * job ../b$i plan $H name x" ;;
  esac
  i=$((i + 1))
done | rc >/dev/null
G2=$(sub 5) || exit 90
work --jobs 8
obelus status --redis "$REDIS" --queue "$Q" --json >st.json
waitj "$G1" b0 b1 "$G2"
]],
  expect = {
    code = 1,
    out = expect_results { GOOD1, { exit = 2, has = { '"inputs"' } }, { exit = 2, has = { '"plan"' } }, GOOD2 },
    check = all(marks_are { 1, 5 }, function(dir)
      local ok, st = pcall(cjson.decode, slurp(dir .. "/st.json") or "")
      if not ok or type(st) ~= "table" then return false, "status --json: " .. tostring(slurp(dir .. "/st.json")) end
      if st.failed ~= 1000 or st.done ~= 2 or st.queued ~= 0 or st.running ~= 0 then
        return false, "status --json: " .. slurp(dir .. "/st.json")
      end
      return true
    end),
  },
}

add {
  name = "fake entries in the stream of finished jobs: wait does not take them for a result",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
G1=$(sub 1) || exit 90
rc XADD "ob:{$Q}:done" '*' job "$G1" exit 0 >/dev/null
rc XADD "ob:{$Q}:done" '*' junk x >/dev/null
printf '\377\000' | rc -x XADD "ob:{$Q}:done" '*' job >/dev/null
obelus wait --redis "$REDIS" --queue "$Q" --timeout 1500 "$G1"
]],
  expect = {
    code = 4,
    out = function(out)
      local got, e = results(out)
      if not got then return false, e end
      if #got ~= 1 or got[1].exit ~= cjson.null or got[1].state ~= "queued" then
        return false, "wait printed: " .. out
      end
      return true
    end,
  },
}

-- =====================================================================================
-- the commands: submit, status, log --redis, wait, and the Lua module, as docs/fleet.md
-- and --help describe them
-- =====================================================================================
add(among {
  name = "status counts the malformed job as failed; log --redis says why it has no journal (exit 1)",
  add = [[add job bad plan "$H" inputs '{"n": 1}']],
  after = [[obelus status --redis "$REDIS" --queue "$Q" --json >st.json
obelus log --redis "$REDIS" --queue "$Q" bad >log.out 2>log.err; echo $? >log.rc
]],
  ids = "bad",
  bad = { { exit = 2, has = { '"inputs"' } } },
  check = function(dir)
    local ok, st = pcall(cjson.decode, slurp(dir .. "/st.json") or "")
    if not ok or type(st) ~= "table" or st.failed ~= 1 or st.done ~= 2 then
      return false, "status --json: " .. tostring(slurp(dir .. "/st.json"))
    end
    local rc, err = (slurp(dir .. "/log.rc") or ""):match("%d+"), slurp(dir .. "/log.err") or ""
    if rc ~= "1" or not err:find('"inputs"', 1, true) then
      return false, ("log --redis bad: exit %s, stderr %s"):format(tostring(rc), err)
    end
    return true
  end,
})

add {
  name = "log --redis of a job whose plan was gone: exit 1, saying why it never ran",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
add job pg plan 0123456789abcdef
work
obelus log --redis "$REDIS" --queue "$Q" pg
]],
  expect = { code = 1, err = { "pg", "plan" } },
}

add {
  name = "log --redis of a job whose stored error holds terminal controls: printed escaped",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
rc HSET "ob:{$Q}:job:e1" state failed exit 2 error "$(printf 'bad \033[2J\033]0;pwned\007 x')" >/dev/null
obelus log --redis "$REDIS" --queue "$Q" e1
]],
  expect = {
    code = 1,
    err = { "e1", "\\x1b" },
    check = function(_, r)
      if r.err:find("\27", 1, true) or r.err:find("\7", 1, true) then
        return false, "stderr carries raw ESC/BEL bytes"
      end
      return true
    end,
  },
}

add {
  name = "status with junk in the workers' hash, the stats and the set of streams: exit 0, one JSON object",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
G1=$(sub 1) || exit 90
rc HSET "ob:{$Q}:workers" evil 'not json' evil2 '{"host":5,"pid":"x","running":-1,"seen":"yesterday"}' >/dev/null
rc HSET "ob:{$Q}:stats" done abc failed -5 >/dev/null
rc SADD "ob:{$Q}:streams" "ob:{$Q}:seq" nokey >/dev/null
obelus status --redis "$REDIS" --queue "$Q" >&2 || exit 91
obelus status --redis "$REDIS" --queue "$Q" --json
]],
  expect = {
    code = 0,
    out = function(out)
      local ok, st = pcall(cjson.decode, out)
      if not ok or type(st) ~= "table" or st.queued ~= 1 then return false, "status --json: " .. out:sub(1, 300) end
      return true
    end,
  },
}

add {
  name = "status prints a worker's name and host from Redis (escape sequences in them) escaped",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
rc HSET "ob:{$Q}:workers" "$(printf 'e\033[31mRED')" \
  '{"host":"h\u001b[2J","pid":1,"seen":1,"tools_id":"\u001b[31m"}' >/dev/null
obelus status --redis "$REDIS" --queue "$Q"
]],
  expect = {
    code = 0,
    out = function(out)
      if out:find("\27", 1, true) then return false, "status printed a raw ESC byte: " .. out:gsub("\27", "^[") end
      if not out:find("\\x1b", 1, true) then return false, "status does not show the name escaped: " .. out end
      return true
    end,
  },
}

add {
  name = "submit when the queue's id counter holds junk: an error in Redis's words, nothing queued",
  item = 2, needs = "redis", files = files(),
  run = prelude() .. [[
rc SET "ob:{$Q}:seq" abc >/dev/null
obelus submit p.json --redis "$REDIS" --queue "$Q" --input '{"n": 1}'; c=$?
echo "queued: $(rc XLEN "$S")"
exit $c
]],
  expect = { code = { 1, 2, 3 }, err = "not an integer", out = "queued: 0" },
}

add {
  name = "submit refuses a plan over 64 MB as a worker would: exit 2, nothing queued",
  item = 2, needs = "redis", secs = 60, files = files(),
  run = prelude() .. [[
{ printf '{"plan":[{"_tool":"step","n":1,"pad":"'; rep 67200000 x; printf '"}]}'; } >big.json
obelus submit big.json --redis "$REDIS" --queue "$Q"; c=$?
echo "queued: $(rc XLEN "$S")"
exit $c
]],
  expect = { code = 2, err = { "64 MB", "nothing queued" }, out = "queued: 0" },
}

add {
  name = "obelus queue (no such command; status is): exit 2, saying so, with the commands",
  item = 2, files = files(),
  run = [[obelus queue --redis redis://127.0.0.1:1 --queue x]],
  expect = { code = 2, err = { "queue", "wait and status" } },
}

add {
  name = "worker --queue with a brace (it would break the {NAME} hash tag): exit 2 naming --queue",
  item = 2, needs = "redis", files = files(),
  run = [[obelus worker --redis "$REDIS" --queue 'a}b{c' --tools tools --drain]],
  expect = { code = 2, err = "--queue" },
}

add {
  name = "worker and submit against a Redis nobody listens on: exit 3, naming the URL",
  item = 2, files = files(),
  run = [[obelus submit p.json --redis redis://127.0.0.1:1 --input '{"n": 1}'; s=$?
echo "submit: $s"
obelus worker --redis redis://127.0.0.1:1 --tools tools --drain]],
  expect = { code = 3, out = "submit: 3", err = { "cannot reach Redis at redis://127.0.0.1:1" } },
}

add {
  name = "the Lua module: q:wait of a malformed job returns exit 2 and the error, no raise",
  item = 2, needs = "redis", files = files {
    ["lq.lua"] = [[
package.cpath = os.getenv("OBELUS_ROOT") .. "/lib/?.so;" .. package.cpath
package.path = os.getenv("OBELUS_ROOT") .. "/lua/?.lua;" .. os.getenv("OBELUS_ROOT") .. "/lua/?/init.lua;" .. package.path
local obelus = require "obelus"
local q = obelus.queue { redis = os.getenv("REDIS"), queue = arg[1] }
for i = 2, #arg do
  local r = q:wait(arg[i], { timeout_ms = 10000 })
  print(("%s\t%s\t%s"):format(tostring(r.job), tostring(r.exit), tostring(r.error)))
end
q:close()
]],
  },
  run = prelude() .. [[
G1=$(sub 1) || exit 90
H=$(rc HGET "ob:{$Q}:job:$G1" plan)
add job bad plan "$H" inputs '{"n": 1}'
G2=$(sub 5) || exit 90
work
lua5.4 lq.lua "$Q" "$G1" bad "$G2"
]],
  expect = {
    code = 0,
    out = function(out)
      local l = {}
      for x in out:gmatch("[^\n]+") do l[#l + 1] = x end
      if #l ~= 3 or not l[1]:find("^%S+\t0\tnil$") or not l[3]:find("^%S+\t0\tnil$")
         or not l[2]:find("^bad\t2\t.*\"inputs\"") then
        return false, "q:wait gave: " .. out
      end
      return true
    end,
    check = marks_are { 1, 5 },
  },
}

return cases
