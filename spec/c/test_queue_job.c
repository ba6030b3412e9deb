/* test_queue_job.c -- a job's stream entry decoded and checked (ob_queue_job.c), as a
 * worker does before using any of it: a good entry gives its id, plan hash, name,
 * inputs and batch; each malformed field (missing, wrong type, a path for an id, garbage bytes,
 * huge numbers, a field twice, an odd count) gives an error naming it, with the id
 * kept when it is valid, and never inputs that are not an array. */
#include <string.h>

#include "fleet/ob_queue_job.h"
#include "test.h"

#define H "0123456789abcdef"

static int decode(ob_queue_entry *e, const char *const *fv, size_t n) {
  size_t lens[32];
  for (size_t i = 0; i < n; i++)
    lens[i] = fv[i] ? strlen(fv[i]) : 0;
  return ob_queue_entry_decode(fv, lens, n, e);
}

TEST(a_good_entry_gives_its_fields) {
  ob_queue_entry e;
  const char *fv[] = {"job", "12.3", "plan", H, "name", "pl\xC3\xA4n.json", "inputs", "[{\"n\":1},2]",
                      "extra", "ignored", "batch", "9223372036854775807"};
  CHECK_INT(decode(&e, fv, 12), OB_OK);
  CHECK_STR(e.batch, "9223372036854775807");
  CHECK_STR(e.id, "12.3");
  CHECK_STR(e.plan, H);
  CHECK_STR(e.name, "pl\xC3\xA4n.json");
  CHECK(e.inputs && ob_typeof(e.inputs) == OB_ARRAY && ob_array_len(e.inputs) == 2);
  CHECK(e.error == NULL);
  ob_queue_entry_free(&e);
  const char *bare[] = {"plan", H, "job", "7"};
  CHECK_INT(decode(&e, bare, 4), OB_OK);
  CHECK_STR(e.name, "plan.json");
  CHECK(e.inputs == NULL);
  CHECK_STR(e.batch, ""); /* none */
  ob_queue_entry_free(&e);
}

static void bad(const char *const *fv, size_t n, const char *id, const char *why) {
  ob_queue_entry e;
  CHECK_INT(decode(&e, fv, n), OB_EINVAL);
  if (id)
    CHECK_STR(e.id, id);
  else
    CHECK(e.id == NULL);
  CHECK(e.inputs == NULL);
  CHECK(e.error && strstr(e.error, why));
  if (e.error && !strstr(e.error, why))
    fprintf(stderr, "    got: %s\n", e.error);
  ob_queue_entry_free(&e);
}

TEST(each_malformed_field_is_named) {
  bad((const char *[]){"job", "1", "plan", H, "inputs", "{\"n\":1}"}, 6, "1",
      "\"inputs\": a JSON object, where an array");
  bad((const char *[]){"job", "1", "plan", H, "inputs", "[1,"}, 6, "1", "\"inputs\": not JSON");
  bad((const char *[]){"job", "1", "plan", H, "inputs", "[123456789012345678901234567890]"}, 6, "1",
      "too big integer");
  bad((const char *[]){"job", "1", "plan", H, "inputs", "[1e999999]"}, 6, "1", "overflow");
  bad((const char *[]){"job", "1"}, 2, "1", "no \"plan\" field");
  bad((const char *[]){"job", "1", "plan", H, "batch", "../b"}, 6, "1", "\"batch\": not a batch id");
  bad((const char *[]){"job", "1", "plan", H, "batch", "0"}, 6, "1", "\"batch\": not a batch id");
  bad((const char *[]){"job", "1", "plan", H, "batch", ""}, 6, "1", "\"batch\": not a batch id");
  bad((const char *[]){"job", "1", "plan", H, "batch", "12345678901234567890"}, 6, "1",
      "\"batch\": not a batch id");
  bad((const char *[]){"job", "1", "plan", H, "batch", "1", "batch", "2"}, 8, "1", "more than once");
  bad((const char *[]){"job", "1", "plan", "0123456789ABCDEF"}, 4, "1", "not a plan's hash");
  bad((const char *[]){"job", "1", "plan", "../../x"}, 4, "1", "not a plan's hash");
  bad((const char *[]){"plan", H}, 2, NULL, "no \"job\" field");
  bad((const char *[]){"job", "../../etc/passwd", "plan", H}, 4, NULL, "not a job id");
  bad((const char *[]){"job", "", "plan", H}, 4, NULL, "not a job id");
  bad((const char *[]){"job", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "plan", H}, 4,
      NULL, "not a job id"); /* 65 */
  bad((const char *[]){"job", "1", "plan", H, "name", "\x1b[31mred"}, 6, "1", "\"name\"");
  bad((const char *[]){"job", "1", "plan", H, "name", "\xff\xfe"}, 6, "1", "\"name\"");
  bad((const char *[]){"job", "1", "plan", H, "name", ""}, 6, "1", "\"name\"");
  bad((const char *[]){"job", "1", "plan", H, "plan", H}, 6, "1", "\"plan\" more than once");
  bad((const char *[]){"job", "1", "plan", H, "name"}, 5, "1", "not in pairs");
  bad((const char *[]){"job", "1", "plan", NULL}, 4, "1", "not a string");
}

TEST(values_with_nul_bytes_are_refused_and_messages_are_printable) {
  ob_queue_entry e;
  const char *fv[] = {"job", "1\0x", "plan", H};
  size_t lens[] = {3, 3, 4, 16};
  CHECK_INT(ob_queue_entry_decode(fv, lens, 4, &e), OB_EINVAL);
  CHECK(e.id == NULL);
  ob_queue_entry_free(&e);
  const char *fv2[] = {"job", "1", "plan", H, "inputs", "[\x1b]"};
  CHECK_INT(decode(&e, fv2, 6), OB_EINVAL);
  for (const char *p = e.error; p && *p; p++)
    CHECK(*p >= 0x20 && *p < 0x7f);
  ob_queue_entry_free(&e);
}

int main(void) {
  RUN(a_good_entry_gives_its_fields);
  RUN(each_malformed_field_is_named);
  RUN(values_with_nul_bytes_are_refused_and_messages_are_printable);
  return TEST_END();
}
