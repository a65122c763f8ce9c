"""What every part of the benchmark reports into, and the settings they share: the rows of
the final table, the targets (PASS / FAIL lines) and how many rounds each side runs."""
import os
import sys

QUICK = os.environ.get("QUICK") == "1"
# Runs per side of the allreduce and 1,024/4,096-worker scale cases, ours and
# the peer's interleaved; the table shows medians. One run per side swings by
# 30% and more on a small shared VM, and a run of the peer's that happened to
# land in a quiet moment would decide a target alone.
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "1" if QUICK else "3")))

table = []    # rows of the final table: (section, name, ours, peer, ratio, note)
targets = []  # (passed, text)


def print_table():
    print()
    print(f"{'part':<10} {'case':<32} {'ours':>24} {'peer':>24} {'ratio':>6}  note")
    print("-" * 120)
    for section, name, ours, peer, ratio, note in table:
        print(f"{section:<10} {name:<32} {ours:>24} {peer:>24} {ratio:>6}  {note}")
    print()
    for passed, text in targets:
        print(f"{'PASS' if passed else 'FAIL'}  {text}")
    sys.stdout.flush()
