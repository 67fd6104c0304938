#!/usr/bin/env python3
"""Counts the user-space instructions `iwarp perf` spends per message, under
callgrind: a figure that, unlike time on this machine, is the same from one
run to the next, so that a change to the per-message path can be measured
by a single pair of runs.

    python3 scripts/instructions.py [--iters N] [--bin PATH] [PERF ARGS...]

Without PERF ARGS it measures the latency test, `send lat -s 64`, over iWARP
and over plain TCP (`--transport tcp`), both ends in one process. Each
transport runs twice, with N and 2N iterations, and the difference over N
is the marginal cost of one iteration: what connection setup, the runtime's
start and the report cost falls out. A latency iteration is a round trip,
two one-way messages; the script prints per one-way message for `lat` and
per operation for `bw`.

What it does not count: the kernel (callgrind sees user space only; count
system calls with `perf stat -e 'syscalls:sys_enter_*'`), and the CRC as it
runs outside valgrind, which reports no VPCLMULQDQ to the program, so the
CRC takes the `crc32c` crate's path there (bandwidth figures over-count
it). Needs valgrind; build first with `cargo build --release -p iwarp-cli`.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def instructions(binary, args):
    """Total user-space instructions of one `iwarp perf` run under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "perf", *args],
            capture_output=True, text=True, timeout=3600)
        if run.returncode != 0:
            sys.exit(f"iwarp perf {' '.join(args)} failed under valgrind:\n{run.stdout}{run.stderr}")
        m = re.search(r"Collected : (\d+)", run.stderr)
        if not m:
            sys.exit(f"no instruction count in valgrind's output:\n{run.stderr}")
        return int(m.group(1))


def marginal(binary, args, iters):
    """Instructions per iteration: the difference between 2N and N iterations, over N."""
    small = instructions(binary, [*args, "-n", str(iters)])
    large = instructions(binary, [*args, "-n", str(2 * iters)])
    return (large - small) / iters


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=10000, help="N (the runs make N and 2N)")
    p.add_argument("--bin", default=os.environ.get("IWARP_BIN", "target/release/iwarp"))
    p.add_argument("perf", nargs=argparse.REMAINDER, help="iwarp perf arguments (no -n, no -D)")
    a = p.parse_args()
    args = a.perf or ["send", "lat", "-s", "64"]
    if any(a in args for a in ("-n", "--iters", "-D", "--duration")):
        sys.exit("leave -n and -D out: the script sets the iteration count")
    per = 2 if "lat" in args else 1
    unit = "one-way message" if per == 2 else "operation"
    figures = {}
    for transport in ("iwarp", "tcp"):
        figures[transport] = marginal(a.bin, [*args, "--transport", transport], a.iters) / per
        print(f"{transport:6} {figures[transport]:10,.0f} instructions per {unit}", flush=True)
    print(f"ratio  {figures['iwarp'] / figures['tcp']:10.3f}   (iwarp perf {' '.join(args)})")


if __name__ == "__main__":
    main()
