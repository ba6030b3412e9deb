/* test_schema_format.c -- `format` as an assertion (each rule of ob_schema.c at its edges,
 * beyond what the installed JSON-Schema-Test-Suite covers: uuid, leap seconds, leading
 * zeros, address literals), the failure message naming the path and the format, and the
 * strict compile a tool's schema gets: unknown keywords and formats refused with the
 * nearest known name, x- keywords allowed, lenient compiling letting both through; the
 * engine refusing such a tool unless it is lenient. */
#include "base/ob_schema.h"
#include "engine/ob_engine.h"
#include "engine/ob_run.h"
#include "test.h"
#include "test_json.h"

/* Is the string s of format f? Both answers (yes/no and collected) must agree. */
static int is_format(const char *f, const char *s) {
  char text[512];
  snprintf(text, sizeof text, "{\"format\": \"%s\"}", f);
  ob_value *schema = json(text);
  ob_error err = {0, 0, ""};
  ob_schema *c = ob_schema_compile_with(schema, OB_SCHEMA_STRICT, &err);
  ob_value *v = ob_string(s, strlen(s));
  ob_schema_result r;
  int quick = c ? ob_schema_validate(c, v, NULL) : -1;
  int full = c ? ob_schema_validate(c, v, &r) : -1;
  if (!c)
    fprintf(stderr, "  format %s refused: %s\n", f, err.msg);
  else if (quick != full || (r.n == 0) != (full == 1))
    fprintf(stderr, "  format %s, \"%s\": answers disagree\n", f, s), quick = -1;
  if (c)
    ob_schema_result_free(&r);
  ob_schema_free(c);
  ob_unref(schema);
  ob_unref(v);
  return quick;
}

#define VALID(f, s) CHECK_INT(is_format(f, s), 1)
#define INVALID(f, s) CHECK_INT(is_format(f, s), 0)

TEST(date_time_date_and_time_follow_rfc3339) {
  VALID("date-time", "2024-05-01T12:00:00Z");
  VALID("date-time", "2024-05-01t12:00:00.5z");
  VALID("date-time", "2024-05-01T12:00:00+05:30");
  VALID("date-time", "1998-12-31T23:59:60Z");       /* a leap second */
  VALID("date-time", "1998-12-31T15:59:60.1-08:00"); /* 23:59:60 UTC */
  INVALID("date-time", "1998-12-31T22:59:60Z");     /* :60 but not at 23:59 UTC */
  INVALID("date-time", "1998-12-31T23:59:61Z");
  INVALID("date-time", "2024-05-01T12:00:00");      /* no offset */
  INVALID("date-time", "2024-05-01 12:00:00Z");     /* RFC 3339 wants T */
  INVALID("date-time", "2024-05-01T24:00:00Z");
  INVALID("date-time", "2024-05-01T12:00:00.Z");    /* a dot without digits */
  INVALID("date-time", "2024-05-01T12:00:00+5:30");
  VALID("date", "2020-02-29");
  VALID("date", "2000-02-29");
  INVALID("date", "2100-02-29"); /* not a leap year */
  INVALID("date", "2021-02-29");
  INVALID("date", "2024-04-31");
  INVALID("date", "2024-13-01");
  INVALID("date", "2024-00-10");
  INVALID("date", "2024-5-01");
  INVALID("date", "2024-05-01T00:00:00Z");
  VALID("time", "08:30:06Z");
  VALID("time", "23:59:60+00:00");
  INVALID("time", "08:30:06");
  INVALID("time", "08:30Z");
  INVALID("time", "08:60:00Z");
  INVALID("time", "08:30:06+24:00");
}

TEST(email_is_local_at_domain) {
  VALID("email", "joe.bloggs@example.com");
  VALID("email", "te~st+tag@example.com");
  VALID("email", "\"joe bloggs\"@example.com");
  VALID("email", "joe@[127.0.0.1]");
  VALID("email", "joe@[IPv6:::1]");
  VALID("email", "root@localhost");
  INVALID("email", "x");
  INVALID("email", "@example.com");
  INVALID("email", "joe@");
  INVALID("email", ".joe@example.com");
  INVALID("email", "joe.@example.com");
  INVALID("email", "jo..e@example.com");
  INVALID("email", "joe@exa_mple.com");
  INVALID("email", "joe@-example.com");
  INVALID("email", "joe bloggs@example.com");
  INVALID("email", "joe@[127.0.0.256]");
  INVALID("email", "\"unclosed@example.com");
  char local[80];
  memset(local, 'a', 65);
  strcpy(local + 65, "@example.com");
  INVALID("email", local); /* a local part of 65 bytes */
  local[1] = '\0';
  VALID("email", strcat(local, "@example.com"));
}

