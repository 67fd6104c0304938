#!/usr/bin/env bash
# The live interop matrix against Linux siw, in the siw rig (root; not run by CI).
#
#   scripts/interop-siw.sh [PINGS]            default 100 pings (or messages) per case
#
# Boots the rig's guest (../shared/rigs/siw/run-guest.sh: Debian's kernel with siw, rdma-core's
# rping and ucmatose) four times and runs every case with both roles:
#
#   boot 1, siw serves:   rping -s -P and four ucmatose servers in the guest; `iwarp ping`
#                         and `iwarp cmatose` connect from the host: rping at 26, 64, 4000
#                         and 65535 octets with -V, MPA revision 2 and 1, CRC on and off;
#                         peer-to-peer mode with each RTR siw offers (Write, Read); ucmatose
#                         plain, with private data, in peer-to-peer mode, at revision 1; a
#                         Request asking for markers, which siw rejects (our client must say
#                         so in one line).
#   boot 2, siw connects: `iwarp ping -s -P` and `iwarp cmatose` serve on the host, one per
#                         setting (Reply at revision 2 or 1, with C or without), and the
#                         guest's rping and ucmatose clients connect to each.
#   boot 3, siw connects in peer-to-peer mode, and
#   boot 4, siw connects at revision 1: as boot 2 with a siw.ko whose compile-time
#                         `peer_to_peer` is true, or `mpa_version` is 1. siw has no module
#                         parameters: every setting is a constant in siw_main.c. The modules
#                         are built from the rig's own copy of Debian's siw source with that
#                         one constant changed (SIW_P2P_KO or SIW_REV1_KO name prebuilt
#                         ones); a boot whose module cannot be built is reported and skipped.
#
# Revision and CRC on siw's side otherwise follow ours: as responder siw answers at the lower
# revision and uses CRC iff the Request has C; as initiator it sends revision 2 without C and
# turns CRC on when the Reply has C. Every peer-to-peer connection gets its RTR: siw's 6.1
# kernel crashed when one never came.
#
# Prints a line per case, PASS, FAIL or XFAIL (fails, for a reason on siw's side or in the
# specifications that the script checks and states), then a Markdown table of them. Exit
# status 0 if no case FAILed.
#
# Environment: SIW_RIG (the rig's directory), SIW_RIG_BUILD (its build folder), IWARP_BIN
# (default target/debug/iwarp, built if missing), INTEROP_PORT (first of 10 host ports on
# 127.0.0.1, default 17500), SIW_P2P_KO / SIW_REV1_KO (prebuilt modules), KEEP=1 (keep logs).
set -uo pipefail

PINGS=${1:-100}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
RIG=${SIW_RIG:-$repo/../shared/rigs/siw}
[ -x "$RIG/run-guest.sh" ] || RIG=/work/shared/rigs/siw
BUILD=${SIW_RIG_BUILD:-$HOME/.cache/iwarp-siw-rig}
BIN=${IWARP_BIN:-$repo/target/debug/iwarp}
P=${INTEROP_PORT:-17500}
LOG=$(mktemp -d /tmp/iwarp-interop.XXXXXX)
SIZES="26 64 4000 65535"

[ "$(id -u)" = 0 ] || { echo "interop-siw.sh: needs root (the rig's QEMU guest)"; exit 2; }
[ -x "$RIG/run-guest.sh" ] || { echo "interop-siw.sh: no rig at $RIG"; exit 2; }
[ -f "$BUILD/initramfs.cpio.zst" ] || { echo "interop-siw.sh: build the rig first ($RIG/build.sh)"; exit 2; }
[ -x "$BIN" ] || (cd "$repo" && cargo build -p iwarp-cli) || exit 2

rows=()
failed=0
verdict() { # case, pass|fail|xfail, detail
	case $2 in
	pass) echo "PASS   $1: $3" ;;
	xfail) echo "XFAIL  $1: $3" ;;
	*) echo "FAIL   $1: $3"; failed=1 ;;
	esac
	rows+=("| $1 | $(case $2 in pass) echo pass ;; xfail) echo "fails, expected" ;; *) echo FAIL ;; esac) | $3 |")
}
last_line() { grep -v '^\s*$' "$1" 2>/dev/null | tail -n 1; }
count() { grep -c -- "$1" "$2" 2>/dev/null || true; }

