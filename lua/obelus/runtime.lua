-- runtime.lua -- the `obelus` module as tools see it inside the engine (plan-format §9).
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
-- obelus.uv is luv, bound to the engine's loop, except that the handles a
-- call makes from its own coroutine are kept by attempt: when the attempt is
-- abandoned (its _timeout passed, its run was cancelled) the engine closes
-- them, so that no callback of it runs later. Nothing is kept for handles
-- made elsewhere (in a callback, or through require "luv").
--
-- A child process (obelus.uv.spawn) is started in a process group of its own
-- (options.detached is always true) and tracked until it exits, with the run
-- it belongs to (the top-level run of the call that spawned it, or of the call
-- that gave the libuv callback spawning it): when the attempt that started it
-- is abandoned, its group gets SIGKILL (its exit callback then only closes its
-- handle); so do the groups of a run still tracked when that run ends (freed:
-- ob_run.c), whether the engine goes on (obelus mcp, a worker) or not, and
-- every group still tracked when the engine goes or the process exits on a
-- second signal. A spawn from a callback whose run has ended is refused. A
-- child that exits leaves its group tracked while the group still has a process
-- (what it started, in the background): the group is killed with the others,
-- and untracked once found empty (at each spawn).
local luv = prim.uv
local owned = setmetatable({}, { __mode = "k" }) -- coroutine -> { serial =, handles... }
local children = {} -- pid -> { pid =, slot =, handle =, run =, abandoned =, exited = },
                    -- until it exits and its group is empty
