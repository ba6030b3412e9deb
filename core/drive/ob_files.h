/* ob_files.h -- the files a run reads, to refuse a journal or events file that is
 * one of them (issue 26): one check for every host (the CLI's ob_runner, the Lua
 * module, the C API). ob_files.c says how and what it costs. */
#ifndef OB_FILES_H
#define OB_FILES_H

#include "base/ob_value.h"
#include "engine/ob_engine.h"
#include "plan/ob_plan.h"

typedef struct ob_files ob_files;

ob_files *ob_files_new(void);
void ob_files_free(ob_files *fs);
/* path (NULL, "" and "-" are skipped), said as `what` ("the plan", ...). */
void ob_files_add(ob_files *fs, const char *what, const char *path);
/* The file open on fd (stdin read for a plan, stdout...), when it is a regular file:
 * a terminal or a pipe is no file to destroy. */
void ob_files_add_fd(ob_files *fs, int fd, const char *what);
/* Every regular file of a --tools folder and the modules (*.lua, *.so) in its
 * subfolders, which its tool files may require (OB_FILES_TOOLS_DEPTH levels,
 * OB_FILES_TOOLS_MAX entries at most), or the file itself. */
#define OB_FILES_TOOLS_DEPTH 8
#define OB_FILES_TOOLS_MAX 10000
void ob_files_add_tools(ob_files *fs, const char *path);
/* The tool files engine e loaded. */
void ob_files_add_engine(ob_files *fs, const ob_engine *e);
/* The plans p delegates to, and those they delegate to, as resolved against root:
 * each plan file read once, at most 1,000. */
void ob_files_add_delegates(ob_files *fs, const ob_plan *p, const char *root);
/* 1 when path, the file written as opt ("--journal", "the journal"), is one of fs's
 * files (by st_dev/st_ino, so through links; by its folder's real path when it does
 * not exist yet): why gets "OPT PATH is WHAT NAME: refused (it would be
 * overwritten)". A device or a pipe destroys nothing: 0. */
int ob_files_clash(const ob_files *fs, const char *opt, const char *path, ob_buf *why);
/* The same for a file already open on fd (the C API's journal FILE*). */
int ob_files_clash_fd(const ob_files *fs, const char *opt, int fd, ob_buf *why);

#endif
