/* test_schema_errors.c -- unusable schemas are refused with a message naming the place,
 * failure reports list every failing instance path and keyword, deep values never crash. */
#include <unistd.h>

#include "base/ob_schema.h"
#include "cli/ob_cli.h"
#include "test.h"
#include "test_json.h"

/* Compiling `schema` must fail with OB_EINVAL and a message containing `want`. */
static int refused(const char *schema, const char *want) {
  ob_value *v = json(schema);
  ob_error err = {0, 0, ""};
  ob_schema *s = v ? ob_schema_compile(v, &err) : NULL;
  int ok = v && !s && err.code == OB_EINVAL && strstr(err.msg, want) != NULL;
  if (!ok)
    fprintf(stderr, "  schema %s: %s (message \"%s\", wanted \"%s\")\n", schema,
            s ? "compiled" : "refused with the wrong message", err.msg, want);
  ob_schema_free(s);
  ob_unref(v);
  return ok;
}

static ob_schema *compile(const char *schema) {
  ob_value *v = json(schema);
  ob_error err = {0, 0, ""};
  ob_schema *s = v ? ob_schema_compile(v, &err) : NULL;
  if (!s)
    fprintf(stderr, "  schema %s refused: %s\n", schema, err.msg);
  ob_unref(v); /* the schema keeps its own reference */
  return s;
}

/* Validates and returns the failures as "path keyword" lines, "" when valid. */
static char *failures(const ob_schema *s, const char *instance) {
  ob_value *v = json(instance);
  ob_schema_result r;
  int valid = ob_schema_validate(s, v, &r);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, "", 0);
  for (size_t i = 0; i < r.n; i++)
    ob_buf_addf(&b, "%s %s\n", r.fail[i].instance_path, r.fail[i].keyword);
  if (valid != (r.n == 0))
    ob_buf_add(&b, "ANSWER DISAGREES WITH FAILURES\n", 31);
  if (valid != ob_schema_validate(s, v, NULL))
    ob_buf_add(&b, "QUICK ANSWER DIFFERS\n", 21);
  ob_schema_result_free(&r);
  ob_unref(v);
  return b.data;
}

TEST(keyword_types_are_checked) {
  CHECK(refused("{\"type\": \"strin\"}", "(root): type: unknown type \"strin\""));
  CHECK(refused("{\"type\": 5}", "type: must be a type name"));
  CHECK(refused("{\"type\": [\"string\", \"string\"]}", "appears twice"));
  CHECK(refused("{\"type\": []}", "type: must not be an empty array"));
  CHECK(refused("{\"minimum\": \"3\"}", "(root): minimum: must be a number, not string"));
  CHECK(refused("{\"exclusiveMinimum\": true}", "draft-04"));
  CHECK(refused("{\"minLength\": -1}", "minLength: must be a non-negative integer, not -1"));
  CHECK(refused("{\"maxItems\": 1.5}", "maxItems: must be a non-negative integer"));
  CHECK(refused("{\"multipleOf\": 0}", "multipleOf: must be greater than 0"));
  CHECK(refused("{\"multipleOf\": -0.5}", "multipleOf: must be greater than 0"));
  CHECK(refused("{\"required\": \"name\"}", "required: must be an array of strings"));
  CHECK(refused("{\"required\": [\"a\", 1]}", "item 1 is integer"));
  CHECK(refused("{\"required\": [\"a\", \"a\"]}", "\"a\" appears twice"));
  CHECK(refused("{\"allOf\": []}", "allOf: must be a non-empty array of schemas"));
  CHECK(refused("{\"anyOf\": {}}", "anyOf: must be a non-empty array of schemas, not object"));
  CHECK(refused("{\"oneOf\": [{}, 5]}", "/oneOf/1: schema: must be an object or a boolean"));
  CHECK(refused("{\"items\": 5}", "items: must be a schema or an array of schemas"));
  CHECK(refused("{\"additionalProperties\": \"no\"}", "additionalProperties: must be a schema"));
  CHECK(refused("{\"uniqueItems\": \"yes\"}", "uniqueItems: must be a boolean"));
  CHECK(refused("{\"enum\": 5}", "enum: must be an array"));
  ob_schema *lua_empty = compile("{\"properties\": [], \"required\": {}}"); /* empty Lua tables */
  CHECK(lua_empty != NULL);
  ob_schema_free(lua_empty);
  CHECK(refused("{\"properties\": 5}", "properties: must be an object"));
  CHECK(refused("{\"dependencies\": {\"a\": 5}}", "dependencies: \"a\" must be an array"));
  CHECK(refused("{\"$id\": 5}", "$id: must be a string"));
  CHECK(refused("5", "(root): schema: must be an object or a boolean, not integer"));
  CHECK(refused("null", "must be an object or a boolean"));
}

