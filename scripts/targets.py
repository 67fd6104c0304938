#!/usr/bin/env python3
"""Measures issue 5's performance targets with `iwarp perf --baseline tcp`.

Runs each scenario several times and prints the median iWARP figure, the
median TCP figure and the median of the per-run ratios. Run from the
repository root after `cargo build --release -p iwarp-cli`:

    python3 scripts/targets.py [repeats]
"""
import json
import statistics
import subprocess
import sys

BIN = "target/release/iwarp"
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 5

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


def main():
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
