/* ob_cmd_report.c -- `obelus report JOURNAL -o run.html`: a run to look at, in one
 * self-contained HTML file (no network, no external script or style): the dependency
 * graph coloured by outcome, a timeline of call attempts (what ran together, what
 * waited for what: a faint line from the moment a call's inputs were all written to
 * its start), and a table of calls whose rows open their params, output or error.
 *
 * The data is the journal as ob_trace reads it (OB_TRACE_RUN), embedded as JSON in a
 * <script type="application/json"> (every "<" written "\u003c", so that no value can
 * end it or open an HTML comment in it);
 * the page draws itself with a little inline JavaScript. Big runs stay usable: the
 * graph is drawn up to GRAPH_MAX calls (a note says so above it), the timeline's rows
 * shrink to 3 px, and the table's details are built only when a row is opened.
 * -o the journal itself (ob_files: any name of the same file) is refused before it
 * is read; a page not written whole (a full disk) is exit 4 (OB_EXIT_WRITE).
 * Costs: the journal read once; the page is the data plus 8 KB. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ob_cli.h"
#include "drive/ob_files.h"
#include "host/ob_trace.h"

static const char page_head[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>obelus run</title>\n<style>\n"
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2430;background:#fff}\n"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}\n"
    ".sum span{display:inline-block;margin-right:14px}\n"
    ".done{fill:#3a9d5d;background:#e3f4e8}.failed{fill:#d1453b;background:#fbe4e2}\n"
    ".skipped{fill:#a0a6ae;background:#eef0f2}.running,.never{fill:#fff;background:#fff}\n"
    ".retried{fill:#e39b2d}.handled{fill:#c9862b;background:#fdf0db}\n"
    "svg text{font:11px system-ui,sans-serif;fill:#1d2430}\n"
    ".node rect{stroke:#1d2430;stroke-width:1}.node.done rect{fill:#d6f0de}"
    ".node.failed rect{fill:#f7d3cf}.node.skipped rect{fill:#e4e7ea}.node.handled rect{fill:#fbe3bd}"
    ".node.never rect,.node.running rect{fill:#fff}.node{cursor:pointer}\n"
    ".edge{stroke:#8a93a0;stroke-width:1;fill:none}.wait{stroke:#c9ced6;stroke-dasharray:2 2}\n"
    "table{border-collapse:collapse;width:100%}td,th{padding:3px 8px;border-bottom:1px solid "
    "#e4e7eb;text-align:left;font-size:13px}\n"
    "tr.call{cursor:pointer}tr.call:hover td{background:#f5f7fa}\n"
    "pre{margin:0;white-space:pre-wrap;font:12px ui-monospace,monospace;max-height:300px;"
    "overflow:auto}\n.note{color:#69707a}.scroll{overflow:auto;max-height:520px;border:1px solid "
    "#e4e7eb}\n"
    "</style></head><body>\n<h1 id=\"title\"></h1><div class=\"sum\" id=\"summary\"></div>\n"
    "<h2>Dependency graph</h2><div id=\"graph\" class=\"scroll\"></div>\n"
    "<h2>Timeline</h2><div id=\"timeline\" class=\"scroll\"></div>\n"
    "<h2>Calls</h2><table id=\"calls\"><thead><tr><th>call</th><th>tool</th><th>instance</th>"
    "<th>outcome</th><th>attempts</th><th>started</th><th>took</th></tr></thead><tbody>"
    "</tbody></table>\n<script type=\"application/json\" id=\"run\">";

static const char page_tail[] =
    "</script>\n<script>\n"
    "(function(){\n"
    "var run=JSON.parse(document.getElementById('run').textContent),calls=run.calls;\n"
    "var NS='http://www.w3.org/2000/svg',GRAPH_MAX=400;\n"
    "function el(n,a,p){var e=document.createElementNS(NS,n);for(var k in a)e.setAttribute(k,a[k]);"
    "if(p)p.appendChild(e);return e}\n"
    "function cls(s){return s==='never ran'?'never':s}\n"
    "function name(c){return (c.scope?c.scope+' \\u203a ':'')+c.id}\n"
    "function ms(us){return (us/1000).toFixed(us<10000?2:0)+' ms'}\n"
    "document.getElementById('title').textContent='Run of '+run.plan;\n"
    "var count={};calls.forEach(function(c){count[c.state]=(count[c.state]||0)+1});\n"
    "var sum=document.getElementById('summary');\n"
    "[['calls',calls.length],['exit',run.exit===null?'not ended':run.exit],"
    "['took',ms(run.duration_us)]].concat(Object.keys(count).map(function(k){return [k,count[k]]}))"
    ".forEach(function(p){var s=document.createElement('span');s.textContent=p[0]+': '+p[1];"
    "sum.appendChild(s)});\n"
    /* the graph: layers by the longest path of dependencies */
    "var g=document.getElementById('graph');\n"
    "if(calls.length>GRAPH_MAX){g.innerHTML='<p class=\"note\">'+calls.length+' calls: the graph "
    "is drawn up to '+GRAPH_MAX+'; the timeline and the table have them all.</p>'}else{\n"
    "var depth=calls.map(function(){return -1});\n"
    "function d(i,seen){if(depth[i]>=0)return depth[i];if(seen[i])return 0;seen[i]=1;var m=0;"
    "calls[i].deps.forEach(function(j){m=Math.max(m,d(j,seen)+1)});return depth[i]=m}\n"
    "calls.forEach(function(c,i){d(i,{})});\n"
    "var rows={},pos=[],W=170,H=34,maxr=0,maxl=0;\n"
    "calls.forEach(function(c,i){var l=depth[i];rows[l]=(rows[l]||0);pos[i]=[20+l*(W+50),"
    "14+rows[l]*(H+14)];rows[l]++;maxr=Math.max(maxr,rows[l]);maxl=Math.max(maxl,l)});\n"
    "var svg=el('svg',{width:40+(maxl+1)*(W+50),height:28+maxr*(H+14)},g);\n"
    "calls.forEach(function(c,i){c.deps.forEach(function(j){var a=pos[j],b=pos[i];"
    "el('path',{'class':'edge',d:'M'+(a[0]+W)+','+(a[1]+H/2)+' C'+(a[0]+W+25)+','+(a[1]+H/2)+' '+"
    "(b[0]-25)+','+(b[1]+H/2)+' '+b[0]+','+(b[1]+H/2)},svg)})});\n"
    "calls.forEach(function(c,i){var n=el('g',{'class':'node '+cls(c.state),'data-call':name(c),"
    "'data-state':c.state},svg);el('rect',{x:pos[i][0],y:pos[i][1],width:W,height:H,rx:6,"
    "'class':cls(c.state)},n);var t=el('text',{x:pos[i][0]+8,y:pos[i][1]+14},n);"
    "t.textContent=name(c).slice(0,26);var u=el('text',{x:pos[i][0]+8,y:pos[i][1]+28},n);"
    "u.textContent=c.tool+' \\u00b7 '+c.state;n.addEventListener('click',function(){open(i)})});}\n"
    /* the timeline: a row per call that ran, a bar per attempt */
    "var tl=document.getElementById('timeline'),ran=calls.map(function(c,i){return i})"
    ".filter(function(i){return calls[i].attempts.length});\n"
    "var RH=ran.length>300?3:16,LW=RH>3?190:0,TW=Math.max(400,(tl.clientWidth||1000)-LW-30),"
    "span=Math.max(run.duration_us,1);\n"
    "var ts=el('svg',{width:LW+TW+20,height:20+ran.length*(RH+2)},tl);\n"
    "function x(us){return LW+us/span*TW}\n"
    "ran.forEach(function(i,r){var c=calls[i],y=14+r*(RH+2);\n"
    "if(RH>3){var t=el('text',{x:2,y:y+RH-4},ts);t.textContent=name(c).slice(0,28)}\n"
    "var ready=0;c.deps.forEach(function(j){var a=calls[j].attempts;if(a.length)ready="
    "Math.max(ready,a[a.length-1][1])});\n"
    "if(ready&&ready<c.attempts[0][0])el('line',{'class':'wait',x1:x(ready),x2:x(c.attempts[0][0]),"
    "y1:y+RH/2,y2:y+RH/2},ts);\n"
    "c.attempts.forEach(function(a,k){var last=k===c.attempts.length-1;var b=el('rect',"
    "{x:x(a[0]),y:y,width:Math.max(x(a[1])-x(a[0]),1),height:RH,'class':last?cls(c.state):"
    "'retried','data-call':name(c)},ts);var tt=el('title',{},b);tt.textContent=name(c)+' attempt '+"
    "(k+1)+': '+ms(a[1]-a[0])+(a[2]?' \\u2014 '+a[2]:'')})});\n"
    /* the table: a row per call, its details built when opened */
    "var tb=document.querySelector('#calls tbody'),rowOf=[];\n"
    "calls.forEach(function(c,i){var tr=document.createElement('tr');tr.className='call '+"
    "cls(c.state);tr.setAttribute('data-call',name(c));tr.setAttribute('data-state',c.state);\n"
    "var a=c.attempts,took=a.length?a[a.length-1][1]-a[0][0]:0;\n"
    "[name(c),c.tool,c.instance||'',c.state,a.length,a.length?ms(a[0][0]):'',a.length?ms(took):'']"
    ".forEach(function(v){var td=document.createElement('td');td.textContent=v;tr.appendChild(td)});"
    "\ntr.addEventListener('click',function(){open(i)});tb.appendChild(tr);rowOf[i]=tr});\n"
    "function open(i){var tr=rowOf[i],n=tr.nextSibling;if(n&&n.className==='details'){n.remove();"
    "return}var c=calls[i],d=document.createElement('tr');d.className='details';var td="
    "document.createElement('td');td.colSpan=7;[['params',c.params],['params as it read them',c.resolved],['output',c.output],"
    "['error',c.error],['sent while it ran (attempt, ms, value)',c.progress.length?c.progress"
    ".map(function(p){return p[0]+'  '+ms(p[1])+'  '+JSON.stringify(p[2])}).join('\\n'):null]]"
    ".forEach(function(p){if(p[1]===null||p[1]===undefined)return;var h="
    "document.createElement('div');h.textContent=p[0];h.className='note';var pre="
    "document.createElement('pre');pre.textContent=typeof p[1]==='string'?p[1]:"
    "JSON.stringify(p[1],null,2);td.appendChild(h);td.appendChild(pre)});d.appendChild(td);"
    "tr.parentNode.insertBefore(d,tr.nextSibling);tr.scrollIntoView({block:'nearest'})}\n"
    "document.body.setAttribute('data-ready','1');\n"
    "})();\n</script></body></html>\n";