TEST(errors_name_the_place) {
  CHECK(refused("{\"properties\": {\"a\": {\"properties\": {\"b\": {\"minimum\": \"x\"}}}}}",
                "/properties/a/properties/b: minimum: must be a number, not string"));
  CHECK(refused("{\"properties\": {\"a/b~c\": {\"type\": \"nope\"}}}", "/properties/a~1b~0c: type:"));
  CHECK(refused("{\"items\": [{}, {\"maxLength\": \"2\"}]}", "/items/1: maxLength:"));
  CHECK(refused("{\"definitions\": {\"x\": {\"pattern\": 3}}}", "/definitions/x: pattern: must be a string"));
}

TEST(bad_regex_is_refused) {
  CHECK(refused("{\"pattern\": \"(\"}", "pattern: invalid regular expression \"(\""));
  CHECK(refused("{\"pattern\": \"a{2,1}\"}", "pattern: invalid regular expression"));
  CHECK(refused("{\"patternProperties\": {\"[a-\": {}}}", "patternProperties: invalid regular expression \"[a-\""));
}

TEST(bad_refs_are_refused) {
  CHECK(refused("{\"$ref\": \"#/definitions/missing\"}", "(root): $ref: \"#/definitions/missing\" points to nothing"));
  CHECK(refused("{\"properties\": {\"a\": {\"$ref\": \"#/items/7\"}}, \"items\": [{}]}", "/properties/a: $ref:"));
  CHECK(refused("{\"$ref\": \"other.json\"}", "cannot resolve \"other.json\""));
  CHECK(refused("{\"$ref\": \"https://example.com/s.json#/a\"}", "remote schemas are never fetched"));
  CHECK(refused("{\"$ref\": \"#/a%zz\"}", "malformed %-escape"));
  CHECK(refused("{\"$ref\": \"#/a~2\", \"a~2\": {}}", "points to nothing"));
  CHECK(refused("{\"$ref\": \"#/x\", \"x\": 3}", "/x: schema: must be an object or a boolean"));
  CHECK(refused("{\"$ref\": 5}", "$ref: must be a string"));
  CHECK(refused("{\"$ref\": \"#nowhere\"}", "cannot resolve \"#nowhere\""));
}

TEST(refs_that_never_descend_are_refused) {
  CHECK(refused("{\"$ref\": \"#\"}", "validation would never end"));
  CHECK(refused("{\"anyOf\": [{\"type\": \"string\"}, {\"$ref\": \"#\"}]}", "never end"));
  CHECK(refused("{\"definitions\": {\"a\": {\"$ref\": \"#/definitions/b\"}, "
                "\"b\": {\"not\": {\"$ref\": \"#/definitions/a\"}}}}",
                "never end"));
  CHECK(refused("{\"dependencies\": {\"x\": {\"if\": {\"$ref\": \"#\"}}}}", "never end"));
  /* the same recursion through a keyword that descends is fine */
  ob_schema *s = compile("{\"properties\": {\"next\": {\"$ref\": \"#\"}}, \"required\": [\"v\"]}");
  CHECK(s != NULL);
  if (s) {
    char *f = failures(s, "{\"v\": 1, \"next\": {\"v\": 2, \"next\": {}}}");
    CHECK_STR(f, "/next/next required\n");
    free(f);
  }
  ob_schema_free(s);
}