TEST(hostname_follows_rfc1123) {
  VALID("hostname", "www.example.com");
  VALID("hostname", "localhost");
  VALID("hostname", "1host.example"); /* RFC 1123 allows a digit first */
  VALID("hostname", "xn--4gbwdl.xn--wgbh1c");
  INVALID("hostname", "");
  INVALID("hostname", ".");
  INVALID("hostname", "a..b");
  INVALID("hostname", "example.com.");
  INVALID("hostname", "-a.example");
  INVALID("hostname", "a-.example");
  INVALID("hostname", "under_score.example");
  char label[80];
  memset(label, 'a', 63);
  label[63] = '\0';
  VALID("hostname", label);
  strcat(label, "a");
  INVALID("hostname", label); /* 64 bytes */
  char longname[300] = "";
  for (int i = 0; i < 64; i++)
    strcat(longname, "abc.");
  strcat(longname, "d"); /* 257 bytes */
  INVALID("hostname", longname);
}

TEST(ip_addresses) {
  VALID("ipv4", "192.168.0.1");
  VALID("ipv4", "0.0.0.0");
  VALID("ipv4", "255.255.255.255");
  INVALID("ipv4", "087.10.0.1"); /* a leading zero: octal to some readers */
  INVALID("ipv4", "1.2.3");
  INVALID("ipv4", "1.2.3.4.5");
  INVALID("ipv4", "256.1.1.1");
  INVALID("ipv4", "1.2.3.4 ");
  INVALID("ipv4", "1..3.4");
  INVALID("ipv4", "0x7f000001");
  VALID("ipv6", "::1");
  VALID("ipv6", "2001:db8::7");
  VALID("ipv6", "::ffff:192.168.0.1");
  VALID("ipv6", "1:2:3:4:5:6:7:8");
  INVALID("ipv6", "12345::");
  INVALID("ipv6", "1::2::3");
  INVALID("ipv6", "fe80::1%eth0"); /* a zone is no part of the address */
  INVALID("ipv6", "::laptop");
  INVALID("ipv6", "1:2:3:4:5:6:7:8:9");
  INVALID("ipv6", " ::1");
}

TEST(uri_and_uuid) {
  VALID("uri", "http://example.com/a?b=c#d");
  VALID("uri", "urn:isbn:0451450523");
  VALID("uri", "mailto:joe@example.com");
  VALID("uri", "http://[2001:db8::7]:8080/");
  VALID("uri", "http://example.com/%20a");
  VALID("uri", "x:");
  INVALID("uri", "/relative/path");
  INVALID("uri", "example.com");
  INVALID("uri", "http://exa mple.com");
  INVALID("uri", "http://example.com/%2");
  INVALID("uri", "http://example.com/%zz");
  INVALID("uri", "http://example.com/#a#b");
  INVALID("uri", "http://example.com/[x]");
  INVALID("uri", "1http://example.com");
  INVALID("uri", "http://example.com/\xc3\xa9"); /* an IRI, not a URI */
  VALID("uri-reference", "/relative/path");
  VALID("uri-reference", "");
  INVALID("uri-reference", "a b");
  VALID("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380");
  VALID("uuid", "2EB8AA08-AA98-11EA-B4AA-73B441D16380");
  VALID("uuid", "00000000-0000-0000-0000-000000000000");
  INVALID("uuid", "2eb8aa08aa9811eab4aa73b441d16380");
  INVALID("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d1638");
  INVALID("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d163800");
  INVALID("uuid", "2eb8aa0-8aa98-11ea-b4aa-73b441d16380");
  INVALID("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d1638g");
  INVALID("uuid", "{2eb8aa08-aa98-11ea-b4aa-73b441d16380}");
}

