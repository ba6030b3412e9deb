/* ob_files.c -- the files a run reads, against the files it writes (issue 26).
 *
 * Design
 * ------
 * A run that writes its journal or events over a file it reads destroys it: the
 * plan, a tool file, an --input file, a delegated plan, the file stdin was
 * redirected from. A host gathers what its run reads into an ob_files set (a
 * growing array of identities) and asks ob_files_clash about each file it is to
 * write, before anything runs; the check says why in a buffer and never prints
 * (the host does). A file is known by st_dev/st_ino after symbolic links, so a
 * link of either kind is the file it names; a file that does not exist yet is
 * known by its folder's real path and its name, so two names of one new file
 * (--journal x --events ./x) match. Delegated plans are walked with a work list
 * (no recursion), each plan read once and at most 1,000 read, so a deep or
 * cyclic delegation costs bounded work.
 *
 * A --tools folder counts with its files and, in its subfolders, the modules its
 * tool files may require (*.lua, *.so: tools/lib/h.lua), OB_FILES_TOOLS_DEPTH
 * folders down and at most OB_FILES_TOOLS_MAX entries, so a folder that holds a
 * tree (`--tools .`) costs bounded work.
 *
 * Costs: a stat per file added (a readdir per folder of a --tools folder, a read
 * and parse per delegated plan); nothing once the run starts. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "drive/ob_files.h"
#include "base/ob_mem.h"

typedef struct file_id {
  const char *what; /* "the plan", "the tool file", ... (static) */
  char *name;       /* as given */
  int exists;
  dev_t dev;
  ino_t ino;
  char *norm; /* a file not there yet: its folder's real path and its name */
} file_id;

struct ob_files {
  file_id *v;
  size_t n, cap;
};

ob_files *ob_files_new(void) { return ob_xcalloc(1, sizeof(ob_files)); }

static void id_free(file_id *f) {
  free(f->name);
  free(f->norm);
}

void ob_files_free(ob_files *fs) {
  if (!fs)
    return;
  for (size_t i = 0; i < fs->n; i++)
    id_free(&fs->v[i]);
  free(fs->v);
  free(fs);
}

static file_id identify(const char *what, const char *path) {
  file_id f = {what, ob_xstrdup(path), 0, 0, 0, NULL};
  struct stat st;
  if (stat(path, &st) == 0) {
    f.exists = 1;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    return f;
  }
  const char *slash = strrchr(path, '/');
  char *dir = slash ? ob_xstrndup(path, slash == path ? 1 : (size_t)(slash - path)) : NULL;
  char *real = realpath(dir ? dir : ".", NULL);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%s/%s", real ? real : (dir ? dir : "."), slash ? slash + 1 : path);
  f.norm = ob_xstrdup(b.data);
  ob_buf_free(&b);
  free(real);
  free(dir);
  return f;
}

static void push(ob_files *fs, file_id f) {
  if (fs->n == fs->cap) {
    fs->cap = fs->cap ? 2 * fs->cap : 32;
    fs->v = ob_xrealloc(fs->v, fs->cap * sizeof *fs->v);
  }
  fs->v[fs->n++] = f;
}

void ob_files_add(ob_files *fs, const char *what, const char *path) {
  if (!path || !*path || !strcmp(path, "-"))
    return;
  push(fs, identify(what, path));
}

void ob_files_add_fd(ob_files *fs, int fd, const char *what) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return;
  push(fs, (file_id){what, ob_xstrdup(what), 1, st.st_dev, st.st_ino, NULL});
}

static int same(const file_id *a, const file_id *b) {
  if (a->exists && b->exists)
    return a->dev == b->dev && a->ino == b->ino;
  return !a->exists && !b->exists && !strcmp(a->norm, b->norm);
}

/* What require can load (package.path, package.cpath): a journal in a subfolder of
 * `--tools .` (out/run.jsonl) is no module, and --overwrite may replace it. */
static int module_name(const char *name) {
  size_t n = strlen(name);
  return (n > 4 && !strcmp(name + n - 4, ".lua")) || (n > 3 && !strcmp(name + n - 3, ".so"));
}

/* The regular files of folder path (in its subfolders, the modules a tool file may
 * require: tools/lib/h.lua), at most depth levels down and while *budget lasts. */
