---@meta obelus
-- obelus/meta.lua -- LuaLS annotations of the `obelus` module, for editors: never loaded.
-- Point the language server at it (".luarc.json": {"workspace.library": ["<obelus>/lua"]})
-- and `require "obelus"` in a tool completes and checks against what is below.
--
-- Inside the engine (tool files, --latent and --approver scripts), `require "obelus"` is
-- lua/obelus/runtime.lua (plan-format §9): the first part below. From stock Lua (a script or a
-- host), it is lua/obelus/init.lua: JSON helpers, the log and engines, the last part.

---JSON as Lua sees it: null is `obelus.null`, arrays carry `obelus.array_mt`, objects
---are plain tables, integers stay integers.
---@alias obelus.json nil|boolean|integer|number|string|lightuserdata|table

---@class obelus
local obelus = {}

-- --- values (tools and scripts) ------------------------------------------------------

---JSON null: the light userdata NULL, the same value as `cjson.null`.
---@type lightuserdata
obelus.null = nil

---The metatable every JSON array carries, so that an empty array stays an array.
---@type table
obelus.array_mt = {}

---Marks `t` (default: a new table) as a JSON array and returns it.
---@generic T: table
---@param t? T
---@return T
function obelus.array(t) end

---Whether `t` is a JSON array (a table carrying `obelus.array_mt`, or a view of an array).
---@param t any
---@return boolean
function obelus.is_array(t) end

---A read-only view: how a tool gets a param value that is an object or array of 64
---entries or more (counted at every depth, references resolved). It reads like a table (`v.key`,
---`v[1]`, `#v`, `pairs`, `ipairs`); `type(v)` is "userdata"; writing raises an error.
---@class obelus.view: userdata

---A view's deep copy as plain tables (array metatable, key order), as tools got before
---views; anything that is not a view is returned as it is.
---@generic T
---@param v T
---@return T|table
function obelus.totable(v) end

---"object" or "array" when `v` is a view of one, else false.
---@param v any
---@return "object"|"array"|false
function obelus.is_view(v) end

---`next` for views and tables alike (plain `next` refuses a view): the key after `k`
---(an object's keys in their order, an array's 1..n) and its value, or nil.
---@param t table|obelus.view
---@param k? any
---@return any, any
function obelus.next(t, k) end

---Lua value to JSON text: compact, or indented by two spaces when `pretty`.
---@param value obelus.json
---@param pretty? boolean
---@return string
function obelus.encode(value, pretty) end

---JSON text to a Lua value; raises "invalid JSON: ..." on malformed text.
---@param text string
---@return obelus.json
function obelus.decode(text) end

-- --- the tool API (inside the engine) -------------------------------------------------

---luv (`require "luv"`), bound to the engine's own loop: wait on it with `obelus.await`
---so that other calls go on meanwhile. Tools only.
---@type table
obelus.uv = {}

---Sleeps `ms` milliseconds; other calls run meanwhile. Only inside a tool's `run`.
---@param ms number 0 or more
function obelus.sleep(ms) end

---Waits for a callback API: `fn` gets `resume`; await returns what `resume` is given.
---Only the first call of `resume` counts. Only inside a tool's `run`.
---```lua
---local err, data = obelus.await(function(resume)
---  obelus.uv.fs_stat("a.txt", function(e, st) resume(e, st) end)
---end)
---```
---@param fn fun(resume: fun(...: any))
---@return any ...
function obelus.await(fn) end

