// bench/peers/peers.mjs -- the peers' side of `make bench-peers`: one workload, one
// peer, one size, as a whole process: node peers.mjs langgraph|async chain|fanout|sleep N
//   chain   N steps, each reading the one before and adding 1
//   fanout  N independent steps, then one that sums what they wrote
//   sleep   N independent steps that each wait 100 ms (a timer), then a join
// It prints the result, so that a broken run is seen (obelus prints its own).

const [peer, work, nArg] = process.argv.slice(2);
const N = Number(nArg);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function langgraph() { // imported here: the async peer does not pay for loading it
  const { StateGraph, Annotation, START, END } = await import("@langchain/langgraph");
  if (work === "chain") {
    const S = Annotation.Root({ v: Annotation() });
    const g = new StateGraph(S);
    for (let i = 0; i < N; i++) g.addNode("n" + i, (s) => ({ v: s.v + 1 }));
    g.addEdge(START, "n0");
    for (let i = 1; i < N; i++) g.addEdge("n" + (i - 1), "n" + i);
    g.addEdge("n" + (N - 1), END);
    const out = await g.compile().invoke({ v: 0 }, { recursionLimit: N + 10 });
    return out.v;
  }
  // fanout and sleep: N branches from START, joined by one node
  const S = Annotation.Root({
    f: Annotation({ reducer: (a, b) => Object.assign(a, b), default: () => ({}) }),
    sum: Annotation(),
  });
  const g = new StateGraph(S);
  const names = [];
  for (let i = 0; i < N; i++) {
    const name = "f" + i;
    names.push(name);
    g.addNode(name, work === "sleep" ? async () => { await sleep(100); return { f: { [name]: i } }; }
                                     : () => ({ f: { [name]: i } }));
    g.addEdge(START, name);
  }
  g.addNode("join", (s) => ({ sum: Object.values(s.f).reduce((a, b) => a + b, 0) }));
  g.addEdge(names, "join");
  g.addEdge("join", END);
  const out = await g.compile().invoke({}, { recursionLimit: N + 10 });
  return out.sum;
}

async function asyncAuto() {
  const async = (await import("async")).default;
  const tasks = {};
  if (work === "chain") {
    // each step calls back on the next turn (setImmediate): async.auto's own advice, as
    // 10,000 synchronous callbacks in a chain overflow the stack
    tasks.n0 = (cb) => setImmediate(cb, null, 1);
    for (let i = 1; i < N; i++)
      tasks["n" + i] = ["n" + (i - 1), (r, cb) => setImmediate(cb, null, r["n" + (i - 1)] + 1)];
    return new Promise((res, rej) => async.auto(tasks, Infinity, (e, r) => e ? rej(e) : res(r["n" + (N - 1)])));
  }
  const names = [];
  for (let i = 0; i < N; i++) {
    names.push("f" + i);
    tasks["f" + i] = work === "sleep" ? (cb) => setTimeout(() => cb(null, i), 100) : (cb) => setImmediate(cb, null, i);
  }
  tasks.join = [...names, (r, cb) => cb(null, names.reduce((a, k) => a + r[k], 0))];
  return new Promise((res, rej) => async.auto(tasks, Infinity, (e, r) => e ? rej(e) : res(r.join)));
}

const out = await (peer === "langgraph" ? langgraph() : asyncAuto());
console.log(JSON.stringify(out));
