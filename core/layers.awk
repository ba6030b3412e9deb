# core/layers.awk -- the include rule of core/ (`make layers`): a file includes its own
# layer and the layers below it; log, bridge and io sit side by side and never include
# each other. The layers, lowest first: base < log, bridge, io < plan < engine < drive <
# fleet < host (with obelus.h, the public API) < cli. Prints "file:line: layer -> layer
# (up|sideways): #include ..." for each include that breaks the rule, and exits 1 if one
# does.
#   with core/ in layer folders:  awk -f core/layers.awk core/*.h core/*/*.[ch]
#                                 (a file's layer is its folder)
#   while core/ is flat:          awk -v map=core/layers.map -f core/layers.awk core/*.[ch]
#                                 (a file's layer is its line in the map, which places
#                                 each file where it is going; a file with no line is
#                                 "not in a layer")
BEGIN {
  split("base log bridge io plan engine drive fleet host cli", names, " ")
  rank["base"] = 0; rank["log"] = 1; rank["bridge"] = 1; rank["io"] = 1
  rank["plan"] = 2; rank["engine"] = 3; rank["drive"] = 4; rank["fleet"] = 5
  rank["host"] = 6; rank["api"] = 6; rank["cli"] = 7
  if (map != "")
    while ((getline line < map) > 0)
      if (line !~ /^#/ && split(line, f, /[ \t]+/) >= 2) layer_of[f[1]] = f[2]
  bad = 0
}
function base(p) { sub(/.*\//, "", p); return p }
function layer(p,   d) {
  if (map != "") return layer_of[base(p)]
  if (p == "obelus.h" || p ~ /(^|\/)core\/obelus\.h$/) return "api"
  d = p; sub(/\/[^\/]*$/, "", d); sub(/.*\//, "", d)   # the folder that holds it
  return d
}
FNR == 1 { from = layer(FILENAME); if (!(from in rank)) {
  if (map != "") printf "%s: in no layer (give it a line in %s)\n", FILENAME, map
  else printf "%s: not in a layer folder\n", FILENAME
  bad = 1 } }
/^[ \t]*#[ \t]*include[ \t]*"/ && (from in rank) {
  inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
  if (map == "" && inc != "obelus.h" && inc !~ /\//) {
    printf "%s:%d: the include does not name its folder: %s\n", FILENAME, FNR, inc; bad = 1; next }
  to = (map != "" && inc != "obelus.h") ? layer_of[base(inc)] : layer(inc)
  if (inc == "obelus.h") to = "api"
  if (!(to in rank)) { if (map != "") next   # not a core header (generated, <...> via "")
    printf "%s:%d: %s is in no layer\n", FILENAME, FNR, inc; bad = 1; next }
  if (rank[to] > rank[from] || (rank[to] == rank[from] && to != from && \
      !((to == "api" && from == "host") || (to == "host" && from == "api")))) {
    printf "%s:%d: %s -> %s (%s): #include \"%s\"\n", FILENAME, FNR, from, to,
           (rank[to] > rank[from] ? "up" : "sideways"), inc; bad = 1 }
}
END { exit bad }
