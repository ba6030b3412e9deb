/* test_queue_journal.c -- finished jobs' journals as compact records (ob_queue_journal.c,
 * ob_zdict.c): each journal of a record read back byte for byte; journals stored together
 * far smaller than alone; a record that lies (cut short, bytes flipped, another plan's
 * dictionary, a bomb, a count or length that does not hold) refused with a reason, never a
 * crash or a wrong journal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/ob_queue_journal.h"
#include "io/ob_zdict.h"
#include "test.h"

static const char PLAN[] = "[{\"_tool\":\"double\",\"n\":\"\xe2\x80\xa0input.n\","
                           "\"_outputPath\":\"\xe2\x80\xa0state.out\"}]";
static const char HASH[] = "cd86e4e1d83d01ff";

/* A trivial job's journal, as a worker writes it, for input n. */
static void journal(ob_buf *b, int n) {
  b->len = 0;
  ob_buf_addf(b, "{\"type\":\"plan\",\"file\":\"plan.json\",\"plan\":%s}\n", PLAN);
  ob_buf_addf(b, "{\"type\":\"data\",\"kind\":\"input\",\"data\":{\"n\":%d}}\n", n);
  ob_buf_addf(b, "{\"journal\":\"run\",\"tools\":[{\"file\":\"/srv/tools/double.lua\",\"size\":174,"
                 "\"hash\":\"c405b428fb719d2b\"}]}\n");
  ob_buf_addf(b, "{\"journal\":\"start\",\"id\":\"#0\",\"attempt\":1,\"t\":17959153727%05d}\n", n);
  ob_buf_addf(b, "{\"type\":\"data\",\"kind\":\"state\",\"data\":{\"out\":{\"v\":%d}},\"_path\":\"out\","
                 "\"_outputMethod\":\"set\",\"_call\":{\"_tool\":\"double\",\"n\":\"\xe2\x80\xa0input.n\","
                 "\"_outputPath\":\"\xe2\x80\xa0state.out\"},\"_date\":\"2026-11-29T01:22:52.769Z\"}\n",
              2 * n);
  ob_buf_addf(b, "{\"journal\":\"settled\",\"id\":\"#0\",\"state\":\"done\",\"t\":17959153728%05d}\n", n);
  ob_buf_addf(b, "{\"journal\":\"end\",\"exit\":0}\n");
}

/* A record of count journals, jobs first..first+count-1 (their ids the numbers). */
static void record(ob_buf *rec, int first, int count) {
  ob_buf raw, j;
  ob_buf_init(&raw);
  ob_buf_init(&j);
  for (int i = first; i < first + count; i++) {
    char id[32];
    snprintf(id, sizeof id, "%d", i);
    journal(&j, i);
    ob_queue_journal_add(&raw, id, j.data, j.len);
  }
  rec->len = 0;
  ob_queue_journal_pack(HASH, PLAN, strlen(PLAN), (size_t)count, raw.data, raw.len, rec);
  ob_buf_free(&raw);
  ob_buf_free(&j);
}

static int unpack(const ob_buf *rec, const char *plan, const char *id, ob_buf *out, ob_error *err) {
  out->len = 0;
  return ob_queue_journal_unpack(plan, plan ? strlen(plan) : 0, rec->data, rec->len, id, out, err);
}

TEST(every_journal_of_a_record_reads_back_whole) {
  ob_buf rec, out, want;
  ob_buf_init(&rec);
  ob_buf_init(&out);
  ob_buf_init(&want);
  ob_error err;
  record(&rec, 1000, 256);
  CHECK(!memcmp(rec.data, OB_QUEUE_JOURNAL_MAGIC, 3));
  CHECK(!memcmp(rec.data + 3, HASH, 16));
  CHECK(!memcmp(rec.data + 19, "00000100", 8)); /* 256 journals */
  for (int i = 1000; i < 1256; i += 17) {
    char id[32];
    snprintf(id, sizeof id, "%d", i);
    CHECK_INT(unpack(&rec, PLAN, id, &out, &err), OB_OK);
    journal(&want, i);
    CHECK(out.len == want.len && !memcmp(out.data, want.data, want.len));
  }
  CHECK_INT(unpack(&rec, PLAN, "999", &out, &err), OB_ENOENT);
  CHECK(strstr(err.msg, "does not hold it") != NULL);
  CHECK_INT(unpack(&rec, PLAN, "100", &out, &err), OB_ENOENT); /* a prefix of an id is not it */
  ob_buf_free(&rec);
  ob_buf_free(&out);
  ob_buf_free(&want);
}

TEST(journals_stored_together_are_far_smaller_than_alone) {
  ob_buf one, many, j;
  ob_buf_init(&one);
  ob_buf_init(&many);
  ob_buf_init(&j);
  journal(&j, 7);
  record(&one, 7, 1);
  record(&many, 1, 256);
  /* alone, against the dictionary: under a third of the text; together, under a tenth */
  CHECK(one.len * 3 < j.len);
  CHECK(many.len * 10 < j.len * 256);
  ob_buf_free(&one);
  ob_buf_free(&many);
  ob_buf_free(&j);
}

