-- hostile/cases/unfold.lua -- UNFOLD: plans that unfold as they run (issue 28), attacked.
--
-- The attacks on _each: a list of two million (past --max-calls), of a million under a
-- small --max-memory, an _each bomb (copies that delegate to the plan that maps them),
-- lists that are not lists (a string, null, an object), copies that hang until SIGTERM
-- (the journal must read, and resume must end the run), copies that fail with and
-- without a || alternative, elements full of "†" text (never read as references),
-- †each where it means nothing. The attacks on fork: a journal that is not one (a JSON
-- array, garbage in the middle, a torn last line, /dev/null, a FIFO), a loop's journal, a
-- point past the end or before the run, --from a copy's id, a --set that is not a
-- reference or not JSON, the source given as the fork's own journal. A user should get:
-- the right exit code with the limit, the call or the line named, no abort, no hang, and
-- never a source journal changed.
local S = require "support"
local slurp = S.slurp
local cjson = require "cjson"

local DAG = "\xE2\x80\xA0"

local TOOLS = [=[
local obelus = require "obelus"
return {
  { name = "echo", run = function(call) return call.value end },
  { name = "list", run = function(call)
      local t = obelus.array()
      for i = 1, call.n do t[i] = i end
      return t
    end },
  { name = "fail", run = function(call)
      if call.fail then error("copy " .. tostring(call.i) .. " fails", 0) end
      return call.i
    end },
  { name = "forever", run = function()
      local f = assert(io.open("started", "a")); f:write("x\n"); f:close()
      while true do obelus.sleep(60000) end
    end },
}
]=]

local function enc(v) return (cjson.encode(v):gsub("\\/", "/")) end

local function decode(s)
  local ok, v = pcall(cjson.decode, s)
  if ok then return v end
end

-- the output is this JSON value
local function out_is(want)
  return function(out)
    local v = decode(out)
    if enc(v) ~= enc(want) then return false, "output " .. out:sub(1, 200) end
    return true
  end
end

-- every line of the journal j reads as JSON (a torn last line aside)
local function journal_reads(name)
  return function(dir)
    local text = slurp(dir .. "/" .. name)
    if not text then return false, name .. " is missing" end
    local n = 0
    for line in text:gmatch("([^\n]*)\n") do
      n = n + 1
      if line ~= "" and not decode(line) then return false, name .. ":" .. n .. " does not read" end
    end
    return true
  end
end

local MAP = function(list_call, extra)
  local call = { _id = "m", _tool = "echo", _each = DAG .. "state.items", value = DAG .. "each.value",
                 _outputPath = DAG .. "state.out" }
  for k, v in pairs(extra or {}) do call[k] = v end
  return enc { plan = { list_call, call }, output = DAG .. "state.out" }
end

