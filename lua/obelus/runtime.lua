-- runtime.lua -- the `obelus` module as tools see it inside the engine (SPEC 7).
-- Compiled into the engine; the engine calls it with its C primitives.
--
-- Every wait inside a tool goes through one door: coroutine.yield(TOKEN)
-- from the tool's own coroutine. The engine resumes the coroutine when the
-- thing waited for happens (a timer, a libuv callback, a latent answer). A
-- yield that does not carry TOKEN is refused, so a stray coroutine.yield in
-- a tool is an error of that call rather than a call that never ends.
local prim = ...

local obelus = {}

local TOKEN = prim.token
local wake = prim.wake

obelus.null = prim.null
obelus.array_mt = prim.array_mt
obelus.uv = prim.uv
obelus.sleep = prim.sleep
obelus.encode = prim.encode
obelus.decode = prim.decode

--- Marks t (default a new table) as a JSON array, so it stays one when empty.
function obelus.array(t)
  return setmetatable(t or {}, prim.array_mt)
end

function obelus.is_array(t)
  return type(t) == "table" and getmetatable(t) == prim.array_mt
end

--- Waits for a callback API: fn receives `resume`; the values passed to
--- resume are what await returns. Only the first call of resume counts.
function obelus.await(fn)
  local co = coroutine.running()
  if not prim.is_call(co) then
    error("obelus.await must be called from a tool's own coroutine (its run function), " ..
          "not from outside a tool or from a coroutine the tool made", 2)
  end
  if type(fn) ~= "function" then error("obelus.await expects a function", 2) end
  local state, results = "calling", nil
  local function resume(...)
    if state == "done" then return end
    local yielded = state == "waiting"
    state, results = "done", table.pack(...)
    if yielded then wake(co) end
  end
  fn(resume)
  if state ~= "done" then
    state = "waiting"
    coroutine.yield(TOKEN)
  end
  return table.unpack(results, 1, results.n)
end

local branch_mt = prim.branch_mt
local message_mt = prim.message_mt

--- Picks an `||` alternative of the call's _outputPath: by 1-based position
--- or by the alternative as written ("†state.failed").
function obelus.branch(which, value)
  local kind = math.type(which)
  if kind ~= "integer" and type(which) ~= "string" then
    error("obelus.branch: the first argument is a 1-based position or an alternative as written", 2)
  end
  return setmetatable({ which = which, value = value }, branch_mt)
end

--- An output the tool places itself: { kind=, path=, value=, method= }.
function obelus.message(m)
  if type(m) ~= "table" then error("obelus.message expects a table", 2) end
  if m.kind ~= nil and type(m.kind) ~= "string" then error("obelus.message: kind must be a string", 2) end
  if type(m.path) ~= "string" then error("obelus.message: path must be a string", 2) end
  if m.method ~= nil and type(m.method) ~= "string" then error("obelus.message: method must be a string", 2) end
  return setmetatable({ kind = m.kind or "state", path = m.path, value = m.value,
                        method = m.method or "set", instance = m.instance }, message_mt)
end

--- Sets the handler of latent tools (tools without run): fn(call, tool, ctx).
function obelus.set_latent(fn)
  if type(fn) ~= "function" then error("obelus.set_latent expects a function", 2) end
  prim.set_latent(fn)
end

--- Sets the approver: fn(call, ctx) is asked before each ready call starts.
--- It returns true or nil (allow), false or "refuse" (the call fails with
--- "refused"), or a table: a replacement call, validated again.
function obelus.set_approver(fn)
  if type(fn) ~= "function" then error("obelus.set_approver expects a function", 2) end
  prim.set_approver(fn)
end

return obelus
