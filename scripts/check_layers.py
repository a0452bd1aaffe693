#!/usr/bin/env python3
"""Checks that the source folders depend on each other in one direction only.

Each top-level folder may include headers of the folders listed for it below, and of
itself; a CMakeLists.txt may compile another folder's files only where its own folder may
include that folder. The layers, bottom up (docs/architecture.md, "Layout"):

  base  ops  kernels  runtime  |  ir  frontend  lower  passes  report  driver  |  tools  python

Prints each violation as FILE:LINE: FOLDER may not include TARGET, and exits 1 if any.
tests/ may use everything and is not checked.
"""
import pathlib
import re
import sys

_BELOW_COMPILER = {"base", "ops", "kernels", "runtime"}
ALLOWED = {
    "base": set(),
    "ops": {"base"},
    "kernels": {"base", "ops"},
    "runtime": {"base", "ops", "kernels"},
    "ir": {"base", "ops"},
    # proto_convert reads tensor fields with runtime/io's header.
    "frontend": {"base", "ops", "ir", "runtime"},
    # The legalize stage reads attributes through the CPU op context; fused kernels are built
    # with kernels/codegen.
    "lower": _BELOW_COMPILER | {"ir"},
    # Constant folding writes a node as a plan step (lower/plan_convert.h) and runs it on the
    # CPU backend; static shapes run ONNX's inference through frontend/.
    "passes": _BELOW_COMPILER | {"ir", "frontend", "lower"},
    "report": _BELOW_COMPILER | {"ir", "frontend", "lower", "passes"},
    "driver": _BELOW_COMPILER | {"ir", "frontend", "lower", "passes", "report"},
    "tools": _BELOW_COMPILER | {"ir", "frontend", "lower", "passes", "report", "driver"},
    "python": _BELOW_COMPILER
    | {"ir", "frontend", "lower", "passes", "report", "driver", "tools"},
}
SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh", ".in"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/')
CMAKE_SOURCE = re.compile(r"\$\{CMAKE_SOURCE_DIR\}/([A-Za-z_]+)/")


def violations(root: pathlib.Path):
    for folder, allowed in ALLOWED.items():
        for path in sorted((root / folder).rglob("*")):
            if not path.is_file():
                continue
            if path.suffix in SOURCE_SUFFIXES:
                pattern = INCLUDE
            elif path.name == "CMakeLists.txt":
                pattern = CMAKE_SOURCE
            else:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                match = pattern.search(line)
                if not match:
                    continue
                target = match.group(1)
                if target == folder or target not in ALLOWED or target in allowed:
                    continue
                yield f"{path.relative_to(root)}:{number}: {folder}/ may not include {target}/"


def main(argv):
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parent.parent)
    found = list(violations(root.resolve()))
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) against the layering (scripts/check_layers.py)")
        return 1
    print("layering: every include goes downwards")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
