/* ob_params.c -- resolving a call's params against the log (plan-format §2, 5).
 *
 * A call's references were found and parsed when the plan was loaded, in the
 * order a walk of its params meets them; resolving walks the params again in
 * that order and replaces each reference string by its value now, sharing the
 * rest of the call as written (nothing to copy for a call without references).
 * An absent reference is null in the copy and is noted: a skip when some call
 * could have written it (a branch not taken), a structural error when none
 * could. The output template of a plan goes through the same substitution.
 *
 * Costs: O(size of the params' objects and arrays that hold references) per
 * call, plus each reference's read (ob_log.h). A structural error that names the
 * nearest path gathers the plan's and the log's paths (ob_plan_suggest_ref): at most
 * MAX_SUGGESTED a run. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ob_sched.h"

/* A run's structural errors that name the nearest path: each gathers every path the
 * plan writes and the log holds, so a plan of many copies failing alike would pay that
 * per copy; past these, the errors say what is absent only. */
#define MAX_SUGGESTED 256

static void absent(ob_resolver *rs, const ob_param_ref *ref) {
  ob_run *r = rs->run;
  const unsigned char *seen = ob_param_ref_seen_c(ref);
  size_t part = 0;
  for (size_t a = 0; a < ref->expr.n; a++)
    for (size_t k = 0; k < ref->expr.alts[a].n; k++, part++) {
      const ob_reference *x = &ref->expr.alts[a].refs[k];
      ob_value *v = ob_log_read(r->log, x->kind, rs->call->instance, &x->path, OB_LOG_NOW);
      if (v) {
        ob_unref(v);
        continue;
      }
      if (seen[part] && !rs->skip) {
        rs->skip = 1;
        rs->why.len = 0;
        ob_buf_addf(&rs->why, "%s was not written (a branch not taken)", x->text);
      } else if (!seen[part] && !rs->skip && !rs->missing) {
        rs->missing = 1;
        ob_buf_addf(&rs->why, "parameter \"%s\": %s is absent and no call in the plan writes it",
                    ref->where, x->text);
        if (r->suggested < MAX_SUGGESTED) {
          size_t at = rs->why.len;
          r->suggested++;
          ob_buf_add(&rs->why, " (did you mean ", 15);
          if (ob_plan_suggest_ref(r->plan, r->log, x, &rs->why))
            ob_buf_add(&rs->why, "?)", 2);
          else
            rs->why.len = at;
        }
      }
    }
}

/* A param's reference: the call's refs were found in this same walk order. */
/* A reference's value now (an absent one: null, and noted as a skip or a structural error). */
ob_value *ob_params_eval_ref(ob_resolver *rs, const ob_param_ref *ref) {
  ob_value *x = ob_log_eval(rs->run->log, &ref->expr, rs->call->instance, OB_LOG_NOW);
  if (!x) {
    absent(rs, ref);
    return ob_null();
  }
  return x;
}

static ob_value *eval_param(void *ud, const ob_value *text) {
  ob_resolver *rs = ud;
  (void)text;
  return ob_params_eval_ref(rs, &rs->call->refs[rs->next++]);
}

static ob_value *resolve(ob_resolver *rs, const ob_value *v) { return ob_str_substitute(v, eval_param, rs); }

/* The call with its references resolved; meta-properties kept as written. */
ob_value *ob_params_resolve(ob_resolver *rs) {
  const ob_value *raw = rs->call->raw;
  if (!rs->call->nrefs && !rs->call->nliterals)
    return ob_ref((ob_value *)raw); /* nothing to resolve: the call as written */
  ob_value *o = ob_object(), *k, *x;
  ob_object_iter it;
  ob_object_iter_init(&it, raw);
  while (ob_object_iter_next(&it, &k, &x))
    o = ob_object_setv(o, k, ob_string_ptr(k)[0] == '_' ? ob_ref(x) : resolve(rs, x));
  return o;
}

/* The schema view of resolved params fails? Describes the first failures. */
int ob_params_invalid(const ob_tool *t, const ob_value *params, ob_buf *why) {
  if (!t || !t->schema)
    return 0;
  ob_value *props = ob_typeof(t->schema_value) == OB_OBJECT
                        ? ob_object_get(t->schema_value, "properties", 10)
                        : NULL;
  ob_value *view = ob_object(), *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, params);
  while (ob_object_iter_next(&it, &k, &v))
    if (ob_string_ptr(k)[0] != '_' ||
        (props && ob_typeof(props) == OB_OBJECT &&
         ob_object_get(props, ob_string_ptr(k), ob_string_len(k))))
      view = ob_object_setv(view, k, ob_ref(v));
  ob_schema_result res = {0};
  int ok = ob_schema_validate(t->schema, view, &res);
  for (size_t i = 0; i < res.n && i < 3; i++)
    ob_buf_addf(why, "%s%s: %s: %s", i ? "; " : "params do not satisfy the tool's schema: ",
                res.fail[i].instance_path[0] ? res.fail[i].instance_path : "(params)",
                res.fail[i].keyword, res.fail[i].message);
  ob_schema_result_free(&res);
  ob_unref(view);
  return !ok;
}
