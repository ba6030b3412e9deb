/* ob_nulls.h -- what a null written in a call means (ob_nulls.c): absent, where a
 * model held to a strict structured-output schema (every key given, the optional ones
 * nullable: `obelus tools --plan-schema --strict`) has to write one.
 *
 * The rule (the plan format's):
 *  - a meta-property (a key of a call beginning with "_") whose value is null is
 *    absent: {"_tool": "t", "_outputPath": null} is {"_tool": "t"}; so is a key of
 *    _retry's object ({"attempts": 2, "delay_ms": null}: the default wait);
 *  - a key of the plan object ("context", "output", "instances") whose value is null
 *    is absent (ob_plan.c reads them so);
 *  - a param whose value is a literal null, that its tool's schema does not list in
 *    "required", and whose own schema (its "properties" entry) does not accept null,
 *    is absent; the same at any depth of the params, where the schema describes the
 *    object by "properties" (reached through "properties", "items" and local "$ref"s).
 *    A null that the schema accepts, or a required one, stays: it is a value.
 * A reference that resolves to null at run time is a value too: only literal nulls,
 * as written in the plan, are read as absent. */
#ifndef OB_NULLS_H
#define OB_NULLS_H

#include "plan/ob_plan.h"

/* raw (a call) without its null meta-properties: a new value, or NULL when it has
 * none. */
ob_value *ob_nulls_meta(const ob_value *raw);

/* raw (a call of tool t) without the null params t's schema takes as absent (above):
 * a new value, or NULL when there is none (or t has no schema). */
ob_value *ob_nulls_params(const ob_tool *t, const ob_value *raw);

/* Whether `ran` (a call as a run recorded it: an output or error message's _call) is
 * `written` (the call as read from its plan, without the tools): equal, but for keys of
 * written's objects, at any depth, whose null ran lacks (params its tool took as
 * absent). What `obelus log` and `graph --journal` match calls by. */
int ob_nulls_same_call(const ob_value *written, const ob_value *ran);

#endif
