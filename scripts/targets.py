#!/usr/bin/env python3
"""Measures issue 13's performance targets with `iwarp perf --baseline tcp`.

Runs each scenario several times and prints the median iWARP figure, the
median TCP figure and the median of the per-run ratios (each run measures
both transports in one process, so a ratio compares two figures taken
moments apart; single runs vary widely on a busy machine, the medians much
less). Runs alternate which transport goes first. "best/best" is the best
iWARP run against the best TCP run: the machine's slowdowns only subtract,
so it is the steadier view of what each costs when both had the machine at
its best. Run from the repository root after `cargo build --release -p iwarp-cli`:

    python3 scripts/targets.py [repeats] [--only WORD]...

`--only WORD` keeps the rows whose name contains WORD (any of them, case
insensitive), e.g. `--only markers --only lat`.

Each row also prints "CPU/octet": the median of the runs' ratios of the
process's CPU time per octet during the measured phases (`cpu_ratio` in
the tool's JSON; both ends, since they share the process).

Rows beyond bandwidth and latency:

- "CPU per octet": the 64 KiB RDMA Write run over iWARP and over TCP as
  separate processes, alternating, each process's user and system time
  (both ends: they share the process) per octet moved; the median of the
  per-pair ratios. CPU time rather than cycles: this VM has no hardware
  counters (`perf stat -e cycles` reports "not supported"), and with the
  clock steady, time is cycles.
- "1000 connections": `-q 1000`, aggregate bandwidth.
- "heap per idle connection": `cargo test -p iwarp --test idle_memory`, the
  live heap per connection, both ends, 200 idle connections (not repeated:
  it does not vary).

`python3 scripts/targets.py placement [repeats]` compares the two receive
placements instead (`--placement direct` and `--placement verified`),
iWARP only: the runs of the two alternate, so that both see the same
machine, and each pair gives a bandwidth ratio and a ratio of CPU time per
octet moved. The medians of the per-pair ratios are the cost of
verification.
"""
import json
import os
import resource
import statistics
import subprocess
import sys

# IWARP_BIN: another build to measure, e.g. a copy from before a change.
BIN = os.environ.get("IWARP_BIN", "target/release/iwarp")

BW64 = ["-s", "64K", "-D", "2"]
BW4 = ["-s", "4K", "-D", "2"]

# (name, arguments, kind, target); kind "bw" wants the ratio at least the
# target, "lat" at most.
SCENARIOS = [
    ("RDMA Write bw 64 KiB, CRC", ["write", "bw", *BW64], "bw", 0.95),
    ("Send bw 64 KiB, CRC", ["send", "bw", *BW64], "bw", 0.95),
    ("RDMA Read bw 64 KiB, CRC", ["read", "bw", *BW64], "bw", 0.95),
    ("RDMA Write bw 64 KiB, CRC, markers", ["write", "bw", *BW64, "--markers", "both"], "bw", 0.85),
    ("Send bw 64 KiB, CRC, markers", ["send", "bw", *BW64, "--markers", "both"], "bw", 0.85),
    ("RDMA Read bw 64 KiB, CRC, markers", ["read", "bw", *BW64, "--markers", "both"], "bw", 0.85),
    ("RDMA Write bw 4 KiB, CRC", ["write", "bw", *BW4], "bw", 0.9),
    ("Send bw 4 KiB, CRC", ["send", "bw", *BW4], "bw", 0.9),
    ("RDMA Read bw 4 KiB, CRC", ["read", "bw", *BW4], "bw", 0.9),
    ("Send lat 64 B (t_typical), CRC", ["send", "lat", "-s", "64", "-n", "20000"], "lat", 1.1),
    ("IFT RDMA Write bw 64 KiB, header+payload CRC", ["write", "bw", *BW64, "--framing", "ift"], "bw", 0.95),
    ("IFT Send bw 64 KiB, header+payload CRC", ["send", "bw", *BW64, "--framing", "ift"], "bw", 0.95),
    ("IFT RDMA Write bw 64 KiB, header+payload CRC, markers", ["write", "bw", *BW64, "--framing", "ift", "--markers", "both"], "bw", 0.85),
    ("MPA RDMA Write bw 64 KiB, no CRC", ["write", "bw", *BW64, "--crc", "off"], "bw", None),
    ("1000 connections, RDMA Write bw 64 KiB", ["write", "bw", "-s", "64K", "-D", "4", "-q", "1000", "-t", "8"], "bw", 0.9),
]

CPU_SCENARIO = ("CPU per octet, RDMA Write 64 KiB (iwarp/tcp)", ["write", "bw", *BW64], 1.15)
MEMORY_SCENARIO = ("heap per idle connection, both ends", 64 * 1024)


