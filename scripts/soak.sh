#!/usr/bin/env bash
# Soak and fault tests of the iWARP stack across a lossy path (root; not run by CI).
#
#   scripts/soak.sh [SOAK_SECONDS] [IDLE_SECONDS]     defaults 60 and 120
#
# Brings up the lossy path (../shared/rigs/lossy-path.sh: namespaces iw-a and iw-b joined by a
# router iw-m that drops 3% of TCP segments) if it is not there, and reuses it as it is if it
# is. Then runs, each with its expected outcome asserted and a PASS or FAIL line:
#
#   soak             many connections of mixed Send/Write/Read, every octet checked: 0 errors
#   kill -9 client   mid-transfer: the server sees every connection end, serves the next client
#   kill -9 server   mid-transfer: the client reports every connection lost, hangs on nothing
#   stops reading    the server is stopped (SIGSTOP) for 20 s: the client's memory stays
#                    bounded, its operations wait, and all complete verified after SIGCONT
#   reset mid-FPDU   a peer resets after half an FPDU: the server drops it, serves the next
#   never starts     a peer sends half an MPA Request: closed at the startup timeout
#   half-open flood  1000 silent connections held open: real clients are served meanwhile
#   long idle        connections idle IDLE_SECONDS across the lossy path, then verified traffic
#
# and prints the table (fault, what the stack did, data lost). Exit status 0 if all passed.
# Each scenario's octets are checked by `iwarp soak` itself (see `iwarp soak --help`).
set -uo pipefail

SOAK_SECONDS=${1:-60}
IDLE_SECONDS=${2:-120}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
RIG=${LOSSY_PATH:-$repo/../shared/rigs/lossy-path.sh}
[ -x "$RIG" ] || RIG=/work/shared/rigs/lossy-path.sh
BIN=${IWARP_BIN:-$repo/target/release/iwarp}
PEERS="$here/soak_peers.py"
A=192.168.77.1
B=192.168.78.1
PORT=${SOAK_PORT:-7175}
LOG=$(mktemp -d /tmp/iwarp-soak.XXXXXX)
a() { ip netns exec iw-a "$@"; }
b() { ip netns exec iw-b "$@"; }

[ "$(id -u)" = 0 ] || { echo "soak.sh: needs root (network namespaces)"; exit 2; }
[ -x "$BIN" ] || (cd "$repo" && cargo build --release -p iwarp-cli) || exit 2
if ! ip netns list | grep -qw iw-a; then
	"$RIG" up 3 || exit 2
else
	echo "lossy path already up: reused as it is"
fi
command -v jq >/dev/null || { apt-get install -y -qq jq >/dev/null 2>&1 || { echo "soak.sh: needs jq"; exit 2; }; }

drops() { ip netns exec iw-m nft list table inet lossy | grep -o 'packets [0-9]*' | awk '{s += $2} END {print s + 0}'; }
rows=()
failed=0
verdict() { # name, pass (0/1), what the stack did, data lost
	if [ "$2" = 0 ]; then echo "PASS  $1: $3"; else echo "FAIL  $1: $3"; failed=1; fi
	rows+=("| $1 | $3 | $4 | $([ "$2" = 0 ] && echo pass || echo FAIL) |")
}
server_pid=
start_server() { # log file
	# Not through a function: $! must be the server itself, to kill and stop it.
	ip netns exec iw-b "$BIN" soak --server --addr "$B" --port "$PORT" --json >"$1" 2>"$1.err" &
	server_pid=$!
	for _ in $(seq 50); do a bash -c "exec 3<>/dev/tcp/$B/$PORT" 2>/dev/null && return 0; sleep 0.1; done
	echo "soak.sh: the server did not start"; cat "$1.err"; exit 2
}
stop_server() { kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; server_pid=; }
trap 'kill -CONT $server_pid 2>/dev/null; kill $server_pid 2>/dev/null' EXIT
field() { jq -r "select(.type == \"summary\") | .$2" "$1"; }
client() { # log, extra args...
	local log=$1; shift
	a "$BIN" soak --connect "$B:$PORT" --json "$@" >"$log" 2>"$log.err"
}

echo "== soak: $SOAK_SECONDS s, 16 connections, depth 4, up to 256 KiB, across the lossy path"
start_server "$LOG/server1.log"
d0=$(drops)
client "$LOG/soak.json" -D "$SOAK_SECONDS" -q 16 -t 4 -s 262144 --seed 1
rc=$?
d1=$(drops)
s=$LOG/soak.json
summary="$(field $s seconds | cut -d. -f1) s, $(field $s connections) connections, $(field $s operations) operations ($(field $s sends) Send, $(field $s writes) Write, $(field $s reads) Read), $(field $s bytes_verified) octets verified, $((d1 - d0)) segments dropped by the router, errors $(field $s errors)"
ok=1; [ $rc = 0 ] && [ "$(field $s errors)" = 0 ] && [ "$(field $s connections_completed)" = 16 ] && ok=0
verdict "soak, 3% loss" $ok "$summary" 0
soak_line=$summary

