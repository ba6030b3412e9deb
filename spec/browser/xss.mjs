// xss.mjs {url, id} -- a run whose plan and tool output hold markup: shown as text, no
// dialog, no element made of it; and the server's graph answered here with a hostile SVG
// (a script, handlers, a foreign object, a javascript: link): drawn without any of them.
import { args, page, ready, report, sleep } from './lib.mjs';

const HOSTILE = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="300" height="120" onload="alert('svg onload')">
<script>alert('svg script')</script>
<g id="graph0" class="graph"><title>g</title>
<g id="call-0" class="node" onclick="alert('node click')"><title>x</title>
<a xlink:href="javascript:alert('link')" href="javascript:alert('link2')"><polygon points="10,10 200,10 200,50 10,50"/>
<text x="20" y="35">node zero</text></a>
<foreignObject width="100" height="100"><img xmlns="http://www.w3.org/1999/xhtml" src="x" onerror="alert('fo')"/></foreignObject>
<set attributeName="onmouseover" to="alert('set')"/><animate attributeName="href" values="javascript:alert('anim')"/>
</g></g></svg>`;

report(async (b) => {
  const p = await page(b);
  await p.setRequestInterception(true);
  p.on('request', (r) => {
    if (r.url().endsWith('/graph.svg')) r.respond({ status: 200, contentType: 'image/svg+xml', body: HOSTILE });
    else r.continue();
  });
  await p.goto(args.url, { waitUntil: 'load' });
  await ready(p);
  await p.waitForSelector('tbody tr[data-id]');
  await p.goto(args.url + '#/run/' + args.id, { waitUntil: 'load' });
  await ready(p);
  await p.waitForSelector('#graph g.node');
  const out = {};
  out.cells = await p.$$eval('tr.call td:first-child', (tds) => tds.map((td) => td.textContent));
  await p.click('tr.call');
  await p.waitForSelector('#panel-output');
  out.output = await p.$eval('#panel-output', (e) => e.textContent);
  out.params = await p.$eval('#panel-params', (e) => e.textContent);
  // the graph's node clicked: the panel, and no handler of the SVG's
  await p.click('#graph g.node');
  await p.hover('#graph g.node');
  await sleep(300);
  out.title = await p.$eval('#title', (e) => e.textContent);
  out.bodyText = await p.evaluate(() => document.body.innerText);
  out.imgs = await p.$$eval('img', (l) => l.length);
  out.scripts = await p.$$eval('script', (l) => l.map((s) => s.src || 'inline: ' + s.textContent.slice(0, 40)));
  out.handlers = await p.evaluate(() => [...document.querySelectorAll('*')].flatMap((e) =>
    [...e.attributes].filter((a) => /^on/i.test(a.name) || /javascript:/i.test(a.value)).map((a) => e.tagName + ' ' + a.name)));
  out.svgKept = await p.$$eval('#graph *', (l) => [...new Set(l.map((e) => e.localName))].sort());
  out.nodeState = await p.$eval('#graph g.node', (g) => g.getAttribute('data-state'));
  out.dialogs = p.seen.dialogs;
  out.errors = p.seen.errors;
  return out;
});
