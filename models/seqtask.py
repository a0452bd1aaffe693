#!/usr/bin/env python3
"""The "sort" sequence task for the gpt example model (numpy only, deterministic).

Each example is a 33-token sequence

    a_0 .. a_15  SEP  s_0 .. s_15

where a_i are random tokens from {1, .., NUM_VALUES}, SEP = 63 (vocabulary 64), and s is a
sorted copy of a. The model sees tokens = seq[:32] and is scored on the next-token targets
targets = seq[1:33], but only where the next token is a sorted one; every other target is
-100, F.cross_entropy's default ignore_index, which the exported SoftmaxCrossEntropyLoss
keeps as its ignore_index attribute:

    position t:   0 .. 14       15      16     17 .. 31
    tokens[t]:    a_0 .. a_14   a_15    SEP    s_0 .. s_14
    targets[t]:   -100          -100    s_0    s_1 .. s_15

(Target 15 would be SEP, known from the position alone; it is ignored so that the loss is
all about sorting: 16 scored positions of 32.)

    /usr/bin/python3 models/seqtask.py --n 4 --seed 0     # print a few examples
"""
import argparse

import numpy as np

VOCAB = 64
SEQ_LEN = 32          # model input length
HALF = SEQ_LEN // 2   # 16 random tokens, then SEP, then 16 sorted
NUM_VALUES = 16       # tokens 1..16 appear in the sequences; 0 and 17..62 never do
SEP = VOCAB - 1
IGNORE = -100


def make_sort_task(n, seed=0):
    """Return (tokens, targets), both int64 [n, SEQ_LEN]."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, NUM_VALUES + 1, size=(n, HALF), dtype=np.int64)
    seq = np.concatenate([a, np.full((n, 1), SEP, np.int64), np.sort(a, axis=1)], axis=1)
    tokens = seq[:, :SEQ_LEN].copy()
    targets = seq[:, 1:].copy()
    targets[:, :HALF] = IGNORE  # the random half and SEP are not predictable / not scored
    return tokens, targets


def main():
    ap = argparse.ArgumentParser(description="print examples of the sort task")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tokens, targets = make_sort_task(args.n, args.seed)
    for t, y in zip(tokens, targets):
        print("tokens ", " ".join(f"{v:4d}" for v in t))
        print("targets", " ".join(f"{v:4d}" for v in y))


if __name__ == "__main__":
    main()
