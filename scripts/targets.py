#!/usr/bin/env python3
"""Measures issue 5's performance targets with `iwarp perf --baseline tcp`.

Runs each scenario several times and prints the median iWARP figure, the
median TCP figure and the median of the per-run ratios. Run from the
repository root after `cargo build --release -p iwarp-cli`:

    python3 scripts/targets.py [repeats]

`python3 scripts/targets.py placement [repeats]` compares the two receive
placements instead (`--placement direct` and `--placement verified`),
iWARP only: the runs of the two alternate, so that both see the same
machine, and each pair gives a bandwidth ratio and a ratio of CPU time per
octet moved (user and system time of the process, both ends included),
which a busy machine disturbs less than bandwidth. The medians of the
per-pair ratios are the cost of verification.
"""
import json
import resource
import statistics
import subprocess
import sys

BIN = "target/release/iwarp"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 5

SCENARIOS = [
    ("RDMA Write bw 64 KiB, CRC, no markers", ["write", "bw", "-s", "64K", "-D", "2"], "bw", 0.9),
    ("Send bw 64 KiB, CRC, no markers", ["send", "bw", "-s", "64K", "-D", "2"], "bw", 0.9),
    ("RDMA Write bw 64 KiB, CRC, markers", ["write", "bw", "-s", "64K", "-D", "2", "--markers", "both"], "bw", 0.8),
    ("Send bw 64 KiB, CRC, markers", ["send", "bw", "-s", "64K", "-D", "2", "--markers", "both"], "bw", 0.8),
    ("Send lat 64 B (t_typical), CRC", ["send", "lat", "-s", "64", "-n", "20000"], "lat", 1.2),
]


def run(args):
    out = subprocess.run([BIN, "perf", *args, "--baseline", "tcp", "--json"],
                         capture_output=True, text=True, timeout=300, check=True)
    doc = json.loads(out.stdout)
    figures = []
    for r in doc["runs"]:
        row = r["results"][0]
        if row.get("bw"):
            figures.append(row["bw"]["avg_bytes_per_sec"] / 2**20)
        else:
            figures.append(row["lat"]["t_typical_usec"])
    return figures


PLACEMENT_SCENARIOS = SCENARIOS[:4]


def run_cpu(args):
    """One iWARP-only run: (MiB/s, CPU seconds per GiB moved)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([BIN, "perf", *args, "--json"],
                         capture_output=True, text=True, timeout=300, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = json.loads(out.stdout)["runs"][0]["results"][0]
    # The process's whole life counts (setup, warm-up): the same for both.
    return row["bw"]["avg_bytes_per_sec"] / 2**20, cpu / (row["bytes"] / 2**30)


def compare_placement(repeats):
    for name, args, _, _ in PLACEMENT_SCENARIOS:
        direct, verified, bw_ratios, cpu_ratios = [], [], [], []
        for _ in range(repeats):
            d, dc = run_cpu([*args, "--placement", "direct"])
            v, vc = run_cpu([*args, "--placement", "verified"])
            direct.append(d)
            verified.append(v)
            bw_ratios.append(v / d)
            cpu_ratios.append(vc / dc)
        bw = statistics.median(bw_ratios)
        cpu = statistics.median(cpu_ratios)
        print(f"{name:42} direct {statistics.median(direct):7.1f} MiB/s  verified {statistics.median(verified):7.1f} MiB/s"
              f"  bandwidth verified/direct {bw:5.3f} [{min(bw_ratios):.2f}..{max(bw_ratios):.2f}]"
              f"  CPU per octet verified/direct {cpu:5.3f} [{min(cpu_ratios):.2f}..{max(cpu_ratios):.2f}]")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "placement":
        compare_placement(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
        return
    for name, args, kind, target in SCENARIOS:
        iw, tcp, ratios = [], [], []
        for _ in range(REPEATS):
            a, b = run(args)
            iw.append(a)
            tcp.append(b)
            ratios.append(a / b)
        unit = "MiB/s" if kind == "bw" else "us"
        r = statistics.median(ratios)
        ok = r >= target if kind == "bw" else r <= target
        print(f"{name:42} iwarp {statistics.median(iw):9.1f} {unit}  tcp {statistics.median(tcp):9.1f} {unit}"
              f"  ratio {r:5.3f} (target {'>=' if kind == 'bw' else '<='} {target}) {'met' if ok else 'NOT met'}"
              f"  [ratios {min(ratios):.3f}..{max(ratios):.3f}]")


if __name__ == "__main__":
    main()