def run(args, tcp_first=False):
    """One `--baseline` run: (iWARP figure, TCP figure, iWARP/TCP CPU per octet).

    With `tcp_first`, TCP is measured first (`--transport tcp --baseline iwarp`):
    alternating the order cancels whatever the second place gains or loses (a
    warmer machine, a fuller heap)."""
    order = ["--transport", "tcp", "--baseline", "iwarp"] if tcp_first else ["--baseline", "tcp"]
    out = subprocess.run([BIN, "perf", *args, *order, "--json"],
                         capture_output=True, text=True, timeout=600, check=True)
    doc = json.loads(out.stdout)
    figures = []
    for r in doc["runs"]:
        row = r["results"][0]
        if row.get("bw"):
            figures.append(row["bw"]["avg_bytes_per_sec"] / 2**20)
        else:
            figures.append(row["lat"]["t_typical_usec"])
    # The tool's own CPU time per octet of each measured phase, both ends (in-process).
    cpu = doc["comparison"]["rows"][0].get("cpu_ratio")
    if tcp_first:
        figures.reverse()
        cpu = 1 / cpu if cpu else None
    return figures + [cpu]


def run_cpu(args):
    """One run of one transport: (MiB/s, CPU seconds per GiB moved)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([BIN, "perf", *args, "--json"],
                         capture_output=True, text=True, timeout=600, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = json.loads(out.stdout)["runs"][0]["results"][0]
    # The process's whole life counts (setup, warm-up): the same for both.
    return row["bw"]["avg_bytes_per_sec"] / 2**20, cpu / (row["bytes"] / 2**30)


def spread(ratios):
    return f"[ratios {min(ratios):.3f}..{max(ratios):.3f}]"


def verdict(r, target, kind):
    if target is None:
        return "(no target)"
    ok = r >= target if kind == "bw" else r <= target
    return f"(target {'>=' if kind == 'bw' else '<='} {target}) {'met' if ok else 'NOT met'}"


def measure_row(name, args, kind, target, repeats):
    iw, tcp, ratios, cpus = [], [], [], []
    for i in range(repeats):
        a, b, cpu = run(args, tcp_first=i % 2 == 1)
        iw.append(a)
        tcp.append(b)
        ratios.append(a / b)
        if cpu is not None:
            cpus.append(cpu)
    unit = "MiB/s" if kind == "bw" else "us"
    r = statistics.median(ratios)
    cpu = f"  CPU/octet {statistics.median(cpus):5.3f}" if cpus else ""
    # Best against best: slowdowns from the machine only ever subtract, so
    # each transport's best run is the steadiest view of what it costs.
    best = max(iw) / max(tcp) if kind == "bw" else min(iw) / min(tcp)
    print(f"{name:46} iwarp {statistics.median(iw):9.1f} {unit}  tcp {statistics.median(tcp):9.1f} {unit}"
          f"  ratio {r:5.3f} {verdict(r, target, kind)}  {spread(ratios)}  best/best {best:5.3f}{cpu}",
          flush=True)


def measure_cpu(repeats):
    name, args, target = CPU_SCENARIO
    iw, tcp, ratios = [], [], []
    for _ in range(repeats):
        _, a = run_cpu([*args, "--transport", "iwarp"])
        _, b = run_cpu([*args, "--transport", "tcp"])
        iw.append(a)
        tcp.append(b)
        ratios.append(a / b)
    r = statistics.median(ratios)
    print(f"{name:46} iwarp {statistics.median(iw):9.3f} s/GiB  tcp {statistics.median(tcp):7.3f} s/GiB"
          f"  ratio {r:5.3f} {verdict(r, target, 'lat')}  {spread(ratios)}", flush=True)


def measure_memory():
    name, target = MEMORY_SCENARIO
    out = subprocess.run(["cargo", "test", "-q", "-p", "iwarp", "--test", "idle_memory", "--",
                          "--nocapture"], capture_output=True, text=True, timeout=1800, check=True)
    line = next(l for l in out.stdout.splitlines() if l.startswith("scenario idle "))
    heap = int(line.split()[3])
    ok = heap <= target
    print(f"{name:46} iwarp {heap / 1024:9.1f} KiB  (target <= {target // 1024} KiB)"
          f" {'met' if ok else 'NOT met'}", flush=True)


def compare_placement(repeats):
    for name, args, _, _ in SCENARIOS[:2] + SCENARIOS[3:5]:
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
    argv = sys.argv[1:]
    if argv and argv[0] == "placement":
        compare_placement(int(argv[1]) if len(argv) > 1 else 5)
        return
    only = [argv[i + 1].lower() for i, a in enumerate(argv) if a == "--only" and i + 1 < len(argv)]
    numbers = [a for a in argv if a.isdigit()]
    repeats = int(numbers[0]) if numbers else 5

    def wanted(name):
        return not only or any(w in name.lower() for w in only)

    for name, args, kind, target in SCENARIOS:
        if wanted(name):
            measure_row(name, args, kind, target, repeats)
    if wanted(CPU_SCENARIO[0]):
        measure_cpu(repeats)
    if wanted(MEMORY_SCENARIO[0]):
        measure_memory()


if __name__ == "__main__":
    main()
