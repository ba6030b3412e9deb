/* ob_queue_memory.c -- what a finished job costs Redis (ob_queue_memory.h).
 *
 * One script looks at the last OB_QUEUE_MEMORY_SAMPLE entries of the done stream: for
 * each job whose hash is still kept, MEMORY USAGE of the hash (Redis's own estimate:
 * the hash and its key), and its share of the record that holds its journal: the
 * record's size, with a field's cost in the bucket (FIELD_COST), divided by the number of
 * journals it holds (its header says: ob_queue_journal.h). What it leaves out: the key's
 * expiry (some 40 bytes a job), the done stream's entry (some 20), the plan's text
 * (shared by its jobs). Each record is read once however many sampled jobs it holds.
 *
 * Costs: one EVAL; in Redis, up to OB_QUEUE_MEMORY_SAMPLE MEMORY USAGE and HMGET, and
 * one HGET a record (at most some 64 KB each). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "fleet/ob_queue.h"
#include "fleet/ob_queue_journal.h"
#include "fleet/ob_queue_memory.h"

/* KEYS: the done stream. ARGV: the job hashes' key without the id, the buckets' key
 * without the minute, OB_QUEUE_JOURNAL_BUCKET_MS, how many entries, a field's cost.
 * {jobs, the hashes' bytes, the journals' bytes (as text: it has a fraction)}. */
static const char MEMORY_SCRIPT[] =
    "local es = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', tonumber(ARGV[4]))\n"
    "local n, hashes, journals, seen, recs = 0, 0, 0, {}, {}\n"
    "for _, e in ipairs(es) do\n"
    "  local f, id = e[2], nil\n"
    "  for i = 1, #f - 1, 2 do if f[i] == 'job' then id = f[i + 1] end end\n"
    "  if id and not seen[id] then\n"
    "    seen[id] = true\n"
    "    local m = redis.pcall('MEMORY', 'USAGE', ARGV[1] .. id)\n"
    "    if type(m) == 'number' then\n"
    "      n, hashes = n + 1, hashes + m\n"
    "      local h = redis.pcall('HMGET', ARGV[1] .. id, 'finished', 'journal', 'worker')\n"
    "      if type(h) == 'table' and not h.err and h[2] and h[3] and tonumber(h[1]) then\n"
    "        local b = ARGV[2] .. string.format('%d', math.floor(tonumber(h[1]) / tonumber(ARGV[3])))\n"
    "                  .. ':' .. h[3]\n"
    "        local k = b .. ' ' .. h[2]\n"
    "        if recs[k] == nil then\n"
    "          local r = redis.pcall('HGET', b, h[2])\n"
    "          local c = type(r) == 'string' and tonumber(string.sub(r, 20, 27), 16)\n"
    "          recs[k] = (c and c > 0) and (#r + tonumber(ARGV[5])) / c or false\n"
    "        end\n"
    "        if recs[k] then journals = journals + recs[k] end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {n, hashes, tostring(journals)}\n";

/* What a field of a bucket costs besides its value: its entry in the hash's table and
 * its name. */
#define FIELD_COST "48"

void ob_queue_memory_args_make(ob_queue_memory_args *a, const char *q) {
  char count[32], bucket_ms[32];
  snprintf(count, sizeof count, "%d", OB_QUEUE_MEMORY_SAMPLE);
  snprintf(bucket_ms, sizeof bucket_ms, "%d", OB_QUEUE_JOURNAL_BUCKET_MS);
  a->owned[0] = ob_queue_key(q, "done", NULL);
  a->owned[1] = ob_queue_key(q, "job:", NULL); /* "ob:{Q}:job:" */
  a->owned[2] = ob_queue_key(q, "journals:", NULL);
  a->owned[3] = ob_xstrdup(bucket_ms);
  a->owned[4] = ob_xstrdup(count);
  const char *argv[] = {"EVAL",      MEMORY_SCRIPT, "1",         a->owned[0], a->owned[1],
                        a->owned[2], a->owned[3],   a->owned[4], FIELD_COST};
  memcpy(a->argv, argv, sizeof argv);
}

void ob_queue_memory_args_free(ob_queue_memory_args *a) {
  for (size_t i = 0; i < sizeof a->owned / sizeof *a->owned; i++)
    free(a->owned[i]);
}

long long ob_queue_memory_per_job(const ob_queue_memory *m) {
  return m->jobs > 0 ? (long long)((m->hash_bytes + m->journal_bytes) / (double)m->jobs + 0.5)
                     : -1;
}

long long ob_queue_memory_used(const char *info) {
  const char *u = info ? strstr(info, "used_memory:") : NULL;
  return u ? strtoll(u + 12, NULL, 10) : -1;
}

int ob_queue_memory_reply(const redisReply *rp, ob_queue_memory *m) {
  if (!rp || rp->type != REDIS_REPLY_ARRAY || rp->elements != 3 ||
      rp->element[0]->type != REDIS_REPLY_INTEGER || rp->element[1]->type != REDIS_REPLY_INTEGER ||
      rp->element[2]->type != REDIS_REPLY_STRING)
    return -1;
  m->jobs = rp->element[0]->integer;
  m->hash_bytes = (double)rp->element[1]->integer;
  m->journal_bytes = strtod(rp->element[2]->str, NULL);
  return 0;
}
