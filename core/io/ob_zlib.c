/* ob_zlib.c -- zlib's functions, loaded once, when first needed (ob_zlib.h).
 *
 * Nothing but `obelus ui` (its gzip'd event streams) and a fleet worker or reader (its
 * journal records) compresses, so a process that does neither never maps libz: it is
 * opened by name with dlopen (ob_dl.c), as libcurl and libwebsockets are, under a
 * pthread_once so that threads may race to be first.
 *
 * Costs: the first call, one dlopen and ten dlsym; then a load of a pointer. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "io/ob_dl.h"
#include "io/ob_zlib.h"

static ob_zlib zl;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

static void load(void) {
  static const char *const names[] = {
      "deflateInit2_", "deflateSetDictionary", "deflate", "deflateEnd", "inflateInit2_",
      "inflateSetDictionary", "inflate", "inflateEnd", "crc32", "crc32_combine"};
  void **const slots[] = {
      (void **)&zl.deflate_init2, (void **)&zl.deflate_set_dictionary, (void **)&zl.deflate,
      (void **)&zl.deflate_end, (void **)&zl.inflate_init2, (void **)&zl.inflate_set_dictionary,
      (void **)&zl.inflate, (void **)&zl.inflate_end, (void **)&zl.crc32,
      (void **)&zl.crc32_combine};
  _Static_assert(sizeof names / sizeof *names == sizeof slots / sizeof *slots,
                 "a name for each slot");
  _Static_assert(sizeof slots / sizeof *slots * sizeof(void *) == sizeof zl,
                 "a slot for each function of the table");
  if (ob_dl_table("libz.so.1", names, slots, sizeof names / sizeof *names, load_error,
                  sizeof load_error) != 0)
    snprintf(load_error + strlen(load_error), sizeof load_error - strlen(load_error),
             " (install zlib1g)");
}

const ob_zlib *ob_zlib_get(const char **why) {
  pthread_once(&load_once, load);
  if (load_error[0]) {
    if (why)
      *why = load_error;
    return NULL;
  }
  return &zl;
}
