// steer.mjs {url, mode, ...} -- steering runs from the page of `obelus ui`, by clicks:
//   mode "approve" {plan}: the plan typed into "Start a run" with "ask before" checked;
//     the run's page opens; its first call waits and is approved from its side panel; the
//     second is approved with a value edited in its params; the page shows the run done.
//   mode "cancel" {id, journal}: Cancel on a running run's page, then Resume; the journal's
//     start records of call "b" counted (read from the file) once it has started again.
//   mode "fork" {id, call, set}: a done run's call opened (its read held back), "set"
//     values typed in its fork form before the read comes (kept when the panel is drawn
//     again), Fork; the new run's page opens and shows it done.
// Every wait is for the page's state or the server's (the journal), capped.
import { readFileSync } from 'node:fs';
import { args, page, ready, report, until } from './lib.mjs';

const T = { timeout: 30000 };
const badge = (p) => p.$eval('.head .badge', (e) => e.textContent);
const waitBadge = (p, want) => p.waitForFunction((w) => {
  const e = document.querySelector('.head .badge');
  return e && e.textContent === w;
}, T, want);
const waitCall = (p, call, state) => p.waitForSelector(`tr.call[data-call="${call}"][data-state="${state}"]`, T);
const runId = (p) => p.evaluate(() => decodeURIComponent((/^#\/run\/(.+)$/.exec(location.hash) || [])[1] || ''));
// the button of sel whose text is text, clicked with the mouse (again if the page drew
// it anew between finding it and clicking it)
async function clickText(p, sel, text) {
  let last;
  for (let k = 0; k < 5; k++) {
    try {
      for (const b of await p.$$(sel)) if (await b.evaluate((e) => e.textContent) === text) { await b.click(); return; }
      last = new Error('no button ' + text);
    } catch (e) { last = e; }
  }
  throw last;
}
// a button of the run's head (Cancel, Resume, Fork…) by its text, clicked
async function clickAction(p, text) {
  await p.waitForFunction((t) => [...document.querySelectorAll('.head .actions button')].some((b) => b.textContent === t), T, text);
  await clickText(p, '.head .actions button', text);
}
// the side panel's button by its text
async function clickPanel(p, sel, text) {
  await p.waitForFunction((s, t) => [...document.querySelectorAll(s)].some((b) => b.textContent === t), T, sel, text);
  await clickText(p, sel, text);
}
// a call's row clicked (again if the table was drawn anew under the mouse); its panel open
async function openCall(p, call) {
  const sel = `tr.call[data-call="${call}"]`;
  let last;
  for (let k = 0; k < 5; k++) {
    try { await p.waitForSelector(sel, T); await p.click(sel); last = null; break; } catch (e) { last = e; }
  }
  if (last) throw last;
  await p.waitForFunction((c) => { const e = document.querySelector('#panel h2'); return e && e.textContent === c; }, T, call);
}

async function approve(p) {
  const out = {};
  await p.goto(args.url + '#/runs', { waitUntil: 'load' });
  await ready(p);
  await p.click('details.start summary');
  await p.waitForSelector('#start-plan', { visible: true, timeout: 10000 });
  await p.type('#start-plan', args.plan);
  await p.click('#start-approve');
  out.checked = await p.$eval('#start-approve', (e) => e.checked);
  await p.click('form.start-form button[type="submit"]');
  await p.waitForFunction(() => /^#\/run\/./.test(location.hash), T);
  out.id = await runId(p);
  await ready(p);
  await p.evaluate(() => { window.__same_page = true; });
  // the first call waits; approved as it is
  await waitCall(p, 'first', 'waiting');
  out.firstWaited = true;
  out.runWaiting = await badge(p);
  await openCall(p, 'first');
  await p.waitForSelector('#panel .approve textarea', T);
  await clickPanel(p, '#panel .approve button', 'Approve');
  // the second waits: its params edited in the textarea, then "Edit and approve"
  await waitCall(p, 'second', 'waiting');
  // first done: its settling may reach the page after second's wait does (the journal's
  // records stream, the waiting calls are told at once), so it is waited for, capped
  try { await waitCall(p, 'first', 'done'); } catch (e) { /* said below */ }
  out.firstAfter = await p.$eval('tr.call[data-call="first"]', (e) => e.getAttribute('data-state'));
  await openCall(p, 'second');
  await p.waitForSelector('#panel .approve textarea', T);
  const shown = JSON.parse(await p.$eval('#panel .approve textarea', (e) => e.value));
  out.shownParams = { ...shown };
  shown.value = args.edited;
  await p.click('#panel .approve textarea');
  await p.keyboard.down('Control'); await p.keyboard.press('a'); await p.keyboard.up('Control');
  await p.keyboard.press('Backspace');
  await p.keyboard.type(JSON.stringify(shown));
  await clickPanel(p, '#panel .approve button', 'Edit and approve');
  await waitBadge(p, 'done');
  out.runState = await badge(p);
  out.calls = await p.$$eval('tr.call', (trs) => trs.map((tr) => [tr.getAttribute('data-call'), tr.getAttribute('data-state')]));
  out.samePage = await p.evaluate(() => window.__same_page === true);
  return out;
}

const starts = (call) => readFileSync(args.journal, 'utf8').split('\n')
  .filter((l) => l.includes(`"journal":"start","id":"${call}"`)).length;

async function cancel(p) {
  const out = {};
  await p.goto(args.url + '#/run/' + args.id, { waitUntil: 'load' });
  await ready(p);
  await p.evaluate(() => { window.__same_page = true; });
  out.before = await badge(p);
  await clickAction(p, 'Cancel');
  await waitBadge(p, 'killed-resumable');
  out.cancelled = await badge(p);
  out.resumeShown = true;
  await clickAction(p, 'Resume');
  await waitBadge(p, 'running');
  out.resumed = await badge(p);
  out.startsB = await until(() => starts('b') >= 2 ? starts('b') : 0, 20000, 50);
  out.startsA = starts('a');
  out.cancelAgain = await p.$$eval('.head .actions button', (bs) => bs.map((b) => b.textContent));
  out.samePage = await p.evaluate(() => window.__same_page === true);
  return out;
}

async function fork(p) {
  const out = {};
  // a call's read held back 500 ms: what is typed in its fork form goes in before it
  // comes, and the panel is drawn again when it does
  await p.setRequestInterception(true);
  p.on('request', (r) => {
    if (/\/api\/runs\/.+\/calls\/\d+$/.test(new URL(r.url()).pathname)) setTimeout(() => r.continue(), 500);
    else r.continue();
  });
  await p.goto(args.url + '#/run/' + args.id, { waitUntil: 'load' });
  await ready(p);
  out.source = await badge(p);
  await openCall(p, args.call);
  await p.click('#panel .fork-form textarea');
  await p.keyboard.type(JSON.stringify(args.set));
  // the call read (its params shown): the panel was drawn again, with what was typed kept
  await p.waitForSelector('#panel #panel-params', T);
  out.typed = await p.$eval('#panel .fork-form textarea', (e) => e.value);
  await clickPanel(p, '#panel .fork-form button', 'Fork');
  await p.waitForFunction((id) => /^#\/run\/./.test(location.hash) && !location.hash.endsWith('/' + id), T, args.id);
  out.id = await runId(p);
  await ready(p);
  await waitBadge(p, 'done');
  out.runState = await badge(p);
  out.calls = await p.$$eval('tr.call', (trs) => trs.map((tr) => [tr.getAttribute('data-call'), tr.getAttribute('data-state')]));
  return out;
}

report(async (b) => {
  const p = await page(b);
  const out = await ({ approve, cancel, fork })[args.mode](p);
  out.errors = p.seen.errors;
  out.failed = p.seen.failed;
  out.dialogs = p.seen.dialogs;
  return out;
});
