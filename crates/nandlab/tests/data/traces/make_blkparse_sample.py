#!/usr/bin/env python3
"""Write `blkparse_sample.txt`: blkparse's default text output for a
simulated block layer, and `blkparse_sample.expected.json`: what it holds.

Why a simulation and not a capture: the public capture the tests used
before (Apress, "block-trace-analysis-and-storage-system-optimization")
is under a licence that forbids redistribution for commercial use, which
nandlab (MIT/Apache) cannot carry, and a sandbox cannot run blktrace. This
script writes what `blkparse -i sdb` prints for a busy disk, with the
quirks of real output that a reader must survive: the "Input file" header,
interleaved CPUs with per-CPU sequence numbers, partition remaps (A),
merges (M) that never complete on their own, plugs and unplugs (P, U, UT),
scheduler messages (m) with sequence 0, flushes without a sector (FN),
preflush + FUA writes (FWFS), discards (D), readahead and metadata flags,
events of a second device, and the per-CPU and total summary at the end.

The expected counts are computed here from the generator's own requests
with the RWBS rules of blkparse(1) (preflush F before the direction, FUA F
after it, N with a preflush is a flush): an implementation independent of
nandlab's reader, so the test compares two readings of the same rules.

Deterministic: `python3 make_blkparse_sample.py` rewrites both files
byte-identically.  Licence: this script and its output are nandlab's
(MIT OR Apache-2.0).
"""
import json
import random
from pathlib import Path

SEED = 20261126
REQUESTS = 1200
DEVICE = "8,16"
OTHER_DEVICE = "8,32"
PART_START = 2048  # sectors: /dev/sdb1 starts here
HERE = Path(__file__).resolve().parent

PROCS = [(18615, "java"), (1199, "jbd2/sdb1-8"), (2222, "fstrim"), (3141, "dd"), (16766, "flush-8:16"),
         (4242, "postgres"), (77, "kworker/2:1")]
# (rwbs, weight): the mix a database on ext4 produces.
KINDS = [("R", 34), ("RA", 6), ("RM", 3), ("W", 30), ("WS", 10), ("WM", 4), ("FWFS", 3), ("FWS", 2),
         ("WFS", 1), ("D", 3), ("FN", 3), ("RS", 1)]


def op_of(rwbs):
    """(preflush, direction or None, fua) by blkparse(1)'s RWBS rules."""
    pre, direction, fua = False, None, False
    for c in rwbs:
        if c == "F" and direction is None:
            pre = True
        elif c == "F":
            fua = True
        elif c in "RWDN" and direction is None:
            direction = c
    return pre, direction, fua


def requests_of(rwbs, blocks):
    """The host requests one event stands for: (op, bytes) in order."""
    pre, d, fua = op_of(rwbs)
    out = []
    if pre:
        out.append(("flush", 0))
    if d in ("R", "W", "D"):
        op = {"R": "read", "W": "write", "D": "trim"}[d]
        out.append((op, blocks * 512))
        if fua and d == "W":
            out.append(("flush", 0))
    return out


