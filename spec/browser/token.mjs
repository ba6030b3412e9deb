// token.mjs {url, token} -- a server with a token: the page and the API without it are
// 401; the page opened with ?token= draws the runs (the cookie it set carries the API's
// requests) and takes the token out of the address bar.
import { args, page, ready, report } from './lib.mjs';

report(async (b) => {
  const out = {};
  out.apiBare = (await fetch(args.url + 'api/runs')).status;
  out.pageBare = (await fetch(args.url)).status;
  out.appBare = (await fetch(args.url + 'app.js')).status;
  out.wrong = (await fetch(args.url + '?token=nope')).status;
  const p = await page(b);
  const first = await p.goto(args.url + '?token=' + encodeURIComponent(args.token), { waitUntil: 'load' });
  out.pageStatus = first.status();
  out.csp = first.headers()['content-security-policy'] || null;
  await ready(p);
  await p.waitForSelector('tbody tr[data-id]');
  out.rows = await p.$$eval('tbody tr[data-id]', (l) => l.length);
  out.address = await p.evaluate(() => location.href);
  out.cookieVisible = await p.evaluate(() => document.cookie); // HttpOnly: not to scripts
  out.apiFromPage = await p.evaluate(async () => (await fetch('/api/runs')).status);
  out.errors = p.seen.errors;
  return out;
});