local function keep(handle)
  local co = coroutine.running()
  local serial = prim.attempt(co)
  if not serial or (type(handle) ~= "userdata" and type(handle) ~= "table") then return end
  local list = owned[co]
  if not list or list.serial ~= serial then
    list = { serial = serial }
    owned[co] = list
  end
  list[#list + 1] = handle
end

local function spawn(path, options, on_exit)
  if prim.is_view(options) then options = prim.totable(options) end
  local o = {}
  if type(options) == "table" then
    for k, v in pairs(options) do o[k] = v end
  end
  o.detached = true -- its own process group: killed as one (setsid)
  local run = prim.run_of(coroutine.running())
  if run == false then
    return nil, "obelus.uv.spawn: the run of this callback's call has ended", "ESRCH"
  end
  for pid, c in pairs(children) do -- the groups left by children that exited, now empty
    if c.exited and not prim.child_group(pid) then
      children[pid] = nil
      prim.child_untrack(c.slot)
    end
  end
  local child
  local r = table.pack(luv.spawn(path, o, function(...)
    if child then
      child.exited = true
      if child.abandoned or not prim.child_group(child.pid) then
        children[child.pid] = nil
        prim.child_untrack(child.slot)
      end -- else its group lives on: killed with the others when its attempt or the run ends
      if child.abandoned then
        if not child.handle:is_closing() then child.handle:close() end
        return
      end
    end
    if on_exit then return on_exit(...) end
  end))
  local handle, pid = r[1], r[2]
  if not handle then return table.unpack(r, 1, r.n) end -- nil, why, name
  child = { pid = pid, slot = prim.child_track(pid), handle = handle, run = run }
  children[pid] = child
  keep(child)
  return handle, pid
end

-- A callback a call gives luv (a function argument of obelus.uv.* or of a
-- handle's method, called from the call's own coroutine) is tied to that
-- attempt: while it runs, the engine knows whose it is, and a memory error in
-- it fails that call (ob_engine.c's luv_callback_pcall) rather than being
-- printed while the callback comes again, forever.
local owner = prim.owner
local function tie(f, co, serial, run)
  return function(...)
    owner(co, serial, run)
    return f(...)
  end
end
local function tied(f)
  return function(...)
    local n = select("#", ...)
    for i = 1, n do
      if type((select(i, ...))) == "function" then
        local co = coroutine.running()
        local serial, run = prim.attempt(co)
        if not serial then break end
        local args = table.pack(...)
        for k = i, n do
          if type(args[k]) == "function" then args[k] = tie(args[k], co, serial, run) end
        end
        return f(table.unpack(args, 1, n))
      end
    end
    return f(...)
  end
end
local patched = setmetatable({}, { __mode = "k" }) -- handle metatables whose methods tie
local function tie_methods(handle)
  local mt = type(handle) == "userdata" and getmetatable(handle)
  local methods = type(mt) == "table" and rawget(mt, "__index")
  if type(methods) ~= "table" or patched[methods] then return end
  patched[methods] = true
  for k, m in pairs(methods) do
    if type(m) == "function" then methods[k] = tied(m) end
  end
end

obelus.uv = setmetatable({}, {
  __index = function(t, k)
    local f = luv[k]
    if k == "spawn" then
      f = tied(spawn)
    elseif type(f) == "function" and k:sub(1, 4) == "new_" then
      -- (its arguments are not tied: new_work and new_thread dump their functions)
      local made = f
      f = function(...)
        local r = table.pack(made(...))
        keep(r[1])
        tie_methods(r[1])
        return table.unpack(r, 1, r.n)
      end
    elseif type(f) == "function" then
      f = tied(f)
    end
    rawset(t, k, f)
    return f
  end,
})

local function kill(child)
  if child.abandoned then return end
  child.abandoned = true
  prim.child_kill(child.pid, child.slot)
  child.slot = nil
end

--- Closes the handles attempt `serial` of coroutine co made, and kills its
--- children (the engine calls it).
function prim.abandon(co, serial)
  local list = owned[co]
  if not list or list.serial ~= serial then return end
  owned[co] = nil
  for i = 1, #list do
    local h = list[i]
    if type(h) == "table" then
      kill(h) -- a child: its handle closes when it has exited
    elseif not h:is_closing() then
      h:close()
    end
  end
end

--- Kills every child still tracked of run `run` (the serial of a top-level run: the
--- engine calls it as the run ends), or of every run (nil: as the engine goes).
function prim.kill_children(run)
  for _, child in pairs(children) do
    if run == nil or child.run == run then kill(child) end
  end
end
obelus.sleep = prim.sleep
obelus.emit = prim.emit
obelus.encode = prim.encode
obelus.decode = prim.decode

--- Marks t (default a new table) as a JSON array, so it stays one when empty.
function obelus.array(t)
  return setmetatable(t or {}, prim.array_mt)
end

function obelus.is_array(t)
  if type(t) == "table" then return getmetatable(t) == prim.array_mt end
  return prim.is_view(t) == "array"
end

-- Views (core/bridge/ob_view.c): a call's big params are read-only userdata that read like
-- tables. totable(v) copies one into plain tables (anything else comes back as it is);
-- is_view(v) is "array", "object" or false; next(t, k) is next for views and tables
-- alike (plain next refuses a userdata).
obelus.totable = prim.totable
obelus.is_view = prim.is_view
obelus.next = prim.next

-- lua-cjson cannot print a userdata: `require "cjson"` (or "cjson.safe") in the
-- engine's state gives the real module with encode wrapped, so that a view, or a
-- table holding views, is printed by obelus's printer from the value itself (keys in
-- their order, as the log would print it). Anything else goes to cjson as before.
-- cjson's buffers are the C allocator's, outside the memory account: a value
-- whose text would not fit in the account's room is refused before cjson starts
-- (prim.encode_check raises "memory limit of N MB reached (--max-memory)").
local is_view, encode_value, encode_check = prim.is_view, prim.encode, prim.encode_check
local function wrap_cjson(name)
  package.preload[name] = function()
    package.preload[name] = nil
    local m = require(name) -- the real one, found by the other searchers
    local encode = m.encode
    if type(encode) == "function" then
      m.encode = function(v, ...)
        if is_view(v) then return encode_value(v) end
        encode_check(v)
        local ok, text, err = pcall(encode, v, ...)
        if ok and text ~= nil then return text end
        local why = ok and err or text -- cjson.safe answers nil, why
        if type(v) == "table" and tostring(why):find("userdata", 1, true) then
          local ok2, mine = pcall(encode_value, v)
          if ok2 then return mine end
        end
        if ok then return text, err end
        error(why, 0)
      end
    end
    return m
  end
end
wrap_cjson("cjson")
wrap_cjson("cjson.safe")

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

-- obelus.http: requests on the engine's loop (libcurl's multi interface,
-- ob_http.c). The calling call waits; every other call goes on. A transfer
-- is kept by the call's attempt like a luv handle: when the attempt is
-- abandoned (_timeout, a cancelled run) it is stopped and never answers.
-- A transport failure raises "METHOD URL: why"; an HTTP status is data.
local http = {}
obelus.http = http

