// run.mjs {url, id, call} -- one run's page: a call chosen from the table (mouse), the
// graph and the timeline, and from the keyboard: the side panel shows its params; the
// slider over the log changes the documents shown.
import { args, page, ready, report } from './lib.mjs';

report(async (b) => {
  const p = await page(b);
  await p.goto(args.url + '#/run/' + args.id, { waitUntil: 'load' });
  await ready(p);
  const out = { title: await p.$eval('#title', (e) => e.textContent) };
  out.calls = await p.$$eval('tr.call', (trs) => trs.map((tr) => [tr.getAttribute('data-call'), tr.getAttribute('data-state')]));
  out.nodes = await p.$$eval('#graph g.node', (gs) => gs.map((g) => [g.getAttribute('data-call'), g.getAttribute('data-state')]));
  out.timelineRows = await p.$eval('#timeline', (e) => e.getAttribute('data-rows'));
  // the table
  await p.click(`tr.call[data-call="${args.call}"]`);
  await p.waitForSelector('#panel-params');
  out.panel = await p.$eval('#panel h2', (e) => e.textContent);
  out.params = JSON.parse(await p.$eval('#panel-params', (e) => e.textContent));
  out.output = await p.$eval('#panel-output', (e) => e.textContent).catch(() => null);
  // the graph: its first node
  const first = out.nodes[0] && out.nodes[0][0];
  if (first) {
    await p.click('#graph g.node');
    await p.waitForFunction((n) => document.querySelector('#panel h2').textContent === n, {}, first);
    out.fromGraph = await p.$eval('#panel h2', (e) => e.textContent);
  }
  // the timeline: the row of the last call, clicked where its row is drawn
  const last = out.calls[out.calls.length - 1][0];
  const box = await (await p.$('#timeline canvas')).boundingBox();
  await p.mouse.click(box.x + 60, box.y + 26 + (out.calls.length - 1) * 18 + 9);
  await p.waitForFunction((n) => document.querySelector('#panel h2').textContent === n, {}, last);
  out.fromTimeline = await p.$eval('#panel h2', (e) => e.textContent);
  // the keyboard: the timeline focused, up arrow: the call before
  await p.focus('#timeline');
  await p.keyboard.press('ArrowUp');
  out.fromKeys = await p.$eval('#panel h2', (e) => e.textContent);
  await p.keyboard.press('Escape');
  out.closed = (await p.$('#panel')) === null;
  // the slider: the last message, then message 2
  await p.waitForFunction(() => document.getElementById('states').hasAttribute('data-at'));
  out.atEnd = { at: await p.$eval('#states', (e) => e.getAttribute('data-at')), max: await p.$eval('#at', (e) => e.max),
    text: await p.$eval('#documents', (e) => e.textContent) };
  await p.$eval('#at', (e) => { e.value = 2; e.dispatchEvent(new Event('input', { bubbles: true })); });
  await p.waitForFunction(() => document.getElementById('states').getAttribute('data-at') === '2');
  out.at2 = { label: await p.$eval('#at-label', (e) => e.textContent), text: await p.$eval('#documents', (e) => e.textContent) };
  out.errors = p.seen.errors.filter((e) => !/404/.test(e)); // graph.svg, not served yet
  out.failed = p.seen.failed;
  out.dialogs = p.seen.dialogs;
  return out;
});