def main():
    rng = random.Random(SEED)
    events = []  # (time_ns, cpu, pid, action, rest, device)
    t = 0
    last_end = {}  # per process: end sector of its last request (sequential streams merge)
    for _ in range(REQUESTS):
        t += int(rng.expovariate(1 / 40_000))  # ~25 k requests/s
        pid, name = rng.choice(PROCS)
        rwbs = rng.choices([k for k, _ in KINDS], weights=[w for _, w in KINDS])[0]
        cpu = rng.randrange(4)
        if rwbs == "FN":
            events.append((t, cpu, pid, "Q", f" FN [{name}]", DEVICE))
            events.append((t + 900, cpu, pid, "G", f" FN [{name}]", DEVICE))
            events.append((t + 1500, cpu, 0, "C", " FN [0]", DEVICE))
            continue
        blocks = rng.choice([8, 8, 8, 16, 32, 64, 128, 256]) if rwbs != "D" else rng.choice([2048, 4096, 65536])
        part_sector = last_end.get(pid) if rng.random() < 0.3 and pid in last_end else rng.randrange(0, 2_000_000) * 8
        last_end[pid] = part_sector + blocks
        sector = part_sector + PART_START
        io = f"{rwbs:>3} {sector} + {blocks}"
        events.append((t, cpu, pid, "A", f"{io} <- (8,17) {part_sector}", DEVICE))
        events.append((t + 1850, cpu, pid, "Q", f"{io} [{name}]", DEVICE))
        if rwbs in ("W", "R") and rng.random() < 0.12:
            # Merged into a request already queued: no G/I/D/C of its own.
            events.append((t + 2300, cpu, pid, "M", f"{io} [{name}]", DEVICE))
            continue
        events.append((t + 6438, cpu, pid, "G", f"{io} [{name}]", DEVICE))
        if rng.random() < 0.2:
            events.append((t + 8750, cpu, pid, "P", f"  N [{name}]", DEVICE))
        events.append((t + 9980, cpu, pid, "I", f"{io} [{name}]", DEVICE))
        events.append((t + 12990, cpu, 0, "m", f"  N cfq{pid}S / insert_request", DEVICE))
        if rng.random() < 0.15:
            events.append((t + 14000, cpu, pid, "U", f"  N [{name}] 1", DEVICE))
        service = rng.randrange(80_000, 2_000_000)
        events.append((t + 31865, cpu, pid, "D", f"{io} [{name}]", DEVICE))
        events.append((t + 31865 + service, rng.randrange(4), 0, "C", f"{io} [0]", DEVICE))
        if rng.random() < 0.02:
            events.append((t + 40000, cpu, 0, "UT", f"  N [swapper] {rng.randrange(1, 4)}", DEVICE))
        if rng.random() < 0.03:
            # Another disk traced in the same run.
            other = rng.randrange(0, 100_000) * 8
            events.append((t + 500, cpu, pid, "Q", f"  W {other} + 8 [{name}]", OTHER_DEVICE))
            events.append((t + 90_500, cpu, 0, "C", f"  W {other} + 8 [0]", OTHER_DEVICE))
    events.sort(key=lambda e: (e[0], e[1]))

    seq = {}
    lines = ["Input file sdb.blktrace.0 added", "Input file sdb.blktrace.1 added",
             "Input file sdb.blktrace.2 added", "Input file sdb.blktrace.3 added"]
    expected = {"completed": {}, "queued": {}, "issued": {}}
    per_cpu = {c: {"Q": 0, "C": 0} for c in range(4)}
    for time_ns, cpu, pid, action, rest, dev in events:
        if action == "m":
            n = 0
        else:
            seq[(dev, cpu)] = seq.get((dev, cpu), 0) + 1
            n = seq[(dev, cpu)]
        secs, ns = divmod(time_ns, 1_000_000_000)
        lines.append(f"{dev:>5} {cpu:>3} {n:>8} {secs:>5}.{ns:09d} {pid:>5} {action:>2} {rest}")
        if dev == DEVICE and action in ("Q", "C"):
            per_cpu[cpu][action] += 1
        which = {"Q": "queued", "D": "issued", "C": "completed"}.get(action)
        if which:
            words = rest.split()
            rwbs = words[0]
            blocks = int(words[3]) if len(words) > 3 and words[2] == "+" else 0
            key = dev
            for op, nbytes in requests_of(rwbs, blocks):
                c = expected[which].setdefault(key, {}).setdefault(op, [0, 0])
                c[0] += 1
                c[1] += nbytes
    for c in range(4):
        lines.append(f"CPU{c} ({DEVICE}):")
        lines.append(f" Reads Queued:    {per_cpu[c]['Q']:>8},  0KiB\t Writes Queued:  0,  0KiB")
        lines.append(f" Reads Completed: {per_cpu[c]['C']:>8},  0KiB\t Writes Completed: 0,  0KiB")
    lines.append(f"Total ({DEVICE}):")
    lines.append(" Reads Queued:           0,        0KiB\t Writes Queued:           0,        0KiB")
    lines.append("Throughput (R/W): 0KiB/s / 0KiB/s")
    lines.append(f"Events ({DEVICE}): {len(events)} entries")
    lines.append("Skips: 0 forward (0 -   0.0%)")
    text = "\n".join(lines) + "\n"
    (HERE / "blkparse_sample.txt").write_text(text)
    expected["lines"] = len(lines)
    (HERE / "blkparse_sample.expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
