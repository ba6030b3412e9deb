// spec/mcp/http_client.mjs -- drives `obelus mcp --http` with the official MCP SDK's
// Streamable HTTP client (@modelcontextprotocol/sdk, installed here by
// spec/cli/mcp_http_spec.lua) and prints what it saw as one JSON object:
//   node http_client.mjs URL [TOKEN]
// (the token, when given, sent as Authorization: Bearer on every request)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const errors = [];

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "obelus-http-spec", version: "1.0.0" });
  client.onerror = (e) => errors.push(String(e && e.message || e));
  await client.connect(transport);
  return { client, transport };
}

// a POST as a client would send it, by hand: its status
async function post(session, body) {
  const r = await fetch(url, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json", accept: "application/json, text/event-stream",
               ...(session ? { "mcp-session-id": session } : {}) },
    body: JSON.stringify(body),
  });
  await r.text();
  return r.status;
}

const report = {};
const { client, transport } = await connect();
report.server = client.getServerVersion();
report.session = transport.sessionId ?? null;
report.protocol = transport.protocolVersion ?? null;

const listed = await client.listTools();
report.tools = listed.tools.map((t) => t.name).sort();

report.echo = await client.callTool({ name: "echo", arguments: { value: { n: 42, s: "†not a reference" } } });

// a plan with progress: the answer comes on an event stream, the notifications first
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
report.plan = await client.callTool({ name: "run_plan", arguments: { plan } }, undefined,
  { onprogress: (p) => progress.push(p) });
report.progress = progress;

// a tool that streams (obelus.emit): each value a notification
const streamed = [];
report.streamed_result = await client.callTool({ name: "steps", arguments: { n: 3, ms: 40 } }, undefined,
  { onprogress: (p) => streamed.push(p) });
report.streamed = streamed.map((p) => p.message);

// two calls at once, each on its own POST: answered as they finish
const order = [];
const slow = client.callTool({ name: "sleepy", arguments: { ms: 400, value: "slow" } }).then((r) => order.push(r.content[0].text));
const fast = client.callTool({ name: "sleepy", arguments: { ms: 10, value: "fast" } }).then((r) => order.push(r.content[0].text));
await Promise.all([slow, fast]);
report.order = order;

// cancellation: the call abandoned, the session goes on
const ac = new AbortController();
const cancelled = client.callTool({ name: "sleepy", arguments: { ms: 60000, value: 1 } }, undefined, { signal: ac.signal })
  .then(() => "answered", (e) => "rejected: " + e.message);
setTimeout(() => ac.abort("enough"), 100);
report.cancelled = await cancelled;
report.after_cancel = await client.callTool({ name: "echo", arguments: { value: "still here" } });

// a second client: a session of its own, served alongside
const second = await connect();
report.second_session = second.transport.sessionId ?? null;
report.second_echo = await second.client.callTool({ name: "echo", arguments: { value: "two" } });

// DELETE ends the first session: its id is then unknown (404); the second goes on
const old = transport.sessionId;
await transport.terminateSession();
report.after_delete = await post(old, { jsonrpc: "2.0", id: 99, method: "ping" });
report.second_after_delete = await second.client.callTool({ name: "echo", arguments: { value: "two again" } });
report.no_session = await post(null, { jsonrpc: "2.0", id: 100, method: "ping" });

await client.close();
await second.client.close();
report.errors = errors;
console.log(JSON.stringify(report));
