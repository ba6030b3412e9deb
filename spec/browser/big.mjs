// big.mjs {url, id, last} or {file, last} (a report) -- the page of a run of very many calls: drawn (the timeline has
// them all, the table only the rows in view), a call chosen; how long it took (said,
// not asserted).
import { args, page, ready, report } from './lib.mjs';

report(async (b) => {
  const p = await page(b);
  const t0 = Date.now();
  await p.goto(args.file ? 'file://' + args.file : args.url + '#/run/' + args.id, { waitUntil: 'load' });
  await ready(p);
  const out = { ms: Date.now() - t0, drawnMs: await p.evaluate(() => Math.round(performance.getEntriesByName('obelus-drawn')[0].startTime)),
    loadedMs: await p.evaluate(() => Math.round(performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd)),
    firstPaintMs: await p.evaluate(() => { const e = performance.getEntriesByName('first-contentful-paint')[0]; return e ? Math.round(e.startTime) : null; }) };
  out.timelineRows = await p.$eval('#timeline', (e) => +e.getAttribute('data-rows'));
  out.tableRows = await p.$$eval('tr.call', (l) => l.length);
  out.graph = await p.$eval('#graph', (e) => e.textContent.slice(0, 80));
  // the table scrolled to its end: its last rows drawn
  await p.$eval('.calls.scroll', (e) => { e.scrollTop = e.scrollHeight; });
  await p.waitForFunction((n) => [...document.querySelectorAll('tr.call')].some((tr) => tr.getAttribute('data-call') === n), {}, args.last);
  await p.click(`tr.call[data-call="${args.last}"]`);
  await p.waitForSelector('#panel-params');
  out.panel = await p.$eval('#panel h2', (e) => e.textContent);
  out.errors = p.seen.errors.filter((e) => !/404/.test(e));
  return out;
});
