/* ob_dl.c -- a shared library's functions, loaded into a table with dlopen and dlsym.
 * The callers (ob_curl.c, ob_lws.c) keep their tables and check the functions' types
 * against the libraries' headers; this is the loading they share. */
#include <dlfcn.h>
#include <stdio.h>

#include "io/ob_dl.h"

int ob_dl_table(const char *soname, const char *const *names, void **const *slots, size_t n,
                char *why, size_t whylen) {
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(why, whylen, "cannot load %s: %s", soname, e ? e : "?");
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    if (!(*slots[i] = dlsym(lib, names[i]))) {
      snprintf(why, whylen, "%s has no %s", soname, names[i]);
      return -1;
    }
  return 0;
}
