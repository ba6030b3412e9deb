// bench/peers/fleet_bullmq.mjs -- BullMQ's side of `make bench-fleet` (bench/fleet_peers.lua
// drives it and obelus's side alike). One program, three roles:
//   node fleet_bullmq.mjs calibrate MS
//       the loop count of burn() that takes MS ms of CPU time here (after warming the JIT
//       up), and what one burn of that count then took (median of 21): {"loops", "ms"}
//   node fleet_bullmq.mjs worker PORT QUEUE SHAPE CONCURRENCY [LOOPS]
//       a Worker on queue QUEUE of the redis-server on 127.0.0.1:PORT, processing SHAPE
//       jobs CONCURRENCY at a time, until SIGTERM (then worker.close(): running jobs finish)
//   node fleet_bullmq.mjs client PORT QUEUE SHAPE N [WAIT]
//       queues N jobs with one addBulk (FlowProducer.addBulk for the flow shape), waits
//       until every one has finished, checks their results and prints one JSON line:
//       {"jobs", "ok" (finished with the expected result), "sum" (of the results),
//        "submitted_at_ms" (when addBulk answered, ms since 1970), "submit_s" (addBulk's
//        time), "wait_s" (from then to the last result), "missed_events", and for cpu
//        "burn_ms": the median time of the burns in the workers}
// The shapes (each job's input is {n: i}, i = 1..N):
//   trivial  return n * 2
//   cpu      burn(LOOPS) (a busy loop the driver calibrated to ~5 ms), return its result and
//            the CPU time it took: {x, ms}
//   steps    four steps, each doubling the one before's output, in one job, each step's
//            output saved with job.updateData({step, v}) before the next: BullMQ's
//            documented "process step jobs" pattern, so that a retried job resumes at its
//            last saved step (obelus's journal does that for a 4-call plan). Returns n * 16
//   flow     the same four steps as a FlowProducer chain: four jobs, each the parent of
//            the one before, each reading its child's return value (getChildrenValues);
//            the client waits for the top job (n * 16). Each step is then a job of its own
//            (own lock, retries, any worker): more than obelus's plan does, reported apart.
// Waiting (WAIT): "events" (the default, measured fastest for a batch): one QueueEvents
// reading the queue's event stream from its start (the Redis is fresh, so nothing is missed
// between connecting and the first read), counting our ids' "completed" and "failed"
// events; the event stream is trimmed at ~10,000 events (BullMQ's default, kept), so a
// reader that falls behind could miss some: every second the client also compares the
// completed count (ZCARD) with what it has seen, and once every job is counted finished it
// fetches the jobs it has no event for (missed_events says how many; 0 in our runs).
// "poll": no events; getJobCounts every 20 ms until all are finished, then every job's
// return value read (Job.fromId, pipelined in chunks). "until": job.waitUntilFinished(qe)
// for every job (one listener per job on the same QueueEvents). Measured (20,000 trivial
// jobs, 1 worker, 2 runs each): events 3.1-3.3 s, poll 8.9-14 s, until 6.4-11.7 s (and
// it missed events of jobs finished before their listener was added: the safety net
// fetched them).
// Everything uses BullMQ's defaults (completed jobs kept, attempts 1, lock 30 s).
import { Queue, Worker, QueueEvents, FlowProducer, Job } from "bullmq";

const [role, ...args] = process.argv.slice(2);

function burn(loops) {
  let x = 0;
  for (let i = 1; i <= loops; i++) x = (x + i * 7) % 1000003;
  return x;
}

// the CPU time f takes, in ms (user + system, as Lua's os.clock counts on obelus's side):
// the busy loops are calibrated and checked in CPU time, which a shared machine's other
// processes do not stretch as they do wall time
function cpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
function ms(f) {
  const t = cpuMs();
  f();
  return cpuMs() - t;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[(s.length - 1) >> 1];
}

function calibrate(target) {
  for (let i = 0; i < 50; i++) burn(100000); // the JIT's optimised code first
  const probe = 1000000;
  const per = median(Array.from({ length: 11 }, () => ms(() => burn(probe)))) / probe;
  const loops = Math.round(target / per);
  const took = median(Array.from({ length: 21 }, () => ms(() => burn(loops))));
  console.log(JSON.stringify({ loops, ms: took }));
}

const connection = (port) => ({ host: "127.0.0.1", port: Number(port), maxRetriesPerRequest: null });

function processor(shape, loops) {
  switch (shape) {
    case "trivial":
      return async (job) => job.data.n * 2;
    case "cpu": // and what the burn took, so that the client can tell the calibration held
      return async () => {
        let x;
        const took = ms(() => { x = burn(loops); });
        return { x, ms: took };
      };
    case "steps":
      return async (job) => {
        let { n, step = 0, v = n } = job.data;
        while (step < 4) {
          v = v * 2;
          step++;
          await job.updateData({ n, step, v });
        }
        return v;
      };
    case "flow":
      return async (job) => {
        if (job.data.step === 1) return job.data.n * 2;
        const vals = Object.values(await job.getChildrenValues());
        return vals[0] * 2;
      };
    default:
      throw new Error("no such shape: " + shape);
  }
}

