/* app.js -- the obelus web app: the runs of `obelus ui` (its JSON API, /api/), one run's
 * graph, timeline, calls and documents, live while it runs, and the fleet. The same file
 * draws `obelus report`'s page ("static mode": the run is in the page, in a
 * <script type="application/json" id="obelus-run">, and nothing is asked of a server).
 *
 * Design. No framework, no build step: DOM built with createElement and textContent
 * only (h() below), never innerHTML, so that nothing a plan, a tool or a journal holds
 * can become markup; the graph's SVG, the one markup taken from the server, is parsed as
 * image/svg+xml and kept only in the elements and attributes a drawing needs. Pages are
 * hash routes (#/runs, #/run/ID, #/fleet), each a mount function that returns its
 * unmount. A run's page holds one model (the run as GET /api/runs/ID gives it); live
 * records (EventSource on /api/runs/ID/events) are queued and applied to it once per
 * animation frame, and what they touched is repainted then: graph nodes' classes, table
 * rows, the timeline's canvas.
 *
 * Costs. A run of 100,000 calls: the timeline is one canvas the size of its box, drawing
 * the rows in view; the calls table holds every row up to TABLE_ALL, then only the rows
 * in view; the side panel is built when a call is chosen; the graph is asked for only up
 * to GRAPH_FETCH_MAX calls, and drawn here (without Graphviz) up to GRAPH_MAX. */
