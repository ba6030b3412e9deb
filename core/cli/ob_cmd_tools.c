/* ob_cmd_tools.c -- `obelus tools`: the loaded tools described for planners, in the
 * shape an LLM API or MCP takes (--format), or a JSON Schema of a whole plan for them
 * (--plan-schema), also in the subset OpenAI's strict structured output takes
 * (--strict, its notes on stderr). A thin layer over ob_catalog.c. */
#include <stdio.h>

#include "host/ob_catalog.h"
#include "cli/ob_cli.h"
#include "cli/ob_runner.h"

static const char tools_help[] =
    "usage: obelus tools --tools PATH... [--latent FILE] [--format FORMAT]\n"
    "       obelus tools --tools PATH... [--latent FILE] --plan-schema [--strict]\n"
    "\n"
    "Prints the loaded tools (name, description, params schema) as JSON, in the shape\n"
    "an ecosystem takes:\n"
    "  json-schema  [{\"name\", \"api_name\"?, \"description\", \"parameters\", \"latent\"?}]\n"
    "               (the default)\n"
    "  openai       [{\"type\": \"function\", \"function\": {name, description, parameters}}]\n"
    "  anthropic    [{\"name\", \"description\", \"input_schema\"}]\n"
    "  mcp          {\"tools\": [{\"name\", \"description\", \"inputSchema\"}]} (tools/list)\n"
    "The params are each tool's schema without its meta-properties (keys beginning\n"
    "with _). openai and anthropic name each tool by its API name, matching\n"
    "^[a-zA-Z0-9_-]{1,64}$: a name that does not has each other character made _,\n"
    "and is cut with a hash suffix when too long or when two tools would share it\n"
    "(json-schema gives it as api_name); a plan, a loop's calls and MCP's tools/call\n"
    "may name a tool by either name, the real one winning.\n"
    "--plan-schema prints instead a JSON Schema (draft-07) of a whole plan for these\n"
    "tools, meta-properties and \xE2\x80\xA0 references included, to constrain a model's\n"
    "output to plans that pass `obelus check` (it cannot tell cycles or references\n"
    "that nothing writes). With --strict, the schema OpenAI's strict structured\n"
    "output takes: the plan's object form {plan, output, instances}, every key\n"
    "required, the optional ones nullable (a plan reads null as absent); what the\n"
    "tools' schemas say that strict mode cannot is left out, each said in a note on\n"
    "stderr (obelus still checks it).\n"
    "Exit 0; 2: bad options or tools.\n"
    "\n"
    "examples:\n"
    "  obelus tools --tools plans/weather/tools --format openai\n"
    "  obelus tools --tools plans/weather/tools --plan-schema > plan.schema.json\n"
    "  obelus schema plan.schema.json plans/weather/plan.json\n"
    "  obelus tools --tools plans/weather/tools --plan-schema --strict > strict.json\n";

int ob_cmd_tools(int argc, char **argv) {
  ob_cmd_options o;
  int rc = ob_cmd_options_parse(argc, argv, &o, tools_help);
  ob_unref(o.inputs);
  if (rc)
    return rc < 0 ? OB_EXIT_OK : rc;
  ob_catalog_format format = OB_CATALOG_JSON_SCHEMA;
  if (o.format && ob_catalog_format_parse(o.format, &format) != OB_OK)
    return ob_cli_usage_error("tools", "--format is json-schema, openai, anthropic or mcp, not "
                                       "\"%s\"",
                              o.format);
  if (o.format && o.plan_schema)
    return ob_cli_usage_error("tools", "--format and --plan-schema go apart");
  if (o.strict && !o.plan_schema)
    return ob_cli_usage_error("tools", "--strict goes with --plan-schema");
  if (!o.ntools)
    return ob_cli_usage_error("tools", "needs --tools PATH");
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  if (!e) {
    ob_eprintf("obelus tools: %s\n", err.msg);
    return OB_EXIT_USAGE;
  }
  ob_engine_set_note(e, ob_cli_note, NULL);
  if ((rc = ob_cmd_load(&o, e)) == OB_EXIT_OK) {
    ob_value *notes = NULL;
    ob_value *v = o.strict        ? ob_catalog_plan_schema_strict(e, &notes)
                  : o.plan_schema ? ob_catalog_plan_schema(e)
                                  : ob_catalog_tools(e, format);
    for (size_t i = 0; notes && i < ob_array_len(notes); i++)
      ob_eprintf("obelus tools: note: %s\n", ob_string_ptr(ob_array_get(notes, i)));
    ob_cmd_print_json(v);
    ob_unref(v);
    ob_unref(notes);
  }
  ob_engine_free(e);
  return rc;
}
