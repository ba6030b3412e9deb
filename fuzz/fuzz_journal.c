/* fuzz_journal.c -- libFuzzer target: any bytes as a journal file. The journal reader
 * (every line, records and messages), loading its messages into a log (what `log`,
 * `resolve` and `report` do), and resume's reading of it (obelus_resume: the plan it
 * holds checked against the tools, the log rebuilt from its settled calls), then the
 * resumed run taken to its end when it would not wait on a clock. Nothing may crash,
 * leak or hang; a bad journal is an error. */
#include "fuzz_common.h"
#include "log/ob_journal.h"

static int each_line(void *ud, const ob_journal_line *l, ob_error *err) {
  (void)err;
  size_t *n = ud;
  *n += l->is_record;
  return OB_OK;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  obelus_engine *e = fuzz_engine();
  static char path[64];
  if (!path[0]) {
    snprintf(path, sizeof path, "/tmp/obelus-fuzz-journal-%d.jsonl", (int)getpid());
    setvbuf(stderr, NULL, _IOFBF, 1 << 16); /* resume's notes: not worth a write each */
  }
  FILE *f = fopen(path, "wb");
  if (!f)
    abort();
  fwrite(data, 1, size, f);
  fclose(f);

  ob_error err;
  ob_journal_info info;
  size_t records = 0;
  ob_journal_read(path, each_line, &records, &info, &err);
  ob_log *log = ob_log_new();
  ob_journal_load(log, path, &info, &err);
  ob_log_free(log);

  obelus_run_options opt = {.force = 1, .max_calls = 200, .max_depth = 4};
  obelus_run *run = NULL;
  if (obelus_resume(e, &run, path, &opt) == OBELUS_OK) {
    if (!fuzz_may_wait(data, size) && obelus_run_start(run) == OBELUS_OK) {
      obelus_run_wait(run);
      free(obelus_run_output(run));
    }
    obelus_run_free(run);
  }
  unlink(path);
  return 0;
}
