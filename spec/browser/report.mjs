// report.mjs {file, call} -- `obelus report`'s page opened from disk: the run drawn (its
// calls listed, the timeline, the graph), a call's panel, no console error, nothing
// asked of the network.
import { args, page, ready, report } from './lib.mjs';

report(async (b) => {
  const p = await page(b);
  const requests = [];
  p.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) requests.push(r.url()); });
  await p.goto('file://' + args.file, { waitUntil: 'load' });
  await ready(p);
  const out = {};
  out.calls = await p.$$eval('tr.call', (trs) => trs.map((tr) => [tr.getAttribute('data-call'), tr.getAttribute('data-state')]));
  out.nodes = await p.$$eval('#graph g.node', (l) => l.length);
  out.timelineRows = await p.$eval('#timeline', (e) => e.getAttribute('data-rows'));
  out.buttons = await p.$$eval('main button', (l) => l.map((b2) => b2.textContent));
  if (args.call) {
    await p.click(`tr.call[data-call="${args.call}"]`);
    await p.waitForSelector('#panel-params');
    out.panel = await p.$eval('#panel h2', (e) => e.textContent);
    out.params = await p.$eval('#panel-params', (e) => e.textContent);
    out.resolved = await p.$eval('#panel-resolved', (e) => e.textContent).catch(() => null);
    out.panelButtons = await p.$$eval('#panel button', (l) => l.map((b2) => b2.textContent));
  }
  out.depths = await p.$$eval('tr.call', (trs) => trs.map((tr) => tr.cells[0].style.paddingLeft || ''));
  out.slider = await p.$eval('#at', (e) => ({ max: e.max, value: e.value })).catch(() => null);
  out.requests = requests;
  out.errors = p.seen.errors;
  return out;
});
