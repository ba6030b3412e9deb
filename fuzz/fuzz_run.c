/* fuzz_run.c -- libFuzzer target: the scheduler. Any bytes as a plan (either form),
 * validated, then run to the end with small tools in C and Lua (echo, fail, a yield,
 * || branches, a result the journal cannot hold, a schema), writing a journal; then
 * its output. Nothing may crash, leak or hang. Plans that could wait on a clock
 * (_retry, _timeout) or read other files (_delegate) are only validated. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  obelus_engine *e = fuzz_engine();
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  FILE *journal = tmpfile();
  obelus_run_options opt = {.name = "fuzz.json", .journal = journal, .max_calls = 200,
                            .max_depth = 4, .max_output_kb = 256, .concurrency = size % 3};
  obelus_run *run = NULL;
  if (obelus_run_new(e, &run, text, &opt) == OBELUS_OK) {
    if (!fuzz_may_wait(data, size) && obelus_run_start(run) == OBELUS_OK) {
      obelus_run_wait(run);
      free(obelus_run_output(run));
      for (size_t i = 0; i < 4; i++)
        free(obelus_run_message(run, i));
    }
    obelus_run_free(run);
  }
  if (journal)
    fclose(journal);
  free(text);
  return 0;
}