guest_pid=
boot() { # name, readiness, forwards..., -- guest command
	local name=$1 wait=$2
	shift 2
	local fwd=()
	while [ "$1" != -- ]; do fwd+=("$1"); shift; done
	shift
	mkdir -p "$LOG/$name/share"
	"$RIG/run-guest.sh" -w "$wait" -d "$LOG/$name" "${fwd[@]}" "$*" >"$LOG/$name.out" 2>"$LOG/$name.err" &
	guest_pid=$!
	for _ in $(seq 600); do
		grep -q READY "$LOG/$name.out" 2>/dev/null && return 0
		kill -0 "$guest_pid" 2>/dev/null || break
		sleep 0.5
	done
	verdict "$name: guest" fail "did not come up: $(last_line "$LOG/$name.err")"
	return 1
}
shutdown_guest() { # name: stop the guest (if still up); report a kernel oops
	if kill -0 "$guest_pid" 2>/dev/null; then kill "$guest_pid"; fi
	wait "$guest_pid" 2>/dev/null
	if grep -qE 'Kernel panic|BUG:|kernel BUG at|Oops:' "$LOG/$1/console.log" 2>/dev/null; then
		verdict "$1: guest kernel" fail "oops or panic, see $LOG/$1/console.log"
	fi
}
wait_guest() { # name: the guest command's own end (the guest then powers off), bounded
	for _ in $(seq 3600); do kill -0 "$guest_pid" 2>/dev/null || break; sleep 0.5; done
	shutdown_guest "$1"
}
our_servers=()
serve() { # log, args...: a server of ours on the host, waited for until it listens
	local log=$1
	shift
	"$BIN" "$@" >"$log" 2>"$log.err" &
	our_servers+=($!)
	for _ in $(seq 100); do grep -q "listening on" "$log.err" 2>/dev/null && return 0; sleep 0.1; done
	verdict "our server $*" fail "did not start: $(last_line "$log.err")"
	return 1
}
stop_servers() {
	for pid in "${our_servers[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
	our_servers=()
}
trap 'stop_servers; [ -n "$guest_pid" ] && kill "$guest_pid" 2>/dev/null' EXIT

kver=$(awk '{print $1}' "$BUILD/VERSION" 2>/dev/null)
echo "siw: Linux $(cat "$BUILD/VERSION" 2>/dev/null) (Debian), siw.ko built by the rig"
echo "rdma-core: $(grep -A8 '^Package: rdma-core$' "$BUILD/rootfs/var/lib/dpkg/status" 2>/dev/null | awk '/^Version:/ {print $2}')"
echo "iwarp: $("$BIN" --version), $PINGS pings per case; logs in $LOG"

# ---------------------------------------------------------------------------------------------
# Boot 1: siw serves.
echo "== boot 1: siw as responder (rping -s -P, ucmatose), our clients"
ucma_servers=""
for port in 7472 7473 7474 7475; do
	ucma_servers+="ucmatose -p $port -C $PINGS -S 4000 >/mnt/host/ucmatose-$port.log 2>&1 & "
