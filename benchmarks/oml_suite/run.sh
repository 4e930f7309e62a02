#!/usr/bin/env bash
# OML 4.0's own test suite against oml with only the mechanical rename oml -> oml_core (issue 27's measure), or
# against OML itself (the reference). Nothing of OML is copied into this repository: its tests are exported from a
# clone into a scratch folder and run there.
#
# usage: benchmarks/oml_suite/run.sh OML_GIT_DIR WORK_DIR PYTHON rename|reference [EXTRA_PYTHONPATH]
#   OML_GIT_DIR  a clone (or bare mirror) of OML-Team/open-metric-learning at 6be182e
#   WORK_DIR     scratch folder: its tests go to WORK_DIR/tests, the outcomes to WORK_DIR/outcomes.tsv
#   PYTHON       the interpreter (oml's .venv for `rename`, an OML 4.0 install for `reference`)
# Then: python benchmarks/oml_suite/compare.py REFERENCE_OUTCOMES.tsv WORK_DIR/outcomes.tsv
set -u
MIRROR=$1; W=$2; PY=$3; MODE=$4; EXTRA=${5:-}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W/tests" && mkdir -p "$W"
git -C "$MIRROR" archive 6be182e tests | tar -x -C "$W"
if [ "$MODE" = rename ]; then  # the rename a user does: imports and "oml." strings, nothing else
  find "$W/tests" -name '*.py' -print0 | xargs -0 sed -i -E \
    -e 's/^([[:space:]]*)from oml\./\1from oml_core./' \
    -e 's/^([[:space:]]*)from oml import/\1from oml_core import/' \
    -e 's/^([[:space:]]*)import oml(\.|[[:space:]]|$)/\1import oml_core\2/' \
    -e "s/([\"'])oml\./\1oml_core./g"
fi
OUT=$W/outcomes.tsv; : > "$OUT"
cd "$W" || exit 1
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RECORD_OUTCOMES_FILE="$OUT"
export PYTHONPATH="$HERE${EXTRA:+:$EXTRA}"
CHUNKS="tests/test_build_readme.py tests/test_imports.py tests/test_outdated_docs.py"
for d in tests/test_oml/*/ tests/test_integrations tests/test_runs; do CHUNKS="$CHUNKS $d"; done
for c in $CHUNKS; do  # folder by folder: one failing import stops no other folder
  timeout 1800 "$PY" -m pytest -p no:cacheprovider -p record_outcomes -q -o faulthandler_timeout=120 \
    --continue-on-collection-errors "$c" > "$OUT.$(echo "$c" | tr '/' '_').log" 2>&1
  echo "$c: $(tail -1 "$OUT.$(echo "$c" | tr '/' '_').log")"
done