TEST(regex_and_pointers) {
  VALID("regex", "^[a-z]+\\d*$");
  VALID("regex", "\\u00e9"); /* ECMA-262's escape, as in `pattern` */
  INVALID("regex", "^(abc]");
  INVALID("regex", "a{2,1}");
  VALID("json-pointer", "/a~0b/c~1d/");
  INVALID("json-pointer", "a/b");
  INVALID("json-pointer", "/a~2");
  VALID("relative-json-pointer", "0#");
  INVALID("relative-json-pointer", "01/a");
}

static ob_schema *compile(const char *text, unsigned flags, ob_error *err) {
  ob_value *v = json(text);
  ob_schema *s = v ? ob_schema_compile_with(v, flags, err) : NULL;
  ob_unref(v);
  return s;
}

/* The failures of instance against schema, as ob_schema_failure_write lines. */
static char *failures(const char *schema, const char *instance) {
  ob_error err = {0, 0, ""};
  ob_schema *s = compile(schema, OB_SCHEMA_STRICT, &err);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, "", 0);
  if (!s) {
    ob_buf_addf(&b, "refused: %s", err.msg);
    return b.data;
  }
  ob_value *v = json(instance);
  ob_schema_result r;
  ob_schema_validate(s, v, &r);
  for (size_t i = 0; i < r.n; i++) {
    ob_schema_failure_write(&b, &r.fail[i]);
    ob_buf_addc(&b, '\n');
  }
  ob_schema_result_free(&r);
  ob_schema_free(s);
  ob_unref(v);
  return b.data;
}

TEST(a_failure_names_the_path_and_the_format) {
  char *f = failures("{\"properties\": {\"email\": {\"format\": \"email\"},"
                     " \"ids\": {\"items\": {\"format\": \"uuid\"}}}}",
                     "{\"email\": \"x\", \"ids\": [\"00000000-0000-0000-0000-000000000000\", \"n\"]}");
  CHECK_STR(f, "/email: format: \"x\" is not an email address (format: email)\n"
               "/ids/1: format: \"n\" is not a UUID (8-4-4-4-12 hexadecimal digits) (format: uuid)\n");
  free(f);
  f = failures("{\"format\": \"regex\"}", "\"(a\"");
  CHECK(strstr(f, "(root): format: \"(a\" is not a regular expression (format: regex): ") == f);
  CHECK(strstr(f, "missing closing parenthesis at offset 2") != NULL);
  free(f);
  f = failures("{\"format\": \"date-time\"}", "\"yesterday\"");
  CHECK_STR(f, "(root): format: \"yesterday\" is not a date-time (RFC 3339: "
               "2024-05-01T12:00:00Z) (format: date-time)\n");
  free(f);
  /* only strings: a number, an object, null pass a format (type says what may come) */
  const char *others[] = {"12", "{\"a\": 1}", "null", "[\"x\"]", "true"};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    f = failures("{\"format\": \"email\"}", others[i]);
    CHECK_STR(f, "");
    free(f);
  }
  /* a known format obelus does not check is an annotation */
  f = failures("{\"format\": \"idn-email\"}", "\"anything at all\"");
  CHECK_STR(f, "");
  free(f);
}

/* Compiling strict must fail with a message containing want; lenient must succeed. */
static int strict_refuses(const char *schema, const char *want) {
  ob_error err = {0, 0, ""};
  ob_schema *s = compile(schema, OB_SCHEMA_STRICT, &err);
  int ok = !s && err.code == OB_EINVAL && strstr(err.msg, want) != NULL;
  if (!ok)
    fprintf(stderr, "  schema %s: %s (message \"%s\", wanted \"%s\")\n", schema,
            s ? "compiled" : "refused with the wrong message", err.msg, want);
  ob_schema_free(s);
  ob_error lerr = {0, 0, ""};
  ob_schema *lenient = compile(schema, 0, &lerr);
  if (!lenient) {
    fprintf(stderr, "  schema %s refused even lenient: %s\n", schema, lerr.msg);
    ok = 0;
  }
  ob_schema_free(lenient);
  return ok;
}

