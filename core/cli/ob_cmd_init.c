/* ob_cmd_init.c -- `obelus init DIR`: a new project that works at once: a plan, a tool
 * it calls, a test of both (busted), and a README saying how to run each. DIR must not
 * exist or be empty: nothing is ever overwritten. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"

static const char init_help[] =
    "usage: obelus init DIR\n"
    "\n"
    "Makes DIR (it must not exist, or be empty) a small project that works at once:\n"
    "  plan.json             a plan of two calls, one reading what the other wrote\n"
    "  tools/greet.lua       the tool they call, with its description and schema\n"
    "  test/plan_spec.lua    a busted test that runs the plan and checks its output\n"
    "  README.md             how to run, check, test and graph it\n"
    "Exit 0; 2: DIR is not empty, or cannot be made.\n"
    "\n"
    "example:\n"
    "  obelus init hello && cd hello && obelus run plan.json --tools tools\n";

static const char plan_json[] =
    "{\n"
    "  \"context\": [\n"
    "    { \"type\": \"data\", \"kind\": \"input\", \"data\": { \"name\": \"world\" } }\n"
    "  ],\n"
    "  \"plan\": [\n"
    "    { \"_id\": \"hello\", \"_tool\": \"greet\", \"name\": \"\xE2\x80\xA0input.name\",\n"
    "      \"_outputPath\": \"\xE2\x80\xA0state.greeting\" },\n"
    "    { \"_id\": \"loud\", \"_tool\": \"greet\", \"name\": \"\xE2\x80\xA0state.greeting.text\", "
    "\"shout\": true,\n"
    "      \"_outputPath\": \"\xE2\x80\xA0state.loud\" }\n"
    "  ],\n"
    "  \"output\": { \"greeting\": \"\xE2\x80\xA0state.greeting.text\", \"loud\": "
    "\"\xE2\x80\xA0state.loud.text\" }\n"
    "}\n";

static const char tool_lua[] =
    "-- tools/greet.lua -- a tool: a name, a description and a JSON Schema for its params\n"
    "-- (planners read them: `obelus tools --tools tools --format openai`), and run, which\n"
    "-- gets the params with their references resolved and returns the call's result.\n"
    "local obelus = require \"obelus\"\n"
    "\n"
    "return {\n"
    "  name = \"greet\",\n"
    "  description = \"Greets someone by name; shout = true greets in capitals.\",\n"
    "  schema = {\n"
    "    type = \"object\",\n"
    "    properties = {\n"
    "      name = { type = \"string\", minLength = 1 },\n"
    "      shout = { type = \"boolean\" },\n"
    "    },\n"
    "    required = { \"name\" },\n"
    "  },\n"
    "  run = function(call)\n"
    "    obelus.sleep(10) -- waits without blocking the other calls (obelus.http, obelus.uv too)\n"
    "    local text = \"Hello, \" .. call.name .. \"!\"\n"
    "    if call.shout then text = text:upper() end\n"
    "    return { text = text }\n"
    "  end,\n"
    "}\n";

static const char spec_lua[] =
    "-- test/plan_spec.lua -- runs the plan through the obelus command and checks its output.\n"
    "-- Run it with `busted test` from the project's folder (OBELUS: the obelus command).\n"
    "local cjson = require \"cjson\"\n"
    "\n"
    "local OBELUS = os.getenv(\"OBELUS\") or \"obelus\"\n"
    "\n"
    "local function run(...)\n"
    "  local args = { ... }\n"
    "  for i, a in ipairs(args) do args[i] = \"'\" .. a:gsub(\"'\", \"'\\\\''\") .. \"'\" end\n"
    "  -- the exit status through the shell: every Lua busted may run on says it so\n"
    "  local p = assert(io.popen(OBELUS .. \" \" .. table.concat(args, \" \") ..\n"
    "                           \" 2>/dev/null; echo \\\"exit $?\\\"\"))\n"
    "  local out = p:read(\"*a\")\n"
    "  p:close()\n"
    "  local code = tonumber(out:match(\"exit (%d+)\\n$\"))\n"
    "  return code, (out:gsub(\"exit %d+\\n$\", \"\"))\n"
    "end\n"
    "\n"
    "describe(\"plan.json\", function()\n"
    "  it(\"passes obelus check\", function()\n"
    "    assert.are.equal(0, (run(\"check\", \"plan.json\", \"--tools\", \"tools\")))\n"
    "  end)\n"
    "\n"
    "  it(\"greets, then greets louder\", function()\n"
    "    local code, out = run(\"run\", \"plan.json\", \"--tools\", \"tools\")\n"
    "    assert.are.equal(0, code)\n"
    "    assert.are.same({ greeting = \"Hello, world!\", loud = \"HELLO, HELLO, WORLD!!\" }, "
    "cjson.decode(out))\n"
    "  end)\n"
    "\n"
    "  it(\"greets whoever the input names\", function()\n"
    "    local code, out = run(\"run\", \"plan.json\", \"--tools\", \"tools\", \"--input\", "
    "'{\"name\":\"Ada\"}')\n"
    "    assert.are.equal(0, code)\n"
    "    assert.are.equal(\"Hello, Ada!\", cjson.decode(out).greeting)\n"
    "  end)\n"
    "end)\n";

static const char readme_md[] =
    "# A new obelus project\n"
    "\n"
    "`plan.json` calls the `greet` tool (`tools/greet.lua`) twice: the second call reads\n"
    "what the first wrote (`\xE2\x80\xA0state.greeting.text`), so it starts once the first is done.\n"
    "\n"
    "```sh\n"
    "obelus check plan.json --tools tools          # validate, run nothing\n"
    "obelus run plan.json --tools tools            # run, print the output\n"
    "obelus run plan.json --tools tools --input '{\"name\":\"Ada\"}'\n"
    "obelus graph plan.json                        # the dependency graph (Graphviz dot)\n"
    "busted test                                   # the test in test/plan_spec.lua\n"
    "```\n"
    "\n"
    "`man obelus` tells the rest.\n";

static int write_file(const char *dir, const char *name, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wx"); /* never over a file */
  if (!f) {
    fprintf(stderr, "obelus init: %s: %s\n", path, strerror(errno));
    return OB_EXIT_USAGE;
  }
  fputs(text, f);
  if (fclose(f) != 0) {
    fprintf(stderr, "obelus init: %s: %s\n", path, strerror(errno));
    return OB_EXIT_USAGE;
  }
  printf("  %s\n", path);
  return OB_EXIT_OK;
}

