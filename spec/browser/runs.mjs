// runs.mjs {url} -- the runs list: its rows (source, state), the state and text filters,
// and a row opened from the keyboard.
import { args, page, ready, report } from './lib.mjs';

const rowsOf = (p) => p.$$eval('tbody tr[data-id]', (trs) => trs.map((tr) => ({
  id: tr.getAttribute('data-id'), source: tr.querySelector('a').textContent, state: tr.getAttribute('data-state'),
  cells: [...tr.cells].map((td) => td.textContent) })));

report(async (b) => {
  const p = await page(b);
  await p.goto(args.url, { waitUntil: 'load' });
  await ready(p);
  await p.waitForSelector('tbody tr[data-id]');
  const rows = await rowsOf(p);
  await p.select('select[aria-label=state]', 'failed');
  const failed = await rowsOf(p);
  await p.select('select[aria-label=state]', '');
  await p.type('input[type=search]', 'kill');
  const text = await rowsOf(p);
  // the keyboard: the first row focused, Enter opens its run
  await p.focus('tbody tr[data-id]');
  await p.keyboard.press('Enter');
  await p.waitForFunction(() => location.hash.startsWith('#/run/'));
  await p.waitForSelector('body[data-ready="1"] #title');
  const opened = await p.$eval('#title', (e) => e.textContent);
  return { rows, failed, text, opened, errors: p.seen.errors.filter((e) => !/404/.test(e)), dialogs: p.seen.dialogs };
});
