/* test_json_roundtrip.c -- JSON text in and out: integers stay integers, reals print
 * shortest-exact, key order kept, UTF-8 and \u escapes (surrogates, NUL) round-trip. */
#include <inttypes.h>

#include "base/ob_value.h"
#include "test.h"

/* parse `in`, print compact, compare with `out`; then parse that again: identical */
static int roundtrip(const char *in, const char *out) {
  ob_error err;
  ob_value *v = ob_json_parse(in, strlen(in), &err);
  if (!v) {
    fprintf(stderr, "  parse failed for %s: %s\n", in, err.msg);
    return 0;
  }
  size_t len;
  char *s = ob_json_print(v, OB_JSON_COMPACT, &len);
  int ok = len == strlen(out) && memcmp(s, out, len) == 0;
  if (!ok)
    fprintf(stderr, "  %s printed as %s, expected %s\n", in, s, out);
  ob_value *again = ob_json_parse(s, len, &err);
  ok = ok && again && ob_identical(v, again);
  ob_unref(again);
  ob_unref(v);
  free(s);
  return ok;
}

TEST(scalars) {
  CHECK(roundtrip("null", "null"));
  CHECK(roundtrip(" true ", "true"));
  CHECK(roundtrip("false", "false"));
  CHECK(roundtrip("0", "0"));
  CHECK(roundtrip("-17", "-17"));
  CHECK(roundtrip("9223372036854775807", "9223372036854775807"));
  CHECK(roundtrip("-9223372036854775808", "-9223372036854775808"));
}

/* Integers print two digits a step (ob_buf_add_uint): every length, odd and even, and
 * the numbers around each power of ten, against printf's digits. */
TEST(integers_print_exactly_at_every_length) {
  int64_t n = 1; /* 10^(digits-1), up to 10^18 (INT64_MAX is 9.2 * 10^18) */
  for (int digits = 1; digits <= 19; digits++) {
    int64_t five = n <= INT64_MAX / 5 - 7 ? n * 5 + 7 : n + 7;
    int64_t around[] = {n - 1, n, n + 1, five, -n, -(n - 1), -(n + 1)};
    for (size_t i = 0; i < sizeof around / sizeof *around; i++) {
      char text[32];
      snprintf(text, sizeof text, "%" PRId64, around[i]);
      CHECK(roundtrip(text, text));
    }
    if (digits < 19)
      n *= 10;
  }
  CHECK(roundtrip("9223372036854775807", "9223372036854775807"));
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add_uint(&b, UINT64_MAX);
  ob_buf_add_uint(&b, 0);
  ob_buf_add_uint(&b, 7);
  ob_buf_add_uint(&b, 42);
  ob_buf_add_uint(&b, 100);
  CHECK(!strcmp(b.data, "18446744073709551615" "0" "7" "42" "100"));
  ob_buf_free(&b);
}

TEST(reals_stay_reals_and_print_shortest) {
  CHECK(roundtrip("1.0", "1.0"));
  CHECK(roundtrip("0.1", "0.1"));
  CHECK(roundtrip("-2.5", "-2.5"));
  CHECK(roundtrip("1e300", "1e+300"));
  CHECK(roundtrip("5e-324", "4.94065645841247e-324"));
  CHECK(roundtrip("0.30000000000000004", "0.30000000000000004"));
  CHECK(roundtrip("123456789012345678901234567890.0", "1.2345678901234568e+29"));
  CHECK(roundtrip("1E2", "100.0"));
}

TEST(strings_and_escapes) {
  CHECK(roundtrip("\"a\\\"b\\\\c\\/d\"", "\"a\\\"b\\\\c/d\""));
  CHECK(roundtrip("\"\\n\\t\\r\\b\\f\\u0001\"", "\"\\n\\t\\r\\b\\f\\u0001\""));
  CHECK(roundtrip("\"\\u00e9\\u2020\"", "\"\xC3\xA9\xE2\x80\xA0\""));
  CHECK(roundtrip("\"\\ud83d\\ude00\"", "\"\xF0\x9F\x98\x80\"")); /* surrogate pair -> U+1F600 */
  CHECK(roundtrip("\"\xE6\x97\xA5\xE6\x9C\xAC\"", "\"\xE6\x97\xA5\xE6\x9C\xAC\""));
  CHECK(roundtrip("\"a\\u0000b\"", "\"a\\u0000b\""));
}

TEST(containers_keep_order) {
  CHECK(roundtrip("{\"z\":1,\"a\":[1,2.5,\"x\",null,{}],\"m\":{\"b\":[],\"a\":true}}",
                  "{\"z\":1,\"a\":[1,2.5,\"x\",null,{}],\"m\":{\"b\":[],\"a\":true}}"));
  CHECK(roundtrip("[]", "[]"));
  CHECK(roundtrip("{}", "{}"));
}

TEST(pretty_printing) {
  ob_error err;
  ob_value *v = ob_json_parse("{\"a\":[1,{}],\"b\":{}}", 19, &err);
  char *s = ob_json_print(v, OB_JSON_PRETTY, NULL);
  CHECK_STR(s, "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": {}\n}");
  free(s);
  ob_unref(v);
}

static int fails(const char *text, size_t len, const char *needle) {
  ob_error err = {0};
  ob_value *v = ob_json_parse(text, len, &err);
  if (v) {
    ob_unref(v);
    return 0;
  }
  if (err.code != OB_EJSON || !strstr(err.msg, needle)) {
    fprintf(stderr, "  error was: %s\n", err.msg);
    return 0;
  }
  return 1;
}

TEST(bad_input_gives_clear_errors) {
  CHECK(fails("{\"a\": [1, 2", 11, "line 1"));
  CHECK(fails("", 0, "line"));
  CHECK(fails("[1,]", 4, "line 1"));
  CHECK(fails("\"\xFF\"", 3, "unable to decode byte 0xff"));
  CHECK(fails("\"\\ud800\"", 8, "invalid Unicode"));
  CHECK(fails("{\"k\\u0000\":1}", 13, "NUL byte in object key")); /* jansson refuses these */
  CHECK(fails("99999999999999999999", 20, "too big"));
  CHECK(fails("{\"a\":1}\n{\"b\":2}", 15, "end of file expected"));
}

TEST(ten_thousand_levels_is_an_error_not_a_crash) {
  enum { D = 10000 };
  char *s = malloc(2 * D + 1);
  memset(s, '[', D);
  memset(s + D, ']', D);
  s[2 * D] = '\0';
  CHECK(fails(s, 2 * D, "depth"));
  free(s);
}

TEST(ten_megabyte_string) {
  size_t n = 10u << 20;
  char *s = malloc(n + 3);
  s[0] = '"';
  memset(s + 1, 'x', n);
  s[n + 1] = '"';
  s[n + 2] = '\0';
  ob_error err;
  ob_value *v = ob_json_parse(s, n + 2, &err);
  CHECK(v && ob_typeof(v) == OB_STRING && ob_string_len(v) == n);
  size_t len;
  char *out = ob_json_print(v, 0, &len);
  CHECK(len == n + 2 && memcmp(out, s, len) == 0);
  free(out);
  ob_unref(v);
  free(s);
}

int main(void) {
  RUN(scalars);
  RUN(integers_print_exactly_at_every_length);
  RUN(reals_stay_reals_and_print_shortest);
  RUN(strings_and_escapes);
  RUN(containers_keep_order);
  RUN(pretty_printing);
  RUN(bad_input_gives_clear_errors);
  RUN(ten_thousand_levels_is_an_error_not_a_crash);
  RUN(ten_megabyte_string);
  return TEST_END();
}
