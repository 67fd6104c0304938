#!/usr/bin/env bash
# Runs the fuzz targets against the corpora kept in the repository, then
# minimises each corpus back into fuzz/corpus/<target>, and prints one line
# per target: seconds, executions, coverage (libFuzzer's `cov:` edges and
# `ft:` features), corpus size before and after, crashes.
#
#   scripts/fuzz.sh [SECONDS] [TARGET ...]     # default 600 s, every target
#   FUZZ_JOBS=2 scripts/fuzz.sh 1800 ddp_receive
#
# Needs a nightly toolchain (`rustup toolchain install nightly`); installs
# cargo-fuzz with `cargo install` when it is missing. Not run by CI: it is
# meant to run for tens of minutes per target. A crash leaves its input in
# fuzz/artifacts/<target>/ and makes the script exit 1.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds=${1:-600}
shift || true
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
rustup run nightly rustc --version >/dev/null 2>&1 || {
	echo "fuzz.sh: a nightly toolchain is needed: rustup toolchain install nightly" >&2
	exit 2
}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo +nightly fuzz list)

status=0
mkdir -p logs
printf '%-16s %8s %12s %8s %8s %8s %8s %s\n' target seconds execs cov ft corpus minimised crashes
for t in "${targets[@]}"; do
	corpus=corpus/$t
	mkdir -p "$corpus"
	before=$(find "$corpus" -type f | wc -l)
	log=logs/$t.log
	crashed=0
	# -jobs/-workers run several processes on one corpus; their logs go to
	# fuzz-N.log, the summary line reads the first.
	if ! cargo +nightly fuzz run "$t" "$corpus" -- \
		-max_total_time="$seconds" -print_final_stats=1 \
		${FUZZ_JOBS:+-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS} >"$log" 2>&1; then
		crashed=1
		status=1
	fi
	[ -f fuzz-0.log ] && cat fuzz-*.log >>"$log" && rm -f fuzz-*.log
	execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s+=$2} END {print s+0}')
	last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	# Minimise: keep the smallest set of inputs with the same coverage.
	tmp=$(mktemp -d)
	cargo +nightly fuzz cmin "$t" "$corpus" -- -merge_control_file="$tmp/ctl" >"$tmp/cmin.log" 2>&1 || true
	rm -rf "$tmp"
	after=$(find "$corpus" -type f | wc -l)
	printf '%-16s %8s %12s %8s %8s %8s %8s %s\n' "$t" "$seconds" "$execs" "${cov:-?}" "${ft:-?}" "$before" "$after" "$crashed"
done
exit $status
