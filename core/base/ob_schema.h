/* ob_schema.h -- JSON Schema draft-07 validation over ob_values: compile a schema once,
 * validate many instances. Used for tool params, _outputPath and `obelus schema`. */
#ifndef OB_SCHEMA_H
#define OB_SCHEMA_H

#include <stddef.h>

#include "base/ob_error.h"
#include "base/ob_value.h"

/*
 * What is supported: every draft-07 validation keyword (type, enum, const, the
 * numeric, string, array and object keywords, allOf/anyOf/oneOf/not,
 * if/then/else, dependencies, propertyNames, contains), boolean schemas,
 * `definitions`, `$id` and `$ref` within the schema (JSON pointers with ~0 ~1
 * and percent escapes, plain-name fragments such as "#foo", ids such as
 * "http://example.com/node" declared inside the schema), and the draft-07
 * meta-schema "http://json-schema.org/draft-07/schema#", which is built in.
 * Nothing is ever fetched: any other remote $ref makes the schema unusable.
 * `format` is an assertion for date-time, date, time, email, hostname, ipv4,
 * ipv6, uri, uri-reference, uuid, regex, json-pointer and relative-json-pointer
 * (ob_schema.c states each rule), on strings only; draft-07's other formats
 * (idn-email, idn-hostname, iri, iri-reference, uri-template) are known but not
 * checked. Keywords next to a `$ref` are ignored, as draft-07 says. Unknown
 * keywords and unknown formats are ignored, or refused when compiled with
 * OB_SCHEMA_STRICT (what a tool's schema gets, unless --lenient-schemas).
 *
 * A compiled schema keeps a reference to the schema value and is read-only
 * while validating: validations of one schema may run one after the other
 * from anywhere, and two engines never share anything. Like values, a
 * schema belongs to one thread at a time.
 */

typedef struct ob_schema ob_schema;

/* Compiles `schema` (an object or a boolean). Returns NULL and fills err
 * (OB_EINVAL) when the schema is unusable: a keyword of the wrong type
 * ("minimum" not a number, "required" not an array of unique strings ...),
 * a pattern that is not a valid regular expression, a $ref that leads
 * nowhere or to another server, or a $ref cycle that never descends into
 * the instance (`{"$ref": "#"}`, which could only loop forever). The message
 * names the place in the schema: `/properties/age: minimum: must be a number`.
 * Keeps a reference to `schema` (it must stay unchanged, as values do). */
ob_schema *ob_schema_compile(const ob_value *schema, ob_error *err);

/* Compiling flags. OB_SCHEMA_STRICT: a key of a schema object that is not a
 * keyword (draft-07's, the annotations $comment, title, description, default,
 * examples, readOnly, writeOnly, deprecated, contentMediaType, contentEncoding,
 * and $defs) and does not start with "x-" is refused, as is a `format` no one
 * knows, each with the nearest known name: `(root): requird: unknown keyword;
 * did you mean "required"? ...`. Without it they are ignored (annotations). */
enum { OB_SCHEMA_STRICT = 1 };

/* ob_schema_compile with flags (0: what ob_schema_compile does). */
ob_schema *ob_schema_compile_with(const ob_value *schema, unsigned flags, ob_error *err);

/* Frees a compiled schema. NULL is allowed. */
void ob_schema_free(ob_schema *s);

/* One reason an instance is invalid. All strings are owned by the result. */
typedef struct ob_schema_failure {
  char *instance_path; /* JSON pointer into the instance, "" = the root */
  char *schema_path;   /* JSON pointer to the keyword in the schema, e.g.
                          "/properties/age/minimum"; a keyword of the built-in
                          meta-schema is given as its URI plus fragment */
  char *keyword;       /* "minimum", "required", ...; "false" for a false schema */
  char *message;       /* what is wrong, e.g. "3 is less than 18" */
} ob_schema_failure;

typedef struct ob_schema_result {
  size_t n;                /* number of failures */
  ob_schema_failure *fail; /* n failures, in the order the instance was walked */
  size_t cap;              /* private: allocated slots */
} ob_schema_result;

/* Validates `instance`. Returns 1 when valid, 0 when not. With res == NULL it
 * stops at the first failure (the cheap way to ask a yes/no question);
 * otherwise res is filled from empty (its old content is not freed) with
 * every failure: each failing keyword at each instance path. Branches of
 * anyOf/oneOf/not/if/contains are tried silently: when they make the value
 * invalid, the failure names that keyword, not what went wrong inside each
 * branch. Free res with ob_schema_result_free whatever the answer.
 * Never recurses without bound: when an instance is nested too deep for the
 * validator's budget (16384 nested schema applications or 4 MB of stack) it
 * fails with keyword "depth" instead of overflowing the stack. Values of
 * OB_MAX_DEPTH levels fit, even with a $ref and an allOf at every level. */
int ob_schema_validate(const ob_schema *s, const ob_value *instance, ob_schema_result *res);

/* Validates `instance` against the subschema at `pointer` inside the schema,
 * e.g. "/properties/_outputPath" (a JSON pointer, or a URI fragment starting
 * with '#'). Returns 1 valid, 0 invalid, -1 when there is no subschema at that
 * place (res, when given, is then left empty). */
int ob_schema_validate_at(const ob_schema *s, const char *pointer, const ob_value *instance,
                          ob_schema_result *res);

/* The subschema a local $ref ("#", "#/definitions/x": a JSON pointer after '#', with
 * ~0 ~1 and percent escapes) names inside the schema value root (borrowed), or NULL
 * when it names no place there. Reads the value only: nothing is compiled. */
const ob_value *ob_schema_ref_target(const ob_value *root, const char *ref);

/* Frees the failures in r and leaves it empty. NULL is allowed. */
void ob_schema_result_free(ob_schema_result *r);

/* Appends one failure as a line a user can read, without the newline:
 * "/user/age: minimum: 3 is less than 18"; the root instance is "(root)". */
void ob_schema_failure_write(ob_buf *b, const ob_schema_failure *f);


#endif
