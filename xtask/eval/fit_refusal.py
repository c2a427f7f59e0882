#!/usr/bin/env python3
"""Fits the refusal model (runtime/src/search/confidence.rs) on the tune halves of the
development sets and reports it on the test halves.

Reads target/eval/<set>.json (written by `cargo xtask eval`): each hybrid query's
signals, whether it is a negative, and its half. Fits a logistic regression (Newton's
method, L2 0.01, standardised features, no libraries needed) on the tune halves of every
set pooled, and prints the weights in the confidence model's raw-feature form, then
false answers and false refusals per set and half at the chosen threshold.

    python3 xtask/eval/fit_refusal.py [--threshold 0.5] [--recall 0.97] [--dir target/eval]
                                      [--add unmatched]

`--add F` fits only feature F's weight, the others held at SHIPPED (the model before F
existed) as a fixed offset: how a signal is added without refitting what the test
halves already judged.
"""
import json
import math
import sys

SETS = ["docs-aep", "docs-devtron", "code-concrete-ml", "code-tfhe"]
FEATURES = ["top_cosine", "unseen", "keyword", "unmatched"]
# How each signal enters the model (runtime/src/search/confidence.rs: `Signals::logit`).
TRANSFORM = {"keyword": lambda x: math.log1p(max(0.0, x))}
# Where the reports are (`--dir`; `cargo xtask eval` writes target/eval).
DIR = sys.argv[sys.argv.index("--dir") + 1] if "--dir" in sys.argv else "target/eval"


# The model before `unmatched` (cosine-unseen-keyword-v2), for `--add`.
SHIPPED = {"top_cosine": 7.545, "unseen": -14.323, "keyword": 5.565, "bias": -10.402}


def load():
    rows = []
    for s in SETS:
        rep = json.load(open(f"{DIR}/{s}.json"))
        mode = next(m for m in rep["modes"] if m["mode"] == "hybrid")
        for q in mode["queries"]:
            sig = q["signals"]
            x = [TRANSFORM.get(f, float)(float(sig.get(f, 0.0))) for f in FEATURES]
            rows.append((s, q["tags"]["half"], 0 if q["negative"] else 1, sig["exact"], x))
    return rows


def solve(a, b):
    """Gaussian elimination for a small dense system."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[c][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_one(xs, ys, offsets, l2=0.01):
    """One standardised weight (no intercept) over fixed log-odds `offsets`."""
    mean = sum(xs) / len(xs)
    sd = max(1e-6, math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs)))
    b = 0.0
    for _ in range(100):
        g, h = l2 * b, l2
        for x, y, z in zip(xs, ys, offsets):
            x = (x - mean) / sd
            p = 1 / (1 + math.exp(-(z + b * x)))
            g += (p - y) * x
            h += p * (1 - p) * x * x
        b -= g / h
    return b / sd


def fit(xs, ys, l2=0.01):
    k = len(xs[0])
    mean = [sum(x[j] for x in xs) / len(xs) for j in range(k)]
    sd = [max(1e-6, math.sqrt(sum((x[j] - mean[j]) ** 2 for x in xs) / len(xs))) for j in range(k)]
    z = [[1.0] + [(x[j] - mean[j]) / sd[j] for j in range(k)] for x in xs]
    w = [0.0] * (k + 1)
    for _ in range(50):
        grad = [0.0] * (k + 1)
        hess = [[0.0] * (k + 1) for _ in range(k + 1)]
        for zi, y in zip(z, ys):
            p = 1 / (1 + math.exp(-sum(a * b for a, b in zip(w, zi))))
            for a in range(k + 1):
                grad[a] += (p - y) * zi[a]
                for b in range(k + 1):
                    hess[a][b] += p * (1 - p) * zi[a] * zi[b]
        for a in range(1, k + 1):
            grad[a] += l2 * w[a]
            hess[a][a] += l2
        step = solve(hess, grad)
        w = [a - b for a, b in zip(w, step)]
    # Back to raw features: z_j = (x_j - mean_j) / sd_j.
    weights = [w[j + 1] / sd[j] for j in range(k)]
    bias = w[0] - sum(w[j + 1] * mean[j] / sd[j] for j in range(k))
    return weights, bias


def prob(weights, bias, x, exact):
    if exact:
        return 1.0
    return 1 / (1 + math.exp(-(bias + sum(a * b for a, b in zip(weights, x)))))


def main():
    args = sys.argv[1:]
    rows = load()
    tune = [r for r in rows if r[1] == "tune" and not r[3]]
    if "--add" in args:
        added = args[args.index("--add") + 1]
        j = FEATURES.index(added)
        weights = [SHIPPED.get(f, 0.0) for f in FEATURES]
        bias = SHIPPED["bias"]
        offsets = [bias + sum(w * x for w, x in zip(weights, r[4])) for r in tune]
        weights[j] = fit_one([r[4][j] for r in tune], [r[2] for r in tune], offsets)
    else:
        weights, bias = fit([r[4] for r in tune], [r[2] for r in tune])
    print("CALIBRATION:", ", ".join(f"{f}: {w:.3f}" for f, w in zip(FEATURES, weights)), f"bias: {bias:.3f}")
    recall = float(args[args.index("--recall") + 1]) if "--recall" in args else 0.97
    # Atlas ships 0.25 (DEFAULT_THRESHOLD): the tune halves keep 97 % of their
    # answerable questions there.
    # The threshold: the highest that keeps this share of the tune halves' answerable
    # questions answered.
    pos = sorted(prob(weights, bias, r[4], r[3]) for r in rows if r[1] == "tune" and r[2] == 1)
    t = pos[int(len(pos) * (1 - recall))] if "--threshold" not in args else float(args[args.index("--threshold") + 1])
    print(f"threshold {t:.3f}")
    for s in SETS + ["all"]:
        for h in ["tune", "test"]:
            part = [r for r in rows if (s == "all" or r[0] == s) and r[1] == h]
            neg = [r for r in part if r[2] == 0]
            ans = [r for r in part if r[2] == 1]
            fa = sum(prob(weights, bias, r[4], r[3]) >= t for r in neg)
            fr = sum(prob(weights, bias, r[4], r[3]) < t for r in ans)
            print(f"  {s:<18} {h}: {fa:>2} of {len(neg):>2} negatives answered, {fr:>2} of {len(ans):>2} answerable refused")


main()
