/* ob_catalog.h -- an engine's tools described for planners (ob_catalog.c): the tool
 * lists LLM APIs and MCP take, and a JSON Schema (draft-07) of a whole plan for
 * those tools, so that a planner can constrain a model's output to valid plans, also
 * in the subset OpenAI's strict mode takes (ob_catalog_strict.c). The LLM APIs'
 * formats and the plan schemas name each tool by its API name (ob_toolname.h), which
 * the plan loader resolves back. `obelus tools` prints them; the MCP server lists
 * tools from them.
 *
 * Costs: a walk over the tools and copies of their schemas; nothing is cached. */
#ifndef OB_CATALOG_H
#define OB_CATALOG_H

#include "engine/ob_engine.h"

typedef enum ob_catalog_format {
  OB_CATALOG_JSON_SCHEMA, /* [{"name", "description", "parameters", "latent"?}] */
  OB_CATALOG_OPENAI,      /* [{"type": "function", "function": {name, description, parameters}}] */
  OB_CATALOG_ANTHROPIC,   /* [{"name", "description", "input_schema"}] */
  OB_CATALOG_MCP          /* {"tools": [{"name", "description", "inputSchema", "_meta"?}]} */
} ob_catalog_format;

/* "json-schema", "openai", "anthropic" or "mcp" -> *out: OB_OK, or OB_EINVAL. */
int ob_catalog_format_parse(const char *s, ob_catalog_format *out);

/* A tool's params schema as a caller of the tool sees it: its schema without the
 * meta-properties (keys that begin with "_", also out of "required"), and an
 * object schema always ({"type": "object"} for a tool without one). New value. */
ob_value *ob_catalog_params(const ob_tool *t);

/* The engine's tools, sorted by name, in the given format (latent tools marked in
 * json-schema's "latent" and mcp's "_meta"; the LLM APIs' shapes take no extra key).
 * New value. */
ob_value *ob_catalog_tools(const ob_engine *e, ob_catalog_format format);

/* A JSON Schema (draft-07) of a plan for the engine's tools: either form of plan-format §5;
 * each call one of the tools (its params per the tool's schema, where any value may
 * instead be a reference string, "†..."), or a _delegate call; the meta-properties
 * with their rules; no unknown meta-property. New value. */
ob_value *ob_catalog_plan_schema(const ob_engine *e);

/* A JSON Schema of a plan for the engine's tools that OpenAI's strict structured
 * output takes (ob_catalog_strict.c, which states its rules and what it leaves out):
 * the plan's object form, every object closed and all its keys required, the optional
 * ones nullable (null is absent to the plan loader). *notes gets a new array of
 * strings: what the tools' schemas say that strict mode cannot (left out, the loader
 * still judging it), and any of strict mode's limits the schema passes. New value. */
ob_value *ob_catalog_plan_schema_strict(const ob_engine *e, ob_value **notes);

#endif
