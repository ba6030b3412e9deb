// spec/mcp/client.mjs -- drives `obelus mcp` with the official MCP SDK's client
// (@modelcontextprotocol/sdk, installed here by spec/cli/mcp_spec.lua) and prints what
// it saw as one JSON object: node client.mjs OBELUS TOOLS
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, tools] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: bin, args: ["mcp", "--tools", tools], stderr: "ignore" });
const client = new Client({ name: "obelus-spec", version: "1.0.0" });
const report = {};
await client.connect(transport);
report.server = client.getServerVersion();
report.protocol = transport._protocolVersion ?? null;

const listed = await client.listTools();
report.tools = listed.tools.map((t) => t.name).sort();
report.run_plan_schema = listed.tools.find((t) => t.name === "run_plan")?.inputSchema;

report.echo = await client.callTool({ name: "echo", arguments: { value: { n: 42, s: "†not a reference" } } });

const plan = {
  context: [{ type: "data", kind: "input", data: { a: 1 } }],
  plan: [
    { _id: "x", _tool: "sleepy", ms: 50, value: "†input.a", _outputPath: "†state.x" },
    { _id: "y", _tool: "sleepy", ms: 50, value: "†state.x", _outputPath: "†state.y" },
    { _id: "z", _tool: "sleepy", ms: 50, value: "†state.y", _outputPath: "†state.z" },
  ],
  output: { z: "†state.z" },
};
const progress = [];
report.plan = await client.callTool({ name: "run_plan", arguments: { plan, input: { b: 2 } } }, undefined,
  { onprogress: (p) => progress.push(p) });
report.progress = progress;

// a tool that streams (obelus.emit): each value a notification, its progress growing.
// The call after it sleeps a quarter second, so that s's notifications all come well
// before the answer (the SDK drops those read with the answer: on a loaded machine, 40 ms
// was not always enough)
const streamed = [];
report.streamed_result = await client.callTool({ name: "run_plan", arguments: { plan: [
  { _id: "s", _tool: "steps", n: 3, ms: 40, _outputPath: "†state.s" },
  { _id: "t", _tool: "sleepy", ms: 250, value: "†state.s", _outputPath: "†state.t" }] } }, undefined,
  { onprogress: (p) => streamed.push(p) });
report.streamed = streamed;

report.bad = await client.callTool({ name: "run_plan", arguments: { plan: [{ _tool: "nope", _outputPath: "†state.a" }] } });
report.failed = await client.callTool({ name: "run_plan", arguments: { plan: [{ _tool: "fail", message: "boom", _outputPath: "†state.a" }] } });

// concurrent requests are answered as they finish: the slow one last
const order = [];
const slow = client.callTool({ name: "sleepy", arguments: { ms: 400, value: "slow" } }).then(() => order.push("slow"));
const fast = client.callTool({ name: "sleepy", arguments: { ms: 10, value: "fast" } }).then(() => order.push("fast"));
await Promise.all([slow, fast]);
report.order = order;

// cancellation: the request is abandoned, the server goes on serving
const ac = new AbortController();
const t0 = Date.now();
const cancelled = client.callTool({ name: "sleepy", arguments: { ms: 60000, value: 1 } }, undefined, { signal: ac.signal })
  .then(() => "answered", (e) => "rejected: " + e.message);
setTimeout(() => ac.abort("enough"), 100);
report.cancelled = await cancelled;
report.cancel_ms = Date.now() - t0;
report.after_cancel = await client.callTool({ name: "echo", arguments: { value: "still here" } });

report.unknown = await client.callTool({ name: "no_such_tool", arguments: {} }).then(
  (r) => ({ result: r }), (e) => ({ error: e.code ?? e.message }));

await client.close();
console.log(JSON.stringify(report));
