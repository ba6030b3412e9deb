-- obelus/init.lua -- the `obelus` module for stock Lua scripts and hosts: JSON values
-- through the C bridge (obelus.core), the message log, and engines that run plans.
--
--   package.cpath = "lib/?.so;" .. package.cpath
--   package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
--   local obelus = require "obelus"
--   local uv = require "luv"
--   local engine = obelus.engine { tools = { "plans/weather/tools" } }
--   local run = engine:run("plans/weather/plan.json", { input = { city = "Lisbon" } })
--   uv.run()                                    -- luv's loop drives every run
--   print(run:status(), obelus.encode(run:output()))
--
-- Engines and runs (implemented in core/host/ob_luamod.c, whose first comment gives the
-- design):
--
--   obelus.engine([{tools = path|{paths}, scripts = path|{paths}, max_memory_mb = n, http_max = n,
--                   http_max_bytes = n, http_allow_private = bool, on_note = fn}])
--       -> engine
--       An engine on luv's loop, with its own Lua state for the tools. `tools` are tool
--       files or folders of them (plan-format §9); `scripts` are Lua files that configure it
--       (obelus.set_latent, obelus.set_approver); max_memory_mb caps the engine's
--       memory: Lua heap, values, log (`obelus run --max-memory`: the call that
--       would pass it fails; default half of `ulimit -v` when set); http_max
--       the obelus.http transfers at once (`--http-max`, default 1000); http_max_bytes
--       the answer body a request without max_bytes takes (`--http-max-bytes`, 64 MB);
--       http_allow_private lets requests connect to link-local and cloud metadata
--       addresses (`--http-allow-private`). on_note = fn(kind, call, msg) gets what
--       the engine says outside any run's events (an error in a tool's libuv callback:
--       "callback_error", an obelus.http one: "http", ...; call nil or an id); by
--       default a Lua warning ("obelus: " .. msg, printed once warn("@on") is set).
--   engine:load_tools(path) -> engine          engine:load_script(path) -> engine
--   engine:check(plan [, opts]) -> true | nil, problems
--       Validates without running: problems is a list of "file: call <id> (<tool>): <what>".
--   engine:run(plan [, opts]) -> run
--       plan: a file name, or a table (a plan object or a list of calls; use
--       obelus.array{} for an empty list). Raises when the plan is invalid, with every
--       problem in the message; nothing runs then. Otherwise the calls that are ready
--       start at once; the loop does the rest. opts:
--         input = value          one input document ({"type":"data","kind":"input"})
--         on_event = fn(ev)      ev = {event=, call=, tool=, reason=, t_ms=}; event is
--                                ready, started, done, skipped, failed, run_done or
--                                note (note= its kind: retry, traceback, ...; reason=
--                                the text the command line prints)
--         on_done = fn(run)      every awaited call has settled
--         concurrency = n, max_depth = n, journal = path, time_travel = bool,
--         fsync = "never" | "batch" | "always"   (the journal's durability),
--         overwrite = bool       replace an existing non-empty journal file (else the
--                                run is refused: a journal is never truncated)
--         name = text            (the plan's name in messages, for a table)
--         plans_root = dir       the folder every _delegate path must lead into
--                                (default: the plan file's folder; the current
--                                directory for a table)
--         call_timeout_ms = n    a _timeout for every call without one
--         max_output_kb = n      the largest message a call may write (default 65536)
--         max_calls = n          the most calls in all (instances, delegated plans;
--                                default 1000000)
--       A journal that cannot be written (disk full, I/O error) stops the run: no
--       call starts after it; run:wait() returns nil and the reason.
--       A journal ends with its end record once the run has finished (and no
--       fire-and-forget call runs), or is cancelled or closed after finishing.
--   engine:resume(journal [, opts]) -> run
--       Takes up the run whose journal is the file `journal` (killed, crashed or
--       cancelled), as `obelus resume` does: the log rebuilt, only the calls that did not
--       complete run (one that had started runs again), appending to the same journal;
--       it ends with the status and output the uninterrupted run would have had. A
--       journal of a run that ended finishes at once, with its status and output,
--       running nothing. The tools are the engine's: load the same files. opts as for
--       run, but input and journal (the run's own), plus force = true to take it up
--       even when the plan or a tool file changed since the run (refused otherwise).
--       Journals of `obelus loop` are refused: resume those with `obelus resume`.
--   engine:fork(journal, opts) -> run
--       A new run from a point of the run `journal` tells of (finished, failed or
--       killed), with changes, as `obelus fork` does: opts.journal (the fork's own,
--       required), opts.from (a call id: it and all that follows from it run again) or
--       opts.at (keep the first n messages), opts.set ({["†state.x"] = value, ...}:
--       messages of their own; their readers run again), opts.input (an input
--       document), opts.overwrite; the rest as for resume (no force: files changed
--       since are said as a note "changed"). `journal` is never written.
--   engine:close()                             also __close and __gc
--
--   run:status() -> 0 | 1 | nil, "running" | "cancelled" | "closed"
--       0: every awaited call done or skipped; 1: some call failed (as `obelus run`).
--   run:wait() -> same as status()
--       Turns luv's loop (uv.run("once")) until the run's awaited calls have settled.
--       Not from inside the loop (a callback): use on_done there.
--   run:output() -> value | nil, why           the final output (plan-format §5), once settled
--   run:resolve(expr [, {at = n, instance = "X"}]) -> value | nil
--   run:messages() -> list                     the run's log so far
--   run:cancel()                               abandons the calls still running
--   run:close()                                also __close and __gc
--
-- Errors raise (bad arguments, tool files, invalid plans); questions a run cannot answer
-- yet answer nil and why. A run that has not finished is kept alive by the module until
-- it has (callbacks still come when the script drops it); a run keeps its engine alive.
-- Callbacks run inside the engine's scheduler: cancel/close called there take effect at
-- the next turn of the loop, and an error they raise is reported on stderr. A call that
-- waits while nothing is left on the loop fails as "stalled", as in `obelus run`.
local core = require "obelus.core"

local obelus = {
  null = core.null,         -- JSON null: the light userdata NULL, same as cjson.null
  array = core.array,       -- array(t): marks t (or a new table) as a JSON array, returns it
  array_mt = core.array_mt, -- the metatable every JSON array carries
  decode = core.decode,     -- decode(text): JSON text -> Lua value
  encode = core.encode,     -- encode(value [, pretty]): Lua value -> JSON text
  totable = core.totable,   -- totable(v): a view's deep copy as tables; anything else as it is
  is_view = core.is_view,   -- is_view(v): "array" or "object" for a read-only view (a tool's
                            -- big params, plan-format §9), else false
  next = core.next,         -- next(t, k): next for tables and views alike
  log = core.log,           -- log(): a new, empty message log
  engine = core.engine,     -- engine([opts]): a new engine on luv's loop (above)
  queue = core.queue,       -- queue{redis = URL, queue = NAME}: a job queue in Redis for
                            -- `obelus worker`s: q:submit(plan, opts), q:wait(id, opts)
}

-- Whether t is a JSON array (a table carrying obelus.array_mt).
function obelus.is_array(t)
  if type(t) == "table" then return getmetatable(t) == core.array_mt end
  return core.is_view(t) == "array"
end

return obelus
