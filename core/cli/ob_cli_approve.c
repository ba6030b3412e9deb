/* ob_cli_approve.c -- --approve: the CLI's approval hook (ob_run_options.approve), which
 * asks on the terminal before each call starts: "run #3 sendEmail {...}? [y/n/e]"; y runs
 * it, n refuses it, e edits the whole call in $EDITOR (run through the shell) and runs
 * that. It opens /dev/tty, so it works with stdin and stdout redirected. A Lua approver
 * (obelus.set_approver) comes first when there is one (ob_approve.c). Costs: a terminal
 * round trip per call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ob_cli.h"
#include "engine/ob_run.h"

/* --approve on a terminal: "run #3 sendEmail {...}? [y/n/e]" */
int ob_cli_approve_tty(void *ud, const ob_approve_ask *q, ob_value **replacement, ob_buf *why) {
  (void)ud;
  const ob_value *params = q->params;
  FILE *tty = fopen("/dev/tty", "r+");
  if (!tty) {
    ob_buf_addf(why, "--approve needs a terminal to ask on");
    return OB_APPROVE_BROKEN;
  }
  setvbuf(tty, NULL, _IONBF, 0); /* read one answer, leave the next ones on the terminal */
  ob_value *shown = ob_object(), *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, params);
  while (ob_object_iter_next(&it, &k, &v))
    if (ob_string_ptr(k)[0] != '_')
      shown = ob_object_setv(shown, k, ob_ref(v));
  char *text = ob_json_print(shown, OB_JSON_COMPACT, NULL);
  ob_unref(shown);
  int verdict = OB_APPROVE_BROKEN;
  for (;;) {
    fprintf(tty, "run %s %s %s? [y/n/e] ", q->id, q->tool, text);
    fflush(tty);
    char line[64];
    if (!fgets(line, sizeof line, tty)) {
      verdict = OB_APPROVE_REFUSE; /* the terminal closed: nobody said yes */
      break;
    }
    if (line[0] == 'y' || line[0] == 'Y') {
      verdict = OB_APPROVE_ALLOW;
      break;
    }
    if (line[0] == 'n' || line[0] == 'N') {
      verdict = OB_APPROVE_REFUSE;
      break;
    }
    if (line[0] != 'e' && line[0] != 'E')
      continue;
    /* edit the whole call (meta-properties too) in $EDITOR */
    char path[] = "/tmp/obelus-call-XXXXXX.json";
    int fd = mkstemps(path, 5);
    if (fd < 0)
      continue;
    char *doc = ob_json_print(params, OB_JSON_PRETTY, NULL);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "%s\n", doc);
    fclose(f);
    free(doc);
    ob_buf cmd;
    ob_buf_init(&cmd);
    const char *editor = getenv("EDITOR");
    ob_buf_addf(&cmd, "%s '%s' </dev/tty >/dev/tty", editor && *editor ? editor : "vi", path);
    int st = system(cmd.data);
    ob_buf_free(&cmd);
    ob_error err;
    ob_value *edited = st == 0 ? ob_json_parse_file(path, &err) : NULL;
    unlink(path);
    if (!edited) {
      fprintf(tty, "obelus: %s; try again\n", st == 0 ? err.msg : "the editor failed");
      continue;
    }
    *replacement = edited;
    verdict = OB_APPROVE_ALLOW;
    break;
  }
  free(text);
  fclose(tty);
  return verdict;
}
