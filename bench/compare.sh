#!/usr/bin/env bash
# Run the same perf scenarios against warren and Debian's RabbitMQ on this machine, one after the
# other, and print a markdown table for bench/RESULTS.md.  JSON per run goes to bench/out/.
#   bench/compare.sh [--time SECONDS] [--warren-port PORT] [--no-warren] [--no-rabbitmq]
# Scenarios: A = 1 producer, 1 consumer, transient 1 KiB, auto-ack;
#            B = the same with confirms (window 1000) and manual acks (prefetch 300).
# Without --warren-port, warren is started with scripts/start_node --port 5673 if that script exists.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"; [ -x "$py" ] || py=python3
time_s=30; warren_port=""; run_warren=1; run_rabbit=1
rabbit_port=5690; warren_start_port=5673
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_s=$2; shift 2 ;;
    --warren-port) warren_port=$2; shift 2 ;;
    --no-warren) run_warren=0; shift ;;
    --no-rabbitmq) run_rabbit=0; shift ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
done

out="$root/bench/out"; mkdir -p "$out"
work=$(mktemp -d /tmp/warren-compare.XXXXXX)
warren_pgid=""
cleanup() {
  if [ -n "$warren_pgid" ]; then
    kill -- -"$warren_pgid" 2>/dev/null || true
    wait "$warren_pgid" 2>/dev/null || true  # its ports are free when the next run starts a node
  fi
  if [ -f "$work/rabbit/launcher.pid" ]; then "$root/scripts/rabbitmq_oracle" stop "$work/rabbit" || true; fi
}
trap cleanup EXIT INT TERM

wait_port() {  # port seconds
  for _ in $(seq 1 $(($2 * 2))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.5
  done
  return 1
}

runs_total=0; [ "$run_warren" = 1 ] && runs_total=$((runs_total + 2)); [ "$run_rabbit" = 1 ] && runs_total=$((runs_total + 2))
runs_done=0; started=$(date +%s)
scenario() {  # broker port name -> bench/out/BROKER-NAME.json
  local broker=$1 port=$2 name=$3; shift 3
  local uri="amqp://guest:guest@127.0.0.1:$port/%2F"
  runs_done=$((runs_done + 1))
  echo "== [$runs_done/$runs_total, $(( $(date +%s) - started )) s so far] $broker, scenario $name ($time_s s)" >&2
  rm -f "$out/$broker-$name.json"
  case "$name" in
    A) set -- --producers 1 --consumers 1 --size 1024 --auto-ack ;;
    B) set -- --producers 1 --consumers 1 --size 1024 --confirm 1000 --prefetch 300 ;;
  esac
  (cd "$root" && "$py" -m bench.perf --uri "$uri" --time "$time_s" "$@" \
      --json "$out/$broker-$name.json") >&2 || echo "$broker scenario $name failed" >&2
  files+=("$out/$broker-$name.json")
}

files=()
skip_reason="no --warren-port and no scripts/start_node"
if [ "$run_warren" = 1 ]; then
  if [ -z "$warren_port" ] && [ -x "$root/scripts/start_node" ]; then
    warren_port=$warren_start_port
    setsid "$root/scripts/start_node" --port "$warren_port" --data-dir "$work/warren" \
      > "$work/warren.log" 2>&1 &
    warren_pgid=$!
    if ! wait_port "$warren_port" 60; then
      kill -- -"$warren_pgid" 2>/dev/null || true
      warren_pgid=""; warren_port=""
      skip_reason="it did not come up on $warren_start_port; see $work/warren.log"
    fi
  fi
  if [ -n "$warren_port" ]; then
    scenario warren "$warren_port" A
    scenario warren "$warren_port" B
  else
    echo "skipping warren: $skip_reason" >&2
  fi
fi
if [ "$run_rabbit" = 1 ]; then
  "$root/scripts/rabbitmq_oracle" start "$rabbit_port" "$work/rabbit" >&2
  scenario rabbitmq "$rabbit_port" A
  scenario rabbitmq "$rabbit_port" B
fi

existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
if [ ${#existing[@]} -gt 0 ]; then
  (cd "$root" && "$py" -m bench.perf.table "${existing[@]}")
  (cd "$root" && "$py" -m bench.compare_charts perf "$out/compare.png" "${existing[@]}") >&2
fi
