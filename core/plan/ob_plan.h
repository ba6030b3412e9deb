/* ob_plan.h -- plans (plan-format §5): loading a plan file, validating every call, and the
 * dependency graph derived from references and output paths. Nothing here runs. */
#ifndef OB_PLAN_H
#define OB_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/ob_doc.h"
#include "bridge/ob_lua.h"
#include "base/ob_map.h"
#include "base/ob_path.h"
#include "base/ob_schema.h"
#include "base/ob_value.h"
#include "log/ob_log.h"

/* A call of a tool written in C, while it runs (ob_run.c): the handle its
 * function completes, now or later, with ob_call_complete. */
typedef struct ob_call_handle ob_call_handle;
typedef void (*ob_tool_fn)(ob_call_handle *h, const ob_value *params, void *data);

/* A tool as the plan sees it: a name, a schema, and whether it can run. */
typedef struct ob_tool {
  char *name;
  char *description;
  char *file;          /* where it was defined */
  ob_value *schema_value;
  ob_schema *schema;   /* NULL when the tool has no schema */
  int latent;          /* no run function: the latent handler runs it */
  int run_ref;         /* Lua registry reference of run, or a negative number */
  int table_ref;       /* Lua registry reference of the tool table */
  ob_tool_fn fn;       /* a tool written in C (run_ref unused), or NULL */
  void *fn_data;
  ob_lua_keys keys;    /* the key list of its last call's params (ob_run.c) */
} ob_tool;

/* One reference expression found in a call's params. */
typedef struct ob_param_ref {
  ob_expr expr;        /* shared among calls that wrote the same text (ob_plan.c's memo) */
  char *where;         /* the param it sits in, for messages: "profile", "items[2].name" */
  char *pointer;       /* the same place as a JSON pointer: "/profile", "/items/2/name";
                          both shared too when the same text sits in the same place */
  union {              /* per part (alternatives flattened in order): 1 when some call
                          of the plan writes a path this call can see overlapping it; */
    unsigned char *heap; /* read and set through ob_param_ref_seen: in `in` when the */
    unsigned char in[sizeof(unsigned char *)]; /* parts fit (most: one part) */
  } seen;
  uint32_t nparts;
  unsigned char owns_expr, owns_place; /* 1: ob_plan_free frees expr, where and pointer
                                          with this call (the one that made them) */
} ob_param_ref;

/* A reference's seen flags (see above), nparts of them. */
static inline unsigned char *ob_param_ref_seen(ob_param_ref *r) {
  return r->nparts <= sizeof r->seen.in ? r->seen.in : r->seen.heap;
}
static inline const unsigned char *ob_param_ref_seen_c(const ob_param_ref *r) {
  return r->nparts <= sizeof r->seen.in ? r->seen.in : r->seen.heap;
}

/* The deepest nesting a plan, or a message a call writes (its value under its path), may
 * have: JSON text nests at most 2047 levels to be read (jansson's JSON_PARSER_MAX_DEPTH,
 * 2048, exclusive), and a journal's line wraps a plan or a message in a level or two of
 * its own (the plan message; a delegated plan's lines), so that every line stays readable. */
#define OB_JOURNAL_MAX_DEPTH 2040

/* _retry: attempts in all (0 or 1: no retry), and the wait between them. */
#define OB_RETRY_MAX_ATTEMPTS 1000000
typedef struct ob_retry {
  uint32_t attempts, delay_ms, max_delay_ms;
  int jitter;
  double backoff;
} ob_retry;

