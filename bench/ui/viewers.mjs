// bench/ui/viewers.mjs -- N viewers of one run's events (GET /api/runs/ID/events), as a
// browser's EventSource would be: node viewers.mjs BASE_URL ID N. Prints "ready" once
// every stream has its snapshot, then, when every stream has ended, one JSON line:
// {"viewers", "bytes" (per viewer, median), "records" (events per viewer, median)}.
const [base, id, n] = [process.argv[2], process.argv[3], Number(process.argv[4])];

async function view() {
  const res = await fetch(`${base}api/runs/${id}/events`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = "", bytes = 0, records = 0, ready = false, tail = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    bytes += value.length;
    const chunk = tail + dec.decode(value, { stream: true });
    // count the events by their names, keeping a line that may be cut
    const cut = chunk.lastIndexOf("\n");
    text = chunk.slice(0, cut + 1);
    tail = chunk.slice(cut + 1);
    if (!ready && text.includes("event: snapshot")) { ready = true; view.ready++; if (view.ready === n) console.log("ready"); }
    records += (text.match(/^event: records$/gm) || []).length;
  }
  return { bytes, records };
}
view.ready = 0;

const got = await Promise.all(Array.from({ length: n }, () => view()));
const med = (xs) => xs.sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
console.log(JSON.stringify({ viewers: n, bytes: med(got.map((g) => g.bytes)),
  records: med(got.map((g) => g.records)) }));
