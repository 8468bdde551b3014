#!/usr/bin/env bash
# Server CPU time of event-loop layouts under the same open-loop load, each
# server in its own process, in rotating order (docs/perf.md, "Event-loop
# layouts"): bare gnet at GOMAXPROCS 2 (its own layout on 2 cores) and at 3
# (the layout cmd/echo uses there), cmd/echo as it starts by default, and
# cmd/echo with one loop on GOMAXPROCS 2. The CPU is utime+stime from
# /proc/PID/stat over the load test, connects included. Loopback only;
# every server is killed after its run.
#
#	ROUNDS=5 CONNS=8000 RATE=2 bench/scripts/layout-cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.." # bench/
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" github.com/netwheel/netwheel/loadtest github.com/netwheel/netwheel/cmd/echo ./compare
rounds=${ROUNDS:-5}
conns=${CONNS:-8000}
rate=${RATE:-2}
port=${PORT:-9700}
hz=$(getconf CLK_TCK)
layouts=(gnet-P2 gnet-P3 echo-default echo-1loop-P2)
start() { # layout port
	case $1 in
	gnet-P2) GOMAXPROCS=2 exec "$bin/compare" serve -server gnet -listen "127.0.0.1:$2" -for 60s ;;
	gnet-P3) GOMAXPROCS=3 exec "$bin/compare" serve -server gnet -listen "127.0.0.1:$2" -for 60s ;;
	echo-default) exec "$bin/echo" -addr "127.0.0.1:$2" -proto raw -idle-timeout 5m -log-level error ;;
	echo-1loop-P2) GOMAXPROCS=2 exec "$bin/echo" -event-loops 1 -addr "127.0.0.1:$2" -proto raw -idle-timeout 5m -log-level error ;;
	esac
}
for round in $(seq 1 "$rounds"); do
	for k in $(seq 0 $((${#layouts[@]} - 1))); do
		l=${layouts[$(((k + round - 1) % ${#layouts[@]}))]}
		port=$((port + 1))
		start "$l" "$port" >/dev/null 2>&1 &
		pid=$!
		sleep 0.7
		t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
		out=$("$bin/loadtest" -addr "127.0.0.1:$port" -proto raw -scenario echo -conns "$conns" -rate "$rate" -duration 8s \
			-idle 0 -frame-timeout 0 -keepalive 0 -q 2>&1 || true)
		t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
		msgs=$(grep -oE '[0-9]+ msgs/s' <<<"$out" | head -1)
		p99=$(grep -oE 'p99 [0-9.]+[mµ]?s' <<<"$out" | head -1)
		echo "round $round $l cpu $(awk -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN{printf "%.2fs", t/hz}') $msgs $p99"
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
done
