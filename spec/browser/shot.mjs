// shot.mjs {url, id, call, out} -- a screenshot of a run's page, a call chosen (the
// the picture in docs/operations.md, docs/ui-run.png).
import { args, page, ready, report } from './lib.mjs';

report(async (b) => {
  const p = await page(b, { width: 1400, height: 1000 });
  await p.goto(args.url + '#/run/' + args.id, { waitUntil: 'load' });
  await ready(p);
  if (args.call) {
    await p.click(`tr.call[data-call="${args.call}"]`);
    await p.waitForSelector('#panel-params');
  }
  await p.screenshot({ path: args.out });
  return { ok: true };
});
