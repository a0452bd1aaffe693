#!/usr/bin/env python3
"""Write the small example data sets under models/data/ (no download needed).

    /usr/bin/python3 models/make_data.py            # writes models/data/*.npz
    /usr/bin/python3 models/make_data.py --out DIR

digits.npz          x float32 [1797, 64] in 0..1, y int64 [1797]    (for mlp)
digits_images.npz   x float32 [1797, 1, 8, 8],    y int64 [1797]    (for cnn)
seqtask.npz         tokens int64 [2048, 32], targets int64 [2048, 32] (for gpt, seed 0)

The digits come from sklearn.datasets.load_digits(), which ships inside Debian's
python3-sklearn, in a fixed random order (seed 0): sklearn's order groups the writers, so
its last samples are a different population, and `ampc train --holdout F` holds out the
last share of the file. Files are what np.savez_compressed writes (a zip of deflated .npy
members), except that the zip timestamps are fixed so reruns give identical bytes.
"""
import argparse
import os
import sys
import zipfile

import numpy as np
from sklearn.datasets import load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seqtask  # noqa: E402

SEQTASK_N = 2048
SEQTASK_SEED = 0
DIGITS_SEED = 0


def save_npz(path, **arrays):
    """Like np.savez_compressed, but with fixed zip timestamps (reproducible bytes)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(arr), allow_pickle=False)
    print(f"wrote {path} ({os.path.getsize(path)} bytes): " +
          ", ".join(f"{k} {a.dtype}{list(a.shape)}" for k, a in arrays.items()))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="write models/data/*.npz")
    ap.add_argument("--out", default=os.path.join(here, "data"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    digits = load_digits()
    order = np.random.default_rng(DIGITS_SEED).permutation(len(digits.target))
    x = (digits.data[order] / 16.0).astype(np.float32)  # pixel values are 0..16
    y = digits.target[order].astype(np.int64)
    save_npz(os.path.join(args.out, "digits.npz"), x=x, y=y)
    save_npz(os.path.join(args.out, "digits_images.npz"), x=x.reshape(-1, 1, 8, 8), y=y)

    tokens, targets = seqtask.make_sort_task(SEQTASK_N, SEQTASK_SEED)
    save_npz(os.path.join(args.out, "seqtask.npz"), tokens=tokens, targets=targets)


if __name__ == "__main__":
    main()