static const char report_help[] =
    "usage: obelus report JOURNAL -o FILE.html\n"
    "\n"
    "Writes a run to look at as one self-contained HTML file (no network, no external\n"
    "script): the dependency graph coloured by outcome (done green, failed red,\n"
    "handled amber: its error went to a || alternative; skipped grey, never ran\n"
    "white), a timeline of call attempts (what ran together; a dashed line from the\n"
    "moment a call's inputs were written to its start: what waited for what), and a\n"
    "table of calls whose rows open their params (as written and as the call read\n"
    "them), output or error. JOURNAL is a run's --journal (a torn last line is said on stderr and\n"
    "ignored). Exit 0; 2: the journal cannot be read, FILE cannot be made, or FILE\n"
    "is the journal; 4: FILE could not be written whole (a full disk).\n"
    "\n"
    "example:\n"
    "  obelus run plan.json --tools tools --journal run.jsonl\n"
    "  obelus report run.jsonl -o run.html\n";

int ob_cmd_report(int argc, char **argv) {
  const char *journal = NULL, *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      fputs(report_help, stdout);
      return OB_EXIT_OK;
    } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) {
      out = argv[++i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return ob_cli_usage_error("report", "unknown option %s, or it lacks its value", argv[i]);
    } else if (!journal) {
      journal = argv[i];
    } else {
      return ob_cli_usage_error("report", "unexpected argument \"%s\"", argv[i]);
    }
  }
  if (!journal || !out)
    return ob_cli_usage_error("report", "needs a JOURNAL and -o FILE.html");
  /* -o the journal itself (a link, another name) would replace the run by its page */
  ob_files *fs = ob_files_new();
  ob_files_add(fs, "the journal", journal);
  ob_buf why;
  ob_buf_init(&why);
  int bad = ob_files_clash(fs, "-o", out, &why);
  ob_files_free(fs);
  if (bad)
    fprintf(stderr, "obelus report: %s\n", why.data);
  ob_buf_free(&why);
  if (bad)
    return OB_EXIT_USAGE;
  ob_error err;
  ob_journal_info info;
  ob_value *run = ob_trace_build(journal, OB_TRACE_RUN, &info, &err);
  if (!run) {
    ob_eprintf("obelus report: %s\n", err.msg);
    return OB_EXIT_USAGE;
  }
  ob_cli_report_torn("obelus report", journal, &info);
  char *json = ob_json_print(run, OB_JSON_COMPACT, NULL);
  ob_unref(run);
  FILE *f = fopen(out, "w");
  if (!f) {
    ob_eprintf("obelus report: %s: cannot write it: %s\n", out, strerror(errno));
    free(json);
    return OB_EXIT_USAGE;
  }
  errno = 0; /* the first failed write's, kept to the end */
  fputs(page_head, f);
  /* no "</script>" can end the data early, and no "<!--" can open the script data's
   * escaped state (where a "<script" would make the next "</script>" not end it): a
   * '<' is only ever inside a JSON string, where \u003c is the same character */
  for (const char *p = json; *p; p++) {
    if (*p == '<')
      fputs("\\u003c", f);
    else
      fputc(*p, f);
  }
  fputs(page_tail, f);
  free(json);
  /* a write that failed midway (a full disk, /dev/full) set the stream's error: fclose
   * alone may not say it */
  int lost = fflush(f) == EOF || ferror(f);
  int saved = errno;
  lost |= fclose(f) != 0;
  if (lost) {
    ob_eprintf("obelus report: %s: cannot write it: %s\n", out,
               strerror(saved ? saved : errno ? errno : EIO));
    return OB_EXIT_WRITE;
  }
  return OB_EXIT_OK;
}
