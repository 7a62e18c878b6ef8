"""Fits the CPU's fixed costs (planner/src/speed.rs: CPU_LAYER_COST_BYTES,
CPU_VOCAB_COST_BYTES) to first runs of the demo models (collect.sh's lines)
by least squares on  bandwidth / measured = bytes / 0.8 + layers * X + vocab * Y,
then prints each model's error as the runs were estimated (speed model 5
for runs-2026-12-05.txt), with the fitted and with the shipped constants.

python3 scripts/speed-fit/fit.py scripts/speed-fit/runs-2026-12-05.txt
"""
import sys

EFFICIENCY = 0.8  # CPU_BANDWIDTH_EFFICIENCY
SHIPPED = (2.5e6, 280.0)  # CPU_LAYER_COST_BYTES, CPU_VOCAB_COST_BYTES
SHAPE = {"demo": (30, 49152), "demo-base": (18, 262144)}  # layers, vocabulary

rows = []
for path in sys.argv[1:]:
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        p = line.split()
        model, old, measured, bw, read = p[1], float(p[2]), float(p[3]), float(p[4]), float(p[5])
        rows.append((model, old, measured, bw, read) + SHAPE[model])

a11 = a12 = a22 = b1 = b2 = 0.0
for model, old, measured, bw, read, layers, vocab in rows:
    r = bw / measured - read / EFFICIENCY
    a11 += layers * layers
    a12 += layers * vocab
    a22 += vocab * vocab
    b1 += layers * r
    b2 += vocab * r
det = a11 * a22 - a12 * a12
fitted = ((b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det)
print(f"fitted: {fitted[0] / 1e6:.2f} MB per layer, {fitted[1]:.0f} bytes per vocabulary entry")


def summary(errors):
    errors = sorted(errors)
    return f"median {errors[len(errors) // 2]:+.0%} ({errors[0]:+.0%} to {errors[-1]:+.0%})"


for name in SHAPE:
    mine = [r for r in rows if r[0] == name]
    line = f"{name}, {len(mine)} runs: as estimated then {summary([o / m - 1 for _, o, m, *_ in mine])}"
    for label, (x, y) in (("fitted", fitted), ("shipped", SHIPPED)):
        est = [bw / (read / EFFICIENCY + l * x + v * y) / m - 1 for _, _, m, bw, read, l, v in mine]
        line += f"; {label} {summary(est)}"
    print(line)
