#!/bin/bash
# Runs `iwarp perf --perftest` against perftest in the siw rig (../shared/rigs/siw, a Linux
# siw guest under QEMU): each of the six tests at each size, with iwarp perf as the client
# of a perftest server in the guest, then as the server of a perftest client in the guest.
# Every connection passes through scripts/tcp-record.py, so the octets of each run are kept
# too. Not run by CI (it needs the rig and takes a while under TCG).
#
#   scripts/interop-perftest.sh [-o OUTDIR] [-P PORTBASE] [-n ITERS] [-t 'TESTS'] [-s 'SIZES']
#                               [-r client|server|both|summary] [-x 'EXTRA perftest options']
#
# OUTDIR (default target/interop-perftest) receives, per role: the guest's whole output,
# the iwarp perf output of each run (client-TEST-SIZE.out ...), the recordings
# (*.jsonl), and summary.md: both ends' result rows side by side, for docs/interop.md.
# Ports PORTBASE+15/16 (perftest server, its recorder) and +25/26 (iwarp perf server, its
# recorder) on 127.0.0.1 are used; the default base is 20500. `-r summary` only writes
# summary.md again from OUTDIR.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RIG=${SIW_RIG:-$ROOT/../../shared/rigs/siw}
[ -x "$RIG/run-guest.sh" ] || RIG=/work/shared/rigs/siw
OUT=$ROOT/target/interop-perftest PORTBASE=20500 ITERS=100 ROLES=both EXTRA=
TESTS="write_bw read_bw send_bw write_lat read_lat send_lat"
SIZES="64 4096 65536"
while getopts "o:P:n:t:s:r:x:h" o; do
	case $o in
	o) OUT=$OPTARG ;;
	P) PORTBASE=$OPTARG ;;
	n) ITERS=$OPTARG ;;
	t) TESTS=$OPTARG ;;
	s) SIZES=$OPTARG ;;
	r) ROLES=$OPTARG ;;
	x) EXTRA=$OPTARG ;;
	*) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;/^set -e/d' >&2; exit 2 ;;
	esac
done
IWARP=${IWARP:-$ROOT/target/release/iwarp}
if [ ! -x "$IWARP" ]; then (cd "$ROOT" && cargo build --release -p iwarp-cli); fi
mkdir -p "$OUT"
GSRV=$((PORTBASE + 15)) GSRV_REC=$((PORTBASE + 16))
USRV=$((PORTBASE + 25)) USRV_REC=$((PORTBASE + 26))
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

listening() { ss -ltn | grep -q "127.0.0.1:$1 "; }
wait_listening() { for _ in $(seq 1 100); do listening "$1" && return 0; sleep 0.1; done; return 1; }

# record LISTEN TARGET DIR: one recorder for a whole role, writing each run's connections
# to DIR/<run>.jsonl as named in DIR/run (a peer connecting between runs always finds it
# listening: a closed port there can crash siw, see below).
record() {
	python3 "$HERE/tcp-record.py" "$1" "$2" --tag-file "$3/run" "$3" >"$3/recorder.log" 2>&1 &
	RECORDER=$!
	PIDS+=("$RECORDER")
	wait_listening "$1"
}

