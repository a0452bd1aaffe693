"""The GIL is released while a step runs: two threads stepping two trainers interleave even
when Python would not switch threads on its own for a long time (sys.setswitchinterval),
which a step holding the GIL would prevent (the first thread would finish all its steps)."""

import sys
import threading

import ampc
from conftest import batches

STEPS = 200


def test_steps_of_two_threads_interleave(mlp_plan, digits):
    trainers = {name: ampc.compile(mlp_plan) for name in "ab"}
    feed = batches(*digits, 8)
    done = []
    barrier = threading.Barrier(2)

    def train(name):
        barrier.wait()
        for k in range(STEPS):
            bx, by = feed[k % len(feed)]
            trainers[name].step(x=bx, y=by)
            done.append(name)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(100.0)  # no forced switch while the threads run
    try:
        threads = [threading.Thread(target=train, args=(n,)) for n in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(done) == 2 * STEPS
    # Each thread's steps ran while the other one waited for or ran its own: both names
    # appear among the first half of the completions.
    assert set(done[:STEPS]) == {"a", "b"}
    # And the two trainers computed the same steps on the same batches.
    for name, value in trainers["a"].state_dict().items():
        assert (trainers["b"].state_dict()[name] == value).all()
