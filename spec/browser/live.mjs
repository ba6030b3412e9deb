// live.mjs {url, bin, plan, tools, journal, source, calls} -- a run started by
// `obelus run --journal` into the served folder while the runs list is open: it appears
// in the list (running), and its page, opened while it runs, follows it to its end
// without being loaded again: each call's state as the page showed it over time.
import { spawn } from 'node:child_process';
import { args, page, ready, report, until } from './lib.mjs';

report(async (b) => {
  const p = await page(b);
  await p.goto(args.url, { waitUntil: 'load' });
  await ready(p);
  const run = spawn(args.bin, ['run', args.plan, '--tools', args.tools, '--journal', args.journal],
    { stdio: 'ignore' });
  const exited = new Promise((r) => run.on('exit', (code) => r(code)));
  const out = {};
  const row = `tbody tr[data-id] a`;
  out.listed = await until(() => p.$$eval('tbody tr[data-id]', (trs, src) =>
    trs.filter((tr) => tr.querySelector('a').textContent === src).map((tr) => tr.getAttribute('data-state'))[0],
    args.source), 20000, 50);
  await p.evaluate((src) => [...document.querySelectorAll('tbody tr[data-id] a')].find((a) => a.textContent === src).click(), args.source);
  await ready(p);
  await p.evaluate(() => { window.__same_page = true; });
  // each call's states as shown, sampled until the run has ended and the page says so
  const seen = {};
  const sample = async () => {
    const now = await p.$$eval('tr.call', (trs) => trs.map((tr) => [tr.getAttribute('data-call'), tr.getAttribute('data-state')]));
    for (const [c, s] of now) { const l = seen[c] || (seen[c] = []); if (l[l.length - 1] !== s) l.push(s); }
    return p.$eval('.head .badge', (e) => e.textContent);
  };
  out.runState = await until(async () => { const s = await sample(); return s === 'done' || s === 'failed' ? s : null; }, 30000, 50);
  await sample(); // the rows once more: the badge may have said the end between two reads
  out.exit = await exited;
  out.seen = seen;
  out.samePage = await p.evaluate(() => window.__same_page === true);
  out.events = !p.seen.failed.some((f) => f.endsWith('/events')); // false: polled (no events stream)
  out.dialogs = p.seen.dialogs;
  return out;
});
