#!/usr/bin/env bash
# Exercise the deepseek-ocr2 engine on a CUDA GPU and print its figures in under 8 minutes, each line as soon as
# it is known (see scripts/gpu_check.py for the steps). Runs from the source tree: no install needed, only a
# Python with torch (CUDA build) and transformers >= 5; the first of $PYTHON, .venv/bin/python, python3 and
# python that has them is used.
#
#   scripts/gpu_check.sh                       # on a machine with a CUDA GPU
#   scripts/gpu_check.sh --device cpu --quick  # check the script itself without a GPU
set -uo pipefail
cd "$(dirname "$0")/.."
PY=""
for candidate in "${PYTHON:-}" .venv/bin/python python3 python; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || [ -x "$candidate" ] || continue
    if "$candidate" -c "import torch, transformers" >/dev/null 2>&1; then PY="$candidate"; break; fi
done
if [ -z "$PY" ]; then
    echo "gpu_check: no Python here has torch and transformers (tried \$PYTHON, .venv/bin/python, python3, python)"
    exit 2
fi
missing=$("$PY" - <<'PYEOF'
import importlib.util
need = ["typer", "rich", "PIL", "pypdfium2", "numpy", "safetensors", "tokenizers"]
print(" ".join(m for m in need if importlib.util.find_spec(m) is None))
PYEOF
)
echo "gpu_check: python $PY ($("$PY" -c 'import sys, torch, transformers; print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)'))"
if [ -n "$missing" ]; then
    echo "gpu_check: missing modules: $missing (pip install them; the steps that need them will fail)"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
exec timeout --kill-after=10 470 "$PY" scripts/gpu_check.py "$@"
