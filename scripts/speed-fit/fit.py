"""Fits the CPU's fixed costs (planner/src/speed.rs: CPU_PER_LAYER_S,
CPU_VOCAB_S) to first runs of the demo models by least squares on

    1 / measured = max(bytes / (0.8 * bandwidth), 2 * plain_params / flops_plain)
                   + layers * X + vocabulary * Y

at flops_plain = 2 threads x CPU_DECODE_FLOPS_PER_CORE_PLAIN, each spell
(first column) weighted alike, then prints each spell's errors as the runs
were estimated, and with the fitted and the shipped constants.

python3 scripts/speed-fit/fit.py scripts/speed-fit/runs-2026-12-05.txt
"""
import sys

EFFICIENCY = 0.8  # CPU_BANDWIDTH_EFFICIENCY
FLOPS_PLAIN = 2 * 25e9  # 2 threads x CPU_DECODE_FLOPS_PER_CORE_PLAIN
SHIPPED = (64e-6, 13.4e-9)  # CPU_PER_LAYER_S, CPU_VOCAB_S
# layers, vocabulary, active parameters in weights read unrepacked
SHAPE = {"demo": (30, 49152, 134.5e6), "demo-base": (18, 262144, 244e6)}

rows = []
for path in sys.argv[1:]:
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        p = line.split()
        old = None if p[2] == "-" else float(p[2])
        rows.append((p[0], p[1], old, float(p[3]), float(p[4]), float(p[5])))
spells = sorted({r[0] for r in rows})
weight = {s: 1.0 / sum(1 for r in rows if r[0] == s) for s in spells}


def base(model, bw, read):
    return max(read / (EFFICIENCY * bw), 2 * SHAPE[model][2] / FLOPS_PLAIN)


a11 = a12 = a22 = b1 = b2 = 0.0
for spell, model, _, measured, bw, read in rows:
    layers, vocab, _ = SHAPE[model]
    w = weight[spell]
    r = 1 / measured - base(model, bw, read)
    a11 += w * layers * layers
    a12 += w * layers * vocab
    a22 += w * vocab * vocab
    b1 += w * layers * r
    b2 += w * vocab * r
det = a11 * a22 - a12 * a12
fitted = ((b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det)
print(f"fitted: {fitted[0] * 1e6:.1f} us per layer, {fitted[1] * 1e9:.1f} ns per vocabulary entry")


def summary(errors):
    errors = sorted(errors)
    if not errors:
        return "-"
    return f"median {errors[len(errors) // 2]:+.0%} ({errors[0]:+.0%} to {errors[-1]:+.0%})"


for spell in spells:
    for name in SHAPE:
        mine = [r for r in rows if r[0] == spell and r[1] == name]
        if not mine:
            continue
        line = f"spell {spell}, {name}, {len(mine)} runs: as estimated then "
        line += summary([o / m - 1 for _, _, o, m, _, _ in mine if o is not None])
        for label, (x, y) in (("fitted", fitted), ("shipped", SHIPPED)):
            layers, vocab, _ = SHAPE[name]
            est = [1 / (base(name, bw, read) + layers * x + vocab * y) / m - 1 for _, _, _, m, bw, read in mine]
            line += f"; {label} {summary(est)}"
        print(line)
