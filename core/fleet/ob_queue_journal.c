/* ob_queue_journal.c -- finished jobs' journals as compact records in Redis, and reading
 * a job's journal whatever its state (ob_queue_journal.h).
 *
 * Why records: a trivial job's journal is some 610 bytes, most of them what every
 * journal says ({"journal":"start","id":"#0","attempt":1,"t":...), the plan it repeats
 * (its first line, and each call again in the record of what the call wrote) and the
 * worker's tool files. Kept as text in a key of its own, it cost Redis 840 bytes a job
 * (the key, and the room APPEND leaves) and was never let go. Alone, deflated against a
 * dictionary of those words and the plan's text, it is some 160 bytes; deflated with the
 * journals stored beside it (a worker stores the results that end in one turn of its
 * loop together: up to 256), each but the first points back into the one before it, and
 * a trivial job's is some 40. The record is one field of the minute's bucket, its key
 * and expiry paid once a minute rather than once a job.
 *
 * The dictionary, version 1: the journal's fixed words, the least likely first (deflate
 * reaches the nearest bytes with the shortest codes), then the plan's text. Changing it
 * breaks every record made with it: a new dictionary is a new version, and the magic
 * says which one a record uses.
 *
 * Costs: packing, one deflate at level 9 of up to OB_QUEUE_JOURNAL_RECORD bytes (level 6
 * past it); reading a job's journal, one inflate of its record: at most about 64 KB
 * besides its own. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "fleet/ob_queue.h"
#include "fleet/ob_queue_journal.h"
#include "io/ob_zdict.h"

#define MAGIC_LEN 3

static const char DICT_V1[] =
    "{\"journal\":\"loop\",\"planner\":{\"journal\":\"step\",\"step\":"
    "{\"journal\":\"fork\",\"source\":\"changes\":\"from\":\"at\":"
    "{\"journal\":\"msg\",\"scope\":{\"journal\":\"cancelled\",\"reason\":"
    "\"kind\":\"approval\",\"approved\":true,\"phase\":\"structural\","
    "\"_outputMethod\":\"merge\",\"_outputMethod\":\"concat\",\"_outputMethod\":\"assign\","
    "\"_outputMethod\":\"push\",\"_branch\":\"_instances\":\"_delegate\":\"_fireAndForget\":true,"
    "{\"type\":\"data\",\"kind\":\"error\",\"data\":{\"call\":{\"_tool\":\"\",\"id\":\"#\","
    "\"error\":\"\",\"phase\":\"runtime\"}}\n"
    "{\"journal\":\"settled\",\"id\":\"#1\",\"state\":\"failed\",\"t\":1\n"
    "{\"journal\":\"end\",\"exit\":1}\n"
    "{\"journal\":\"run\",\"tools\":[{\"file\":\"/\",\"size\":,\"hash\":\"\"},"
    "{\"file\":\"/tools/\",\"size\":1,\"hash\":\"\"}]}\n"
    "{\"type\":\"data\",\"kind\":\"input\",\"data\":{\"\n"
    "{\"type\":\"plan\",\"file\":\".json\",\"plan\":[{\"_tool\":\"\",\"_outputPath\":\"†state.\"}]}\n"
    "{\"journal\":\"start\",\"id\":\"#0\",\"attempt\":1,\"t\":17\n"
    "{\"type\":\"data\",\"kind\":\"state\",\"data\":{\"\":{\"\"}},\"_path\":\"\","
    "\"_outputMethod\":\"set\",\"_call\":{\"_tool\":\"\",\"_outputPath\":\"†state.\"},"
    "\"_date\":\"20T:.Z\"}\n"
    "{\"journal\":\"settled\",\"id\":\"#0\",\"state\":\"done\",\"t\":17\n"
    "{\"journal\":\"end\",\"exit\":0}";

/* The dictionary for a plan: DICT_V1, then the plan's text (the window's last 32 KB
 * count: a long plan's end, and none of DICT_V1). */
static void dictionary(ob_buf *d, const char *plan, size_t plen) {
  ob_buf_add(d, DICT_V1, sizeof DICT_V1 - 1);
  if (plan)
    ob_buf_add(d, plan, plen);
}

#define HEAD_LEN (MAGIC_LEN + 16 + 8) /* the magic, the plan's hash, the count */

void ob_queue_journal_add(ob_buf *raw, const char *id, const char *text, size_t len) {
  ob_buf_addf(raw, "%s\n%zu\n", id, len);
  ob_buf_add(raw, text, len);
}

