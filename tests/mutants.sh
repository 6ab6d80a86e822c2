#!/bin/bash
# Mutation testing of the durability sites (issues 14 and 30): see
# tests/vm_mutants.py, which does the work (the mutants, their checkers,
# the negative controls and the verdict).
#
# usage: tests/mutants.sh [NAME-PATTERN]
# Prints one line per control and per mutant, "controls N, not caught N"
# and "durability sites N, mutants caught N". Exit status 0 if every
# mutant was caught and no control was.
REPO=$(cd "$(dirname "$0")/.." && pwd)
exec "${PY:-/usr/bin/python3}" "$REPO/tests/vm_mutants.py" "$@"