local function with(opts, extra)
  local t = {}
  for k, v in pairs(opts or {}) do t[k] = v end
  for k, v in pairs(extra) do t[k] = v end
  return t
end

-- Options may come from a call's params: a view (or views inside) becomes tables.
local function transfer(opts, level)
  if prim.is_view(opts) then opts = prim.totable(opts) end
  if type(opts) ~= "table" then
    error("obelus.http.request expects a table {url = ..., method = ..., ...}", level)
  end
  if prim.is_view(opts.headers) then opts = with(opts, { headers = prim.totable(opts.headers) }) end
  local res, err = obelus.await(function(resume)
    keep(prim.http_start(opts, resume))
  end)
  if not res then error(err, level) end
  return res
end

--- request{url=, method="GET", headers={}, body=, timeout_ms=300000, follow=true,
--- max_bytes= (the engine's: 64 MB), low_speed_limit=1, low_speed_time=60, ca_file=}
--- -> {status=, headers= (lower-case names), body=, url=}. A method, a header or
--- a URL that could split the request (CR, LF, NUL, not a token, not http(s))
--- raises before anything is sent.
function http.request(opts) return transfer(opts, 3) end

function http.get(url, opts) return transfer(with(opts, { url = url, method = "GET" }), 3) end

function http.post(url, body, opts)
  return transfer(with(opts, { url = url, method = "POST", body = body }), 3)
end

--- json{url=, method= ("POST" with a body, else "GET"), body = a Lua value, ...}:
--- sends the value as JSON, and answers with body = the decoded answer (nil
--- when empty) and text = the answer as received.
function http.json(opts)
  if prim.is_view(opts) then opts = prim.totable(opts) end
  if type(opts) ~= "table" then error("obelus.http.json expects a table {url = ..., body = ...}", 2) end
  local headers = { ["accept"] = "application/json" }
  for k, v in pairs(opts.headers or {}) do headers[k] = v end
  local extra = { headers = headers }
  if opts.body ~= nil then
    extra.body = prim.encode(opts.body)
    headers["content-type"] = headers["content-type"] or "application/json"
    extra.method = opts.method or "POST"
  end
  local res = transfer(with(opts, extra), 3)
  res.text = res.body
  if res.body == "" then
    res.body = nil
  else
    local ok, v = pcall(prim.decode, res.body)
    if not ok then
      error(("%s %s: the answer (status %d) is not JSON: %s"):format(extra.method or opts.method or "GET",
            opts.url, res.status, tostring(v)), 2)
    end
    res.body = v
  end
  return res
end

--- download(url, path, opts): streams the answer into the file path;
--- answers {status=, headers=, bytes=, url=} (no body).
function http.download(url, path, opts)
  if type(path) ~= "string" then error("obelus.http.download expects a file path", 2) end
  return transfer(with(opts, { url = url, download = path }), 3)
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
  prim.branched() -- its value must be what the call returns (ob_write.c)
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