void ob_queue_journal_pack(const char *plan_hash, const char *plan, size_t plen, size_t count,
                           const char *raw, size_t len, ob_buf *out) {
  size_t was = out->len;
  ob_buf_add(out, OB_QUEUE_JOURNAL_MAGIC, MAGIC_LEN);
  char h[16 + 8 + 1];
  if (plan_hash && strlen(plan_hash) == 16)
    memcpy(h, plan_hash, 16);
  else
    memset(h, '-', 16), plan_hash = NULL;
  snprintf(h + 16, 9, "%08zx", count > 0xffffffff ? (size_t)0xffffffff : count);
  ob_buf_add(out, h, 24);
  ob_buf d;
  ob_buf_init(&d);
  dictionary(&d, plan_hash ? plan : NULL, plen);
  ob_error err;
  if (ob_zdict_deflate(d.data, d.len, raw, len, len > OB_QUEUE_JOURNAL_RECORD ? 6 : 9, out,
                       &err) != OB_OK) { /* no zlib: the journals as they are */
    out->len = was;
    ob_buf_add(out, "\0J0", MAGIC_LEN);
    ob_buf_add(out, h, 24);
    ob_buf_add(out, raw, len);
  }
  ob_buf_free(&d);
}

/* Job id's journal in the journals raw (len): OB_OK with *text, *tlen; OB_ENOENT; or
 * OB_EINVAL when raw is not a record's journals. */
static int find(const char *raw, size_t len, const char *id, const char **text, size_t *tlen) {
  size_t idlen = strlen(id), at = 0;
  while (at < len) {
    const char *nl = memchr(raw + at, '\n', len - at);
    if (!nl)
      return OB_EINVAL;
    size_t name = (size_t)(nl - (raw + at)), p = (size_t)(nl - raw) + 1, n = 0, digits = 0;
    while (p < len && raw[p] >= '0' && raw[p] <= '9' && digits < 12)
      n = n * 10 + (size_t)(raw[p++] - '0'), digits++;
    if (!digits || p >= len || raw[p] != '\n' || n > len - p - 1)
      return OB_EINVAL;
    p++;
    if (name == idlen && !memcmp(raw + at, id, idlen)) {
      *text = raw + p;
      *tlen = n;
      return OB_OK;
    }
    at = p + n;
  }
  return OB_ENOENT;
}

int ob_queue_journal_unpack(const char *plan, size_t plen, const char *rec, size_t len,
                            const char *id, ob_buf *out, ob_error *err) {
  int deflated = len >= HEAD_LEN && !memcmp(rec, OB_QUEUE_JOURNAL_MAGIC, MAGIC_LEN);
  if (!deflated && !(len >= HEAD_LEN && !memcmp(rec, "\0J0", MAGIC_LEN)))
    return ob_error_set(err, OB_EINVAL, 0, "its journal's record is not one (%s)",
                        len && !rec[0] ? "of a version not known here: written by a newer "
                                         "obelus?" : "no record's first bytes");
  int none = rec[MAGIC_LEN] == '-';
  if (deflated && !none && !plan)
    return ob_error_set(err, OB_ENOENT, 0, "its journal's record cannot be read: its plan's "
                                           "text (the record's dictionary) is gone from Redis");
  ob_buf raw, d;
  ob_buf_init(&raw);
  ob_buf_init(&d);
  int rc = OB_OK;
  const char *body = rec + HEAD_LEN;
  size_t blen = len - HEAD_LEN;
  if (deflated) {
    dictionary(&d, none ? NULL : plan, plen);
    ob_error zerr;
    if (ob_zdict_inflate(d.data, d.len, body, blen, OB_QUEUE_JOURNAL_MAX, &raw, &zerr) != OB_OK)
      rc = ob_error_set(err, OB_EINVAL, 0, "its journal's record cannot be read: %s", zerr.msg);
    body = raw.data ? raw.data : "";
    blen = raw.len;
  }
  const char *text = NULL;
  size_t tlen = 0;
  if (rc == OB_OK) {
    rc = find(body, blen, id, &text, &tlen);
    if (rc == OB_OK)
      ob_buf_add(out, text, tlen);
    else if (rc == OB_ENOENT)
      ob_error_set(err, rc, 0, "its journal's record does not hold it");
    else
      ob_error_set(err, rc, 0, "its journal's record is broken");
  }
  ob_buf_free(&raw);
  ob_buf_free(&d);
  return rc;
}

char *ob_queue_journal_bucket(const char *q, uint64_t finished_ms, const char *worker) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%" PRIu64 ":%s", finished_ms / OB_QUEUE_JOURNAL_BUCKET_MS, worker);
  char *k = ob_queue_key(q, "journals", b.data);
  ob_buf_free(&b);
  return k;
}