TEST(a_record_that_lies_is_refused_with_a_reason) {
  ob_buf rec, out, bad;
  ob_buf_init(&rec);
  ob_buf_init(&out);
  ob_buf_init(&bad);
  ob_error err;
  record(&rec, 1, 40);
  /* its plan gone: said */
  CHECK_INT(unpack(&rec, NULL, "3", &out, &err), OB_ENOENT);
  CHECK(strstr(err.msg, "plan's text") != NULL);
  /* another plan's text as the dictionary: a stream of another dictionary */
  CHECK(unpack(&rec, "[{\"_tool\":\"other\"}]", "3", &out, &err) != OB_OK);
  CHECK_INT((int)out.len, 0);
  /* every cut short */
  for (size_t cut = 0; cut < rec.len; cut += 7) {
    ob_buf_add(&bad, rec.data, cut);
    CHECK(unpack(&bad, PLAN, "3", &out, &err) != OB_OK);
    bad.len = 0;
  }
  /* every byte of the deflated part flipped in turn: refused, or (deflate cannot always
     tell) read as some other text, never a crash */
  for (size_t at = 27; at < rec.len; at++) {
    ob_buf_add(&bad, rec.data, rec.len);
    bad.data[at] ^= 0x5a;
    int rc = unpack(&bad, PLAN, "3", &out, &err);
    CHECK(rc == OB_OK || rc == OB_EINVAL || rc == OB_ENOENT);
    bad.len = 0;
  }
  /* bytes after the stream's end */
  ob_buf_add(&bad, rec.data, rec.len);
  ob_buf_add(&bad, "xyz", 3);
  CHECK_INT(unpack(&bad, PLAN, "3", &out, &err), OB_EINVAL);
  bad.len = 0;
  /* not a record at all, a newer version, nothing */
  ob_buf_addf(&bad, "{\"journal\":\"end\"}");
  CHECK_INT(unpack(&bad, PLAN, "3", &out, &err), OB_EINVAL);
  bad.len = 0;
  ob_buf_add(&bad, "\0J9cd86e4e1d83d01ff00000001abc", 30);
  CHECK_INT(unpack(&bad, PLAN, "3", &out, &err), OB_EINVAL);
  CHECK(strstr(err.msg, "newer") != NULL);
  bad.len = 0;
  CHECK_INT(unpack(&bad, PLAN, "3", &out, &err), OB_EINVAL);
  ob_buf_free(&rec);
  ob_buf_free(&out);
  ob_buf_free(&bad);
}

TEST(the_journals_inside_must_hold_together) {
  ob_buf rec, out, raw;
  ob_buf_init(&rec);
  ob_buf_init(&out);
  ob_buf_init(&raw);
  ob_error err;
  /* lengths that run past the end, or are not numbers: broken, not read past */
  const char *broken[] = {"1\n999\nabc", "1\nx\nabc", "1\n3", "1", "1\n3\nabc2\n1\n"};
  for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
    rec.len = 0;
    ob_queue_journal_pack(NULL, NULL, 0, 1, broken[i], strlen(broken[i]), &rec);
    int rc = unpack(&rec, NULL, "2", &out, &err);
    CHECK(rc == OB_EINVAL);
  }
  /* the first is found before the breakage */
  rec.len = 0;
  ob_queue_journal_pack(NULL, NULL, 0, 2, "1\n3\nabc2\n", 9, &rec);
  CHECK_INT(unpack(&rec, NULL, "1", &out, &err), OB_OK);
  CHECK(out.len == 3 && !memcmp(out.data, "abc", 3));
  ob_buf_free(&rec);
  ob_buf_free(&out);
  ob_buf_free(&raw);
}

TEST(a_bomb_is_refused_past_the_bound) {
  /* 64 MB of one byte deflates to some 64 KB; inflating it with a bound of 1 MB stops there */
  size_t n = (size_t)64 << 20;
  char *zeros = calloc(n, 1);
  ob_buf z, out;
  ob_buf_init(&z);
  ob_buf_init(&out);
  ob_error err;
  CHECK_INT(ob_zdict_deflate("dict", 4, zeros, n, 9, &z, &err), OB_OK);
  CHECK(z.len < n / 500);
  CHECK_INT(ob_zdict_inflate("dict", 4, z.data, z.len, (size_t)1 << 20, &out, &err), OB_ENOMEM);
  CHECK_INT((int)out.len, 0);
  CHECK_INT(ob_zdict_inflate("dict", 4, z.data, z.len, n, &out, &err), OB_OK);
  CHECK(out.len == n && !memcmp(out.data, zeros, n));
  free(zeros);
  ob_buf_free(&z);
  ob_buf_free(&out);
}

int main(void) {
  RUN(every_journal_of_a_record_reads_back_whole);
  RUN(journals_stored_together_are_far_smaller_than_alone);
  RUN(a_record_that_lies_is_refused_with_a_reason);
  RUN(the_journals_inside_must_hold_together);
  RUN(a_bomb_is_refused_past_the_bound);
  return TEST_END();
}
