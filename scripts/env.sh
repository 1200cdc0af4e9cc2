# Source this file to use dtrain from a shell: `source scripts/env.sh` (after scripts/build.sh).
# It puts the built Python package (BUILD_DIR/python, default build/python) on PYTHONPATH and
# the `dtrain` command on PATH, and sets DTRAIN_PY to the interpreter that has torch (Debian's
# /usr/bin/python3 when present: another python3 may come first on PATH). Then:
#   $DTRAIN_PY -c 'import dtrain.torch'
#   dtrain run -n 2 -- $DTRAIN_PY my_ddp_script.py
_dtrain_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
_dtrain_build="$_dtrain_root/${BUILD_DIR:-build}"
export PYTHONPATH="$_dtrain_build/python${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$_dtrain_build/bin:$PATH"
if [[ -x /usr/bin/python3 ]]; then export DTRAIN_PY=/usr/bin/python3; else export DTRAIN_PY=python3; fi
if [[ ! -d "$_dtrain_build/python/dtrain" ]]; then
  echo "dtrain: $_dtrain_build/python/dtrain not built yet (scripts/build.sh; needs pybind11-dev and libtorch-dev)" >&2
fi
unset _dtrain_root _dtrain_build
