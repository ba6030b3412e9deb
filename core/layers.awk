# core/layers.awk -- the include rule of core/ (`make layers`, docs/architecture.md): a
# file includes its own layer and the layers below it; log, bridge and io sit side by
# side and never include each other. A file's layer is the folder that holds it; the
# layers, lowest first: base < log, bridge, io < plan < engine < drive < fleet < host
# (with obelus.h, the public API, beside it in core/) < cli.
#   awk -f core/layers.awk core/obelus.h core/*/*.[ch]
# Prints "file:line: layer -> layer (up|sideways): #include ..." for each include that
# breaks the rule, and a line for a file outside the layer folders or an include that
# does not name its folder ("engine/ob_run.h"), and exits 1 if there is one.
BEGIN {
  rank["base"] = 0; rank["log"] = 1; rank["bridge"] = 1; rank["io"] = 1
  rank["plan"] = 2; rank["engine"] = 3; rank["drive"] = 4; rank["fleet"] = 5
  rank["host"] = 6; rank["api"] = 6; rank["cli"] = 7
  bad = 0
}
function layer(p,   d) {
  if (p == "obelus.h" || p ~ /(^|\/)core\/obelus\.h$/) return "api"
  d = p; sub(/\/[^\/]*$/, "", d); sub(/.*\//, "", d)   # the folder that holds it
  return d
}
FNR == 1 {
  from = layer(FILENAME)
  if (!(from in rank)) { printf "%s: not in a layer folder\n", FILENAME; bad = 1 }
}
/^[ \t]*#[ \t]*include[ \t]*"/ && (from in rank) {
  inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
  if (inc != "obelus.h" && inc !~ /\//) {
    printf "%s:%d: the include does not name its folder: %s\n", FILENAME, FNR, inc; bad = 1; next }
  to = layer(inc)
  if (!(to in rank)) { printf "%s:%d: %s is in no layer\n", FILENAME, FNR, inc; bad = 1; next }
  if (rank[to] > rank[from] || (rank[to] == rank[from] && to != from && \
      !((to == "api" && from == "host") || (to == "host" && from == "api")))) {
    printf "%s:%d: %s -> %s (%s): #include \"%s\"\n", FILENAME, FNR, from, to,
           (rank[to] > rank[from] ? "up" : "sideways"), inc; bad = 1 }
}
END { exit bad }
