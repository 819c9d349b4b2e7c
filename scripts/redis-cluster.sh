#!/usr/bin/env bash
# A three-master Redis Cluster on 127.0.0.1 for the cluster tests of
# redisstore, keeping nothing on disk.
# Usage: scripts/redis-cluster.sh start|stop|status
#   start   starts the nodes and joins them, unless the cluster is up already
#   stop    shuts down the nodes this script started and removes their files
#   status  exits 0 when every node answers and the cluster state is ok
# Ports: REDIS_CLUSTER_PORTS (default "7001 7002 7003"), which are also the
# redisstore tests' default seeds (RETRY_TEST_REDIS_CLUSTER_ADDRS).
set -euo pipefail
read -r -a ports <<< "${REDIS_CLUSTER_PORTS:-7001 7002 7003}"
dir=${TMPDIR:-/tmp}/retry-redis-cluster

cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }
answers() { [ "$(cli "$1" ping 2>/dev/null)" = PONG ]; }

status() {
  local p
  for p in "${ports[@]}"; do
    answers "$p" && cli "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
}

stop() {
  local p
  for p in "${ports[@]}"; do
    if [ -f "$dir/$p/redis.pid" ] && answers "$p"; then
      cli "$p" shutdown nosave >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$dir"
}

start() {
  if status; then
    echo "Redis Cluster already up on ${ports[*]}"
    return
  fi
  for tool in redis-server redis-cli; do
    command -v "$tool" >/dev/null || { echo "$tool not found: install Redis (Debian: apt-get install redis-server)" >&2; exit 1; }
  done
  stop # nodes left from an earlier start that never joined
  local p
  for p in "${ports[@]}"; do
    if answers "$p"; then
      echo "port $p: a Redis that this script did not start answers there; stop it or set REDIS_CLUSTER_PORTS" >&2
      exit 1
    fi
    mkdir -p "$dir/$p"
    redis-server --bind 127.0.0.1 --port "$p" --cluster-enabled yes \
      --cluster-config-file "$dir/$p/nodes.conf" --dir "$dir/$p" \
      --save "" --appendonly no --daemonize yes \
      --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log"
  done
  local seeds=() i
  for p in "${ports[@]}"; do
    for i in $(seq 1 50); do answers "$p" && break; sleep 0.1; done
    answers "$p" || { echo "node $p did not start; see $dir/$p/redis.log" >&2; exit 1; }
    seeds+=("127.0.0.1:$p")
  done
  redis-cli --cluster create "${seeds[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; exit 1; }
  for i in $(seq 1 100); do
    status && { echo "Redis Cluster up on ${ports[*]}"; return; }
    sleep 0.1
  done
  echo "the cluster did not reach cluster_state:ok" >&2
  cli "${ports[0]}" cluster info >&2 || true
  exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) sed -n '4,7p' "$0" >&2; exit 2 ;;
esac