echo "== kill -9 of the client in the middle of a transfer"
client "$LOG/kill-client.json" -D 60 -q 8 -t 4 -s 1048576 --seed 2 &
cpid=$!
sleep 5
kill -9 "$(pgrep -n -f "soak --connect $B:$PORT .*--seed 2")"
wait $cpid 2>/dev/null
sleep 3
ends=$(grep -c '"connection_end"' "$LOG/server1.log")
mism=$(jq -s '[.[] | select(.type == "connection_end") | .mismatches] | add // 0' "$LOG/server1.log")
[ -n "$mism" ] || mism=unknown
client "$LOG/after-kill.json" -D 5 -q 4 --seed 3
after=$(field "$LOG/after-kill.json" errors)
ok=1; [ "$ends" -ge $((16 + 8)) ] && [ "$mism" = 0 ] && [ "$after" = 0 ] && kill -0 "$server_pid" 2>/dev/null && ok=0
verdict "peer killed (kill -9) mid-transfer" $ok "server saw all 8 connections end ($((ends - 16)) ends logged), 0 mismatches in what arrived, served the next client with 0 errors" 0
stop_server

echo "== kill -9 of the server in the middle of a transfer"
start_server "$LOG/server2.log"
client "$LOG/kill-server.json" -D 60 -q 8 -t 4 -s 1048576 --seed 4 --op-timeout 30 &
cpid=$!
sleep 5
kill -9 "$server_pid"; server_pid=
wait $cpid; rc=$?
s=$LOG/kill-server.json
ok=1; [ $rc = 1 ] && [ "$(field $s connection_errors)" = 8 ] && [ "$(field $s mismatches)" = 0 ] && [ "$(field $s peer_mismatches)" = 0 ] && [ "$(field $s timeouts)" = 0 ] && ok=0
verdict "server killed (kill -9) mid-transfer" $ok "client: all $(field $s connection_errors) connections reported lost ($(head -1 $s.err | cut -c1-80)...), $(field $s operations) operations verified before, no hang, no timeout" 0

echo "== a peer that stops reading (SIGSTOP for 20 s)"
start_server "$LOG/server3.log"
client "$LOG/stopped.json" -D 40 -q 8 -t 4 -s 1048576 --seed 5 --op-timeout 90 &
cpid=$!
sleep 5
cl=$(pgrep -n -f "soak --connect $B:$PORT .*--seed 5")
kill -STOP "$server_pid"
rss0=$(awk '/VmRSS/ {print $2}' /proc/$cl/status)
rssmax=$rss0
for _ in $(seq 20); do
	sleep 1
	r=$(awk '/VmRSS/ {print $2}' /proc/$cl/status 2>/dev/null || echo 0)
	[ "$r" -gt "$rssmax" ] && rssmax=$r
done
kill -CONT "$server_pid"
wait $cpid; rc=$?
s=$LOG/stopped.json
ok=1; [ $rc = 0 ] && [ "$(field $s errors)" = 0 ] && [ $((rssmax - rss0)) -lt 16384 ] && ok=0
verdict "peer stops reading for 20 s" $ok "client memory $((rss0 / 1024)) MiB at the stop, at most $((rssmax / 1024)) MiB during it; operations waited, then all $(field $s operations) completed verified, errors $(field $s errors)" 0

echo "== a reset in the middle of an FPDU"
a python3 "$PEERS" reset-mid-fpdu "$B" "$PORT" | tee "$LOG/reset.txt"
sleep 1
endline=$(grep '"connection":999' "$LOG/server3.log" | tail -1)
client "$LOG/after-reset.json" -D 5 -q 4 --seed 6
ok=1; [ -n "$endline" ] && ! echo "$endline" | grep -q '"clean":true' && [ "$(field $LOG/after-reset.json errors)" = 0 ] && ok=0
verdict "reset in the middle of an FPDU" $ok "connection dropped ($(echo "$endline" | jq -r .end)), nothing of the partial FPDU delivered, next client served with 0 errors" 0

echo "== a startup that never finishes"
a python3 "$PEERS" never-start "$B" "$PORT" | tee "$LOG/never.txt"
rc=${PIPESTATUS[0]}
verdict "startup never finishes" "$rc" "$(cut -d: -f2- "$LOG/never.txt" | sed 's/^ //') (MPA request timeout, 5 s by default)" 0

echo "== a flood of 1000 half-open connections"
a python3 "$PEERS" flood "$B" "$PORT" 1000 25 >"$LOG/flood.txt" &
fpid=$!
sleep 3
client "$LOG/flood.json" -D 10 -q 4 --seed 7
wait $fpid
cat "$LOG/flood.txt"
s=$LOG/flood.json
ok=1; [ "$(field $s errors)" = 0 ] && [ "$(field $s connections_completed)" = 4 ] && ok=0
verdict "flood of 1000 half-open connections" $ok "4 real clients served during it ($(field $s operations) operations, errors $(field $s errors)); $(tail -1 "$LOG/flood.txt" | cut -d';' -f2 | sed 's/^ //')" 0

echo "== connections idle for $IDLE_SECONDS s across the lossy path"
client "$LOG/idle.json" -D 10 -q 4 --idle "$IDLE_SECONDS" --seed 8
s=$LOG/idle.json
ok=1; [ "$(field $s errors)" = 0 ] && [ "$(field $s connections_completed)" = 4 ] && ok=0
verdict "idle $IDLE_SECONDS s across the lossy path" $ok "4 connections: traffic, $IDLE_SECONDS s idle, traffic; $(field $s operations) operations, errors $(field $s errors)" 0
stop_server

echo
echo "| fault | what the stack did | data lost | result |"
echo "| --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo
echo "logs: $LOG"
exit $failed