async function worker(port, queue, shape, concurrency, loops) {
  const w = new Worker(queue, processor(shape, Number(loops || 0)), {
    connection: connection(port),
    concurrency: Number(concurrency),
  });
  w.on("error", (e) => console.error("worker:", e.message));
  let stopping = false;
  const stop = async () => {
    if (stopping) process.exit(1);
    stopping = true;
    await w.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

let burned = null; // burn(loops), computed once (the check is inside the timed run)
function expected(shape, n, loops) {
  if (shape === "trivial") return n * 2;
  if (shape === "cpu") return burned ?? (burned = burn(loops));
  return n * 16;
}

async function client(port, queue, shape, count, how = "events", loops = 0) {
  const N = Number(count);
  const conn = connection(port);
  const q = new Queue(queue, { connection: conn });
  const results = new Map(); // job id -> { value } | { failed }
  let qe = null;
  let done = null;
  const finished = new Promise((r) => (done = r));
  let ids = null; // the ids we wait for (the flows' top jobs), once addBulk answered
  let got = 0;
  const check = () => {
    if (ids && got >= ids.length) done();
  };
  const note = (id, r) => {
    if (results.has(id)) return;
    results.set(id, r);
    if (ids && ids.set.has(id)) got++;
    check();
  };
  if (how === "events" || how === "until") {
    qe = new QueueEvents(queue, { connection: conn, lastEventId: "0-0" });
    if (how === "events") {
      qe.on("completed", ({ jobId, returnvalue }) => note(jobId, { value: returnvalue }));
      qe.on("failed", ({ jobId, failedReason }) => note(jobId, { failed: failedReason }));
    }
    await qe.waitUntilReady();
  }
  const t0 = process.hrtime.bigint();
  let list, added;
  if (shape === "flow") {
    const fp = new FlowProducer({ connection: conn });
    const flows = [];
    for (let i = 1; i <= N; i++) {
      let node = { name: "s1", queueName: queue, data: { n: i, step: 1 } };
      for (let s = 2; s <= 4; s++) node = { name: "s" + s, queueName: queue, data: { step: s }, children: [node] };
      flows.push(node);
    }
    added = (await fp.addBulk(flows)).map((t) => t.job);
    list = added.map((j) => j.id);
    await fp.close();
  } else {
    const jobs = [];
    for (let i = 1; i <= N; i++) jobs.push({ name: shape, data: { n: i } });
    added = await q.addBulk(jobs);
    list = added.map((j) => j.id);
  }
  const t1 = process.hrtime.bigint();
  const submitted_at_ms = Date.now();
  ids = list;
  ids.set = new Set(list);
  for (const id of list) if (results.has(id)) got++;
  const n_of = new Map(list.map((id, i) => [id, i + 1]));
  let missed = 0;
  const fetchMissing = async () => {
    const want = list.filter((id) => !results.has(id));
    for (let k = 0; k < want.length; k += 1000) {
      const jobs = await Promise.all(want.slice(k, k + 1000).map((id) => Job.fromId(q, id)));
      for (const j of jobs) {
        if (!j || (!j.finishedOn)) continue;
        if (how !== "poll") missed++;
        note(j.id, j.failedReason ? { failed: j.failedReason } : { value: j.returnvalue });
      }
    }
  };
  if (how === "until") // one promise a job, each a listener on the QueueEvents
    for (const j of added)
      j.waitUntilFinished(qe).then((v) => note(j.id, { value: v }), (e) => note(j.id, { failed: String(e) }));
  check();
  const timer = setInterval(async () => {
    // events: the safety net for a trimmed event stream; poll: the waiting itself
    if (how !== "poll" && got >= ids.length) return;
    const c = await q.getJobCounts("completed", "failed");
    // the flow's steps are jobs too: all N*4 finished means every top job has
    const total = shape === "flow" ? N * 4 : N;
    if (c.completed + c.failed >= total) await fetchMissing();
  }, how === "events" ? 1000 : 20);
  await finished;
  clearInterval(timer);
  const t2 = process.hrtime.bigint();
  let ok = 0;
  let sum = 0;
  const burns = [];
  for (const id of list) {
    const r = results.get(id);
    if (r && !("failed" in r)) {
      let v = r.value;
      if (shape === "cpu" && v) {
        burns.push(v.ms);
        v = v.x;
      }
      sum += Number(v);
      if (Number(v) === expected(shape, n_of.get(id), loops)) ok++;
    }
  }
  console.log(JSON.stringify({ jobs: N, ok, sum, submitted_at_ms, submit_s: Number(t1 - t0) / 1e9,
                               wait_s: Number(t2 - t1) / 1e9, missed_events: missed,
                               burn_ms: burns.length ? median(burns) : undefined }));
  if (qe) await qe.close();
  await q.close();
  process.exit(0);
}

if (role === "calibrate") calibrate(Number(args[0] || 5));
else if (role === "worker") worker(...args);
else if (role === "client") {
  const [port, queue, shape, n, how, loops] = args;
  client(port, queue, shape, n, how || "events", Number(loops || 0)).catch((e) => {
    console.error(e);
    process.exit(1);
  });
} else {
  console.error("usage: node fleet_bullmq.mjs calibrate MS | worker PORT QUEUE SHAPE CONCURRENCY [LOOPS] | client PORT QUEUE SHAPE N [events|poll] [LOOPS]");
  process.exit(2);
}