TEST(every_failure_is_listed) {
  ob_schema *s = compile(
      "{\"type\": \"object\", \"required\": [\"name\", \"user\", \"id\"],"
      " \"properties\": {\"name\": {\"type\": \"string\"}, \"id\": {\"type\": \"integer\"},"
      "   \"user\": {\"properties\": {\"age\": {\"type\": \"integer\", \"minimum\": 18}}},"
      "   \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 3},"
      "              \"uniqueItems\": true},"
      "   \"mode\": {\"enum\": [\"fast\", \"slow\"]}},"
      " \"additionalProperties\": false}");
  CHECK(s != NULL);
  if (!s)
    return;
  char *f = failures(s, "{\"user\": {\"age\": 3.5}, \"tags\": [\"ab\", 7, \"abcd\", \"ab\"],"
                        " \"mode\": \"medium\", \"extra\": 1}");
  CHECK_STR(f, " required\n"
               " required\n"
               "/user/age type\n"
               "/user/age minimum\n"
               "/tags/1 type\n"
               "/tags/2 maxLength\n"
               "/tags uniqueItems\n"
               "/mode enum\n"
               " additionalProperties\n");
  free(f);
  f = failures(s, "{\"name\": \"n\", \"user\": {\"age\": 40}, \"id\": 1}");
  CHECK_STR(f, "");
  free(f);

  /* the readable form: path (root shown as "(root)"), keyword, what */
  ob_value *v = json("{\"name\": \"n\", \"id\": 1, \"user\": {\"age\": 3}}");
  ob_schema_result r;
  CHECK_INT(ob_schema_validate(s, v, &r), 0);
  CHECK_INT(r.n, 1);
  if (r.n == 1) {
    ob_buf b;
    ob_buf_init(&b);
    ob_schema_failure_write(&b, &r.fail[0]);
    CHECK_STR(b.data, "/user/age: minimum: 3 is less than 18");
    CHECK_STR(r.fail[0].schema_path, "/properties/user/properties/age/minimum");
    ob_buf_free(&b);
  }
  ob_schema_result_free(&r);
  ob_unref(v);
  v = json("{\"name\": \"n\", \"user\": {}}");
  CHECK_INT(ob_schema_validate(s, v, &r), 0);
  if (r.n == 1) {
    ob_buf b;
    ob_buf_init(&b);
    ob_schema_failure_write(&b, &r.fail[0]);
    CHECK_STR(b.data, "(root): required: missing property \"id\"");
    ob_buf_free(&b);
  }
  ob_schema_result_free(&r);
  ob_unref(v);
  ob_schema_free(s);
}

TEST(combinators_report_once) {
  ob_schema *s = compile("{\"properties\": {"
                         " \"a\": {\"anyOf\": [{\"type\": \"string\"}, {\"minimum\": 10}]},"
                         " \"b\": {\"oneOf\": [{\"type\": \"integer\"}, {\"minimum\": 0}]},"
                         " \"c\": {\"not\": {\"type\": \"null\"}},"
                         " \"d\": {\"if\": {\"type\": \"string\"}, \"then\": {\"maxLength\": 1},"
                         "        \"else\": {\"const\": 0}},"
                         " \"e\": {\"contains\": {\"const\": 1}},"
                         " \"f\": {\"propertyNames\": {\"pattern\": \"^[a-z]+$\"}},"
                         " \"g\": {\"dependencies\": {\"x\": [\"y\", \"z\"], \"w\": {\"required\": [\"v\"]}}},"
                         " \"h\": {\"allOf\": [{\"minimum\": 5}, {\"multipleOf\": 2}]}}}");
  CHECK(s != NULL);
  if (!s)
    return;
  char *f = failures(s, "{\"a\": 3, \"b\": 5, \"c\": null, \"d\": \"long\", \"e\": [2, 3],"
                        " \"f\": {\"ok\": 1, \"Bad\": 2}, \"g\": {\"x\": 1, \"w\": 2, \"y\": 0},"
                        " \"h\": 3}");
  CHECK_STR(f, "/a anyOf\n"
               "/b oneOf\n"
               "/c not\n"
               "/d maxLength\n"
               "/e contains\n"
               "/f propertyNames\n"
               "/g dependencies\n"
               "/g required\n"
               "/h minimum\n"
               "/h multipleOf\n");
  free(f);
  f = failures(s, "{\"d\": 1}");
  CHECK_STR(f, "/d const\n");
  free(f);
  ob_schema_free(s);
}

