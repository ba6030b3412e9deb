/* ob_cli.c -- helpers the command-line commands share: usage errors, counts. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge/ob_watch.h"
#include "cli/ob_cli.h"
#include "cli/ob_progress.h"
#include "log/ob_journal.h"

int ob_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "obelus %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(try `obelus %s --help`)\n", cmd);
  return OB_EXIT_USAGE;
}

int ob_cli_parse_count(const char *s, size_t *out) {
  if (!*s || strspn(s, "0123456789") != strlen(s))
    return 0;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v >= (unsigned long long)SIZE_MAX)
    return 0;
  *out = (size_t)v;
  return 1;
}

int ob_cli_parse_duration(const char *s, uint64_t *secs) {
  if (!strcmp(s, "forever")) {
    *secs = UINT64_MAX;
    return 1;
  }
  size_t digits = strspn(s, "0123456789");
  if (!digits || digits > 12)
    return 0;
  uint64_t n = strtoull(s, NULL, 10), unit = 1;
  const char *u = s + digits;
  if (!strcmp(u, "d"))
    unit = 86400;
  else if (!strcmp(u, "h"))
    unit = 3600;
  else if (!strcmp(u, "m"))
    unit = 60;
  else if (*u && strcmp(u, "s"))
    return 0;
  *secs = n * unit;
  return 1;
}

void ob_cli_say_stuck(void *ud, const char *msg) {
  const char *who = ud ? ud : "obelus";
  (void)!write(2, who, strlen(who));
  (void)!write(2, ": ", 2);
  (void)!write(2, msg, strlen(msg));
  (void)!write(2, "\n", 1);
}

void ob_fputs_escaped(FILE *f, const char *text, size_t n, int flags) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add_escaped(&b, text, n, flags);
  if (b.len)
    fwrite(b.data, 1, b.len, f);
  ob_buf_free(&b);
}

void ob_eprintf(const char *fmt, ...) {
  ob_progress_clear(); /* the progress line, if one is shown, gives way */
  char small[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  char *text = small;
  if ((size_t)n >= sizeof small) {
    if (!(text = malloc((size_t)n + 1)))
      abort();
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  ob_fputs_escaped(stderr, text, (size_t)n, OB_ESC_LINES);
  if (text != small)
    free(text);
}

void ob_cli_say_note(const char *kind, const char *msg) {
  ob_progress_clear(); /* the progress line, if one is shown, gives way */
  if (kind && !strcmp(kind, "warning")) { /* a tool's warn(), as Lua's own lua.c says it */
    fputs("Lua warning: ", stderr);
    fputs(msg, stderr);
    fputc('\n', stderr);
    fflush(stderr);
    return;
  }
  const char *who = kind && !strcmp(kind, "rerun") ? "obelus resume: " : "obelus: ";
  ob_buf b = {0};
  ob_buf_addf(&b, "%s%s\n", who, msg ? msg : "");
  ob_fputs_escaped(stderr, b.data, b.len, OB_ESC_LINES);
  ob_buf_free(&b);
}

void ob_cli_note(void *ud, const char *kind, const char *call_id, const char *msg) {
  (void)ud, (void)call_id;
  ob_cli_say_note(kind, msg);
}

void ob_cli_report_torn(const char *who, const char *path, const ob_journal_info *info) {
  ob_progress_clear(); /* the progress line, if one is shown, gives way */
  ob_buf b;
  ob_buf_init(&b);
  ob_journal_torn_text(&b, who, path, info);
  if (b.len)
    fputs(b.data, stderr);
  ob_buf_free(&b);
}

void ob_cli_signals(uv_loop_t *loop, uv_signal_t sig[2], uv_signal_cb cb, void *data, int weak,
                    int hard, const char *who) {
  static const int nums[2] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; i++) {
    uv_signal_init(loop, &sig[i]);
    sig[i].data = data;
    uv_signal_start(&sig[i], cb, nums[i]);
    if (weak)
      uv_unref((uv_handle_t *)&sig[i]);
  }
  ob_watch_catch_signals(hard);
  ob_watch_exit_stuck(ob_cli_say_stuck, (void *)who);
}

void ob_cli_signals_close(uv_signal_t sig[2]) {
  uv_close((uv_handle_t *)&sig[0], NULL);
  uv_close((uv_handle_t *)&sig[1], NULL);
}