done
if boot siw-serves 7475 -f "$P:7471" -f "$((P + 1)):7472" -f "$((P + 2)):7473" \
	-f "$((P + 3)):7474" -f "$((P + 4)):7475" -- \
	"rping -s -a 0.0.0.0 -p 7471 -S 65535 -P >/mnt/host/rping.log 2>&1 & $ucma_servers wait"; then
	rping_log=$LOG/siw-serves/share/rping.log
	ping_case() { # case, expectation (ok | reject:TEXT | xfail-ord0), args...
		local name=$1 want=$2 out="$LOG/$1.log" before
		shift 2
		before=$(count "post send error" "$rping_log")
		"$BIN" ping --connect "127.0.0.1:$P" --timeout 30 "$@" >"$out" 2>&1
		local rc=$?
		case $want in
		ok)
			if [ $rc = 0 ] && grep -q "^$PINGS pings of " "$out"; then
				verdict "$name" pass "$PINGS validated pings, $(grep -m1 'rtt min' "$out")"
			else
				verdict "$name" fail "$(last_line "$out")"
			fi
			;;
		reject:*)
			if [ $rc != 0 ] && [ "$(wc -l <"$out")" = 1 ] && grep -qF "${want#reject:}" "$out"; then
				verdict "$name" pass "$(last_line "$out")"
			else
				verdict "$name" fail "$(last_line "$out")"
			fi
			;;
		xfail-ord0)
			# A revision 1 Request carries no IRD/ORD: siw reports 0/0 to rdma_cm
			# (siw_proc_mpareq sets them only from enhanced data), rping accepts with
			# them (rdma_accept with no parameters) and its RDMA Read fails at the post.
			if [ $rc != 0 ] && [ "$(count "post send error" "$rping_log")" -gt "$before" ]; then
				verdict "$name" xfail "siw accepts a revision 1 Request with ORD 0, so rping's RDMA Read fails at its post (\"post send error -1\") and it disconnects; ours: $(last_line "$out")"
			elif [ $rc = 0 ]; then
				verdict "$name" pass "$PINGS validated pings (siw's ORD 0 is gone?)"
			else
				verdict "$name" fail "$(last_line "$out")"
			fi
			;;
		esac
	}
	for rev in 2 1; do
		want=ok
		[ "$rev" = 1 ] && want=xfail-ord0
		for crc in on off; do
			for size in $SIZES; do
				ping_case "siw serves, rping, rev $rev, CRC $crc, $size octets" "$want" \
					--mpa-rev "$rev" --crc "$crc" -S "$size" -C "$PINGS" -V
			done
		done
	done
	ping_case "siw serves, a Request asking for markers" \
		"reject:rejected the connection (we asked for MPA markers" --markers -C 1
	cma_case() { # case, host port, args...
		local name=$1 port=$2 out="$LOG/$1.log"
		shift 2
		"$BIN" cmatose -s "127.0.0.1:$port" -C "$PINGS" -S 4000 -v --timeout 30 "$@" >"$out" 2>&1
		if [ $? = 0 ] && grep -q "^data transfers complete" "$out"; then
			verdict "$name" pass "$PINGS messages of 4000 octets each way; $(grep -m1 '^connection 0' "$out" | cut -d' ' -f3-)"
		else
			verdict "$name" fail "$(last_line "$out")"
		fi
	}
	cma_case "siw serves, ucmatose" "$((P + 1))"
	cma_case "siw serves, ucmatose, 13 octets of private data" "$((P + 2))" --private-data "iwarp cmatose"
	cma_case "siw serves, ucmatose, rev 1, CRC off" "$((P + 4))" --mpa-rev 1 --crc off
	# Peer-to-peer last: a siw that crashes takes only these cases with it.
	cma_case "siw serves, ucmatose, peer-to-peer, Write RTR" "$((P + 3))" --p2p write
	for rtr in write read; do
		ping_case "siw serves, rping, peer-to-peer, $rtr RTR" ok --p2p "$rtr" -S 4000 -C "$PINGS" -V
	done
	ping_case "siw serves, rping, peer-to-peer offering Write and Read" ok \
		--p2p write,read -S 64 -C "$PINGS" -V
fi
shutdown_guest siw-serves

