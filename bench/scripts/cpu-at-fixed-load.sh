#!/usr/bin/env bash
# Server CPU time for the same open-loop load, each server in its own
# process, rounds in rotation. `go run ./compare` (in bench/) measures the
# same in its fixed-rate phase (docs/perf.md, "The server against its
# baselines"). The baselines are `compare serve`, netwheel cmd/echo.
# Loopback only; every server stops by itself after 60s at most.
set -euo pipefail
cd "$(dirname "$0")/.." # bench/
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" github.com/netwheel/netwheel/loadtest github.com/netwheel/netwheel/cmd/echo ./compare
lt="$bin/loadtest"
rounds=${ROUNDS:-3}
port=${PORT:-9600}
hz=$(getconf CLK_TCK)
for round in $(seq 1 "$rounds"); do
	for s in gnet netwheel gnetafterfunc netdeadline; do
		port=$((port + 1))
		if [ "$s" = netwheel ]; then
			"$bin/echo" -addr "127.0.0.1:$port" -proto raw -idle-timeout 30s -log-level error >/dev/null 2>&1 &
		else
			"$bin/compare" serve -server "$s" -listen "127.0.0.1:$port" -for 60s -idle 30s >/dev/null 2>&1 &
		fi
		pid=$!
		sleep 0.7
		t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
		out=$("$lt" -addr "127.0.0.1:$port" -proto raw -scenario echo -conns 2000 -rate 10 -duration 8s -idle 30s -q 2>&1 || true)
		t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
		rate=$(grep -oE '[0-9]+ msgs/s' <<<"$out" | head -1)
		echo "round $round $s cpu $(awk -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN{printf "%.2fs", t/hz}') $rate"
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
done