TEST(validate_at_a_subschema) {
  ob_schema *s = compile("{\"properties\": {"
                         " \"_outputPath\": {\"enum\": [\"\xE2\x80\xA0state.ok || \xE2\x80\xA0state.failed\"]},"
                         " \"to\": {\"pattern\": \"^user\\\\.\"},"
                         " \"a/b\": {\"type\": \"string\"}}}");
  CHECK(s != NULL);
  if (!s)
    return;
  ob_value *good = ob_cstring("\xE2\x80\xA0state.ok || \xE2\x80\xA0state.failed");
  ob_value *bad = ob_cstring("user.x");
  ob_schema_result r;
  CHECK_INT(ob_schema_validate_at(s, "/properties/_outputPath", good, NULL), 1);
  CHECK_INT(ob_schema_validate_at(s, "/properties/_outputPath", bad, &r), 0);
  CHECK_INT(r.n, 1);
  if (r.n == 1) {
    CHECK_STR(r.fail[0].instance_path, "");
    CHECK_STR(r.fail[0].keyword, "enum");
    CHECK_STR(r.fail[0].schema_path, "/properties/_outputPath/enum");
  }
  ob_schema_result_free(&r);
  CHECK_INT(ob_schema_validate_at(s, "#/properties/to", bad, NULL), 1);
  CHECK_INT(ob_schema_validate_at(s, "/properties/to", good, NULL), 0);
  CHECK_INT(ob_schema_validate_at(s, "/properties/a~1b", good, NULL), 1);
  CHECK_INT(ob_schema_validate_at(s, "#/properties/a~1b", good, NULL), 1);
  CHECK_INT(ob_schema_validate_at(s, "", good, NULL), 1);
  CHECK_INT(ob_schema_validate_at(s, "/properties/missing", good, &r), -1);
  CHECK_INT(r.n, 0);
  ob_schema_result_free(&r);
  CHECK_INT(ob_schema_validate_at(s, "/properties", good, NULL), -1);
  CHECK_INT(ob_schema_validate_at(s, "properties/to", good, NULL), -1);
  CHECK_INT(ob_schema_validate_at(s, "/properties/a~2b", good, NULL), -1);
  ob_unref(good);
  ob_unref(bad);
  ob_schema_free(s);
}

/* [[[...]]] nested `depth` times, built directly (the parser stops at 2048). */
static ob_value *nested_arrays(size_t depth) {
  ob_value *v = ob_int(1);
  for (size_t i = 0; i < depth; i++)
    v = ob_array_push(ob_array(), v);
  return v;
}

TEST(deep_instances_do_not_crash) {
  ob_schema *s = compile("{\"type\": [\"array\", \"integer\"], \"items\": {\"$ref\": \"#\"}}");
  CHECK(s != NULL);
  if (!s)
    return;
  ob_value *v = nested_arrays(OB_MAX_DEPTH);
  ob_schema_result r;
  CHECK_INT(ob_schema_validate(s, v, NULL), 1);
  CHECK_INT(ob_schema_validate(s, v, &r), 1);
  ob_schema_result_free(&r);
  ob_unref(v);

  /* far deeper than any value obelus builds: refused, never a stack overflow */
  v = nested_arrays(200000);
  CHECK_INT(ob_schema_validate(s, v, NULL), 0);
  CHECK_INT(ob_schema_validate(s, v, &r), 0);
  CHECK_INT(r.n, 1);
  if (r.n == 1)
    CHECK_STR(r.fail[0].keyword, "depth");
  ob_schema_result_free(&r);
  ob_unref(v);
  ob_schema_free(s);

  /* a failure at the bottom of a deep value is found and named */
  s = compile("{\"items\": {\"$ref\": \"#\"}, \"not\": {\"const\": 1}}");
  CHECK(s != NULL);
  v = nested_arrays(1000);
  if (s) {
    CHECK_INT(ob_schema_validate(s, v, &r), 0);
    CHECK_INT(r.n, 1);
    if (r.n == 1) {
      CHECK_INT(strlen(r.fail[0].instance_path), 2000); /* "/0" a level */
      CHECK_STR(r.fail[0].keyword, "not");
    }
    ob_schema_result_free(&r);
  }
  ob_unref(v);
  ob_schema_free(s);
}