'use strict';
(() => {
  const RUN_DATA = document.getElementById('obelus-run');
  const STATIC = !!RUN_DATA;
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const TABLE_ALL = 10000;     // calls up to which the table holds every row
  const GRAPH_MAX = 400;       // calls up to which the graph is drawn here without the server's
  const GRAPH_FETCH_MAX = 5000; // calls up to which the server's graph is asked for
  const POLL_MS = 1500;

  // --- little helpers -------------------------------------------------------------------

  // An element: props are set as properties (text, class), listeners (on...), or
  // attributes; children are nodes or strings (text nodes, never markup).
  function h(tag, props, ...kids) {
    const e = document.createElement(tag);
    if (props)
      for (const k of Object.keys(props)) {
        const v = props[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === 'text') e.textContent = String(v);
        else if (k === 'class') e.className = v;
        else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : String(v));
      }
    for (const k of kids) if (k !== null && k !== undefined && k !== false) e.append(k);
    return e;
  }
  function svg(tag, attrs, parent) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k of Object.keys(attrs || {})) e.setAttribute(k, String(attrs[k]));
    if (parent) parent.appendChild(e);
    return e;
  }
  const pad = (n) => String(n).padStart(2, '0');
  function fmtDate(ms) {
    if (!ms) return '';
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function fmtBytes(n) {
    if (typeof n !== 'number') return '';
    return n < 10240 ? n + ' B' : n < 10485760 ? (n / 1024).toFixed(1) + ' KB' : (n / 1048576).toFixed(1) + ' MB';
  }
  function fmtDur(us) {
    if (us === null || us === undefined || !isFinite(us)) return '';
    if (us === 0) return '0';
    const ms = us / 1000;
    if (ms < 10) return ms.toFixed(ms < 1 ? 2 : 1) + ' ms';
    if (ms < 1000) return Math.round(ms) + ' ms';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`;
    return `${Math.floor(m / 60)} h ${m % 60} min`;
  }
  // JSON for a <pre>, cut past a bound (a document of megabytes would stall the page)
  function pretty(v, max) {
    let t = typeof v === 'string' ? v : JSON.stringify(v, null, 2);
    if (t === undefined) t = String(v);
    const cap = max || 200000;
    return t.length > cap ? t.slice(0, cap) + `\n… (${t.length - cap} more characters)` : t;
  }
  function debounce(fn, ms) {
    let t = 0;
    const d = (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
    d.cancel = () => clearTimeout(t);
    return d;
  }
  // (wantText: the answer's text too, to tell a list that changed from one that did not)
  async function api(method, path, body, wantText) {
    const opt = { method, credentials: 'same-origin', headers: {} };
    if (body !== undefined) {
      opt.headers['Content-Type'] = 'application/json';
      opt.body = JSON.stringify(body);
    }
    const r = await fetch(path, opt);
    let j = null;
    if (!wantText && r.ok && (r.headers.get('content-type') || '').startsWith('application/json')) {
      // parsed from the bytes (no text made first: a light run of 100,000 calls is 11 MB)
      try { j = await r.json(); } catch (e) { j = null; }
      return { json: j };
    }
    const text = await r.text();
    try { j = text ? JSON.parse(text) : null; } catch (e) { j = null; }
    if (!r.ok) {
      const err = new Error((j && j.error) || `${r.status} ${r.statusText}`);
      err.status = r.status;
      throw err;
    }
    return { json: j, text };
  }
  const runPath = (id) => '/api/runs/' + encodeURIComponent(id);
  // the page has drawn what it was asked: for tests, and the time it took (a mark)
  function drawn() {
    if (document.body.getAttribute('data-ready') === '1') return;
    document.body.setAttribute('data-ready', '1');
    if (window.performance && performance.mark) performance.mark('obelus-drawn');
  }

  // --- states ---------------------------------------------------------------------------

  const CALL_CLASS = { done: 'st-done', failed: 'st-failed', handled: 'st-handled', skipped: 'st-skipped',
    running: 'st-running', waiting: 'st-waiting', 'never ran': 'st-never' };
  const RUN_CLASS = { done: 'st-done', failed: 'st-failed', running: 'st-running',
    'waiting-approval': 'st-waiting', 'killed-resumable': 'st-handled' };
  const stClass = (s) => CALL_CLASS[s] || 'st-other';
  const runClass = (s) => RUN_CLASS[s] || 'st-other';
  const badge = (text, cls) => h('span', { class: 'badge ' + cls, text });
  function legend() {
    const l = h('div', { class: 'legend', 'aria-label': 'state colours' });
    for (const s of ['done', 'failed', 'handled', 'skipped', 'running', 'waiting', 'never ran'])
      l.append(h('span', { class: stClass(s) }, h('i'), s));
    return l;
  }
  const colours = {};
  function colour(name) {
    if (!(name in colours))
      colours[name] = getComputedStyle(document.documentElement).getPropertyValue('--' + name).trim() || '#888';
    return colours[name];
  }
  const STATE_COLOUR = { done: 'done', failed: 'failed', handled: 'handled', skipped: 'skipped',
    running: 'running', waiting: 'waiting' };

  // --- the frame: header, main, routes ---------------------------------------------------

  const app = document.getElementById('app') || document.body.appendChild(h('div', { id: 'app' }));
  let main, navLinks = {}, unmount = null;

  function frame() {
    app.replaceChildren();
    if (!STATIC) {
      const nav = h('nav', { 'aria-label': 'pages' });
      for (const [k, label] of [['runs', 'Runs'], ['fleet', 'Fleet']]) {
        navLinks[k] = h('a', { href: '#/' + k, text: label });
        nav.append(navLinks[k]);
      }
      app.append(h('header', { class: 'top' }, h('a', { class: 'brand', href: '#/runs', text: 'obelus' }), nav,
        h('span', { class: 'where', text: location.host })));
    }
    main = h('main', { id: 'main' });
    app.append(main);
  }

  function route() {
    if (unmount) { unmount(); unmount = null; }
    closePanel();
    main.replaceChildren();
    document.body.removeAttribute('data-ready');
    const hash = location.hash.replace(/^#\/?/, '');
    const [page, ...rest] = hash.split('/');
    for (const k of Object.keys(navLinks)) navLinks[k].classList.toggle('here', k === (page || 'runs'));
    if (page === 'run' && rest.length) unmount = runPage(decodeURIComponent(rest.join('/')));
    else if (page === 'fleet') unmount = fleetPage();
    else unmount = runsPage();
  }

  // --- the runs ---------------------------------------------------------------------------

  const RUN_STATES = ['running', 'waiting-approval', 'done', 'failed', 'killed-resumable'];

  function runsPage() {
    document.title = 'obelus · runs';
    const state = h('select', { 'aria-label': 'state' }, h('option', { value: '', text: 'every state' }),
      ...RUN_STATES.map((s) => h('option', { value: s, text: s })));
    const text = h('input', { type: 'search', placeholder: 'filter: source, plan, id', 'aria-label': 'filter' });
    const saved = sessionStorage.getItem('obelus.filter');
    if (saved) { const f = JSON.parse(saved); state.value = f.state || ''; text.value = f.text || ''; }
    const count = h('span', { class: 'note' });
    const err = h('div', { class: 'error', role: 'alert' });
    const tbody = h('tbody');
    const table = h('table', { class: 'runs' }, h('thead', null, h('tr', null,
      ...['source', 'state', 'started', 'duration', 'calls', 'failed'].map((c, i) =>
        h('th', { class: i >= 4 ? 'num' : null, text: c })))), tbody);
    main.append(h('h1', { text: 'Runs' }), startForm(), h('div', { class: 'filters' }, state, text, count), err,
      h('div', { class: 'scroll' }, table));
    let runs = [], last = '', timer = 0, gone = false;

    function draw() {
      const s = state.value, q = text.value.trim().toLowerCase();
      sessionStorage.setItem('obelus.filter', JSON.stringify({ state: s, text: text.value }));
      const shown = runs.filter((r) => (!s || r.state === s) &&
        (!q || [r.source, r.plan, r.id].some((v) => typeof v === 'string' && v.toLowerCase().includes(q))));
      count.textContent = `${shown.length} of ${runs.length} runs`;
      const rows = shown.map((r) => {
        const dur = r.started ? ((r.ended || (r.state === 'running' ? Date.now() : null)) - r.started) : null;
        return h('tr', { class: 'link', 'data-id': r.id, 'data-state': r.state, tabindex: 0 },
          h('td', null, h('a', { href: '#/run/' + encodeURIComponent(r.id), text: r.source || r.id })),
          h('td', null, badge(r.state, runClass(r.state))),
          h('td', { text: fmtDate(r.started) }),
          h('td', { text: dur !== null && dur >= 0 ? fmtDur(dur * 1000) : '' }),
          h('td', { class: 'num', text: r.calls ?? '' }),
          h('td', { class: 'num', text: r.failed ?? '' }));
      });
      tbody.replaceChildren(...rows);
      if (!rows.length)
        tbody.append(h('tr', null, h('td', { colspan: 6, class: 'note',
          text: runs.length ? 'no run matches' : 'no journal under the --journals folders yet' })));
    }
    const open = (ev) => {
      const tr = ev.target.closest('tr[data-id]');
      if (!tr || ev.target.closest('a')) return;
      if (ev.type === 'keydown' && ev.key !== 'Enter') return;
      location.hash = '#/run/' + encodeURIComponent(tr.getAttribute('data-id'));
    };
    tbody.addEventListener('click', open);
    tbody.addEventListener('keydown', open);
    state.addEventListener('change', draw);
    text.addEventListener('input', draw);

    async function refresh() {
      clearTimeout(timer);
      if (gone) return;
      if (!document.hidden) {
        try {
          const r = await api('GET', '/api/runs', undefined, true);
          err.textContent = '';
          if (r.text !== last) { last = r.text; runs = (r.json && r.json.runs) || []; draw(); }
          drawn();
        } catch (e) { err.textContent = 'cannot list the runs: ' + e.message; }
      }
      if (!gone) timer = setTimeout(refresh, POLL_MS);
    }
    const onVisible = () => { if (!document.hidden) refresh(); };
    document.addEventListener('visibilitychange', onVisible);
    refresh();
    return () => { gone = true; clearTimeout(timer); document.removeEventListener('visibilitychange', onVisible); };
  }

  // "Start a run": a plan (a plan file's JSON) and its input → POST /api/runs
  function startForm() {
    const plan = h('textarea', { id: 'start-plan', rows: 8, spellcheck: 'false',
      placeholder: '[{"_id": "a", "_tool": "echo", "value": 1, "_outputPath": "†state.a"}]' });
    const input = h('textarea', { id: 'start-input', rows: 3, spellcheck: 'false', placeholder: '{}' });
    const name = h('input', { id: 'start-name', type: 'text', placeholder: 'optional', size: 24 });
    const ask = h('input', { id: 'start-approve', type: 'checkbox' });
    const err = h('div', { class: 'error', role: 'alert' });
    const go = h('button', { type: 'submit', class: 'primary', text: 'Start' });
    const form = h('form', { class: 'start-form' },
      h('label', { for: 'start-plan', text: 'Plan (a plan file\'s JSON)' }), plan,
      h('label', { for: 'start-input', text: 'Input (JSON)' }), input,
      h('label', { for: 'start-name', text: 'Name' }), name,
      h('div', { class: 'row' }, ask, h('label', { for: 'start-approve', class: 'inline',
        text: 'ask before each call starts (approve)' })),
      h('div', { class: 'row' }, go), err);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      let p, i = null;
      try { p = JSON.parse(plan.value); } catch (e) { err.textContent = 'the plan is not JSON: ' + e.message; return; }
      if (input.value.trim())
        try { i = JSON.parse(input.value); } catch (e) { err.textContent = 'the input is not JSON: ' + e.message; return; }
      const body = { plan: p, input: i };
      if (name.value.trim()) body.name = name.value.trim();
      if (ask.checked) body.approve = true;
      go.disabled = true;
      try {
        const r = await api('POST', '/api/runs', body);
        location.hash = '#/run/' + encodeURIComponent(r.json.id);
      } catch (e) { err.textContent = 'not started: ' + e.message; } finally { go.disabled = false; }
    });
    return h('details', { class: 'start' }, h('summary', { text: 'Start a run' }), form);
  }

  // --- one run: its model ------------------------------------------------------------------

  // calls by scope, then id: a Map per scope (no key string made per call: a run of
  // 100,000 calls is read without 100,000 of them)
  class Keys {
    constructor() { this.scopes = new Map(); }
    get(scope, id) { const m = this.scopes.get(scope); return m ? m.get(id) : undefined; }
    set(scope, id, i) {
      let m = this.scopes.get(scope);
      if (!m) this.scopes.set(scope, m = new Map());
      m.set(id, i);
    }
  }
  const NONE = Object.freeze([]); // a call's progress until it has some (one list for all)

  // The run as the page holds it: the API's detail, and what is worked out of it (the
  // calls' order as a tree, each with its depth; the calls by scope and id).
  class Run {
    constructor(detail) { this.set(detail); }
    set(detail) {
      this.detail = detail;
      this.run = detail.run || { calls: [] };
      this.calls = this.run.calls || [];
      this.t0 = this.run.t0_us || 0;
      this.byKey = new Keys();
      this.calls.forEach((c, i) => {
        c.attempts = c.attempts || [];
        c.progress = c.progress || NONE;
        this.byKey.set(c.scope || '', c.id, i);
      });
      this.scopes = this.scopes || new Map(); // a journal's scope numbers, as its records define them
      this.markWaiting(detail.waiting);
      this.layout();
    }
    markWaiting(list) {
      for (const c of this.calls) if (c._waiting) c._waiting = null; // (no new field on each)
      for (const w of list || []) {
        const i = this.byKey.get(w.scope || '', w.call);
        if (i !== undefined) this.calls[i]._waiting = w;
      }
    }
    state(i) { const c = this.calls[i]; return c._waiting ? 'waiting' : c.state; }
    name(i) { const c = this.calls[i]; return c.scope ? c.scope + ' › ' + c.id : c.id; }
    // the call that delegated call i's plan, or whose _each copy it is: -1 at the top
    parentOf(i) {
      const c = this.calls[i];
      if (typeof c.parent === 'number' && c.parent >= 0 && c.parent < this.calls.length) return c.parent;
      const s = c.scope || '';
      if (!s) return -1;
      const k = s.lastIndexOf('/');
      const p = k < 0 ? this.byKey.get('', s) : this.byKey.get(s.slice(0, k), s.slice(k + 1));
      return p === undefined || p === i ? -1 : p;
    }
    layout() {
      const n = this.calls.length, kids = new Map(), roots = [];
      this.parent = new Array(n);
      for (let i = 0; i < n; i++) {
        const p = this.parentOf(i);
        this.parent[i] = p;
        if (p < 0) roots.push(i);
        else { let l = kids.get(p); if (!l) kids.set(p, l = []); l.push(i); }
      }
      this.kids = kids;
      this.order = [];
      this.depth = new Array(n).fill(0);
      this.row = new Array(n).fill(-1);
      const seen = new Uint8Array(n);
      const visit = (root) => { // depth first, without recursion: sub-plans nest deep
        const stack = [[root, 0]];
        while (stack.length) {
          const [i, d] = stack.pop();
          if (seen[i]) continue;
          seen[i] = 1;
          this.row[i] = this.order.length;
          this.order.push(i);
          this.depth[i] = d;
          const l = kids.get(i);
          if (l) for (let k = l.length - 1; k >= 0; k--) stack.push([l[k], d + 1]);
        }
      };
      for (const r of roots) visit(r);
      for (let i = 0; i < n; i++) if (!seen[i]) visit(i); // a cycle of parents: kept at the top
    }
    span() {
      let end = this.run.duration_us || 0;
      for (const c of this.calls) for (const a of c.attempts) {
        if (a[1] !== null && a[1] > end) end = a[1];
        if (a[0] > end) end = a[0];
      }
      if (this.live && this.t0) end = Math.max(end, Date.now() * 1000 - this.t0);
      return Math.max(end, 1);
    }
    // the run's state: the API's, or from the exit status (a report)
    runState() {
      const d = this.detail;
      // its end read from the stream: ended, whatever a detail fetched before it says
      if (this.ended && typeof this.run.exit === 'number') return this.run.exit === 0 ? 'done' : 'failed';
      if (d.state) return d.state;
      const e = this.run.exit;
      return e === 0 ? 'done' : typeof e === 'number' ? 'failed' : 'not ended';
    }
    // a call known by scope and id, made when a live record names one not seen yet
    call(scope, id, make) {
      const i = this.byKey.get(scope, id);
      if (i !== undefined) return i;
      if (!make) return -1;
      this.calls.push({ id, scope, tool: '', instance: null, state: 'running', attempts: [], progress: [],
        deps: [] }); // (its params and output: asked for when it is chosen)
      this.byKey.set(scope, id, this.calls.length - 1);
      this.grown = true;
      return this.calls.length - 1;
    }
    scopeName(s) {
      if (s === undefined || s === null || s === '') return '';
      if (typeof s === 'string') return s;
      return this.scopes.has(s) ? this.scopes.get(s) : null;
    }
    // Applies one journal record or message to the model; the touched calls' indices go
    // into dirty. false: one it cannot place (a scope defined before the snapshot).
    apply(r, dirty) {
      if (!r || typeof r !== 'object') return true;
      if (r.journal === 'scope') {
        const name = r.in ? (this.scopes.has(r.in) ? this.scopes.get(r.in) + '/' + r.call : null) : r.path;
        if (name === null || name === undefined) return false;
        this.scopes.set(r.n, String(name));
        return true;
      }
      if (r.journal === 'msg') {
        const s = this.scopeName(r.scope);
        if (s === null) return false;
        this.message(r.msg, s, dirty);
        return true;
      }
      if (r.type !== undefined) { // a message of the run's own log
        this.messages = (this.messages || 0) + 1;
        this.message(r, '', dirty);
        return true;
      }
      const scope = this.scopeName(r.scope);
      if (scope === null) return false;
      const t = typeof r.t === 'number' ? r.t : 0;
      if (t && !this.t0) this.t0 = this.run.t0_us = t;
      const rel = t ? t - this.t0 : 0;
      const open = (c) => { const a = c.attempts[c.attempts.length - 1]; return a && a[1] === null ? a : null; };
      let i = -1;
      switch (r.journal) {
        case 'start': {
          i = this.call(scope, r.id, true);
          const c = this.calls[i], a = open(c);
          if (a) a[1] = rel;
          c.attempts.push([rel, null, null]);
          c.state = 'running';
          c._waiting = null;
          break;
        }
        case 'retry': {
          i = this.call(scope, r.id, true);
          const a = open(this.calls[i]);
          if (a) { a[1] = rel; a[2] = r.error ?? 'failed'; }
          break;
        }
        case 'settled': {
          i = this.call(scope, r.id, true);
          const c = this.calls[i], a = open(c);
          if (a) { a[1] = rel; if (r.state === 'failed' && c.error) a[2] = c.error; }
          c.state = r.state;
          c.settled = rel;
          c._waiting = null;
          break;
        }
        case 'progress': {
          i = this.call(scope, r.id, true);
          const c = this.calls[i];
          if (c.progress === NONE) c.progress = [];
          c.progress.push([r.attempt, rel, r.data]);
          break;
        }
        case 'end':
          this.run.exit = r.exit;
          this.ended = true;
          break;
        default:
          return true;
      }
      if (i >= 0) dirty.add(i);
      return true;
    }
    message(m, scope, dirty) {
      if (!m || m.type !== 'data') return;
      if (m.kind === 'error' && m.data && typeof m.data.id === 'string') {
        const i = this.call(scope, m.data.id, false);
        if (i >= 0) { this.calls[i].error = m.data.error ?? m.data; dirty.add(i); }
        return;
      }
      const id = m._call && m._call._id;
      if (typeof id !== 'string') return;
      const i = this.call(scope, id, false);
      if (i < 0) return;
      const c = this.calls[i], d = m.data;
      const obj = (v) => v && typeof v === 'object' && !Array.isArray(v);
      c.output = obj(c.output) && obj(d) ? Object.assign({}, c.output, d) : d;
      dirty.add(i);
    }
  }

  // --- one run: its page ---------------------------------------------------------------------

  function runPage(id, staticDetail, staticExtra) {
    const page = { id, m: null, chosen: -1, gone: false, timers: [], es: null, queue: [], dirty: new Set(), frame: 0 };
    const head = h('div', { class: 'head' });
    const err = h('div', { class: 'error', role: 'alert' });
    const graphBox = h('div', { class: 'graph scroll', id: 'graph' });
    const ganttBox = h('div', { class: 'gantt', id: 'timeline', tabindex: 0, 'aria-label':
      'timeline: a row per call, a bar per attempt; up and down arrows choose a call' });
    const callsBox = h('div', { class: 'calls scroll' });
    const statesBox = h('div', { class: 'states', id: 'states' });
    if (!STATIC) main.append(h('p', null, h('a', { href: '#/runs', text: '← Runs' })));
    main.append(head, err, legend(),
      h('h2', { text: 'Dependency graph' }), graphBox,
      h('h2', { text: 'Timeline' }), ganttBox,
      h('h2', { text: 'Calls' }), callsBox,
      h('h2', { text: 'Documents over the log' }), statesBox);
    const gantt = new Gantt(ganttBox, page);
    const table = new CallsTable(callsBox, page);
    let graphNodes = [];

    page.select = (i) => {
      const was = page.chosen;
      page.chosen = i;
      if (i !== was) page.forkOf = null; // another call chosen: a fresh fork form
      for (const k of [was, i]) if (k >= 0) { table.update(k); paintNode(k); }
      gantt.paint();
      if (i >= 0) { gantt.reveal(i); openPanel(page, i); } else closePanel();
    };

    function paintNode(i) {
      const n = graphNodes[i];
      if (!n) return;
      const st = page.m.state(i);
      n.setAttribute('class', 'node ' + stClass(st) + (i === page.chosen ? ' chosen' : ''));
      n.setAttribute('data-state', st);
    }

    function drawHead() {
      const m = page.m, d = m.detail, run = m.run, st = m.runState();
      document.title = 'obelus · ' + (d.source || run.plan || id);
      const failed = m.calls.filter((c) => c.state === 'failed').length;
      const counts = {};
      m.calls.forEach((c, i) => { const s = m.state(i); counts[s] = (counts[s] || 0) + 1; });
      const item = (k, v) => h('span', null, k + ': ', h('b', { text: v }));
      const sum = h('div', { class: 'sum' }, badge(st, runClass(st)),
        item('exit', run.exit === null || run.exit === undefined ? 'not yet' : run.exit),
        item('took', fmtDur(run.duration_us)), item('plan', run.plan || d.plan || ''),
        d.started ? item('started', fmtDate(d.started)) : null,
        item('calls', m.calls.length), item('failed', failed),
        ...Object.keys(counts).sort().map((k) => item(k, counts[k])));
      head.replaceChildren(h('h1', { id: 'title', text: d.source || run.plan || id }), sum);
      if (!STATIC) head.append(actions());
    }

    function actions() {
      const m = page.m, d = m.detail, st = m.runState();
      const bar = h('div', { class: 'actions' });
      const here = d.here === true || (d.dir === 0 && typeof d.source === 'string' && d.source.startsWith('ui/'));
      if ((st === 'running' || st === 'waiting-approval') && here)
        bar.append(h('button', { class: 'danger', text: 'Cancel', onclick: () =>
          act('cancel', 'POST', runPath(id) + '/cancel', undefined, () => refetch()) }));
      if (st === 'killed-resumable')
        bar.append(h('button', { text: 'Resume', onclick: () =>
          act('resume', 'POST', runPath(id) + '/resume', undefined, (j) => {
            if (j && j.id && j.id !== id) location.hash = '#/run/' + encodeURIComponent(j.id);
            else { refetch(); live(); }
          }) }));
      const forkBox = h('div', { class: 'fork' });
      bar.append(h('button', { text: 'Fork…', 'aria-expanded': 'false', onclick: (ev) => {
        const open = !forkBox.firstChild;
        ev.target.setAttribute('aria-expanded', String(open));
        forkBox.replaceChildren(...(open ? [forkForm(page, null)] : []));
      } }));
      return h('div', null, bar, forkBox);
    }

    async function act(what, method, path, body, then) {
      err.textContent = '';
      try { const r = await api(method, path, body); if (then) then(r.json); } catch (e) { err.textContent = what + ': ' + e.message; }
    }
    page.act = act;

    // -- the graph: the server's SVG (Graphviz), sanitized; or one drawn here
    async function drawGraph() {
      const m = page.m, n = m.calls.length;
      let text = null;
      if (STATIC) text = staticExtra && staticExtra.graph;
      else if (n <= GRAPH_FETCH_MAX) {
        try {
          const r = await fetch(runPath(id) + '/graph.svg', { credentials: 'same-origin' });
          if (r.ok) text = await r.text();
        } catch (e) { text = null; }
      }
      if (page.gone) return;
      const root = text ? sanitizeSvg(text) : null;
      graphNodes = [];
      if (root) {
        graphBox.replaceChildren(root);
        // a node's id is its call's "node" (the trace's and the graph's names agree)
        const byNode = new Map();
        m.calls.forEach((c, i) => { if (c.node) byNode.set(c.node, i); });
        for (const g of root.querySelectorAll('g.node')) {
          const gid = g.getAttribute('id') || '';
          const k = byNode.has(gid) ? byNode.get(gid) : (/^call-(\d+)$/.exec(gid) || [])[1];
          if (k === undefined || +k >= n) continue;
          graphNodes[+k] = g;
          g.setAttribute('data-call', m.name(+k));
          paintNode(+k);
        }
      } else if (m.calls.filter((c) => !c.scope).length <= GRAPH_MAX) {
        graphBox.replaceChildren(layeredGraph(m, graphNodes));
        m.calls.forEach((c, i) => paintNode(i));
      } else {
        graphBox.replaceChildren(h('p', { class: 'note', text: `${n} calls: the graph is drawn up to ` +
          `${GRAPH_MAX}; the timeline and the table have them all.` }));
      }
    }
    graphBox.addEventListener('click', (ev) => {
      const g = ev.target.closest && ev.target.closest('g.node');
      const i = g ? graphNodes.indexOf(g) : -1;
      if (i >= 0) page.select(i);
    });

    // -- the whole page from the model
    function drawAll() {
      drawHead();
      gantt.paint();
      table.draw();
      if (page.chosen >= page.m.calls.length) page.select(-1);
      refreshPanel();
    }
    // the panel again, unless the user is typing in it (approve's params, fork's values)
    function refreshPanel() {
      const f = document.activeElement;
      if (page.chosen < 0 || !panel || panel.page !== page) return;
      if (f && panel.contains(f) && (f.tagName === 'TEXTAREA' || f.tagName === 'INPUT')) return;
      openPanel(page, page.chosen);
    }

    // -- live: records applied once per frame
    page.flush = () => {
      page.frame = 0;
      const m = page.m;
      if (!m) return;
      let lost = false;
      const before = m.messages || 0;
      for (const r of page.queue) if (!m.apply(r, page.dirty)) lost = true;
      page.queue = [];
      if (m.grown) { m.grown = false; m.layout(); table.draw(); } // new calls: sub-plans', _each copies
      for (const i of page.dirty) { table.update(i); paintNode(i); }
      if (page.dirty.has(page.chosen)) refreshPanel();
      page.dirty.clear();
      drawHead();
      gantt.paint();
      states.follow((m.messages || 0) > before);
      if (lost) refetch(); // a record named what the page cannot place: the run afresh
    };
    page.push = (records) => {
      for (const r of records) page.queue.push(r);
      if (!page.frame) page.frame = requestAnimationFrame(page.flush);
    };

    async function refetch() {
      const seq = page.fetches = (page.fetches || 0) + 1;
      try {
        const r = await api('GET', runPath(id) + '?calls=light');
        if (page.gone || seq !== page.fetches) return; // a later one was asked for: it wins
        setDetail(r.json);
      } catch (e) { err.textContent = 'cannot read the run: ' + e.message; }
    }
    function setDetail(d) {
      if (page.m) page.m.set(d); else page.m = new Run(d);
      page.m.live = isLive(page.m.runState());
      drawAll();
    }
    page.setDetail = setDetail;
    const isLive = (st) => st === 'running' || st === 'waiting-approval';

    function live() {
      if (STATIC || page.gone || page.es) return;
      const poll = () => { // without the events stream: the run again every POLL_MS while it runs
        if (page.gone) return;
        const t = setTimeout(async () => {
          if (!document.hidden) await refetch();
          if (page.m && isLive(page.m.runState())) poll();
          else states.load();
        }, POLL_MS);
        page.timers.push(t);
      };
      if (!window.EventSource) { poll(); return; }
      const es = new EventSource(runPath(id) + '/events');
      page.es = es;
      let opened = false;
      es.addEventListener('snapshot', (ev) => {
        opened = true;
        // the stream's snapshot is light (no params, outputs, errors): the whole run once
        try { setDetail(JSON.parse(ev.data)); page.m.live = true; } catch (e) { /* a bad snapshot: the next one */ }
        refetch();
      });
      // the calls waiting for an answer changed (a run this server drives): the run again
      es.addEventListener('waiting', () => { refetch(); });
      es.addEventListener('records', (ev) => {
        opened = true;
        let list;
        try { list = JSON.parse(ev.data); } catch (e) { return; }
        if (Array.isArray(list)) page.push(list);
      });
      es.addEventListener('end', (ev) => {
        es.close();
        page.es = null;
        if (page.frame) { cancelAnimationFrame(page.frame); page.flush(); } // its last records first
        try {
          const e = JSON.parse(ev.data);
          if (page.m && typeof e.exit === 'number') { page.m.run.exit = e.exit; page.m.ended = true; }
        } catch (x) { /* the run again below says it */ }
        if (page.m) page.m.live = false;
        refetch().then(() => states.load());
      });
      es.addEventListener('error', () => {
        if (es.readyState === EventSource.CLOSED) { // no stream here (not served): poll
          page.es = null;
          if (!opened || (page.m && isLive(page.m.runState()))) poll();
        }
      });
      // a call waiting for its approval writes nothing: its run asked for again now and then
      const watch = () => {
        const t = setTimeout(async () => {
          if (page.gone || !page.es) return;
          if (!document.hidden && page.m && page.m.calls.some((c) => c._waiting))
            await refetch();
          watch();
        }, 2 * POLL_MS);
        page.timers.push(t);
      };
      watch();
    }

    const states = new StatesView(statesBox, page, staticExtra);

    async function start() {
      if (STATIC) {
        setDetail(staticDetail);
        await drawGraph();
        states.load();
        drawn();
        return;
      }
      try { // light: what the page draws; a call's params and output when it is chosen
        const r = await api('GET', runPath(id) + '?calls=light');
        if (page.gone) return;
        setDetail(r.json);
      } catch (e) {
        err.textContent = e.status === 404 ? 'no run of that id (its journal moved, or was removed)' : 'cannot read the run: ' + e.message;
        drawn();
        return;
      }
      await drawGraph();
      states.load();
      drawn();
      if (isLive(page.m.runState())) live();
    }
    const onResize = () => gantt.paint();
    window.addEventListener('resize', onResize);
    const tick = setInterval(() => { if (page.m && page.m.live && !document.hidden) gantt.paint(); }, 1000);
    start();
    return () => {
      page.gone = true;
      if (page.es) page.es.close();
      page.timers.forEach(clearTimeout);
      clearInterval(tick);
      if (page.frame) cancelAnimationFrame(page.frame);
      window.removeEventListener('resize', onResize);
      states.stop();
    };
  }

  // The graph drawn here: layers by the longest path of dependencies (the top-level
  // calls; sub-plans' are in the timeline and the table, under their call).
  function layeredGraph(m, nodes) {
    const idx = m.calls.map((c, i) => i).filter((i) => !m.calls[i].scope);
    const depth = new Map();
    const d = (i, seen) => {
      if (depth.has(i)) return depth.get(i);
      if (seen.has(i)) return 0;
      seen.add(i);
      let v = 0;
      for (const j of m.calls[i].deps || []) if (j !== i && j < m.calls.length) v = Math.max(v, d(j, seen) + 1);
      depth.set(i, v);
      return v;
    };
    idx.forEach((i) => d(i, new Set()));
    const W = 170, H = 36, GX = 54, GY = 14, rows = {}, pos = new Map();
    let maxr = 0, maxl = 0;
    for (const i of idx) {
      const l = depth.get(i), r = rows[l] || 0;
      rows[l] = r + 1;
      pos.set(i, [16 + l * (W + GX), 12 + r * (H + GY)]);
      maxr = Math.max(maxr, r + 1);
      maxl = Math.max(maxl, l);
    }
    const root = svg('svg', { width: 32 + (maxl + 1) * (W + GX), height: 24 + maxr * (H + GY), role: 'img',
      'aria-label': 'dependency graph' });
    for (const i of idx) for (const j of m.calls[i].deps || []) {
      const a = pos.get(j), b = pos.get(i);
      if (!a || !b) continue;
      const g = svg('g', { class: 'edge' }, root);
      svg('path', { d: `M${a[0] + W},${a[1] + H / 2} C${a[0] + W + 25},${a[1] + H / 2} ${b[0] - 25},${b[1] + H / 2} ${b[0]},${b[1] + H / 2}` }, g);
    }
    for (const i of idx) {
      const [x, y] = pos.get(i), c = m.calls[i];
      const g = svg('g', { class: 'node', id: 'call-' + i, 'data-call': m.name(i) }, root);
      svg('title', {}, g).textContent = m.name(i) + ' (' + (c.tool || '?') + ')';
      svg('rect', { x, y, width: W, height: H, rx: 6 }, g);
      svg('text', { x: x + 8, y: y + 15 }, g).textContent = clip(m.name(i), 25);
      svg('text', { x: x + 8, y: y + 29, class: 'tool' }, g).textContent = clip(c.tool || '', 25);
      nodes[i] = g;
    }
    return root;
  }
  const clip = (s, n) => { s = String(s); return s.length > n ? s.slice(0, n - 1) + '…' : s; };

  // The server's SVG, parsed as SVG (never as HTML) and kept only in the elements a
  // drawing needs, without any script, foreign object, event handler, style or link out.
  const SVG_KEEP = new Set(['svg', 'g', 'title', 'desc', 'polygon', 'polyline', 'path', 'ellipse', 'circle',
    'rect', 'line', 'text', 'tspan', 'a', 'defs', 'lineargradient', 'radialgradient', 'stop', 'clippath', 'marker']);
  function sanitizeSvg(text) {
    let doc;
    try { doc = new DOMParser().parseFromString(text, 'image/svg+xml'); } catch (e) { return null; }
    const root = doc.documentElement;
    if (!root || root.namespaceURI !== SVG_NS || root.localName !== 'svg' ||
        doc.getElementsByTagName('parsererror').length) return null;
    const clean = (el) => {
      for (const a of [...el.attributes]) {
        const n = a.name.toLowerCase(), v = a.value.replace(/[\u0000-\u0020]+/g, '').toLowerCase();
        if (n.startsWith('on') || n === 'style' || ((n === 'href' || n.endsWith(':href')) && !a.value.startsWith('#')) ||
            v.includes('javascript:') || v.includes('data:text/html'))
          el.removeAttributeNode(a);
      }
      for (const k of [...el.children]) {
        if (k.namespaceURI !== SVG_NS || !SVG_KEEP.has(k.localName.toLowerCase())) k.remove();
        else clean(k);
      }
    };
    clean(root);
    root.setAttribute('role', 'img');
    root.setAttribute('aria-label', 'dependency graph');
    return document.importNode(root, true);
  }

  // --- the timeline: a canvas the size of its box, drawing the rows in view ------------------

  class Gantt {
    constructor(box, page) {
      this.box = box;
      this.page = page;
      this.canvas = h('canvas', { role: 'img', 'aria-label': 'timeline of call attempts' });
      this.tall = h('div', { class: 'tall' });
      box.append(this.canvas, this.tall);
      this.RH = 18;
      this.AX = 26;
      this.frame = 0;
      box.addEventListener('scroll', () => this.paint());
      this.canvas.addEventListener('click', (ev) => {
        const i = this.at(ev);
        if (i >= 0) page.select(i);
      });
      this.canvas.addEventListener('mousemove', (ev) => {
        const i = this.at(ev), m = page.m;
        this.canvas.title = i < 0 ? '' : `${m.name(i)} (${m.calls[i].tool || '?'}): ${m.state(i)}` +
          m.calls[i].attempts.map((a, k) => `\nattempt ${k + 1}: ${fmtDur(a[0])} + ${a[1] === null ? 'running' : fmtDur(a[1] - a[0])}` +
            (a[2] ? ' — ' + clip(a[2], 120) : '')).join('');
      });
      box.addEventListener('keydown', (ev) => {
        const m = page.m;
        if (!m || !m.order.length) return;
        const r = page.chosen >= 0 ? m.row[page.chosen] : -1;
        let next = -1;
        if (ev.key === 'ArrowDown') next = Math.min(m.order.length - 1, r + 1);
        else if (ev.key === 'ArrowUp') next = Math.max(0, r - 1);
        else if (ev.key === 'Home') next = 0;
        else if (ev.key === 'End') next = m.order.length - 1;
        else return;
        ev.preventDefault();
        page.select(m.order[next]);
      });
      if (window.ResizeObserver) new ResizeObserver(() => this.paint()).observe(box);
    }
    at(ev) {
      const m = this.page.m;
      if (!m) return -1;
      const rect = this.canvas.getBoundingClientRect(), y = ev.clientY - rect.top;
      if (y < this.AX) return -1;
      const r = Math.floor((y - this.AX + this.box.scrollTop) / this.RH);
      return r >= 0 && r < m.order.length ? m.order[r] : -1;
    }
    reveal(i) {
      const r = this.page.m.row[i];
      if (r < 0) return;
      const top = r * this.RH, view = this.box.clientHeight - this.AX;
      if (top < this.box.scrollTop) this.box.scrollTop = top;
      else if (top + this.RH > this.box.scrollTop + view) this.box.scrollTop = top + this.RH - view;
    }
    paint() { if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.draw(); }); }
    draw() {
      const m = this.page.m;
      if (!m) return;
      const { RH, AX } = this, rows = m.order.length;
      const W = Math.max(320, this.box.clientWidth);
      const H = Math.min(480 - 2, AX + rows * RH + 4);
      const dpr = window.devicePixelRatio || 1, cv = this.canvas;
      if (cv.width !== Math.round(W * dpr) || cv.height !== Math.round(H * dpr)) {
        cv.width = Math.round(W * dpr);
        cv.height = Math.round(H * dpr);
        cv.style.width = W + 'px';
        cv.style.height = H + 'px';
      }
      this.tall.style.height = Math.max(0, AX + rows * RH + 4 - H) + 'px';
      const g = cv.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.clearRect(0, 0, W, H);
      g.font = '12px system-ui, sans-serif';
      g.textBaseline = 'middle';
      const LW = Math.min(260, Math.max(140, W * 0.28)), TW = W - LW - 16, span = m.span();
      const x = (us) => LW + (us / span) * TW;
      const top = this.box.scrollTop, first = Math.max(0, Math.floor(top / RH)),
        last = Math.min(rows, first + Math.ceil((H - AX) / RH) + 1);
      const nowRel = m.live && m.t0 ? Date.now() * 1000 - m.t0 : span;
      for (let r = first; r < last; r++) {
        const i = m.order[r], c = m.calls[i], y = AX + r * RH - top;
        if (y + RH < AX) continue;
        if (i === this.page.chosen) { g.fillStyle = '#e8effb'; g.fillRect(0, y, W, RH); }
        else if (r % 2) { g.fillStyle = '#fafbfc'; g.fillRect(0, y, W, RH); }
        const st = m.state(i), d = m.depth[i];
        g.fillStyle = colour(STATE_COLOUR[st] || 'skipped');
        g.fillRect(4 + d * 12, y + 5, 8, 8);
        g.fillStyle = '#1d2430';
        g.save();
        g.beginPath();
        g.rect(0, y, LW - 6, RH);
        g.clip();
        g.fillText(c.id, 16 + d * 12, y + RH / 2);
        g.restore();
        const n = c.attempts.length;
        c.attempts.forEach((a, k) => {
          const end = a[1] === null ? (m.live ? nowRel : span) : a[1];
          const x0 = x(a[0]), w = Math.max(2, x(end) - x0);
          let fill;
          if (a[2]) fill = colour('failed');
          else if (k < n - 1) fill = colour('retried');
          else fill = colour(STATE_COLOUR[a[1] === null ? 'running' : st] || 'done');
          g.fillStyle = fill;
          g.fillRect(x0, y + 3, w, RH - 6);
          if (k < n - 1) { g.fillStyle = '#fff'; g.fillRect(x0 + w - 1, y + 3, 1, RH - 6); }
        });
        if (!n && c.settled !== undefined && st !== 'never ran') { // skipped: a tick where it settled
          g.fillStyle = colour(STATE_COLOUR[st] || 'skipped');
          g.fillRect(x(c.settled) - 1, y + 4, 2, RH - 8);
        }
      }
      // the axis, over the rows
      g.fillStyle = '#fff';
      g.fillRect(0, 0, W, AX);
      g.strokeStyle = '#dde1e6';
      g.beginPath();
      g.moveTo(0, AX - 0.5);
      g.lineTo(W, AX - 0.5);
      g.stroke();
      const step = niceStep(span / Math.max(2, Math.floor(TW / 90)));
      g.fillStyle = '#5f6773';
      g.font = '11px system-ui, sans-serif';
      g.textAlign = 'center';
      for (let t = 0; t <= span + step / 1e6; t += step) {
        const px = Math.round(x(t)) + 0.5;
        g.strokeStyle = '#dde1e6';
        g.beginPath();
        g.moveTo(px, AX - 6);
        g.lineTo(px, H);
        g.stroke();
        g.fillText(tickLabel(t, step), Math.min(Math.max(px, LW + 12), W - 24), AX / 2 - 1);
      }
      g.textAlign = 'left';
      g.fillText(rows + ' calls', 6, AX / 2 - 1);
      this.drawn = { first, last, span };
      this.box.setAttribute('data-rows', String(rows));
    }
  }
  function niceStep(raw) {
    if (!(raw > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  function tickLabel(us, step) {
    if (us === 0) return '0';
    if (step < 1e6) { const ms = us / 1000, dec = step < 1000 ? Math.min(3, Math.ceil(-Math.log10(step / 1000))) : 0; return ms.toFixed(dec) + ' ms'; }
    if (step < 60e6) return Math.round(us / 1e6) + ' s';
    return Math.round(us / 60e6) + ' min';
  }

  // --- the calls table: every row up to TABLE_ALL calls, the rows in view past it -------------

  class CallsTable {
    constructor(box, page) {
      this.box = box;
      this.page = page;
      this.tbody = h('tbody');
      this.rows = new Map(); // call index -> its <tr>, while shown
      box.append(h('table', { id: 'calls' }, h('thead', null, h('tr', null,
        ...['call', 'tool', 'instance', 'state', 'attempts', 'started', 'took'].map((c, k) =>
          h('th', { class: k >= 4 ? 'num' : null, text: c })))), this.tbody));
      const pick = (ev) => {
        const tr = ev.target.closest('tr.call');
        if (!tr) return;
        if (ev.type === 'keydown') {
          if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
            const to = ev.key === 'ArrowDown' ? tr.nextElementSibling : tr.previousElementSibling;
            if (to && to.classList.contains('call')) { ev.preventDefault(); to.focus(); }
            return;
          }
          if (ev.key !== 'Enter' && ev.key !== ' ') return;
          ev.preventDefault();
        }
        page.select(+tr.getAttribute('data-i'));
      };
      this.tbody.addEventListener('click', pick);
      this.tbody.addEventListener('keydown', pick);
      box.addEventListener('scroll', () => { if (this.virtual) this.window(); });
      this.rowH = 25;
    }
    row(i) {
      const m = this.page.m, c = m.calls[i], st = m.state(i), a = c.attempts;
      const took = a.length ? (a[a.length - 1][1] ?? null) !== null ? a[a.length - 1][1] - a[0][0] : null : null;
      const tr = h('tr', { class: 'call ' + stClass(st) + (i === this.page.chosen ? ' chosen' : ''),
        'data-call': m.name(i), 'data-state': st, 'data-i': i, tabindex: 0 });
      const first = h('td', { text: c.id, title: m.name(i) });
      if (m.depth[i]) first.style.paddingLeft = 8 + m.depth[i] * 16 + 'px';
      tr.append(first, h('td', { text: c.tool || '' }), h('td', { text: c.instance || '' }),
        h('td', null, badge(st, stClass(st))), h('td', { class: 'num', text: a.length }),
        h('td', { class: 'num', text: a.length ? fmtDur(a[0][0]) : '' }),
        h('td', { class: 'num', text: took === null ? (a.length ? 'running' : '') : fmtDur(took) }));
      return tr;
    }
    draw() {
      const m = this.page.m;
      this.rows.clear();
      this.virtual = m.order.length > TABLE_ALL;
      if (!this.virtual) {
        const frag = document.createDocumentFragment();
        for (const i of m.order) { const tr = this.row(i); this.rows.set(i, tr); frag.appendChild(tr); }
        this.tbody.replaceChildren(frag);
        return;
      }
      this.window(true);
    }
    // the rows in view, between two spacers as tall as the rows left out
    window(force) {
      const m = this.page.m, n = m.order.length, H = this.box.clientHeight || 520;
      const first = Math.max(0, Math.floor(this.box.scrollTop / this.rowH) - 10);
      const last = Math.min(n, first + Math.ceil(H / this.rowH) + 20);
      if (!force && this.span && this.span[0] === first && this.span[1] === last) return;
      this.span = [first, last];
      this.rows.clear();
      const spacer = (rows) => { const tr = h('tr', { class: 'spacer', 'aria-hidden': 'true' }, h('td', { colspan: 7 })); tr.firstChild.style.height = rows * this.rowH + 'px'; return tr; };
      const frag = document.createDocumentFragment();
      frag.appendChild(spacer(first));
      for (let r = first; r < last; r++) { const i = m.order[r], tr = this.row(i); this.rows.set(i, tr); frag.appendChild(tr); }
      frag.appendChild(spacer(n - last));
      this.tbody.replaceChildren(frag);
      const one = this.rows.get(m.order[first]);
      const hgt = one && one.getBoundingClientRect().height;
      if (hgt && Math.abs(hgt - this.rowH) > 0.5) { this.rowH = hgt; this.window(true); }
    }
    update(i) {
      const tr = this.rows.get(i);
      if (!tr) return;
      const focused = document.activeElement === tr, nt = this.row(i);
      tr.replaceWith(nt);
      this.rows.set(i, nt);
      if (focused) nt.focus();
    }
  }

  // --- the documents as of message N (GET .../state?at=N; a report: its embedded points) -----

  class StatesView {
    constructor(box, page, extra) {
      this.box = box;
      this.page = page;
      this.points = STATIC ? ((extra && extra.states && extra.states.points) || []) : null;
      this.total = STATIC && extra && extra.states ? extra.states.messages : null;
      this.slider = h('input', { type: 'range', min: 0, max: 0, value: 0, step: 1, id: 'at',
        'aria-label': 'the documents as of message' });
      this.label = h('span', { class: 'note', id: 'at-label' });
      this.pre = h('pre', { id: 'documents' });
      box.append(h('div', { class: 'row' }, h('label', { for: 'at', text: 'as of message' }), this.slider, this.label), this.pre);
      this.fetch = debounce((n) => this.at(n), 150);
      this.slider.addEventListener('input', () => {
        if (this.points) this.showPoint(+this.slider.value);
        else { this.following = +this.slider.value === this.messages; this.label.textContent = `${this.slider.value} of ${this.messages}`; this.fetch(+this.slider.value); }
      });
      this.seq = 0;
    }
    load() {
      if (this.points) {
        if (!this.points.length) { this.box.replaceChildren(h('p', { class: 'note', text: 'the documents are not in this report' })); return; }
        this.slider.max = this.points.length - 1;
        this.slider.value = this.points.length - 1;
        this.showPoint(this.points.length - 1);
        return;
      }
      this.at(null);
    }
    showPoint(k) {
      const p = this.points[k];
      this.label.textContent = `${p.at} of ${this.total ?? this.points[this.points.length - 1].at}`;
      this.pre.textContent = pretty(p.documents);
      this.box.setAttribute('data-at', String(p.at));
    }
    async at(n) {
      const seq = ++this.seq;
      try {
        const r = await api('GET', runPath(this.page.id) + '/state' + (n === null ? '' : '?at=' + n));
        if (seq !== this.seq || this.page.gone) return;
        const j = r.json;
        this.messages = j.messages;
        this.slider.max = j.messages;
        if (n === null) { this.slider.value = j.at ?? j.messages; this.following = true; }
        this.label.textContent = `${j.at} of ${j.messages}`;
        this.pre.textContent = pretty(j.documents);
        this.box.setAttribute('data-at', String(j.at));
      } catch (e) {
        if (seq === this.seq) this.pre.textContent = 'cannot read the documents: ' + e.message;
      }
    }
    // live: the log has more messages; the view follows them when it shows the last
    follow(more) {
      if (this.points || !more || !this.following) return;
      this.lazy = this.lazy || debounce(() => { if (this.following) this.at(null); }, 800);
      this.lazy();
    }
    stop() { this.fetch.cancel(); if (this.lazy) this.lazy.cancel(); this.seq++; }
  }

  // --- the side panel: the chosen call -----------------------------------------------------

  let panel = null;
  function closePanel() {
    if (panel) { panel.remove(); panel = null; }
    document.body.classList.remove('with-panel');
  }
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && panel && !ev.target.closest('textarea')) {
      const p = panel.page;
      closePanel();
      if (p && p.select) { p.chosen = -1; p.select(-1); }
    }
  });

  // A call of a light run (GET /api/runs/ID?calls=light) has no params, output or error
  // until it is chosen: they are asked for then (GET /api/runs/ID/calls/I), and again
  // when its state has changed since.
  async function readCall(page, i) {
    const m = page.m, c = m.calls[i], st = m.state(i);
    if (c._reading) return;
    c._reading = true;
    try {
      const r = await api('GET', runPath(page.id) + '/calls/' + i);
      if (page.m !== m || m.calls[i] !== c) return; // the run was read again meanwhile
      for (const k of ['params', 'resolved', 'output', 'error']) c[k] = r.json[k] ?? null;
      c._got = st;
    } catch (e) {
      c._got = st; c.params = c.params ?? null; c.error = c.error ?? 'cannot read the call: ' + e.message;
    } finally { c._reading = false; }
    if (page.chosen === i && panel && panel.page === page) openPanel(page, i);
  }

  function openPanel(page, i) {
    const m = page.m, c = m.calls[i], st = m.state(i);
    const unread = !STATIC && (!('params' in c) || (c._got !== undefined && c._got !== st));
    if (unread) readCall(page, i);
    const focused = panel && panel.contains(document.activeElement) ? document.activeElement : null;
    const box = panel || h('aside', { class: 'panel', id: 'panel', 'aria-label': 'the chosen call' });
    box.page = page;
    const sec = (title, ...kids) => [h('h3', { text: title }), ...kids];
    const parts = [
      h('button', { class: 'close', 'aria-label': 'close', text: '×', onclick: () => page.select(-1) }),
      h('h2', { text: m.name(i) }), badge(st, stClass(st)),
    ];
    const a = c.attempts;
    const dl = h('dl');
    const dd = (k, v) => { if (v !== '' && v !== null && v !== undefined) dl.append(h('dt', { text: k }), h('dd', { text: v })); };
    dd('tool', c.tool);
    dd('instance', c.instance);
    dd('scope', c.scope);
    dd('started', a.length ? fmtDur(a[0][0]) + ' into the run' : 'never');
    // (a light run leaves out a settled time that is its last attempt's end)
    const settled = c.settled ?? (a.length && a[a.length - 1][1] !== null ? a[a.length - 1][1] : null);
    if (settled !== null && st !== 'running' && st !== 'never ran') dd('settled', fmtDur(settled) + ' into the run');
    if (a.length && a[a.length - 1][1] !== null) dd('took', fmtDur(a[a.length - 1][1] - a[0][0]));
    dd('attempts', a.length);
    parts.push(dl);
    const p = m.parent[i];
    if (p >= 0) parts.push(h('p', null, 'under ', h('button', { text: m.name(p), onclick: () => page.select(p) })));
    if (!STATIC && c._waiting) parts.push(approveBox(page, i));
    if (a.length) parts.push(...sec('attempts', h('ol', null, ...a.map((x) =>
      h('li', { class: x[2] ? 'failed' : null, text: `at ${fmtDur(x[0])}, ${x[1] === null ? 'running' : 'took ' + fmtDur(x[1] - x[0])}` +
        (x[2] ? ' — ' + x[2] : '') })))));
    if (unread && !('params' in c)) parts.push(h('p', { class: 'note', text: 'reading the call…' }));
    else parts.push(...sec('params as written', h('pre', { id: 'panel-params', text: pretty(c.params) })));
    if (c.resolved !== undefined && c.resolved !== null)
      parts.push(...sec('params as the call read them', h('pre', { id: 'panel-resolved', text: pretty(c.resolved) })));
    if (c.output !== null && c.output !== undefined) parts.push(...sec('output', h('pre', { id: 'panel-output', text: pretty(c.output) })));
    if (c.error !== null && c.error !== undefined) parts.push(...sec('error', h('pre', { id: 'panel-error', class: 'error', text: pretty(c.error) })));
    if (c.progress.length) parts.push(...sec('sent while it ran (attempt, when, value)', h('pre', { text:
      pretty(c.progress.map((x) => `${x[0]}  ${fmtDur(x[1])}  ${JSON.stringify(x[2])}`).join('\n')) })));
    const kids = m.kids.get(i);
    if (kids && kids.length) {
      const shown = kids.slice(0, 50);
      parts.push(...sec(`calls under it (${kids.length})`, h('div', { class: 'actions' },
        ...shown.map((k) => h('button', { class: stClass(m.state(k)), text: m.calls[k].id, onclick: () => page.select(k) })))));
    }
    // the fork form is kept while its call stays chosen: the panel is drawn again as the
    // call is read or changes, and what was typed in it must not go
    if (!STATIC && !c.scope) {
      if (!page.forkOf || page.forkOf.i !== i) page.forkOf = { i, form: forkForm(page, i) };
      parts.push(...sec('fork from this call', page.forkOf.form));
    }
    box.replaceChildren(...parts);
    if (!panel) { panel = box; document.body.append(box); }
    document.body.classList.add('with-panel');
    if (focused) (box.contains(focused) ? focused : box.querySelector('.close')).focus();
  }

  // The approve box on show, kept across the panel's redraws while its call waits with the
  // same params: a redraw (news of another call) must not take away an edit in progress.
  let approving = null;
  function approveBox(page, i) {
    const m = page.m, c = m.calls[i], w = c._waiting;
    const text = JSON.stringify(w.params ?? c.resolved ?? c.params ?? {}, null, 2);
    const key = page.id + '\n' + c.id + '\n' + text;
    if (approving && approving.key === key) return approving.box;
    const ta = h('textarea', { rows: 6, 'aria-label': 'the params to approve', spellcheck: 'false' });
    ta.value = text;
    const err = h('div', { class: 'error', role: 'alert' });
    const send = async (decision, edited) => {
      const body = { call: c.id, decision };
      if (edited) {
        try { body.params = JSON.parse(ta.value); } catch (e) { err.textContent = 'not JSON: ' + e.message; return; }
      }
      try {
        await api('POST', runPath(page.id) + '/approve', body);
        const now = page.m.calls[i]; // (the run may have been read again meanwhile)
        if (now && now.id === c.id) now._waiting = null;
        approving = null;
        page.push([]);
        err.textContent = '';
      } catch (e) { err.textContent = e.message; }
    };
    const box = h('div', { class: 'approve' }, h('b', { text: 'Waiting for approval' }),
      h('p', { class: 'note', text: 'the params as the call will read them:' }), ta,
      h('div', { class: 'actions' },
        h('button', { class: 'primary', text: 'Approve', onclick: () => send('yes', false) }),
        h('button', { text: 'Edit and approve', onclick: () => send('yes', true) }),
        h('button', { class: 'danger', text: 'Reject', onclick: () => send('no', false) })), err);
    approving = { key, box };
    return box;
  }

  // Fork: from call i (or, i null, at the slider's message), with "set" values
  function forkForm(page, i) {
    const m = page.m;
    const set = h('textarea', { rows: 4, spellcheck: 'false', 'aria-label': 'values to set, JSON',
      placeholder: '{"†state.city": "Oslo"}' });
    const err = h('div', { class: 'error', role: 'alert' });
    let where = null;
    if (i === null) {
      const at = document.getElementById('at');
      where = h('p', { class: 'note', text: page.chosen >= 0 && !m.calls[page.chosen].scope
        ? `from call ${m.calls[page.chosen].id} (the chosen one)` : `at message ${at ? at.value : 0} (the slider's)` });
    }
    const go = h('button', { class: 'primary', text: 'Fork', onclick: async () => {
      err.textContent = '';
      const body = {};
      const from = i !== null ? i : (page.chosen >= 0 && !m.calls[page.chosen].scope ? page.chosen : -1);
      if (from >= 0) body.from = m.calls[from].id;
      else { const at = document.getElementById('at'); body.at = at ? +at.value : 0; }
      if (set.value.trim()) {
        try { body.set = JSON.parse(set.value); } catch (e) { err.textContent = 'set is not JSON: ' + e.message; return; }
      }
      go.disabled = true;
      try {
        const r = await api('POST', runPath(page.id) + '/fork', body);
        location.hash = '#/run/' + encodeURIComponent(r.json.id);
      } catch (e) { err.textContent = 'not forked: ' + e.message; } finally { go.disabled = false; }
    } });
    return h('div', { class: 'fork-form' }, where, h('p', { class: 'note', text: 'values to set, by reference (JSON):' }), set,
      h('div', { class: 'actions' }, go), err);
  }

  // --- the fleet (obelus ui --redis) -----------------------------------------------------------

  function fleetPage() {
    document.title = 'obelus · fleet';
    const body = h('div');
    const err = h('div', { class: 'error', role: 'alert' });
    main.append(h('h1', { text: 'Fleet' }), err, body);
    let timer = 0, gone = false, last = '';
    const table = (cols, rows, onRow) => {
      const tb = h('tbody');
      for (const r of rows) {
        const tr = h('tr', null, ...cols.map((c) => h('td', { class: c[2] ? 'num' : null, text: c[1](r) ?? '' })));
        if (onRow) { tr.className = 'link'; tr.tabIndex = 0; const go = onRow(r);
          tr.addEventListener('click', go); tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') go(); }); }
        tb.append(tr);
      }
      if (!rows.length) tb.append(h('tr', null, h('td', { colspan: cols.length, class: 'note', text: 'none' })));
      return h('div', { class: 'scroll' }, h('table', null, h('thead', null, h('tr', null,
        ...cols.map((c) => h('th', { class: c[2] ? 'num' : null, text: c[0] })))), tb));
    };
    function draw(f) {
      const when = (v) => typeof v === 'number' ? fmtDate(v > 1e12 ? v : v * 1000) : v;
      body.replaceChildren(
        h('div', { class: 'sum' }, h('span', null, 'redis: ', h('b', { text: f.redis ?? '' })),
          h('span', null, 'queue: ', h('b', { text: f.queue ?? '' })),
          f.sampled ? h('span', null, 'sampled: ', h('b', { text: when(f.sampled) })) : null),
        h('div', { class: 'grid2' },
          h('div', null, h('h2', { text: 'Workers' }), table([['name', (r) => r.name], ['state', (r) => r.state],
            ['running', (r) => r.running, 1], ['done', (r) => r.done, 1], ['failed', (r) => r.failed, 1],
            ['taken over', (r) => r.taken_over, 1], ['last seen', (r) => when(r.last_seen)]], f.workers || [])),
          h('div', null, h('h2', { text: 'Queues' }), table([['name', (r) => r.name], ['waiting', (r) => r.waiting, 1],
            ['running', (r) => r.running, 1], ['done', (r) => r.done, 1], ['failed', (r) => r.failed, 1],
            ['poison', (r) => r.poison, 1], ['Redis', (r) => fmtBytes(r.redis_bytes), 1],
            ['a finished job', (r) => fmtBytes(r.job_bytes), 1]], f.queues || []))),
        h('h2', { text: 'Jobs a second' }), rateChart(f.rate || []),
        h('h2', { text: 'Poison jobs' }), table([['job', (r) => r.job], ['deliveries', (r) => r.deliveries, 1],
          ['error', (r) => r.error]], f.poison || [], (r) => () => { location.hash = '#/run/' + encodeURIComponent('job-' + r.job); }),
        h('h2', { text: 'Jobs' }), table([['job', (r) => r.job], ['state', (r) => r.state], ['worker', (r) => r.worker],
          ['started', (r) => when(r.started)], ['ended', (r) => when(r.ended)]], f.jobs || [],
          (r) => () => { location.hash = '#/run/' + encodeURIComponent('job-' + r.job); }));
    }
    async function refresh() {
      clearTimeout(timer);
      if (gone) return;
      if (!document.hidden) {
        try {
          const r = await api('GET', '/api/fleet', undefined, true);
          err.textContent = '';
          if (r.text !== last) { last = r.text; draw(r.json || {}); }
        } catch (e) {
          err.textContent = e.status === 404 ? (e.message || 'no fleet here') : 'cannot read the fleet: ' + e.message;
          body.replaceChildren();
          last = '';
        }
        drawn();
      }
      if (!gone) timer = setTimeout(refresh, 2000);
    }
    refresh();
    return () => { gone = true; clearTimeout(timer); };
  }

  // done and failed a second, oldest first: two polylines
  function rateChart(rate) {
    const W = 640, H = 160, L = 36, B = 20;
    const root = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'jobs done and failed a second' });
    const box = h('div', { class: 'rate' }, root);
    if (!rate.length) { box.append(h('p', { class: 'note', text: 'no sample yet' })); return box; }
    const max = Math.max(1, ...rate.map((r) => Math.max(+r.done || 0, +r.failed || 0)));
    const x = (k) => L + (rate.length === 1 ? 0 : (k / (rate.length - 1)) * (W - L - 8));
    const y = (v) => H - B - ((+v || 0) / max) * (H - B - 10);
    svg('line', { class: 'axis', x1: L, x2: W - 8, y1: H - B, y2: H - B }, root);
    svg('line', { class: 'axis', x1: L, x2: L, y1: 8, y2: H - B }, root);
    svg('text', { x: 4, y: 14 }, root).textContent = String(max);
    svg('text', { x: 4, y: H - B }, root).textContent = '0';
    svg('text', { x: L, y: H - 4 }, root).textContent = rate.length + ' s';
    for (const k of ['done', 'failed'])
      svg('polyline', { class: k, points: rate.map((r, i) => `${x(i).toFixed(1)},${y(r[k]).toFixed(1)}`).join(' ') }, root);
    box.append(h('div', { class: 'legend' }, h('span', { class: 'st-done' }, h('i'), 'done'), h('span', { class: 'st-failed' }, h('i'), 'failed')));
    return box;
  }

  // --- start ---------------------------------------------------------------------------------

  frame();
  if (STATIC) {
    let detail = {}, extra = {};
    try { detail = JSON.parse(RUN_DATA.textContent); } catch (e) { main.append(h('p', { class: 'error', text: 'the run in this page is not JSON' })); }
    const g = document.getElementById('obelus-graph'), s = document.getElementById('obelus-states');
    try { if (g) extra.graph = JSON.parse(g.textContent); } catch (e) { extra.graph = null; }
    try { if (s) extra.states = JSON.parse(s.textContent); } catch (e) { extra.states = null; }
    runPage(detail.id || '', detail, extra);
  } else {
    if (/[?&]token=/.test(location.search)) // the server has set its cookie: the token leaves the address bar
      history.replaceState(null, '', location.pathname + location.hash);
    window.addEventListener('hashchange', route);
    route();
  }
})();
