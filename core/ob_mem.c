/* ob_mem.c -- the thread's current memory account (see ob_mem.h). */
#include "ob_mem.h"

_Thread_local ob_mem *ob_mem_cur OB_MEM_TLS;