/* KEYS: the job's hash, its journal key. ARGV: the buckets' key without the minute, the
 * plans' key without the hash, the job's id, OB_QUEUE_JOURNAL_BUCKET_MS.
 * {"text", the text} (running, or a journal kept as text); {"record", record, its plan's
 * text or false}; {"gone", state} (it ran and finished; its record no longer kept, or
 * never: --keep-journals 0; or its plan's text, which reads it, has expired: a bucket
 * may outlive its first records' keep); {"none", state or false}. The keys the job's fields name are in its queue's slot ({Q}), as the
 * declared ones. */
static const char READ_SCRIPT[] =
    "local t = redis.pcall('GET', KEYS[2])\n"
    "if type(t) == 'string' then return {'text', t} end\n"
    "local h = redis.pcall('HMGET', KEYS[1], 'finished', 'journal', 'state', 'worker')\n"
    "if type(h) ~= 'table' or h.err then return {'none', false} end\n"
    "local f = tonumber(h[1])\n"
    "if h[2] == '-' then return {'gone', h[3] or false} end\n"
    "if not f or not h[2] or not h[4] then return {'none', h[3] or false} end\n"
    "local b = ARGV[1] .. string.format('%d', math.floor(f / tonumber(ARGV[4]))) .. ':' .. h[4]\n"
    "local rec = redis.pcall('HGET', b, h[2])\n"
    "if type(rec) ~= 'string' then return {'gone', h[3] or false} end\n"
    "local plan, ph = false, string.sub(rec, 4, 19)\n"
    "if string.sub(rec, 1, 3) == '\\0J1' and string.match(ph, '^%x+$') then\n"
    "  plan = redis.pcall('GET', ARGV[2] .. ph)\n"
    "  if type(plan) ~= 'string' then return {'gone', h[3] or false} end\n"
    "end\n"
    "return {'record', rec, plan}\n";

void ob_queue_journal_args_make(ob_queue_journal_args *a, const char *q, const char *job) {
  char bucket_ms[32];
  snprintf(bucket_ms, sizeof bucket_ms, "%d", OB_QUEUE_JOURNAL_BUCKET_MS);
  a->owned[0] = ob_queue_key(q, "job", job);
  a->owned[1] = ob_queue_key(q, "journal", job);
  a->owned[2] = ob_queue_key(q, "journals:", NULL); /* "ob:{Q}:journals:" */
  a->owned[3] = ob_queue_key(q, "plan:", NULL);
  a->owned[4] = ob_xstrdup(bucket_ms);
  const char *argv[9] = {"EVAL", READ_SCRIPT, "2", a->owned[0], a->owned[1], a->owned[2],
                         a->owned[3], job, a->owned[4]};
  memcpy(a->argv, argv, sizeof argv);
}

void ob_queue_journal_args_free(ob_queue_journal_args *a) {
  for (size_t i = 0; i < sizeof a->owned / sizeof *a->owned; i++)
    free(a->owned[i]);
}

static int is_str(const redisReply *r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

int ob_queue_journal_reply(const redisReply *rp, const char *id, ob_buf *out, char *state,
                           size_t statelen, ob_error *err) {
  if (state && statelen)
    state[0] = 0;
  if (!rp || rp->type != REDIS_REPLY_ARRAY || rp->elements < 2 || !is_str(rp->element[0])) {
    ob_error_set(err, OB_EINVAL, 0, "%s", rp && rp->type == REDIS_REPLY_ERROR
                                              ? rp->str : "an unexpected reply to reading it");
    return OB_QJ_BAD;
  }
  const char *kind = rp->element[0]->str;
  const redisReply *v = rp->element[1];
  if (!strcmp(kind, "text") && is_str(v)) {
    ob_buf_add(out, v->str, v->len);
    return OB_QJ_TEXT;
  }
  if (!strcmp(kind, "record") && is_str(v)) {
    const redisReply *p = rp->elements > 2 ? rp->element[2] : NULL;
    if (ob_queue_journal_unpack(is_str(p) ? p->str : NULL, is_str(p) ? p->len : 0, v->str,
                                v->len, id, out, err) != OB_OK)
      return OB_QJ_BAD;
    return OB_QJ_TEXT;
  }
  if (state && statelen && is_str(v))
    snprintf(state, statelen, "%s", v->str);
  return !strcmp(kind, "gone") ? OB_QJ_GONE : OB_QJ_NONE;
}
