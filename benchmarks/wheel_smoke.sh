#!/usr/bin/env bash
# The package outside the checkout: build the wheel, install it into a fresh virtualenv and run `garen-infer demo`
# from an empty folder with a clean environment (no PYTHONPATH, no checkout on the path). Prints the wheel's
# presets, where the installed garen_infer and its presets live, the demo's output and its wall time.
#   bash benchmarks/wheel_smoke.sh [OUT_DIR]          # default runs/wheel-smoke (git-ignored)
#   DEPS=registry  (default) the wheel's dependencies come from the package index, pinned by requirements-cpu.txt,
#                  as a user installs it (needs the registry; minutes)
#   DEPS=borrow    offline: the fresh virtualenv reads this checkout's .venv packages through a .pth file and the
#                  wheel is installed --no-deps (still the wheel's garen_infer: site-packages comes first)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-runs/wheel-smoke}")
DEPS=${DEPS:-registry}
BASE_PYTHON=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
rm -rf "$OUT" && mkdir -p "$OUT/source" "$OUT/empty" "$OUT/home"
cp -r pyproject.toml setup.py MANIFEST.in README.md LICENSE CITATION.cff CHANGELOG.md garen_infer garen_train configs "$OUT/source/"
.venv/bin/python -m pip wheel --no-deps --no-build-isolation --no-index -q -w "$OUT/dist" "$OUT/source"
WHEEL=$(ls "$OUT"/dist/*.whl)
echo "[wheel] $(basename "$WHEEL"): $(unzip -l "$WHEEL" | grep -c 'garen_infer/configs/.*\.yaml') presets"
"$BASE_PYTHON" -m venv "$OUT/venv"
if [ "$DEPS" = borrow ]; then
  PURELIB='import sysconfig; print(sysconfig.get_paths()["purelib"])'
  .venv/bin/python -c "$PURELIB" > "$("$OUT/venv/bin/python" -c "$PURELIB")/borrowed-dependencies.pth"
  "$OUT/venv/bin/pip" install -q --no-deps "$WHEEL"
else
  "$OUT/venv/bin/pip" install -q -r requirements-cpu.txt "$WHEEL"
fi
cd "$OUT/empty"
CLEAN=(env -i HOME="$OUT/home" PATH="$OUT/venv/bin:/usr/bin:/bin" HF_HUB_OFFLINE=1 GAREN_CACHE_DIR="$OUT/cache")
"${CLEAN[@]}" python -c 'import garen_infer, garen_infer.config as c; print("[installed]", garen_infer.__file__, "presets:", c.CONFIG_DIR)'
start=$(date +%s)
"${CLEAN[@]}" garen-infer demo | tee "$OUT/demo.log"
echo "[demo] exit 0 after $(( $(date +%s) - start )) s wall; output in $OUT/demo.log"
