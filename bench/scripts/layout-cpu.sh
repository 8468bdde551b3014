#!/usr/bin/env bash
# Server CPU time and wheel wake-ups of event-loop layouts under the same
# open-loop load, in steady state, each server in its own process, in
# rotating order (docs/perf.md, "Server CPU by layout"). The CPU is
# utime+stime from /proc/PID/stat over a window that starts SETTLE after
# the load test starts (the connections are open and every idle timeout has
# come round once: what a long-running server costs), in CPU-s per second;
# wake-ups are cmd/echo's netwheel_wheel_wakeups_total over the same window.
# Loopback only; every server is killed after its run.
#
#	ROUNDS=4 CONNS=8000 RATE=2 bench/scripts/layout-cpu.sh
#	LAYOUTS="gnet-P2 echo-default" ECHO_BEFORE=/tmp/echo.old bench/scripts/layout-cpu.sh
#
# Layouts: gnet-P2, gnet-P3 (bare gnet at GOMAXPROCS 2, 3), echo-default
# (cmd/echo as it starts), echo-P2 (GOMAXPROCS 2, 2 loops), echo-P2-1loop,
# echo-P3 (GOMAXPROCS 3, 2 loops); before-* the same for ECHO_BEFORE.
set -euo pipefail
cd "$(dirname "$0")/.." # bench/
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" github.com/netwheel/netwheel/loadtest github.com/netwheel/netwheel/cmd/echo ./compare
rounds=${ROUNDS:-4}
conns=${CONNS:-8000}
rate=${RATE:-2}
idle=${IDLE:-3s}
settle=${SETTLE:-15}
window=${WINDOW:-10}
port=${PORT:-9700}
hz=$(getconf CLK_TCK)
read -r -a layouts <<<"${LAYOUTS:-gnet-P2 gnet-P3 echo-default echo-P2 echo-P2-1loop}"
start() { # layout port metrics-port
	local e="$bin/echo" l=$1
	if [[ $l == before-* ]]; then
		e=${ECHO_BEFORE:?before-* layouts need ECHO_BEFORE}
		l=echo-${l#before-}
	fi
	local args=(-addr "127.0.0.1:$2" -proto raw -idle-timeout "$idle" -log-level error -metrics "127.0.0.1:$3")
	case $l in
	gnet-P2) GOMAXPROCS=2 exec "$bin/compare" serve -server gnet -listen "127.0.0.1:$2" -for 10m ;;
	gnet-P3) GOMAXPROCS=3 exec "$bin/compare" serve -server gnet -listen "127.0.0.1:$2" -for 10m ;;
	echo-default) exec "$e" "${args[@]}" ;;
	echo-P2) GOMAXPROCS=2 exec "$e" -event-loops 2 "${args[@]}" ;;
	echo-P2-1loop) GOMAXPROCS=2 exec "$e" -event-loops 1 "${args[@]}" ;;
	echo-P3) GOMAXPROCS=3 exec "$e" -event-loops 2 "${args[@]}" ;;
	*) echo "unknown layout $l" >&2 && exit 2 ;;
	esac
}
wakeups() { # metrics port: the wheel's wake-ups so far, 0 if none served
	curl -s "http://127.0.0.1:$1/metrics" 2>/dev/null | awk '/^netwheel_wheel_wakeups_total /{print $2; f=1} END{if(!f) print 0}'
}
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for round in $(seq 1 "$rounds"); do
	for k in $(seq 0 $((${#layouts[@]} - 1))); do
		l=${layouts[$(((k + round - 1) % ${#layouts[@]}))]}
		port=$((port + 2))
		start "$l" "$port" $((port + 1)) >/dev/null 2>&1 &
		pid=$!
		sleep 0.7
		out=$(mktemp)
		"$bin/loadtest" -addr "127.0.0.1:$port" -proto raw -scenario echo -conns "$conns" -rate "$rate" \
			-duration $((settle + window + 3))s -idle 0 -frame-timeout 0 -keepalive 0 -q >"$out" 2>&1 &
		lt=$!
		sleep "$settle"
		t0=$(cpu "$pid") w0=$(wakeups $((port + 1))) s0=$(date +%s.%N)
		sleep "$window"
		t1=$(cpu "$pid") w1=$(wakeups $((port + 1))) s1=$(date +%s.%N)
		wait "$lt" || true
		msgs=$(grep -oE '[0-9]+ msgs/s' "$out" | head -1)
		p99=$(grep -oE 'p99 [0-9.]+[mµ]?s' "$out" | head -1)
		awk -v r="$round" -v l="$l" -v t=$((t1 - t0)) -v hz="$hz" -v w0="$w0" -v w1="$w1" -v s0="$s0" -v s1="$s1" \
			-v m="$msgs" -v p="$p99" -v ld="$(cut -d' ' -f1 /proc/loadavg)" \
			'BEGIN{d=s1-s0; printf "round %d %-16s cpu-s/s %.3f wakeups/s %.0f  %s  %s  load %s\n", r, l, t/hz/d, (w1-w0)/d, m, p, ld}'
		rm -f "$out"
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
done
