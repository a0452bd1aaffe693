"""What the rounding oracles share: their command line (script_oracles_test.cc passes --ampc,
--models-dir and --out to every script) and running ampc."""
import argparse
import subprocess
import sys


def parse_args(precisions):
    """--ampc BIN --out DIR [--models-dir DIR] PRECISION, one of `precisions`."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--models-dir")  # not used: these oracles make their modules
    ap.add_argument("--out", required=True)
    ap.add_argument("precision", choices=sorted(precisions))
    return ap.parse_args()


def run(cmd):
    """Runs an ampc command; exits with its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
