#!/usr/bin/env bash
# The two set-up commands of the README, on a machine with only python3 and pip:
#
#   ./dev.sh reproduce [--quick|--full] [--only NAME ...]   the main job: every claim, one report
#   ./dev.sh test [pytest args]                             the whole test suite (what CI runs),
#                                                           a pytest-xdist worker per core, +1
#   ./dev.sh setup                                          only create/update the environment
#   ./dev.sh COMMAND ARGS                                   any other dedebate command (run, sweep,
#                                                           bench, config, list, ...); `./dev.sh
#                                                           run --help` shows a command's options
# Commands run in the folder you call dev.sh from (relative paths are yours; `test` runs here).
# Each creates .venv (python3 -m venv, or virtualenv where venv is unavailable) and runs
# `pip install -c constraints.txt -e '.[test]'` when the environment is missing or pyproject.toml
# or constraints.txt changed since the last install (a stamp file inside .venv holds their hash).
# constraints.txt holds versions chosen for speed; pyproject.toml the ranges that work.
set -euo pipefail

CALLER=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")"
PYTHON=${PYTHON:-python3}
VENV=${DEDEBATE_VENV:-.venv}
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac  # still found after cd "$CALLER"
STAMP="$VENV/.dedebate-pyproject.sha256"

say() { printf 'dev.sh: %s\n' "$*" >&2; }

make_venv() {
  if "$PYTHON" -m venv "$VENV" >/dev/null 2>&1 && [ -x "$VENV/bin/python" ] \
     && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    return 0
  fi
  say "python3 -m venv is unavailable here; using virtualenv instead"
  rm -rf "$VENV"
  if ! "$PYTHON" -m virtualenv --version >/dev/null 2>&1; then
    "$PYTHON" -m pip install --user virtualenv >&2 \
      || "$PYTHON" -m pip install --break-system-packages virtualenv >&2 \
      || "$PYTHON" -m pip install virtualenv >&2
  fi
  "$PYTHON" -m virtualenv "$VENV" >&2
}

ensure_env() {
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    make_venv
  fi
  local want have=""
  want=$("$VENV/bin/python" -c 'import hashlib; print(hashlib.sha256(b"".join(open(f, "rb").read() for f in ("pyproject.toml", "constraints.txt"))).hexdigest())')
  [ -f "$STAMP" ] && have=$(cat "$STAMP")
  if [ "$want" != "$have" ] || ! "$VENV/bin/python" -c 'import dedebate' >/dev/null 2>&1 \
     || [ ! -x "$VENV/bin/dedebate" ]; then
    say "installing dedebate and its dependencies into $VENV (pip install -c constraints.txt -e '.[test]')"
    "$VENV/bin/python" -m pip install -c constraints.txt -e '.[test]' >&2
    printf '%s\n' "$want" > "$STAMP"
  fi
  # The checkout's own modules as bytecode (pip compiles site-packages, not an editable install's
  # sources), so that every process reads them compiled even where PYTHONDONTWRITEBYTECODE is
  # set; up-to-date files are skipped, and a failure here only costs speed.
  "$VENV/bin/python" -m compileall -q -j 0 dedebate experiments bench tests >/dev/null 2>&1 || true
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  reproduce)
    ensure_env
    cd "$CALLER"
    exec "$VENV/bin/dedebate" reproduce "$@"
    ;;
  test)
    ensure_env
    # The whole suite, slow tests included (CI runs exactly this), on a worker per core plus one
    # (pytest-xdist; tests of one file stay on one worker to share compiled programs; the longest
    # files first; both in tests/conftest.py). Later arguments win: `./dev.sh test -n 0 ...` runs
    # serially.
    exec "$VENV/bin/python" -m pytest -n "${DEDEBATE_TEST_WORKERS:-auto}" --dist loadfile \
      --no-loadscope-reorder "$@"
    ;;
  setup)
    ensure_env
    say "environment ready: $VENV"
    ;;
  ""|-h|--help|help)
    sed -n '2,15p' dev.sh | sed 's/^# \{0,1\}//' >&2
    [ -z "$cmd" ] && exit 2
    exit 0
    ;;
  *)
    ensure_env
    cd "$CALLER"
    exec "$VENV/bin/dedebate" "$cmd" "$@"
    ;;
esac