local cases = {}
local function case(c) cases[#cases + 1] = c end

case { name = "_each over two million elements stops at --max-calls before any copy", item = 5,
  files = { ["t.lua"] = TOOLS,
            ["p.json"] = MAP { _tool = "list", n = 2000000, _outputPath = DAG .. "state.items" } },
  run = "obelus run p.json --tools t.lua", secs = 60,
  expect = { code = 1, err = { "call m (echo) failed", "2000000 copies would make", "--max-calls 1000000" } } }

case { name = "_each over a million under --max-memory 64: the limit, named", item = 5,
  files = { ["t.lua"] = TOOLS,
            ["p.json"] = MAP { _tool = "list", n = 1000000, _outputPath = DAG .. "state.items" } },
  run = "obelus run p.json --tools t.lua --max-calls 2000000 --max-memory 64", secs = 60,
  expect = { code = 1, err = { "memory limit of 64 MB reached (--max-memory)" } } }

case { name = "an _each bomb: copies delegating to the plan that maps them", item = 5,
  files = { ["t.lua"] = TOOLS,
            ["p.json"] = enc { plan = {
              { _id = "l", _tool = "echo", value = { 1, 2, 3, 4 }, _outputPath = DAG .. "state.items" },
              { _id = "b", _each = DAG .. "state.items", _delegate = "p.json", _outputPath = DAG .. "state.out" } } } },
  run = "obelus run p.json --tools t.lua --journal j.jsonl", secs = 60, changes = { "j.jsonl" },
  expect = { code = 1, err = { "the delegated plan p.json failed: call b: delegation deeper than 16 levels (see --max-depth)" },
             check = function(dir, r) -- the deepest cause only: no message nested 16 times
               if #r.err > 8192 then return false, ("stderr holds %d bytes"):format(#r.err) end
               return journal_reads("j.jsonl")(dir)
             end } }

for _, bad in ipairs { { "a string", '"abc"', "string" }, { "null", "null", "null" },
                       { "an object", '{"a":1}', "object" } } do
  case { name = "_each over " .. bad[1] .. ": a runtime error naming the call", item = 1,
    files = { ["t.lua"] = TOOLS,
              ["p.json"] = '{"plan":[{"_id":"l","_tool":"echo","value":' .. bad[2] ..
                ',"_outputPath":"' .. DAG .. 'state.items"},{"_id":"m","_tool":"echo","_each":"' ..
                DAG .. 'state.items","value":"' .. DAG .. 'each.value","_outputPath":"' .. DAG .. 'state.out"}]}' },
    run = "obelus run p.json --tools t.lua",
    expect = { code = 1, err = { "call m (echo) failed (runtime): _each: " .. DAG .. "state.items is " .. bad[3] } } }
end

case { name = "copies that hang, then SIGTERM: 143, the journal reads, resume is refused nothing", item = 7,
  files = { ["t.lua"] = TOOLS,
            ["p.json"] = enc { plan = {
              { _id = "l", _tool = "echo", value = { 1, 2, 3 }, _outputPath = DAG .. "state.items" },
              { _id = "h", _tool = "forever", _each = DAG .. "state.items", _outputPath = DAG .. "state.out" } } } },
  run = "obelus run p.json --tools t.lua --journal j.jsonl & pid=$!; " ..
        "for i in $(seq 1 200); do [ -f started ] && [ $(wc -l < started) -ge 3 ] && break; sleep 0.05; done; " ..
        "kill -TERM $pid; wait $pid; echo exit=$? >&2; obelus log j.jsonl >/dev/null",
  changes = { "j.jsonl", "started" },
  expect = { code = 0, err = { "exit=143" }, check = journal_reads("j.jsonl") } }

case { name = "elements full of † text are data in every copy, never references", item = 1,
  files = { ["t.lua"] = TOOLS,
            ["p.json"] = enc { plan = {
              { _id = "l", _tool = "echo", value = { DAG .. DAG .. "state.secret", { k = DAG .. DAG .. "input" } },
                _outputPath = DAG .. "state.items" },
              { _id = "m", _tool = "echo", _each = DAG .. "state.items", value = { v = DAG .. "each.value" },
                _outputPath = DAG .. "state.out" } }, output = DAG .. "state.out" } },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 0, out = out_is { { v = DAG .. "state.secret" }, { v = { k = DAG .. "input" } } } } }

case { name = "a failing copy with a || alternative: exit 0, the error handled", item = 1,
  files = { ["t.lua"] = TOOLS,
            ["p.json"] = enc { plan = {
              { _id = "l", _tool = "echo", value = { false, true }, _outputPath = DAG .. "state.items" },
              { _id = "f", _tool = "fail", _each = DAG .. "state.items", fail = DAG .. "each.value",
                i = DAG .. "each.index", _outputPath = DAG .. "state.ok || " .. DAG .. "state.err" } },
              output = DAG .. "state.err.error" } },
  run = "obelus run p.json --tools t.lua",
  expect = { code = 0, out = out_is("copy f[1] failed: copy 1 fails") } }