TEST(deep_and_long_schemas_do_not_crash) {
  /* a schema nested beyond the compiler's limit is refused */
  ob_value *deep = ob_object();
  for (int i = 0; i < 20000; i++)
    deep = ob_object_set(ob_object(), "not", 3, deep);
  ob_error err;
  ob_schema *s = ob_schema_compile(deep, &err);
  CHECK(s == NULL);
  if (!s)
    CHECK(strstr(err.msg, "nested deeper") != NULL);
  ob_unref(deep);

  /* a chain of 50,000 refs compiles (the cycle search is not recursive) */
  ob_value *defs = ob_object();
  char key[32], ref[64];
  for (int i = 0; i < 50000; i++) {
    snprintf(key, sizeof key, "a%d", i);
    snprintf(ref, sizeof ref, "#/definitions/a%d", i + 1);
    ob_value *d = ob_object_set(ob_object(), "$ref", 4, ob_cstring(ref));
    defs = ob_object_set(defs, key, strlen(key), d);
  }
  defs = ob_object_set(defs, "a50000", 6, ob_object_set(ob_object(), "type", 4, ob_cstring("integer")));
  ob_value *schema = ob_object_set(ob_object(), "definitions", 11, defs);
  schema = ob_object_set(schema, "$ref", 4, ob_cstring("#/definitions/a0"));
  s = ob_schema_compile(schema, &err);
  CHECK(s != NULL);
  if (s) {
    ob_value *one = ob_int(1), *str = ob_cstring("x");
    CHECK_INT(ob_schema_validate(s, one, NULL), 1);
    CHECK_INT(ob_schema_validate(s, str, NULL), 0);
    ob_unref(one);
    ob_unref(str);
  }
  ob_schema_free(s);
  ob_unref(schema);

  /* 50,000 allOf levels reached through refs: too deep to evaluate, reported */
  defs = ob_object();
  for (int i = 0; i < 50000; i++) {
    snprintf(key, sizeof key, "a%d", i);
    snprintf(ref, sizeof ref, "#/definitions/a%d", i + 1);
    ob_value *d = ob_object_set(ob_object(), "$ref", 4, ob_cstring(ref));
    ob_value *all = ob_array_push(ob_array(), d);
    defs = ob_object_set(defs, key, strlen(key), ob_object_set(ob_object(), "allOf", 5, all));
  }
  defs = ob_object_set(defs, "a50000", 6, ob_true());
  schema = ob_object_set(ob_object(), "definitions", 11, defs);
  schema = ob_object_set(schema, "$ref", 4, ob_cstring("#/definitions/a0"));
  s = ob_schema_compile(schema, &err);
  CHECK(s != NULL);
  if (s) {
    ob_value *one = ob_int(1);
    ob_schema_result r;
    CHECK_INT(ob_schema_validate(s, one, &r), 0);
    CHECK(r.n == 1 && strcmp(r.fail[0].keyword, "depth") == 0);
    ob_schema_result_free(&r);
    ob_unref(one);
  }
  ob_schema_free(s);
  ob_unref(schema);
}

TEST(numbers_are_exact) {
  ob_schema *s = compile("{\"properties\": {"
                         " \"m\": {\"multipleOf\": 0.01},"
                         " \"big\": {\"maximum\": 9007199254740992},"
                         " \"i\": {\"type\": \"integer\"},"
                         " \"x\": {\"exclusiveMinimum\": -9223372036854775808}}}");
  CHECK(s != NULL);
  if (!s)
    return;
  char *f = failures(s, "{\"m\": 19.99, \"big\": 9007199254740992, \"i\": 2.0, \"x\": -9223372036854775807}");
  CHECK_STR(f, "");
  free(f);
  f = failures(s, "{\"m\": 19.991, \"big\": 9007199254740993, \"i\": 2.5, \"x\": -9223372036854775808}");
  CHECK_STR(f, "/m multipleOf\n/big maximum\n/i type\n/x exclusiveMinimum\n");
  free(f);
  ob_schema_free(s);
}

TEST(strings_count_code_points) {
  ob_schema *s = compile("{\"minLength\": 2, \"maxLength\": 2, \"pattern\": \"^.{2}$\"}");
  CHECK(s != NULL);
  if (!s)
    return;
  char *f = failures(s, "\"\xC3\xA9\xE2\x82\xAC\""); /* two code points, five bytes */
  CHECK_STR(f, "");
  free(f);
  f = failures(s, "\"abc\"");
  CHECK_STR(f, " maxLength\n pattern\n");
  free(f);
  ob_schema_free(s);
}

TEST(a_schema_is_reused) {
  ob_schema *a = compile("{\"type\": \"string\", \"pattern\": \"^a\"}");
  ob_schema *b = compile("{\"type\": \"string\", \"pattern\": \"b$\"}");
  CHECK(a && b);
  if (a && b) {
    ob_value *ab = ob_cstring("ab");
    ob_value *ba = ob_cstring("ba");
    for (int i = 0; i < 1000; i++) {
      CHECK_INT(ob_schema_validate(a, ab, NULL), 1);
      CHECK_INT(ob_schema_validate(b, ab, NULL), 1);
      CHECK_INT(ob_schema_validate(a, ba, NULL), 0);
      CHECK_INT(ob_schema_validate(b, ba, NULL), 0);
    }
    ob_unref(ab);
    ob_unref(ba);
  }
  ob_schema_free(a);
  ob_schema_free(b);
}

