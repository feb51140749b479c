#!/usr/bin/env bash
# Issue 2 acceptance (b): rosetop's CPU engine against Hugging Face transformers on a full
# GPT-2-124M-shaped random model, too big to commit. Run on the GPU machine (python3 + torch +
# transformers there) from the repository root, with the engine test binary built beforehand here:
#   go test -c -o bin/engine.test ./engine/
#   testdata/golden/check_124m.sh [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-/tmp/rosetop-golden-124m}
[ -x bin/engine.test ] || { echo "check_124m: bin/engine.test missing (go test -c -o bin/engine.test ./engine/)" >&2; exit 2; }
PYTHONUNBUFFERED=1 python3 testdata/golden/make_golden.py big "$dir"
# The test binary runs in the package directory, so testdata paths resolve.
(cd engine && ROSETOP_GOLDEN_124M="$dir" ../bin/engine.test -test.run 'TestGolden124M' -test.v)