case { name = DAG .. "each outside an _each call, in output and in _outputPath: check refuses", item = 1,
  files = { ["t.lua"] = TOOLS,
            ["p.json"] = enc { plan = {
              { _id = "a", _tool = "echo", value = DAG .. "each.value", _outputPath = DAG .. "state.a" },
              { _id = "b", _tool = "echo", value = 1, _outputPath = DAG .. "each.x" } },
              output = DAG .. "each.index" } },
  run = "obelus check p.json --tools t.lua",
  expect = { code = 2, err = { "call a (echo): parameter \"value\": " .. DAG .. "each.value is only for a call with _each",
                               "call b (echo): _outputPath: " .. DAG .. "each is an _each call's element",
                               "output: " .. DAG .. "each.index is only for the params of a call with _each" } } }

-- --- fork ---------------------------------------------------------------------------------

local CHAIN = enc { plan = {
  { _id = "a", _tool = "echo", value = 1, _outputPath = DAG .. "state.a" },
  { _id = "b", _tool = "echo", value = DAG .. "state.a", _outputPath = DAG .. "state.b" } },
  output = DAG .. "state.b" }
local RUN = "obelus run p.json --tools t.lua --journal j.jsonl >/dev/null; "

local function fork_case(name, setup_cmd, cmd, code, err)
  case { name = name, item = 1,
    files = { ["t.lua"] = TOOLS, ["p.json"] = CHAIN },
    setup = RUN .. (setup_cmd or ""),
    run = cmd, secs = 20, changes = { "f.jsonl" },
    expect = { code = code, err = err } }
end

fork_case("fork of a JSON array (a log, not a journal)", "echo '[{\"type\":\"plan\"}]' > arr.json",
  "obelus fork arr.json --from b --journal f.jsonl", 2, { "arr.json" })
fork_case("fork of a journal with garbage in the middle: the line named",
  "sed -i '3s/.*/not json at all/' j.jsonl", "obelus fork j.jsonl --from b --journal f.jsonl", 2,
  { "j.jsonl:3" })
fork_case("fork of a journal with a torn last line: read without it",
  "printf '{\"journal\":\"sett' >> j.jsonl", "obelus fork j.jsonl --from b --journal f.jsonl", 0, {})
fork_case("fork of /dev/null: not a journal, no hang", nil,
  "obelus fork /dev/null --from b --journal f.jsonl", 2, { "/dev/null" })
fork_case("fork of a FIFO: refused, never waited for", "mkfifo fifo",
  "obelus fork fifo --from b --journal f.jsonl", 2, { "fifo" })
fork_case("fork --at past the end: the count named", nil,
  "obelus fork j.jsonl --at 1000 --journal f.jsonl", 2, { "--at 1000", "has 3 messages" })
fork_case("fork --from a copy's id: refused, the call to fork from said", nil,
  "obelus fork j.jsonl --from 'b[0]' --journal f.jsonl", 2, { "--from b[0]", "forked from the call that made it" })
fork_case("fork --set of no reference", nil,
  "obelus fork j.jsonl --from b --set 'state.a=1' --journal f.jsonl", 2, { "--set" })
fork_case("fork --set of a value that is not JSON", nil,
  "obelus fork j.jsonl --from b --set '" .. DAG .. "state.a={oops' --journal f.jsonl", 2,
  { "--set " .. DAG .. "state.a: the value is not JSON" })
fork_case("fork onto its own source, --overwrite given: refused, the source kept", nil,
  "obelus fork j.jsonl --from b --journal j.jsonl --overwrite", 2, { "is the journal forked" })

case { name = "fork of a loop's journal: refused, naming what forks take", item = 1,
  files = { ["t.lua"] = TOOLS, ["p.json"] = CHAIN,
            ["planner.lua"] = "return function(ctx) return { output = 1 } end\n" },
  setup = "obelus loop p.json --planner planner.lua --tools t.lua --journal j.jsonl >/dev/null 2>&1",
  run = "obelus fork j.jsonl --from b --journal f.jsonl", changes = { "f.jsonl" },
  expect = { code = 2, err = { "a journal of `obelus loop`" } } }

return cases