/* --- the command ------------------------------------------------------- */

static char tmpdir_[64];

static const char *tmpfile_with(const char *name, const char *text) {
  static char path[8][128];
  static int next;
  char *p = path[next++ % 8];
  snprintf(p, 128, "%s/%s", tmpdir_, name);
  FILE *f = fopen(p, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
  return p;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, "", 0);
  if (f) {
    char chunk[512];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
      ob_buf_add(&b, chunk, n);
    fclose(f);
  }
  return b.data;
}

/* Runs `obelus schema a b` with stdout and stderr captured. */
static int run_cmd(const char *a, const char *b, char **out, char **err) {
  char outp[128], errp[128];
  snprintf(outp, sizeof outp, "%s/stdout", tmpdir_);
  snprintf(errp, sizeof errp, "%s/stderr", tmpdir_);
  fflush(stdout);
  fflush(stderr);
  int saved_out = dup(1), saved_err = dup(2);
  FILE *fo = freopen(outp, "w", stdout);
  FILE *fe = freopen(errp, "w", stderr);
  char *argv[4] = {"schema", (char *)a, (char *)b, NULL};
  int argc = b ? 3 : a ? 2 : 1;
  int rc = ob_cmd_schema(argc, argv);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  (void)fo;
  (void)fe;
  *out = slurp(outp);
  *err = slurp(errp);
  return rc;
}

TEST(the_schema_command) {
  if (!mkdtemp(strcpy(tmpdir_, "/tmp/obelus-schema-XXXXXX"))) {
    CHECK(!"mkdtemp");
    return;
  }
  const char *schema = tmpfile_with("s.json", "{\"type\": \"object\", \"required\": [\"name\"],"
                                              " \"properties\": {\"age\": {\"minimum\": 18}}}");
  const char *good = tmpfile_with("good.json", "{\"name\": \"a\", \"age\": 30}");
  const char *bad = tmpfile_with("bad.json", "{\"age\": 3}");
  const char *unusable = tmpfile_with("unusable.json", "{\"minimum\": \"3\"}");
  const char *malformed = tmpfile_with("malformed.json", "{\"a\": ");
  char *out, *err;

  CHECK_INT(run_cmd(schema, good, &out, &err), 0);
  CHECK_STR(out, "valid\n");
  CHECK_STR(err, "");
  free(out), free(err);

  CHECK_INT(run_cmd(schema, bad, &out, &err), 1);
  CHECK_STR(out, "(root): required: missing property \"name\"\n/age: minimum: 3 is less than 18\n");
  free(out), free(err);

  CHECK_INT(run_cmd(unusable, good, &out, &err), 2);
  CHECK(strstr(err, "unusable.json: unusable schema: (root): minimum: must be a number") != NULL);
  CHECK_STR(out, "");
  free(out), free(err);

  CHECK_INT(run_cmd(schema, malformed, &out, &err), 2);
  CHECK(strstr(err, "malformed.json") != NULL);
  free(out), free(err);

  CHECK_INT(run_cmd(malformed, good, &out, &err), 2);
  CHECK(strstr(err, "malformed.json") != NULL);
  free(out), free(err);

  char missing[128];
  snprintf(missing, sizeof missing, "%s/missing.json", tmpdir_);
  CHECK_INT(run_cmd(schema, missing, &out, &err), 2);
  CHECK(strstr(err, "missing.json") != NULL);
  free(out), free(err);

  CHECK_INT(run_cmd(schema, NULL, &out, &err), 2);
  CHECK(strstr(err, "needs SCHEMA.json and INSTANCE.json") != NULL);
  free(out), free(err);

  const char *names[] = {"s.json", "good.json", "bad.json", "unusable.json", "malformed.json",
                         "stdout", "stderr"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", tmpdir_, names[i]);
    unlink(p);
  }
  rmdir(tmpdir_);
}

int main(void) {
  RUN(keyword_types_are_checked);
  RUN(errors_name_the_place);
  RUN(bad_regex_is_refused);
  RUN(bad_refs_are_refused);
  RUN(refs_that_never_descend_are_refused);
  RUN(every_failure_is_listed);
  RUN(combinators_report_once);
  RUN(validate_at_a_subschema);
  RUN(deep_instances_do_not_crash);
  RUN(deep_and_long_schemas_do_not_crash);
  RUN(numbers_are_exact);
  RUN(strings_count_code_points);
  RUN(a_schema_is_reused);
  RUN(the_schema_command);
  return TEST_END();
}