# ---------------------------------------------------------------------------------------------
# Boots 2 to 4: siw connects to our servers, one per setting, each behind its own guest port.
# A spec is "guest port|label|expectation|server arguments"; expectations: ok, siw-rev2-only
# (siw refuses a Reply below revision 2 to its enhanced Request), rule4 (a ucmatose client
# against a server that MPA forbids to send first).
siw_connects() { # boot name, module to load ("" for the rig's), specs...
	local name=$1 module=$2
	shift 2
	local fwd=() cmd="" spec port label want args i=0
	mkdir -p "$LOG/$name/share"
	if [ -n "$module" ]; then
		cp "$module" "$LOG/$name/share/siw.ko" || return 1
		cmd+='nic=$(ls /sys/class/net | grep -v "^lo$" | head -n1); '
		cmd+='rdma link delete siw0 && rmmod siw && insmod /mnt/host/siw.ko && '
		cmd+='rdma link add siw0 type siw netdev $nic || { echo "module swap failed"; exit 99; }; '
	fi
	for spec in "$@"; do
		IFS='|' read -r port label want args <<<"$spec"
		local hport=$((P + 5 + i))
		i=$((i + 1))
		fwd+=(-g "$port:$hport")
		case $args in
		cmatose*)
			serve "$LOG/$name-$port.srv" $args -b 127.0.0.1 -p "$hport" -C "$PINGS" -S 4000 -v || return 1
			cmd+="echo 'CASE $port ucmatose'; timeout 120 ucmatose -s 10.0.2.100 -p $port -C $PINGS -S 4000; echo \"RC \$?\"; "
			;;
		*)
			serve "$LOG/$name-$port.srv" ping -s -P -a 127.0.0.1 -p "$hport" $args || return 1
			for size in $SIZES; do
				cmd+="echo 'CASE $port rping $size'; timeout 300 rping -c -a 10.0.2.100 -p $port -S $size -C $PINGS -V; echo \"RC \$?\"; "
			done
			;;
		esac
	done
	boot "$name" none "${fwd[@]}" -- "$cmd" || { stop_servers; return 1; }
	wait_guest "$name"
	stop_servers
	if grep -q "module swap failed" "$LOG/$name/share/out.log" 2>/dev/null; then
		verdict "siw connects ($name)" fail "the guest could not load $module"
		return 1
	fi
	for spec in "$@"; do
		IFS='|' read -r port label want args <<<"$spec"
		local srv="$LOG/$name-$port.srv"
		# The guest's output of each case: from its CASE line to its RC line.
		awk -v p="$port" '$1 == "CASE" {on = ($2 == p); c = $3 " " $4; next}
			on && /^RC / {print c, $2; on = 0; next} on {print "#", c, $0}' \
			"$LOG/$name/share/out.log" >"$LOG/$name-$port.cases"
		case $want in
		rule4)
			# ucmatose's exit status says nothing here: it counts flushed receives as
			# messages. Our server's account is the verdict.
			if grep -q "rule 4" "$srv.err"; then
				verdict "siw connects ($name), ucmatose, $label" xfail "ucmatose's client sends nothing until the server has sent, and an MPA server may not send first (RFC 5044 7.1.2 rule 4; siw's own server breaks the rule); ours: $(last_line "$srv.err" | sed 's/^iwarp cmatose: error: //; s/: the client has sent nothing.*//')"
			else
				verdict "siw connects ($name), ucmatose, $label" fail "$(last_line "$srv.err")"
			fi
			;;
		*)
			case $args in
			cmatose*)
				if grep -q "^data transfers complete" "$srv"; then
					verdict "siw connects ($name), ucmatose, $label" pass "$PINGS messages of 4000 octets each way; $(grep -m1 '^connection 0' "$srv" | cut -d' ' -f3-)"
				else
					verdict "siw connects ($name), ucmatose, $label" fail "$(last_line "$srv.err")"
				fi
				continue
				;;
			esac
			local ok=0 size rc
			for size in $SIZES; do
				rc=$(awk -v s="$size" '$1 == "rping" && $2 == s {print $3}' "$LOG/$name-$port.cases")
				if [ "${rc:-x}" = 0 ]; then
					ok=$((ok + 1))
					verdict "siw connects ($name), rping, $label, $size octets" pass "$PINGS validated pings"
				elif [ "$want" = siw-rev2-only ] && grep -q "^# rping $size .*RDMA_CM_EVENT_REJECTED" "$LOG/$name-$port.cases"; then
					verdict "siw connects ($name), rping, $label, $size octets" xfail "siw's enhanced initiator refuses a Reply below revision 2 (siw_proc_mpareply: \"the responder MUST reply with MPA version 2\"); rping: RDMA_CM_EVENT_REJECTED, error -104"
				else
					verdict "siw connects ($name), rping, $label, $size octets" fail \
						"rping rc ${rc:-none}; ours: $(grep -m1 error "$srv.err")"
				fi
			done
			# Our server's side of the same: a client served whole for each rping that passed.
			local served errors
			served=$(count "disconnected after $PINGS pings" "$srv.err")
			errors=$(count "error" "$srv.err")
			if [ "$served" = "$ok" ] && [ "$errors" = 0 ]; then
				[ "$ok" = 0 ] || verdict "siw connects ($name), our rping server, $label" pass "$served clients served $PINGS pings each, no error"
			else
				verdict "siw connects ($name), our rping server, $label" fail "$served clients served $PINGS pings, $errors errors"
			fi
			;;
		esac
	done
}