static void add_folder(ob_files *fs, const char *path, int depth, int top, size_t *budget) {
  DIR *d = opendir(path);
  struct dirent *de;
  ob_buf b;
  ob_buf_init(&b);
  while (d && *budget && (de = readdir(d))) {
    if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
      continue;
    b.len = 0;
    ob_buf_addf(&b, "%s/%s", path, de->d_name);
    struct stat es;
    if (stat(b.data, &es) != 0)
      continue;
    (*budget)--;
    if (S_ISREG(es.st_mode) && (top || module_name(de->d_name)))
      ob_files_add(fs, "a file of the --tools folder", b.data);
    else if (S_ISDIR(es.st_mode) && depth > 0)
      add_folder(fs, b.data, depth - 1, 0, budget);
  }
  if (d)
    closedir(d);
  ob_buf_free(&b);
}

void ob_files_add_tools(ob_files *fs, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
    ob_files_add(fs, "the tool file", path);
    return;
  }
  size_t budget = OB_FILES_TOOLS_MAX;
  add_folder(fs, path, OB_FILES_TOOLS_DEPTH, 1, &budget);
}

void ob_files_add_engine(ob_files *fs, const ob_engine *e) {
  ob_value *tf = ob_engine_tool_files(e);
  for (size_t i = 0; i < ob_array_len(tf); i++) {
    ob_value *f = ob_object_get(ob_array_get(tf, i), "file", 4);
    if (f && ob_typeof(f) == OB_STRING)
      ob_files_add(fs, "the tool file", ob_string_ptr(f));
  }
  ob_unref(tf);
}

void ob_files_add_delegates(ob_files *fs, const ob_plan *p, const char *root) {
  ob_plan **todo = ob_xmalloc(sizeof *todo);
  size_t ntodo = 0, cap = 1, seen = 0;
  size_t first = fs->n;
  const ob_plan *cur = p;
  for (;;) {
    for (size_t i = 0; cur && i < cur->ncalls; i++) {
      const ob_call *c = &cur->calls[i];
      if (!c->delegate)
        continue;
      file_id f = identify("the delegated plan", c->delegate);
      int known = 0;
      for (size_t k = first; k < fs->n && !known; k++)
        known = same(&fs->v[k], &f);
      int exists = f.exists;
      id_free(&f);
      if (known || !exists)
        continue;
      ob_files_add(fs, "the delegated plan", c->delegate);
      ob_error err;
      ob_value *v = seen < 1000 ? ob_plan_read_delegate(c, root, &err) : NULL;
      if (!v)
        continue;
      seen++;
      /* its _delegate paths only: one copy of each instanced call names them all */
      ob_plan *sub = ob_plan_probe(v, c->delegate);
      ob_unref(v);
      if (ntodo == cap)
        todo = ob_xrealloc(todo, (cap *= 2) * sizeof *todo);
      todo[ntodo++] = sub;
    }
    if (cur != p)
      ob_plan_free((ob_plan *)cur);
    if (!ntodo)
      break;
    cur = todo[--ntodo];
  }
  free(todo);
}

/* path NULL: the file is known by opt alone (an open file). */
static int match(const ob_files *fs, const char *opt, const char *path, const file_id *w,
                 ob_buf *why) {
  for (size_t i = 0; i < fs->n; i++) {
    const file_id *r = &fs->v[i];
    if (!same(w, r))
      continue;
    ob_buf_addf(why, "%s%s%s is ", opt, path ? " " : "", path ? path : "");
    if (!strcmp(r->what, r->name))
      ob_buf_addf(why, "the file of %s", r->what);
    else
      ob_buf_addf(why, "%s %s%s", r->what, r->name,
                  path && strcmp(path, r->name) ? " (the same file)" : "");
    ob_buf_addf(why, ": refused (it would be overwritten)");
    return 1;
  }
  return 0;
}

int ob_files_clash(const ob_files *fs, const char *opt, const char *path, ob_buf *why) {
  file_id w = identify(opt, path);
  struct stat st;
  /* a device or a pipe (/dev/null, /dev/stdout on a terminal) destroys nothing */
  int special = w.exists && stat(path, &st) == 0 && !S_ISREG(st.st_mode);
  int bad = !special && match(fs, opt, path, &w, why);
  id_free(&w);
  return bad;
}

int ob_files_clash_fd(const ob_files *fs, const char *opt, int fd, ob_buf *why) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return 0;
  file_id w = {opt, NULL, 1, st.st_dev, st.st_ino, NULL};
  return match(fs, opt, NULL, &w, why);
}
