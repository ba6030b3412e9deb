/* test_value_long_strings.c -- strings too long for a string's 32-bit length keep it
 * beside their bytes (ob_value.c's string_value). A real one is 4 GiB; this build of the
 * value code calls 12 bytes and more "long", so every path meets both forms. */
#define OB_TEST_LEN_LONG 12u
#include "../../core/base/ob_value.c"

#include "test.h"

static void fill(char *b, size_t len, int salt) {
  for (size_t i = 0; i < len; i++)
    b[i] = (char)('a' + (i * 7 + (size_t)salt) % 26);
}

TEST(every_length_keeps_its_bytes_on_both_sides_of_the_cut) {
  char b[64] = {0};
  for (size_t len = 0; len < 40; len++) {
    fill(b, len, 0);
    if (len > 3)
      b[3] = '\0'; /* a NUL inside counts as a byte */
    ob_value *s = ob_string(b, len);
    CHECK_INT(ob_string_len(s), len);
    CHECK(memcmp(ob_string_ptr(s), b, len) == 0);
    CHECK(ob_string_ptr(s)[len] == '\0');
    CHECK_INT(((string_value *)s)->len == LEN_LONG, len >= LEN_LONG);
    ob_value *t = ob_string(b, len);
    CHECK(ob_equal(s, t));
    CHECK_INT(ob_string_hash(s), ob_string_hash(t));
    CHECK_INT(ob_string_hash(s), hash_bytes(b, len));
    ob_unref(t);
    if (len) { /* one byte less: a short string against a long one, or two of each */
      t = ob_string(b, len - 1);
      CHECK(!ob_equal(s, t));
      ob_unref(t);
    }
    ob_unref(s);
  }
}

/* Keys of every length in a small object and in a wide one (past 8 keys), looked up
 * with each other's lengths: a long key never matches a short lookup, nor the reverse. */
TEST(long_keys_are_found_and_only_they) {
  enum { N = 30 };
  char keys[N][N + 1];
  ob_value *small = ob_object(), *wide = ob_object();
  for (int i = 0; i < N; i++) {
    fill(keys[i], (size_t)i + 1, 0); /* each a prefix of the next */
    keys[i][i + 1] = '\0';
    if (i < 8)
      small = ob_object_set(small, keys[i], (size_t)i + 1, ob_int(i));
    wide = ob_object_set(wide, keys[i], (size_t)i + 1, ob_int(i));
  }
  CHECK_INT(ob_object_len(wide), N);
  for (int i = 0; i < N; i++) {
    ob_value *v = ob_object_get(wide, keys[i], (size_t)i + 1);
    CHECK(v && ob_int_value(v) == i);
    v = ob_object_get(small, keys[i], (size_t)i + 1);
    CHECK(i < 8 ? v && ob_int_value(v) == i : v == NULL);
  }
  char other[N + 1];
  fill(other, N, 1); /* same lengths, other bytes */
  for (size_t len = 1; len <= N; len++) {
    CHECK(ob_object_get(wide, other, len) == NULL);
    CHECK(ob_object_get(small, other, len) == NULL);
  }
  /* the keys come back as written, in order */
  for (int i = 0; i < N; i++) {
    ob_value *k, *v;
    ob_object_at(wide, (size_t)i, &k, &v);
    CHECK_INT(ob_string_len(k), i + 1);
    CHECK(memcmp(ob_string_ptr(k), keys[i], (size_t)i + 1) == 0);
  }
  ob_unref(small);
  ob_unref(wide);
}

int main(void) {
  RUN(every_length_keeps_its_bytes_on_both_sides_of_the_cut);
  RUN(long_keys_are_found_and_only_they);
  return TEST_END();
}