TEST(strict_refuses_unknown_keywords_with_a_suggestion) {
  CHECK(strict_refuses("{\"type\": \"object\", \"requird\": [\"x\"]}",
                       "(root): requird: unknown keyword; did you mean \"required\"? (a keyword "
                       "of your own must start with \"x-\")"));
  CHECK(strict_refuses("{\"properties\": {\"a\": {\"fromat\": \"email\"}}}",
                       "/properties/a: fromat: unknown keyword; did you mean \"format\"?"));
  CHECK(strict_refuses("{\"items\": [{\"minimun\": 1}]}",
                       "/items/0: minimun: unknown keyword; did you mean \"minimum\"?"));
  CHECK(strict_refuses("{\"definitions\": {\"d\": {\"addtionalProperties\": false}}}",
                       "/definitions/d: addtionalProperties: unknown keyword; did you mean "
                       "\"additionalProperties\"?"));
  CHECK(strict_refuses("{\"$defs\": {\"d\": {\"patern\": \"a\"}}}",
                       "/$defs/d: patern: unknown keyword; did you mean \"pattern\"?"));
  CHECK(strict_refuses("{\"zzzzzz\": 1}", "(root): zzzzzz: unknown keyword (a keyword of your"));
  CHECK(strict_refuses("{\"a b\": 1}", "(root): \"a b\": unknown keyword"));
  CHECK(strict_refuses("{\"unevaluatedProperties\": false}",
                       "unevaluatedProperties: a keyword of a later draft than 07, which obelus "
                       "implements; draft-07 says it with \"additionalProperties\""));
  CHECK(strict_refuses("{\"dependentRequired\": {}}", "dependentRequired: a keyword of a later"));
  /* next to a $ref too: the typo is the author's whatever draft-07 ignores */
  CHECK(strict_refuses("{\"definitions\": {\"a\": {}}, \"properties\": {\"p\": "
                       "{\"$ref\": \"#/definitions/a\", \"descripton\": \"d\"}}}",
                       "/properties/p: descripton: unknown keyword; did you mean \"description\"?"));
  /* a property called like a typo is a name, not a keyword */
  ob_error err = {0, 0, ""};
  ob_schema *s = compile("{\"properties\": {\"requird\": {}, \"fromat\": {}}, "
                         "\"required\": [\"requird\"]}",
                         OB_SCHEMA_STRICT, &err);
  CHECK(s != NULL);
  ob_schema_free(s);
}

TEST(strict_allows_every_known_keyword_and_x_ones) {
  ob_error err = {0, 0, ""};
  ob_schema *s = compile(
      "{\"$schema\": \"http://json-schema.org/draft-07/schema#\", \"$id\": \"http://e.x/s\","
      " \"$comment\": \"c\", \"title\": \"t\", \"description\": \"d\", \"default\": {},"
      " \"examples\": [{}], \"readOnly\": false, \"writeOnly\": false, \"deprecated\": false,"
      " \"x-foo\": {\"anything\": [1]}, \"x-\": 1,"
      " \"type\": \"object\", \"required\": [\"a\"], \"minProperties\": 1, \"maxProperties\": 9,"
      " \"properties\": {\"a\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 9,"
      "   \"pattern\": \"a\", \"format\": \"email\", \"contentMediaType\": \"text/plain\","
      "   \"contentEncoding\": \"8bit\", \"enum\": [\"a@b.c\"], \"const\": \"a@b.c\"},"
      "  \"n\": {\"multipleOf\": 2, \"minimum\": 0, \"maximum\": 9, \"exclusiveMinimum\": -1,"
      "   \"exclusiveMaximum\": 10},"
      "  \"l\": {\"items\": [{}], \"additionalItems\": false, \"minItems\": 0, \"maxItems\": 3,"
      "   \"uniqueItems\": true, \"contains\": {}}},"
      " \"patternProperties\": {\"^x\": {}}, \"additionalProperties\": true,"
      " \"dependencies\": {\"a\": [\"n\"]}, \"propertyNames\": {\"maxLength\": 5},"
      " \"if\": {}, \"then\": {}, \"else\": {}, \"allOf\": [{}], \"anyOf\": [{}], \"oneOf\": [{}],"
      " \"not\": false, \"definitions\": {\"d\": {}}, \"$defs\": {\"e\": {\"$ref\": \"#/definitions/d\"}}}",
      OB_SCHEMA_STRICT, &err);
  if (!s)
    fprintf(stderr, "  refused: %s\n", err.msg);
  CHECK(s != NULL);
  ob_schema_free(s);
  /* $defs is compiled, so a $ref into it works and its errors show */
  s = compile("{\"$defs\": {\"p\": {\"minimum\": 3}}, \"$ref\": \"#/$defs/p\"}", OB_SCHEMA_STRICT,
              &err);
  ob_value *two = ob_int(2);
  CHECK(s && ob_schema_validate(s, two, NULL) == 0);
  ob_unref(two);
  ob_schema_free(s);
  ob_value *v = json("{\"$defs\": {\"p\": {\"minimum\": \"3\"}}}");
  CHECK(ob_schema_compile(v, &err) == NULL && strstr(err.msg, "/$defs/p: minimum: must be a number"));
  ob_unref(v);
}