typedef struct ob_call {
  /* what starting and settling a call read come first, the first 64 bytes all
   * of it but the output path: the scheduler touches a big plan's calls once
   * each, so the fewer cache lines the better */
  size_t index;        /* position in the plan */
  const ob_tool *tool; /* NULL until validated against a tool set */
  ob_value *raw;       /* the call as written */
  ob_param_ref *refs;
  size_t *deps;        /* calls this one depends on (indices, no duplicates) */
  size_t *users;       /* calls that depend on this one (in the plan's user_block) */
  uint32_t nrefs, ndeps, nusers;
  uint32_t nliterals;  /* params strings beginning with †† (the first † is dropped at run time) */
  ob_expr output;      /* _outputPath parsed (output mode) */
  ob_value **output_text; /* per part (alternatives flattened): the path's canonical text */
  const char *tool_name; /* _tool as written (in raw), or "?" when missing, "delegate";
                          once checked against the tools, the tool's real name (a call
                          may give its API name, ob_toolname.h) */
  char *instance;      /* _instance, or NULL */
  char *delegate;      /* _delegate: the plan file to run, as a path from the cwd (the
                          calling plan's folder joined with the path written), or NULL;
                          read only through ob_plan_read_delegate */
  uint32_t timeout_ms; /* _timeout: per attempt (0: none) */
  uint8_t has_output;  /* _outputPath given */
  uint8_t output_shared; /* output and output_text are another call's (ob_plan.c's memo) */
  uint8_t instance_shared; /* instance is the plan's instances[k] (a copy's), not its own */
  uint8_t method;      /* an ob_method */
  char *id;            /* _id, or "#<index>" */
  char **scopes;       /* _scopes: the kinds the delegated plan sees */
  uint32_t nscopes;
  ob_retry retry;      /* _retry */
  /* _each: the call runs once per element of a list read at run time (ob_each.c) */
  uint8_t each;        /* _each given: its reference is the last of refs (where "_each"),
                          after the params' own, so that walks of the params meet theirs
                          in the same order as ever */
  uint32_t each_concurrency; /* _eachConcurrency: copies running at once (0: no bound) */
  char **each_at;      /* the JSON pointers of its params' †each strings: the tool's schema
                          judges the copies, where they hold the element */
  uint32_t neach_at;
} ob_call;

typedef struct ob_plan {
  char *file;          /* the file it came from, for messages */
  char *root;          /* the plans root its _delegate paths must stay inside (a folder,
                          malloc'd; set it before ob_plan_check_tools), or NULL: the
                          current directory. A delegated plan gets its caller's. */
  ob_value *context;   /* array of messages (never NULL) */
  ob_value *output;    /* the output template, or NULL */
  ob_param_ref *out_refs; /* the references in it, in walk order; a part's seen flag: some
                          call writes a path overlapping it, in any scope (the template is
                          read in the global view or, with instances, in each one's) */
  uint32_t nout_refs;
  size_t ncalls;
  ob_call *calls;
  ob_map ids;          /* id -> call (pointer into calls) */
  size_t *user_block;  /* every call's users, one after another */
  /* "instances" (plan-format §6): each call without _instance runs once per instance,
   * as "<id>@<instance>"; ninstances == 0 when the plan has no such key */
  size_t ninstances;
  char **instances;
  /* a probe (ob_plan_probe): each call without _instance copied for the first
   * instance only; ncalls_all counts the calls of the whole plan (== ncalls
   * when not a probe) */
  int probe;
  size_t ncalls_all;
  int over_limit;      /* ob_plan_read_within: more calls than its max_calls, none read
                          (ncalls 0; ncalls_all says how many) */
  int graphed;         /* its calls were read and their graph built (ob_plan_check_known
                          has something to judge by) */
  int quiet;           /* > 0: problems are not recorded (copies of one call) */
  char *copies_of;     /* the plan of an _each call's copies (its key "each", which the
                          engine writes): that call's id; the copies' ids ("<id>[i]") may
                          then hold '@' (an instance's call's copies) */
  struct ob_expr_memo *memo; /* while the calls are read: references parsed lately */
  /* every problem found, "file: call <id> (<tool>): <what>", in plan order */
  size_t nerrors;
  char **errors;
  size_t ncycles; /* of those, the dependency cycles (`graph` draws a plan with only
                     these, its cycles marked) */
} ob_plan;

/* Reads a plan file (either form of plan-format §5) and checks everything that needs
 * no tool: the shape, meta-properties, ids, methods, references and output
 * paths, and the dependency graph (cycles are reported with their calls). A
 * null meta-property, or a null key of the plan object, is absent (ob_nulls.h):
 * a call's raw is then the call without it.
 * Returns the plan (free with ob_plan_free) with plan->nerrors problems
 * recorded, or NULL when the file cannot be read or parsed at all (err). */
ob_plan *ob_plan_load(const char *file, ob_error *err);
/* The same for a plan already parsed; name is used in messages. */
ob_plan *ob_plan_from_value(const ob_value *v, const char *name);

/* The plan v with each call that has no _instance copied for the first instance
 * only (when v has instances): every check ob_plan_from_value makes gives the
 * same answer on it, since copies differ in their instance's name only, but its
 * problems are counted once rather than once per copy (a cycle, a check against
 * a tool). What `run --threads` checks on the main thread before each thread
 * reads its own part: a plan with problems is read again whole for its report. */
