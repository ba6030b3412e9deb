// spec/browser/lib.mjs -- what the browser scripts share: Debian's Chromium started
// headless through puppeteer-core (no browser download), a page that records its
// console errors, failed requests and dialogs, and one JSON report printed at the end.
// Each script takes its arguments as JSON in argv[2] and prints one JSON object.
import puppeteer from 'puppeteer-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const args = JSON.parse(process.argv[2] || '{}');

export async function browser() {
  const profile = mkdtempSync(join(tmpdir(), 'obelus-chromium-'));
  const b = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true, // the new headless mode
    userDataDir: profile,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
      '--js-flags=--max-old-space-size=1024', '--renderer-process-limit=2'],
    protocolTimeout: 60000,
  });
  const close = b.close.bind(b);
  b.close = async () => { await close(); rmSync(profile, { recursive: true, force: true }); };
  return b;
}

// A page whose console errors, uncaught exceptions, dialogs and failed requests are kept.
export async function page(b, opts = {}) {
  const p = await b.newPage();
  await p.setViewport({ width: opts.width || 1280, height: opts.height || 900 });
  p.seen = { errors: [], dialogs: [], failed: [] };
  p.on('console', (m) => { if (m.type() === 'error') p.seen.errors.push(m.text()); });
  p.on('pageerror', (e) => p.seen.errors.push('exception: ' + e.message));
  p.on('dialog', async (d) => { p.seen.dialogs.push(d.type() + ': ' + d.message()); await d.dismiss(); });
  p.on('response', (r) => { if (r.status() >= 400) p.seen.failed.push(r.status() + ' ' + new URL(r.url()).pathname); });
  return p;
}

// The page has drawn what it was asked (app.js sets body[data-ready] once drawn).
export const ready = (p) => p.waitForSelector('body[data-ready="1"]', { timeout: 20000 });

// Runs main(), prints its report as JSON (or {"error"}), closes the browser, exits.
export async function report(main) {
  let b, out;
  const guard = setTimeout(() => { console.log(JSON.stringify({ error: 'timed out' })); process.exit(3); }, 100000);
  try {
    b = await browser();
    out = await main(b);
  } catch (e) {
    out = { error: String(e && e.stack || e) };
  }
  try { if (b) await b.close(); } catch (e) { /* gone already */ }
  clearTimeout(guard);
  console.log(JSON.stringify(out));
  process.exit(0);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Waits until fn() (in node) answers something truthy; its answer, or null at the end.
export async function until(fn, ms = 15000, every = 100) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await fn();
    if (v) return v;
    await sleep(every);
  }
  return null;
}
