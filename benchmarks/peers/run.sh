#!/bin/sh
# Runs the comparisons on this machine and prints their tables: locks
# against etcd, keyed queues against a Postgres SKIP LOCKED table and Redis
# streams, idempotency keys against a Postgres unique-key table.
# results.md, results.json and results.svg land in benchmarks/peers (or
# -out DIR). Extra arguments go to the program, e.g.
#   benchmarks/peers/run.sh -nodes 1 -workers 16,64 -duration 10s
#   benchmarks/peers/run.sh -primitives queue,idem -nodes 1
#   benchmarks/peers/run.sh leases      # a million leases on one node, then 100,000 beside etcd
# The full grid (1 and 3 nodes; locks: 1,024 and 1 resources × 1, 16, 64
# workers × 3 targets; queues 4 targets and idempotency 3, × 16 and 64
# workers; 5 s rounds after 1 s of warm-up) takes about 7 minutes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if ! command -v etcd >/dev/null 2>&1; then
	echo "etcd not found: installing Debian's etcd-server" >&2
	if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
	$sudo apt-get update
	$sudo apt-get install -y etcd-server
	# The package may start a system etcd on 2379; the benchmark starts its
	# own on free loopback ports and never touches that one.
fi

if ! command -v redis-server >/dev/null 2>&1; then
	echo "redis-server not found: installing Debian's redis-server" >&2
	if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
	$sudo apt-get update
	$sudo apt-get install -y redis-server
	# As with etcd: the benchmark starts its own on a free port.
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT INT TERM
(cd "$root" && go build -o "$bin/leasehold" ./cmd/leasehold)
(cd "$here" && go build -o "$bin/peers" .)
echo "etcd: $(etcd --version | head -1); $(redis-server --version | cut -d' ' -f1-3); leasehold: $(cd "$root" && git describe --always --dirty 2>/dev/null || echo unknown)" >&2
if [ "${1:-}" = leases ]; then
	# The million-lease run and the side by side with etcd's keep-alive
	# (see leases.go); its files are leases.md, leases.json, leases-rss.csv.
	shift
	"$bin/peers" leases -etcd "$(command -v etcd)" -leasehold "$bin/leasehold" -out "$here" "$@"
	exit
fi
"$bin/peers" -etcd "$(command -v etcd)" -redis "$(command -v redis-server)" -leasehold "$bin/leasehold" -out "$here" "$@"