ob_plan *ob_plan_probe(const ob_value *v, const char *name);

/* ob_plan_from_value (ob_plan_probe when probe) that first counts the calls the
 * plan would make (instances x calls) and, when they are more than max_calls
 * (0: no limit), reads none of them: the plan comes back with over_limit set,
 * ncalls 0 and ncalls_all counted, and no problem recorded; the caller's
 * ob_run_count_calls refuses it with --max-calls' message. Nothing in
 * proportion to the product is allocated. */
ob_plan *ob_plan_read_within(const ob_value *v, const char *name, int probe, size_t max_calls);

/* The compact JSON of plan value v (an object, plan p read from it) with "instances"
 * set to p's instances [from, to) ("auto" resolved): a part of the plan for a thread
 * (ob_shard.c) or a job (ob_queue_batch.c). *len its length (len may be NULL);
 * *list, when list is not NULL, those ids as an array (the caller's). */
char *ob_plan_part_text(const ob_value *v, const ob_plan *p, size_t from, size_t to, size_t *len,
                        ob_value **list);
void ob_plan_free(ob_plan *p);

/* Checks every call against the tools (name -> ob_tool*): the tool exists, named by
 * its name or its API name (ob_toolname.h; a latent one needs has_latent_handler), its
 * literal null params that the schema takes as absent are dropped from raw
 * (ob_nulls.h), literal params satisfy its schema
 * (plan-format §5: the schema sees the call without its meta-properties, except those
 * its "properties" names; params holding references are judged only where
 * literal), and _outputPath satisfies the schema's rule for it. Follows each
 * _delegate (confined to p->root, ob_plan_read_delegate) and checks that plan
 * too. Adds to plan->errors; sets each call's tool. Returns the number of new
 * problems. */
size_t ob_plan_check_tools(ob_plan *p, const ob_map *tools, int has_latent_handler);

/* The plans root: the folder every _delegate path must lead into (after
 * symbolic links). By default the folder of the plan file a run started from
 * (ob_plan_default_root: "." for "-" or a name without '/'); a plan given as
 * text has no file, so its default is the current directory. */
char *ob_plan_default_root(const char *file);
/* dir (NULL: ".") as its real path ending in '/' (malloc'd), or NULL with err
 * when it does not resolve. */
char *ob_plans_root(const char *dir, ob_error *err);
/* Reads the plan call c delegates to, confined to root (a folder; NULL: the
 * current directory): a path that is absolute, whose ".." climbs out of the
 * root, or whose real path is outside it is refused before anything is read.
 * Returns the parsed file (new reference), or NULL with err.msg ready to
 * follow "call <id> (<tool>): "; no message quotes a file outside the root,
 * nor the text of a file that does not parse. */
ob_value *ob_plan_read_delegate(const ob_call *c, const char *root, ob_error *err);
/* Its check alone, for a plan read elsewhere (resume's journal): OB_OK when the
 * path is inside root (the file may be missing), else an error with err. */
int ob_plan_confine_delegate(const ob_call *c, const char *root, ob_error *err);

/* Refuses every reference that can only be absent (ob_known.c): each of its ||
 * alternatives has a part that no call writes (in a scope the reader sees) and that the
 * messages given before the run -- `given`, a log of the plan's context and then its
 * ninputs inputs, which messages call input_label ("--input") -- do not hold in the
 * reader's view; in the params of calls and in the output template. Kind `input` is not
 * judged when ninputs is 0 (the input comes at run time), nor kind `error`. Each problem names the part and
 * the nearest path that exists ("did you mean †state.cities?"). Nothing when the plan's
 * calls were not read (p->graphed). Returns the number of new problems. */
size_t ob_plan_check_known(ob_plan *p, ob_log *given, size_t ninputs,
                           const char *input_label);
/* The path nearest reference x that p's calls write or log `now` holds, daggered, added
 * to out (the run's structural error of a reference nothing writes says it too).
 * Returns 0, out untouched, when nothing is near enough. Costs: every candidate path
 * gathered and compared once; for an error, not a hot path. */
int ob_plan_suggest_ref(ob_plan *p, ob_log *now, const ob_reference *x, ob_buf *out);

/* Adds "file: call <id> (<tool>): <what>" to the plan's problems. */
void ob_plan_error(ob_plan *p, const ob_call *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