siw_module() { # name, sed expression, the line it must produce: a siw.ko path, or nothing
	local dir=$LOG/siw-$1-src
	[ -n "$kver" ] && [ -d "/usr/src/linux-headers-$kver" ] && [ -f "$BUILD/siw/siw_main.c" ] || return 0
	mkdir -p "$dir"
	cp "$BUILD"/siw/*.[ch] "$BUILD/siw/Makefile" "$BUILD/siw/Kconfig" "$dir/"
	sed -i "$2" "$dir/siw_main.c"
	grep -qF "$3" "$dir/siw_main.c" || return 0
	make -s -C "/usr/src/linux-headers-$kver" M="$dir" CONFIG_RDMA_SIW=m modules >"$dir/build.log" 2>&1 &&
		echo "$dir/siw.ko"
}

echo "== boot 2: siw as initiator (rping -c, ucmatose -s), our servers"
siw_connects siw-connects "" \
	"7481|Reply rev 2 with C|ok|--crc on" \
	"7482|Reply rev 2 without C|ok|--crc off" \
	"7483|Reply rev 1 with C|siw-rev2-only|--mpa-rev 1 --crc on" \
	"7484|Reply rev 1 without C|siw-rev2-only|--mpa-rev 1 --crc off" \
	"7485|not peer-to-peer|rule4|cmatose --timeout 20"

echo "== boot 3: siw as initiator in peer-to-peer mode (peer_to_peer = true)"
ko=${SIW_P2P_KO:-$(siw_module p2p 's/^const bool peer_to_peer;/const bool peer_to_peer = true;/' 'const bool peer_to_peer = true;')}
if [ -n "$ko" ] && [ -f "$ko" ]; then
	siw_connects siw-p2p-connects "$ko" \
		"7491|peer-to-peer, Write RTR chosen, CRC on|ok|--crc on" \
		"7492|peer-to-peer, Read RTR chosen, CRC off|ok|--crc off --p2p read" \
		"7493|peer-to-peer|ok|cmatose --timeout 30"
else
	verdict "siw connects in peer-to-peer mode" fail "no peer-to-peer siw.ko (see $LOG/siw-p2p-src/build.log)"
fi

echo "== boot 4: siw as initiator at MPA revision 1 (mpa_version = 1)"
ko=${SIW_REV1_KO:-$(siw_module rev1 's/^u_char mpa_version = MPA_REVISION_2;/u_char mpa_version = MPA_REVISION_1;/' 'u_char mpa_version = MPA_REVISION_1;')}
if [ -n "$ko" ] && [ -f "$ko" ]; then
	siw_connects siw-rev1-connects "$ko" \
		"7494|Request rev 1, Reply with C|ok|--crc on" \
		"7495|Request rev 1, Reply without C|ok|--crc off"
else
	verdict "siw connects at revision 1" fail "no revision 1 siw.ko (see $LOG/siw-rev1-src/build.log)"
fi

echo
echo "| case | result | detail |"
echo "| --- | --- | --- |"
printf '%s\n' "${rows[@]}"
[ "${KEEP:-0}" = 1 ] || [ "$failed" = 1 ] || rm -rf "$LOG"
exit "$failed"