TEST(unknown_formats) {
  CHECK(strict_refuses("{\"properties\": {\"e\": {\"format\": \"emial\"}}}",
                       "/properties/e: format: unknown format \"emial\"; did you mean \"email\"? "
                       "(checked: date-time, date, time, email"));
  CHECK(strict_refuses("{\"format\": \"datetime\"}", "did you mean \"date-time\"?"));
  CHECK(strict_refuses("{\"format\": \"ipv5\"}", "did you mean \"ipv4\"?"));
  CHECK(strict_refuses("{\"format\": \"color\"}", "unknown format \"color\" (checked:"));
  /* lenient: an unknown format is an annotation, nothing is checked */
  ob_error err = {0, 0, ""};
  ob_schema *s = compile("{\"format\": \"color\"}", 0, &err);
  ob_value *v = ob_cstring("not a colour");
  CHECK(s && ob_schema_validate(s, v, NULL) == 1);
  ob_unref(v);
  ob_schema_free(s);
  /* a format that is not a string is refused whatever the flags */
  v = json("{\"format\": 5}");
  CHECK(ob_schema_compile(v, &err) == NULL && strstr(err.msg, "(root): format: must be a string, not integer"));
  ob_unref(v);
}

static void noop(ob_call_handle *h, const ob_value *params, void *data) {
  (void)params, (void)data;
  ob_call_complete(h, 0, NULL, NULL);
}

TEST(the_engine_loads_a_tool_strict_unless_lenient) {
  ob_error err = {0, 0, ""};
  ob_engine *e = ob_engine_new(NULL, &err);
  CHECK(e != NULL);
  if (!e)
    return;
  ob_value *typo = json("{\"type\": \"object\", \"requird\": [\"x\"]}");
  CHECK(ob_engine_add_tool(e, "t", typo, noop, NULL, &err) == OB_EINVAL);
  CHECK(strstr(err.msg, "(root): requird: unknown keyword; did you mean \"required\"?") != NULL);
  CHECK(strstr(err.msg, "; or --lenient-schemas lets it through") != NULL);
  /* a schema wrong whatever the flags says nothing of --lenient-schemas */
  ob_value *bad = json("{\"minimum\": \"3\"}");
  CHECK(ob_engine_add_tool(e, "b", bad, noop, NULL, &err) == OB_EINVAL);
  CHECK(strstr(err.msg, "lenient") == NULL);
  ob_value *ext = json("{\"type\": \"object\", \"x-foo\": 1}");
  CHECK_INT(ob_engine_add_tool(e, "x", ext, noop, NULL, &err), OB_OK);
  e->lenient_schemas = 1;
  CHECK_INT(ob_engine_add_tool(e, "t", typo, noop, NULL, &err), OB_OK);
  CHECK(ob_engine_add_tool(e, "b", bad, noop, NULL, &err) == OB_EINVAL);
  ob_unref(typo);
  ob_unref(bad);
  ob_unref(ext);
  ob_engine_free(e);
}

int main(void) {
  RUN(date_time_date_and_time_follow_rfc3339);
  RUN(email_is_local_at_domain);
  RUN(hostname_follows_rfc1123);
  RUN(ip_addresses);
  RUN(uri_and_uuid);
  RUN(regex_and_pointers);
  RUN(a_failure_names_the_path_and_the_format);
  RUN(strict_refuses_unknown_keywords_with_a_suggestion);
  RUN(strict_allows_every_known_keyword_and_x_ones);
  RUN(unknown_formats);
  RUN(the_engine_loads_a_tool_strict_unless_lenient);
  return TEST_END();
}
