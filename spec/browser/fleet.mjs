// fleet.mjs {url, workers, queue, jobs} -- the fleet page (#/fleet) of `obelus ui --redis`:
// waits (the page asks again every 2 s) until it lists the workers live, the queue's done
// count, what a finished job costs Redis (looked at every few seconds) and the jobs; then a job's row clicked opens that job's run page with its calls.
import { args, page, ready, report } from './lib.mjs';

report(async (b) => {
  const p = await page(b);
  const out = {};
  await p.goto(args.url + '#/fleet', { waitUntil: 'load' });
  await ready(p);
  // the rows of the table under the h2 titled title, as objects of cell texts by column
  await p.evaluate(() => {
    window.__rows = (title) => {
      const h2 = [...document.querySelectorAll('h2')].find((e) => e.textContent === title);
      const t = h2 && h2.nextElementSibling && h2.nextElementSibling.querySelector('table');
      if (!t) return null;
      const head = [...t.querySelectorAll('thead th')].map((th) => th.textContent);
      return [...t.querySelectorAll('tbody tr')].filter((tr) => !tr.querySelector('td.note'))
        .map((tr) => Object.fromEntries([...tr.children].map((td, k) => [head[k], td.textContent])));
    };
  });
  await p.waitForFunction((a) => {
    const w = window.__rows('Workers'), q = window.__rows('Queues'), j = window.__rows('Jobs');
    if (!w || !q || !j) return false;
    const live = w.filter((r) => r.state === 'live').map((r) => r.name).sort().join(',');
    const queue = q.find((r) => r.name === a.queue);
    return live === a.workers.slice().sort().join(',') && queue && queue.done === String(a.jobs) &&
      j.filter((r) => r.state === 'done').length === a.jobs && queue['a finished job'] !== '';
  }, { timeout: 40000, polling: 200 }, args);
  out.workers = await p.evaluate(() => window.__rows('Workers'));
  out.queues = await p.evaluate(() => window.__rows('Queues'));
  out.jobs = await p.evaluate(() => window.__rows('Jobs'));
  out.summary = await p.$eval('.sum', (e) => e.textContent);
  await p.evaluate(() => { window.__same_page = true; });
  // the first job's row, clicked: its run's page
  const job = out.jobs[0].job;
  out.clicked = job;
  // (the page draws its tables anew when the fleet's answer changes, as its workers'
  // last_seen does: the row found again if it went between finding and clicking)
  let clicked = false, last = null;
  for (let k = 0; k < 5 && !clicked; k++) {
    try {
      for (const r of await p.$$('h2 + div table tbody tr.link')) {
        if (await r.evaluate((tr) => tr.children[0].textContent) === job) { await r.click(); clicked = true; break; }
      }
    } catch (e) { last = e; }
  }
  if (!clicked && last) throw last;
  if (!clicked) throw new Error('no row for job ' + job);
  await p.waitForFunction(() => /^#\/run\//.test(location.hash), { timeout: 10000 });
  out.hash = await p.evaluate(() => location.hash);
  await ready(p);
  await p.waitForSelector('tr.call', { timeout: 20000 });
  out.title = await p.$eval('#title', (e) => e.textContent);
  out.calls = await p.$$eval('tr.call', (trs) => trs.map((tr) => [tr.getAttribute('data-call'), tr.getAttribute('data-state')]));
  out.samePage = await p.evaluate(() => window.__same_page === true);
  out.errors = p.seen.errors;
  out.failed = p.seen.failed;
  out.dialogs = p.seen.dialogs;
  return out;
});