static int make_dir(const char *path) {
  if (mkdir(path, 0777) == 0 || errno == EEXIST)
    return OB_EXIT_OK;
  fprintf(stderr, "obelus init: %s: %s\n", path, strerror(errno));
  return OB_EXIT_USAGE;
}

int ob_cmd_init(int argc, char **argv) {
  const char *dir = NULL;
  ob_cli_args args;
  ob_cli_args_start(&args, argc, argv);
  int k;
  while ((k = ob_cli_args_next(&args)) > 0) {
    if (args.opt && !strcmp(args.opt, "--help")) {
      fputs(init_help, stdout);
      return OB_EXIT_OK;
    } else if (args.opt) {
      return ob_cli_args_unhandled(&args);
    } else if (!dir) {
      dir = args.val;
    } else {
      return ob_cli_usage_error("init", "unexpected argument \"%s\"", args.val);
    }
  }
  if (k < 0)
    return OB_EXIT_USAGE;
  if (!dir)
    return ob_cli_usage_error("init", "needs a DIR to make the project in");
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *de;
    int empty = 1;
    while ((de = readdir(d)))
      if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
        empty = 0;
    closedir(d);
    if (!empty) {
      fprintf(stderr, "obelus init: %s is not empty: nothing written\n", dir);
      return OB_EXIT_USAGE;
    }
  }
  char sub[4096];
  int rc = make_dir(dir);
  if (rc == OB_EXIT_OK)
    printf("obelus init: made %s:\n", dir);
  snprintf(sub, sizeof sub, "%s/tools", dir);
  if (rc == OB_EXIT_OK)
    rc = make_dir(sub);
  snprintf(sub, sizeof sub, "%s/test", dir);
  if (rc == OB_EXIT_OK)
    rc = make_dir(sub);
  if (rc == OB_EXIT_OK)
    rc = write_file(dir, "plan.json", plan_json);
  if (rc == OB_EXIT_OK)
    rc = write_file(dir, "tools/greet.lua", tool_lua);
  if (rc == OB_EXIT_OK)
    rc = write_file(dir, "test/plan_spec.lua", spec_lua);
  if (rc == OB_EXIT_OK)
    rc = write_file(dir, "README.md", readme_md);
  if (rc == OB_EXIT_OK)
    printf("next: cd %s && obelus run plan.json --tools tools && busted test\n", dir);
  return rc;
}
