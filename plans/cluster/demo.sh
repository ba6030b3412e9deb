#!/bin/sh
# plans/cluster/demo.sh -- `make demo-cluster`: a batch of 40 jobs on two workers, one of
# them SIGKILLed halfway, the other taking its jobs over and finishing the batch.
# Starts its own redis-server (a temporary folder, a free loopback port, AOF on; never
# the system's service) and stops it at the end.
set -e
cd "$(dirname "$0")/../.."
OB=bin/obelus
N=40
dir=$(mktemp -d)
port=$(lua5.4 -e 'local uv = require "luv"; local s = uv.new_tcp(); s:bind("127.0.0.1", 0)
  io.write(s:getsockname().port); s:close(); uv.run()')
url=redis://127.0.0.1:$port
a=""; b=""
cleanup() {
  [ -n "$a" ] && kill -9 "$a" 2>/dev/null || true
  [ -n "$b" ] && kill -9 "$b" 2>/dev/null || true
  [ -f "$dir/redis.pid" ] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
  sleep 0.2
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes --save "" \
  --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
echo "redis-server on $url (its files in $dir)"

for i in $(seq 1 $N); do echo "{\"customer\": \"c$i\"}"; done > "$dir/batch.jsonl"
echo "\$ obelus submit plans/cluster/plan.json --tools plans/cluster/tools --redis $url --batch batch.jsonl"
$OB submit plans/cluster/plan.json --tools plans/cluster/tools --redis "$url" \
  --batch "$dir/batch.jsonl" > "$dir/ids"
echo "$N jobs queued: $(head -c 40 "$dir/ids" | tr '\n' ' ')..."
echo "\$ obelus worker --redis $url --tools plans/cluster/tools --jobs 4 --claim-idle 1000 (twice)"
$OB worker --redis "$url" --tools plans/cluster/tools --jobs 4 --claim-idle 1000 --name worker-a \
  2> "$dir/a.log" &
a=$!
$OB worker --redis "$url" --tools plans/cluster/tools --jobs 4 --claim-idle 1000 --name worker-b \
  2> "$dir/b.log" &
b=$!

# the live line: the queue's status, every 200 ms; worker-a is killed at a third done
killed=""
while :; do
  line=$($OB status --redis "$url" --json | lua5.4 -e '
    local cjson = require "cjson"
    local s = cjson.decode(io.read("a"))
    local w = {}
    for _, x in ipairs(s.workers) do
      w[#w + 1] = ("%s %s %d"):format(x.name, x.live and "running" or "holding", x.pending)
    end
    table.sort(w)
    io.write(("%d done, %d running, %d queued, %d taken over | %s"):format(
      s.done, s.running, s.queued, s.claimed, table.concat(w, ", ")))')
  done=${line%% done*}
  printf '\r\033[K%s' "$line"
  if [ -z "$killed" ] && [ "$done" -ge $((N / 3)) ]; then
    kill -9 "$a"
    killed=1
    printf '\n*** kill -9 worker-a (its running jobs are taken over after --claim-idle)\n'
  fi
  [ "$done" -ge "$N" ] && break
  sleep 0.2
done
printf '\n'
echo "\$ obelus wait --redis $url <the $N ids> | head -3"
# shellcheck disable=SC2046
$OB wait --redis "$url" $(cat "$dir/ids") > "$dir/results"
head -3 "$dir/results"
echo "... $(wc -l < "$dir/results") results, $(grep -c '"exit":0' "$dir/results") with exit 0"
kill -TERM "$b"
wait "$b" 2>/dev/null || true
b=""
grep 'taken over' "$dir/b.log" | head -3 || true
echo "\$ obelus status --redis $url"
$OB status --redis "$url"
