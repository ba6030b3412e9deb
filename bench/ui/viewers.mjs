// bench/ui/viewers.mjs -- N viewers of one run's events (GET /api/runs/ID/events), as a
// browser's EventSource would be: node viewers.mjs BASE_URL ID N. Prints "ready" once
// every stream has its snapshot, then, when every stream has ended, one JSON line:
// {"viewers", "bytes" (per viewer, median: the text's, after gzip), "wire" (per viewer,
// median: as sent), "records" (events per viewer, median)}.
//
// They stand for browsers elsewhere, so they should cost this machine little: node:http
// and node:zlib (not fetch, whose streams cost about three times the CPU), taking gzip
// as a browser does, and each chunk looked at once (Buffer.indexOf, and the seam of two
// chunks, so that an event's name cut in two is still seen).
import http from 'node:http';
import zlib from 'node:zlib';

const [base, id, n] = [process.argv[2], process.argv[3], Number(process.argv[4])];
const SNAP = Buffer.from('\nevent: snapshot\n'), REC = Buffer.from('\nevent: records\n');
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

function count(buf, what) {
  let k = 0;
  for (let at = buf.indexOf(what); at >= 0; at = buf.indexOf(what, at + 1)) k++;
  return k;
}

let readyCount = 0;
function view() {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}api/runs/${id}/events`, { agent, headers: { 'accept-encoding': 'gzip' } }, (res) => {
      let bytes = 0, wire = 0, records = 0, ready = false, last = Buffer.from('\n'); // a stream begins a line
      res.on('data', (c) => { wire += c.length; });
      const body = res.headers['content-encoding'] === 'gzip' ? res.pipe(zlib.createGunzip()) : res;
      body.on('data', (buf) => {
        bytes += buf.length;
        const seam = Buffer.concat([last, buf.subarray(0, REC.length - 1)]); // names across the cut
        if (!ready && (buf.indexOf(SNAP) >= 0 || seam.indexOf(SNAP) >= 0)) {
          ready = true;
          if (++readyCount === n) console.log('ready');
        }
        records += count(buf, REC) + count(seam, REC);
        last = Buffer.from(buf.subarray(Math.max(0, buf.length - (REC.length - 1))));
      });
      body.on('end', () => resolve({ bytes, wire, records }));
      body.on('error', reject);
    });
    req.on('error', reject);
  });
}

const got = await Promise.all(Array.from({ length: n }, () => view()));
const med = (xs) => xs.sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
console.log(JSON.stringify({ viewers: n, bytes: med(got.map((g) => g.bytes)),
  wire: med(got.map((g) => g.wire)), records: med(got.map((g) => g.records)) }));