---@class obelus.http_request
---@field url string
---@field method? string "GET" by default ("POST" for http.json with a body); an HTTP token
---@field headers? table<string, string> names HTTP tokens; values without CR, LF or NUL
---@field body? string (http.json: any JSON value)
---@field timeout_ms? integer the whole transfer (from its turn: see --http-max); default 300000
---@field low_speed_limit? integer bytes/s: slower than this for low_speed_time s fails (default 1)
---@field low_speed_time? integer seconds (default 60)
---@field follow? boolean follow redirects (default true; at most 20, http and https only)
---@field max_bytes? integer a larger answer body (decoded) is a transport failure (default
---the engine's: 64 MB, `--http-max-bytes`)
---@field ca_file? string trust these CAs (PEM) instead of the system's

---@class obelus.http_response
---@field status integer the HTTP status (data, never an error)
---@field headers table<string, string> names in lower case; repeated ones joined with ", "
---@field body? string the answer (http.json: the decoded value; nil for a download)
---@field text? string http.json: the answer as received
---@field bytes integer the answer's length
---@field url string where the answer came from (after redirects)
---@field version string the HTTP version it came in: "1.1", "2", ...

---HTTP on the engine's loop (libcurl): the calling call waits, every other call goes on.
---A transport failure (refused, DNS, TLS, timeout, max_bytes) raises "METHOD URL: why".
---Tools only. HTTPS with the system's CA store, HTTP/2, gzip/deflate/br/zstd decoding,
---redirects, proxies from http_proxy/https_proxy/no_proxy.
obelus.http = {}
---@param opts obelus.http_request
---@return obelus.http_response
function obelus.http.request(opts) end
---@param url string
---@param opts? obelus.http_request
---@return obelus.http_response
function obelus.http.get(url, opts) end
---@param url string
---@param body string
---@param opts? obelus.http_request
---@return obelus.http_response
function obelus.http.post(url, body, opts) end
---Sends `opts.body` (a Lua value) as JSON; answers with `body` decoded (nil when empty).
---@param opts obelus.http_request
---@return obelus.http_response
function obelus.http.json(opts) end
---Streams the answer into the file `path`; the response has no body.
---@param url string
---@param path string
---@param opts? obelus.http_request
---@return obelus.http_response
function obelus.http.download(url, path, opts) end

---A result that picks an `||` alternative of the call's `_outputPath`, by 1-based
---position or by the alternative as written (`"†state.failed"`). Return it from `run`:
---a call that makes one and returns something else fails.
---@param which integer|string
---@param value obelus.json
---@return obelus.branch
function obelus.branch(which, value) end

---An output the tool places itself, on a path of its call's `_outputPath`. Return one,
---or a list of them, from `run`. kind defaults to "state", method to "set".
---@param m { kind?: string, path: string, value: obelus.json, method?: obelus.method, instance?: string }
---@return obelus.message
function obelus.message(m) end

---Sets the handler of latent tools (tools without `run`): it runs as the call's
---coroutine, like a `run` (it may wait), and returns the call's result.
---@param fn fun(call: obelus.call, tool: obelus.tool, ctx: obelus.ctx): any
function obelus.set_latent(fn) end

---Sets the approver, asked before each ready call starts: `true`, `nil` or "allow"
---allow it; `false` or "refuse" fail it with "refused"; a table replaces the call
---(same wiring: `_outputPath`, `_outputMethod`, `_instance`, `_id`, `_delegate`, `_scopes`).
---@param fn fun(call: obelus.call, ctx: { id: string, tool: string, instance?: string }): boolean|"allow"|"refuse"|obelus.call|nil
function obelus.set_approver(fn) end

---@alias obelus.method "set"|"merge"|"assign"|"push"|"concat"

---@class obelus.branch
---@field which integer|string
---@field value obelus.json

---@class obelus.message
---@field kind string
---@field path string
---@field value obelus.json
---@field method obelus.method
---@field instance? string

---What a tool file returns: one tool table, or a list of them. Any other key is an
---error at load, except keys of your own beginning with `x_` (a latent handler gets them).
---@class obelus.tool
---@field name string the name plans call it by (`_tool`)
---@field description? string
---@field schema? table JSON Schema (draft-07) of the call, meta-properties included
---@field run? fun(call: obelus.call, ctx: obelus.ctx): obelus.json|obelus.branch|obelus.message|obelus.message[] runs in its own coroutine; absent: a latent tool. A Lua error is a runtime error of the call (`error(msg, 0)` keeps file:line out of it)

---The call's params, references resolved, meta-properties included (a fresh copy).
---@class obelus.call: { [string]: obelus.json }
---@field _tool string
---@field _outputPath? string
---@field _outputMethod? obelus.method
---@field _instance? string
---@field _id? string

---A userdata read like a table (see docs/tools.md); a tool may set fields of its own on it.
---@class obelus.ctx
---@field id string the call's id: `_id`, or "#<index>"; "<id>@<instance>" for an instance's copy
---@field tool string the tool's name
---@field index integer the call's position in the plan, from 0
---@field instance? string the instance the call runs in

-- --- stock Lua only: the log and engines (lua/obelus/init.lua) -------------------------

---A new, empty message log. Scripts and specs only.
---@return obelus.log
function obelus.log() end

---@class obelus.log
local log = {}
---@param msg table|string a message, or its JSON text
---@return integer position from 0
function log:append(msg) end
---@param out { kind?: string, instance?: string, path: string, method?: obelus.method, value: obelus.json, call?: table }
---@return integer position from 0
function log:append_output(out) end
---@return integer
function log:len() end
---@param i integer from 0
---@return table|nil
function log:message(i) end
---@param expr string a reference expression: "†state.a || †state.b"
---@param opts? { at?: integer, instance?: string }
---@return obelus.json value nil when absent
function log:resolve(expr, opts) end
function log:close() end

---A new engine on luv's loop, with its own Lua state for the tools. Scripts only.
---@param opts? { tools?: string|string[], scripts?: string|string[], max_memory_mb?: integer, http_max?: integer, http_max_bytes?: integer, http_allow_private?: boolean, on_note?: fun(kind: string, call?: string, msg: string) }
---@return obelus.engine
function obelus.engine(opts) end

---@class obelus.run_options
---@field input? obelus.json one input document
---@field on_event? fun(ev: { event: "ready"|"started"|"done"|"skipped"|"failed"|"run_done"|"note"|"progress", note?: string, call?: string, tool?: string, reason?: string, t_ms: number, attempt?: integer, data?: any, value?: any, size?: integer, handled?: boolean, each?: string })
---@field on_done? fun(run: obelus.run) every awaited call has settled
---@field concurrency? integer
---@field max_depth? integer
---@field journal? string a file for the log as JSON Lines (an existing non-empty file is refused, never truncated)
---@field overwrite? boolean replace an existing non-empty journal file
---@field time_travel? boolean keep every version: run:resolve(expr, {at = n})
---@field name? string the plan's name in messages, for a plan given as a table
---@field plans_root? string the folder every _delegate path must lead into (default: the plan file's folder; the current directory for a table)
---@field fsync? "never"|"batch"|"always" the journal's durability (default batch)
---@field call_timeout_ms? integer a _timeout for every call without one
---@field max_output_kb? integer the largest message a call may write
---@field max_calls? integer the most calls in all (instances, delegated plans)
---@field threads? integer a plan with instances: shared out over this many threads, an engine each (default: one engine)

---@class obelus.resume_options
---@field on_event? fun(ev: { event: "ready"|"started"|"done"|"skipped"|"failed"|"run_done"|"note"|"progress", note?: string, call?: string, tool?: string, reason?: string, t_ms: number, attempt?: integer, data?: any, value?: any, size?: integer, handled?: boolean, each?: string })
---@field on_done? fun(run: obelus.run) every awaited call has settled
---@field concurrency? integer
---@field max_depth? integer
---@field time_travel? boolean keep every version: run:resolve(expr, {at = n})
---@field fsync? "never"|"batch"|"always" the journal's durability (default batch)
---@field call_timeout_ms? integer a _timeout for every call without one
---@field max_output_kb? integer the largest message a call may write
---@field max_calls? integer the most calls in all (instances, delegated plans)
---@field force? boolean take the journal up even when the plan or a tool file changed
---@field name? string the plan's name in messages
---@field plans_root? string the folder every _delegate path must lead into (default: the journaled plan file's folder)

---@class obelus.engine
local engine = {}
---@param path string a tool file, or a folder of them
---@return obelus.engine
function engine:load_tools(path) end
---@param path string a Lua file that configures the engine (set_latent, set_approver)
---@return obelus.engine
function engine:load_script(path) end
---@param plan string|table a plan file, or a plan as a table
---@param opts? obelus.run_options
---@return true|nil ok
---@return string[]? problems
function engine:check(plan, opts) end
---Validates (raising with every problem; nothing runs) and starts the plan.
---@param plan string|table a plan file, or a plan as a table
---@param opts? obelus.run_options
---@return obelus.run
function engine:run(plan, opts) end
---Takes up the run a journal tells of, where it stopped (as `obelus resume`), appending
---to the same journal. Raises for a changed plan or tool file unless opts.force.
---@param journal string the journal file (engine:run's journal option)
---@param opts? obelus.resume_options
---@return obelus.run
function engine:resume(journal, opts) end
---@class obelus.fork_options: obelus.resume_options
---@field journal string the fork's own journal (a new file)
---@field from? string run again from this call of the journal's plan, and all that follows from it
---@field at? integer keep the journal's first `at` messages (one of from, at)
---@field set? table<string, any> reference ("†state.x") -> its new value, written before the run goes on
---@field input? any an input document, written the same way
---@field overwrite? boolean replace an existing non-empty journal file

---A new run from a point of the run a journal tells of, with changes (as `obelus fork`):
---the journal's messages up to the point are kept, the changes written, and every call
---that had not completed, opts.from, and the readers of what changed run again.
---@param journal string the journal forked (never written)
---@param opts obelus.fork_options
---@return obelus.run
function engine:fork(journal, opts) end
function engine:close() end

---A job queue in Redis, run by `obelus worker`s (docs/fleet.md). Connects in
---the background; submit and wait turn luv's loop until they have their answer (not
---from inside the loop), or, given on_done, return at once and call it from the loop.
---@param opts { redis: string, queue?: string } redis://[:PASSWORD@]HOST[:PORT][/DB]; queue default "obelus"
---@return obelus.queue
function obelus.queue(opts) end

---@class obelus.queue_result
---@field job string
---@field exit? integer 0, 1 or 2, as `obelus run` gives; nil when not finished
---@field output? obelus.json the run's result
---@field error? string why it ended without a result (poison), or why the wait did ("timeout", "no such job", Redis unreachable)
---@field state? string queued, running, done or failed

---@class obelus.queue
local queue = {}
---Validates the plan (against opts.engine's tools when given: only workers with the same
---tool files then take the job; raises with every problem) and queues it as one job.
---@param plan string|table a plan file, or a plan as a table
---@param opts? { input?: obelus.json, engine?: obelus.engine, name?: string, on_done?: fun(job: string|nil, err: string|nil) }
---@return string|nil job the job's id (nil with on_done)
function queue:submit(plan, opts) end
---Waits for a job to finish (blocking reads in Redis, no polling).
---@param job string
---@param opts? { timeout_ms?: integer, on_done?: fun(res: obelus.queue_result) }
---@return obelus.queue_result|nil res nil with on_done
function queue:wait(job, opts) end
---Drops the connections: submissions and waits in progress never call back.
function queue:close() end

---@class obelus.run
local run = {}
---@return integer|nil status 0 done, 1 some call failed
---@return string? why "running", "cancelled" or "closed"
function run:status() end
---Turns luv's loop until the run's awaited calls have settled. Not from inside the loop.
---@return integer|nil status
---@return string? why
function run:wait() end
---@return obelus.json output nil (and why) before the run has finished
---@return string? why
function run:output() end
---@param expr string
---@param opts? { at?: integer, instance?: string }
---@return obelus.json value nil when absent
function run:resolve(expr, opts) end
---@return table[] messages
function run:messages() end
function run:cancel() end
function run:close() end

return obelus
