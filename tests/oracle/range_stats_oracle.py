"""numpy oracle of ampc.RangeStats (tests/oracle/range_stats_oracle_test.cc).

Reads DIR/manifest.json ([{"values": npy, "stats": npy, "scale": S, "name": ...}]), where
`values` is a tensor the training step computed (a parameter's unscaled fp32 gradient, or an
fp16/fp32 activation) dumped by the test, and `stats` the f64 statistics the plan's
RangeStats step produced for it. Recomputes every statistic with numpy and exits 1 listing
the tensors where anything differs (exact comparison: counts, max and min are exact).
Layout: kernels/shared/range_stats.h.
"""
import json
import os
import sys

import numpy as np

NUMEL, MAX_ABS, MIN_NZ, SCALE, TRUE_CLASS = 0, 1, 2, 3, 4
CLASSES = 6  # zero, flush, subnormal, normal, overflow, nonfinite
SCALED_CLASS = TRUE_CLASS + CLASSES
HIST = SCALED_CLASS + CLASSES


def classes(a):
    a = a.astype(np.float64)
    finite = np.isfinite(a)
    zero = a == 0
    flush = finite & (a > 0) & (a < 2.0 ** -24)
    sub = finite & (a >= 2.0 ** -24) & (a < 2.0 ** -14)
    over = finite & (a > 65504.0)
    normal = finite & ~zero & ~flush & ~sub & ~over
    return [zero.sum(), flush.sum(), sub.sum(), normal.sum(), over.sum(), (~finite).sum()]


def expected(x, scale):
    a = np.abs(x.astype(np.float32).ravel())
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = (a * np.float32(scale)).astype(np.float32)
    out = np.zeros(HIST + 256)
    out[NUMEL] = a.size
    nz = a[np.isfinite(a) & (a != 0)]
    out[MAX_ABS] = nz.max() if nz.size else 0.0
    out[MIN_NZ] = nz.min() if nz.size else 0.0
    out[SCALE] = np.float32(scale)
    out[TRUE_CLASS:TRUE_CLASS + CLASSES] = classes(a)
    out[SCALED_CLASS:SCALED_CLASS + CLASSES] = classes(scaled)
    bins = (nz.view(np.uint32) >> 23) & 0xFF
    out[HIST:] = np.bincount(bins, minlength=256)
    return out


def main():
    d = sys.argv[1]
    items = json.load(open(os.path.join(d, "manifest.json")))
    bad = []
    for it in items:
        x = np.load(os.path.join(d, it["values"]))
        got = np.load(os.path.join(d, it["stats"]))
        want = expected(x, it["scale"])
        if not np.array_equal(got, want):
            diff = np.nonzero(got != want)[0][:5]
            bad.append(f'{it["name"]}: fields {diff.tolist()} got {got[diff].tolist()} '
                       f'want {want[diff].tolist()}')
    print(f"{len(items)} tensors checked, {len(bad)} differ")
    for b in bad:
        print("  " + b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