runs() { for t in $TESTS; do for s in $SIZES; do echo "$t $s"; done; done; }
args_of() { # TEST SIZE -> iwarp perf arguments
	local test=${1%_*} measure=${1#*_}
	echo "$test $measure -R -n $ITERS -s $2 $EXTRA"
}

client_role() {
	local d=$OUT/client
	mkdir -p "$d"
	local cmd=""
	while read -r t s; do
		cmd+="echo '=== $t $s'; ib_$t -R -d siw0 -p 18515 -n $ITERS -s $s -F $EXTRA; echo \"=== rc \$?\"; "
	done < <(runs)
	"$RIG/run-guest.sh" -f "$GSRV:18515" -d "$d/guest" -w 18515 -c 1 "$cmd" >"$d/guest.status" 2>"$d/guest.err" &
	local guest=$!
	PIDS+=("$guest")
	for _ in $(seq 1 600); do grep -q READY "$d/guest.status" 2>/dev/null && break; sleep 0.5; done
	record "$GSRV_REC" "$GSRV" "$d"
	while read -r t s; do
		echo "$t-$s" >"$d/run"
		local status=failed
		: >"$d/$t-$s.err"
		for try in $(seq 1 90); do
			# shellcheck disable=SC2046
			if "$IWARP" perf $(args_of "$t" "$s") --connect "127.0.0.1:$GSRV_REC" >"$d/$t-$s.out" 2>"$d/$t-$s.try"; then
				status="ok after $try tries"
				cat "$d/$t-$s.try" >>"$d/$t-$s.err"
				break
			fi
			cat "$d/$t-$s.try" >>"$d/$t-$s.err"
			# Not listening yet (the previous perftest server is still closing): try again.
			grep -qE "^iwarp perf: error: (cannot connect|connecting to)" "$d/$t-$s.try" || break
			sleep 1
		done
		rm -f "$d/$t-$s.try"
		echo "$status" >"$d/$t-$s.status"
		echo "client $t $s: $status $(tail -n 1 "$d/$t-$s.err")"
	done < <(runs)
	wait "$guest" || true
	kill "$RECORDER" 2>/dev/null || true
}

server_role() {
	local d=$OUT/server
	mkdir -p "$d"
	local cmd=""
	while read -r t s; do
		cmd+="echo '=== $t $s'; for i in \$(seq 1 120); do ib_$t -R -d siw0 -p 18515 -n $ITERS -s $s -F $EXTRA 10.0.2.100 >/tmp/o 2>&1; rc=\$?; [ \$rc = 0 ] && break; sleep 1; done; cat /tmp/o; echo \"=== rc \$rc\"; "
	done < <(runs)
	# The guest's clients retry until a server answers. Between two runs the recorder
	# refuses them (its target is not listening); without it they would meet a closed
	# port behind slirp's forward, which once crashed the guest's siw (a NULL pointer in
	# siw_cm_upcall on the odd Reply).
	echo none >"$d/run"
	record "$USRV_REC" "$USRV" "$d"
	"$RIG/run-guest.sh" -f "$((PORTBASE + 99)):9" -g "18515:$USRV_REC" -d "$d/guest" -w none -c 1 "$cmd" >"$d/guest.status" 2>"$d/guest.err" &
	local guest=$!
	PIDS+=("$guest")
	while read -r t s; do
		echo "$t-$s" >"$d/run"
		# shellcheck disable=SC2046
		"$IWARP" perf $(args_of "$t" "$s") --server --bind 127.0.0.1 -p "$USRV" >"$d/$t-$s.out" 2>"$d/$t-$s.err" &
		local srv=$!
		wait "$srv" && echo "server $t $s: ok" || echo "server $t $s: $(tail -n 1 "$d/$t-$s.err")"
		echo none >"$d/run"
	done < <(runs)
	wait "$guest" || true
	kill "$RECORDER" 2>/dev/null || true
}

# The result rows of one run: the line after the table header, from our output and from
# the guest's section of its log.
ours() { awk '/#bytes/{getline; print; exit}' "$1" 2>/dev/null; }
theirs() { # LOG TEST SIZE
	awk -v h="=== $2 $3" '$0 == h {on=1; next} /^=== rc/ {on=0} on && /#bytes/ {getline; print; exit}' "$1"
}

# The guest's exit status for one run (empty if it has none).
theirs_rc() { # LOG TEST SIZE
	awk -v h="=== $2 $3" '$0 == h {on=1; next} on && /^=== rc/ {print $3; exit}' "$1"
}
# Our run's status ("ok after N tries" or "failed"), as the run loop wrote it.
our_status() { cat "$1" 2>/dev/null || true; }

# One markdown table row: the cells of a perftest result row.
cells() { echo "$1" | tr -s ' \t' '\n' | grep -v '^$' | paste -sd'|' | sed 's/|/ | /g'; }

summary() {
	local f=$OUT/summary.md
	: >"$f"
	for role in client server; do
		[ -d "$OUT/$role" ] || continue
		local log=$OUT/$role/guest/share/out.log
		if [ $role = client ]; then
			printf '### iwarp perf as client, perftest as server\n\n' >>"$f"
		else
			printf '### perftest as client, iwarp perf as server\n\n' >>"$f"
		fi
		for kind in bw lat; do
			runs | grep -q "_$kind " || continue
			if [ $kind = bw ]; then
				echo "| test | end | #bytes | #iterations | BW peak [MiB/s] | BW average [MiB/s] | MsgRate [Mpps] |" >>"$f"
				echo "| --- | --- | --- | --- | --- | --- | --- |" >>"$f"
			else
				echo "| test | end | #bytes | #iterations | t_min [us] | t_max [us] | t_typical [us] | t_avg [us] | t_stdev [us] | 99% [us] | 99.9% [us] |" >>"$f"
				echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |" >>"$f"
			fi
			while read -r t s; do
				[ "${t#*_}" = $kind ] || continue
				local a b
				a=$(ours "$OUT/$role/$t-$s.out")
				b=$(theirs "$log" "$t" "$s")
				[ -n "$a" ] && a=$(cells "$a") || a="(prints no table)"
				[ -n "$b" ] && b=$(cells "$b") || b="(prints no table)"
				# A run that failed says so, whatever table it printed first.
				local rc
				rc=$(theirs_rc "$log" "$t" "$s")
				[ -n "$rc" ] && [ "$rc" != 0 ] && b="FAIL: perftest exited with status $rc"
				[ "$(our_status "$OUT/$role/$t-$s.status")" = failed ] &&
					a="FAIL: $(tail -n 1 "$OUT/$role/$t-$s.err" | tr '|' '/')"
				echo "| ib_$t | iwarp perf | $a |" >>"$f"
				echo "| ib_$t | perftest | $b |" >>"$f"
			done < <(runs)
			echo >>"$f"
		done
	done
	cat "$f"
}

case $ROLES in
client) client_role ;;
server) server_role ;;
both) client_role; server_role ;;
summary) ;;
*) echo "-r client|server|both|summary" >&2; exit 2 ;;
esac
summary
