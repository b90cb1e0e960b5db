#!/usr/bin/env bash
# The package outside the checkout: build the source distribution and the wheel from it, install the wheel
# into a fresh virtualenv and, from an empty folder with a clean environment (no PYTHONPATH, no checkout on the
# path), list the presets it ships and run `garen-infer demo`. Prints the wheel's presets, what pip resolves
# from the wheel's own metadata, where the installed garen_infer and its presets live, the demo's output and
# its wall time.
#   bash benchmarks/wheel_smoke.sh [OUT_DIR]          # default runs/wheel-smoke (git-ignored)
#   BUILD_PYTHON=PY  a Python with `build` (pip install build): `PY -m build`, as a release is built
#                  (setuptools from the package index). Default .venv/bin/python: without `build` it takes the
#                  same two steps offline (setuptools' sdist hook, then a wheel from the unpacked sdist)
#   DEPS=registry  (default) the wheel's dependencies come from the package index, pinned by
#                  requirements-cpu.txt, as the README installs it (needs the registry; minutes). First pip
#                  resolves the wheel's own metadata alone (`pip install --dry-run WHEEL[cpu]`) and the script
#                  says what that would install
#   DEPS=borrow    offline: the fresh virtualenv reads this checkout's .venv packages through a .pth file and
#                  the wheel is installed --no-deps (still the wheel's garen_infer: site-packages comes first)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=$(realpath -m "${1:-runs/wheel-smoke}")
DEPS=${DEPS:-registry}
BUILD_PYTHON=$(realpath -s "$(command -v "${BUILD_PYTHON:-.venv/bin/python}")")
BASE_PYTHON=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
rm -rf "$OUT" && mkdir -p "$OUT/source" "$OUT/empty" "$OUT/home" "$OUT/dist" "$OUT/sdist"
cp -r pyproject.toml setup.py MANIFEST.in README.md LICENSE CITATION.cff CHANGELOG.md "$OUT/source/"
cp -r garen_infer garen_train configs "$OUT/source/"
if "$BUILD_PYTHON" -m build --version >/dev/null 2>&1; then
  # the sdist, then the wheel from it
  "$BUILD_PYTHON" -m build --outdir "$OUT/dist" "$OUT/source" > "$OUT/build.log" 2>&1 \
    || { tail "$OUT/build.log"; exit 1; }
else
  SDIST_HOOK="from setuptools import build_meta; build_meta.build_sdist('$OUT/dist')"
  (cd "$OUT/source" && "$BUILD_PYTHON" -c "$SDIST_HOOK" > "$OUT/build.log")
  tar -xzf "$OUT"/dist/*.tar.gz -C "$OUT/sdist"
  "$BUILD_PYTHON" -m pip wheel --no-deps --no-build-isolation --no-index -q -w "$OUT/dist" "$OUT"/sdist/*/
fi
WHEEL=$(ls "$OUT"/dist/*.whl)
echo "[wheel] $(basename "$WHEEL") built from $(basename "$OUT"/dist/*.tar.gz):" \
     "$(unzip -l "$WHEEL" | grep -c 'garen_infer/configs/.*\.yaml') presets"
"$BASE_PYTHON" -m venv "$OUT/venv"
if [ "$DEPS" = borrow ]; then
  PURELIB='import sysconfig; print(sysconfig.get_paths()["purelib"])'
  .venv/bin/python -c "$PURELIB" > "$("$OUT/venv/bin/python" -c "$PURELIB")/borrowed-dependencies.pth"
  "$OUT/venv/bin/pip" install -q --no-deps "$WHEEL"
else
  "$OUT/venv/bin/pip" install -q --dry-run --ignore-installed --report "$OUT/metadata.json" "$WHEEL[cpu]"
  "$OUT/venv/bin/python" "$REPO/benchmarks/resolution_summary.py" "$OUT/metadata.json"
  start=$(date +%s)
  "$OUT/venv/bin/pip" install -q -r requirements-cpu.txt "$WHEEL"
  "$OUT/venv/bin/pip" check
  echo "[install] requirements-cpu.txt and the wheel from the package index: $(( $(date +%s) - start )) s"
fi
cd "$OUT/empty"
CLEAN=(env -i HOME="$OUT/home" PATH="$OUT/venv/bin:/usr/bin:/bin" HF_HUB_OFFLINE=1 GAREN_CACHE_DIR="$OUT/cache")
WHERE='import garen_infer, garen_infer.configuration.presets as c; print("[installed]", garen_infer.__file__, "presets:",
       c.CONFIG_DIR)'
"${CLEAN[@]}" python -c "$WHERE"
"${CLEAN[@]}" garen-infer presets > "$OUT/presets.txt"
echo "[presets] garen-infer presets lists $(grep -c '^  ' "$OUT/presets.txt") shipped files ($OUT/presets.txt)"
start=$(date +%s)
"${CLEAN[@]}" garen-infer demo | tee "$OUT/demo.log"
echo "[demo] exit 0 after $(( $(date +%s) - start )) s wall; output in $OUT/demo.log"
