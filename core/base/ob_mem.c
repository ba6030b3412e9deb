/* ob_mem.c -- the thread's current memory account (see ob_mem.h). */
#include <string.h>
#include <unistd.h>

#include "base/ob_mem.h"

_Thread_local ob_mem *ob_mem_cur OB_MEM_TLS;

_Noreturn void ob_die(const char *msg) {
  (void)!write(2, msg, strlen(msg)); /* write(2): no stdio lock, whatever state it is in */
  (void)!write(2, "\n", 1);
  abort();
}
