/* fuzz_job.c -- libFuzzer target: any bytes as a job's stream entry (strings split
 * at each 0xFF byte: field, value, field, value...) through ob_queue_entry_decode, as
 * a worker decodes what anyone may XADD. Nothing may crash or leak; a decoded job must
 * be one a worker can use (a valid id, a 16-digit hash, a name, inputs an array),
 * and a refused one must say why. */
#include <stdlib.h>
#include <string.h>

#include "fleet/ob_queue_job.h"

#define MAX_STRINGS 64

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  const char *fv[MAX_STRINGS];
  size_t lens[MAX_STRINGS], n = 0;
  const char *p = (const char *)data, *end = p + size;
  while (n < MAX_STRINGS) {
    const char *cut = memchr(p, 0xff, (size_t)(end - p));
    const char *stop = cut ? cut : end;
    fv[n] = p;
    lens[n++] = (size_t)(stop - p);
    if (!cut)
      break;
    p = cut + 1;
  }
  /* a string that is not one (a nil in a reply) when the input says so */
  if (n >= 2 && lens[n - 1] == 1 && fv[n - 1][0] == '\x01')
    fv[n - 1] = NULL;
  ob_queue_entry e;
  int rc = ob_queue_entry_decode(fv, lens, n, &e);
  if (rc == OB_OK) {
    if (e.error || !e.id || !ob_queue_id_ok(e.id, strlen(e.id)) || strlen(e.plan) != 16 || !e.name)
      abort();
    if (e.inputs) {
      if (ob_typeof(e.inputs) != OB_ARRAY)
        abort();
      for (size_t i = 0; i < ob_array_len(e.inputs); i++) {
        char *text = ob_json_print(ob_array_get(e.inputs, i), 0, NULL);
        free(text);
      }
    }
  } else {
    if (!e.error || !*e.error || e.inputs || !e.name)
      abort();
    if (e.id && !ob_queue_id_ok(e.id, strlen(e.id)))
      abort();
  }
  ob_queue_entry_free(&e);
  return 0;
}
