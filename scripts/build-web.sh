#!/usr/bin/env bash
# Build everything the browser app needs, on a fresh machine:
#   1. npm ci                         (vite, pyodide, tfjs from package-lock.json; skipped when up to date)
#   2. the numr_web wheel             (engine only, NUMR_WEB_NO_APP=1 -> build/web-wheels/)
#   3. micropip + packaging wheels    (pip download from PyPI, versions from Pyodide's lock file, so
#                                      Pyodide loads them from this origin; skipped when present)
#      numpy for Pyodide              (optional, from NUMR_PYODIDE_PACKAGES: the cpu fallback)
#   4. build/web-wheels/manifest.json
#   5. golden values for the parity page (native cpu backend -> web/public/golden/parity.json)
#   6. vite build -c vite.lib.config.js  (the npm package numr-web -> web/lib, with Pyodide + wheels)
#   7. vite build                     (the app -> web/dist, with web/lib copied to dist/lib + sw.js)
# Then `python -m build` ships web/dist inside the numr-web wheel (hatch_build.py).
# Env: PYTHON (default: python3; numr-web serve passes its own interpreter), NUMR_SKIP_NPM=1 (never run
# npm ci), NUMR_SKIP_GOLDEN=1 (keep old golden values), NUMR_PYODIDE_PACKAGES (see 3b).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
WHEELS=build/web-wheels
GOLDEN=web/public/golden
step() { printf '\n== build-web: %s\n' "$*" >&2; }
die() { echo "build-web: $*" >&2; exit 1; }

# 1. node dependencies ------------------------------------------------------------------------------
command -v npm >/dev/null || die "npm and Node ^20.19 or >= 22.12 are required (Vite 8's range)"
NODE_V=$(node -p 'process.versions.node' 2>/dev/null || echo 0.0.0)
node -e 'const [a, b] = process.versions.node.split(".").map(Number);
         process.exit((a === 20 && b >= 19) || (a === 22 && b >= 12) || a >= 23 ? 0 : 1)' 2>/dev/null \
  || die "Node $NODE_V is too old: Vite 8 needs Node ^20.19 or >= 22.12"
$PY -c "import build" 2>/dev/null || die "the Python package 'build' is missing: $PY -m pip install build"
STAMP=node_modules/.numr-lock-sha
LOCK_SHA=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ "${NUMR_SKIP_NPM:-0}" != 1 ]] && [[ ! -f $STAMP || "$(cat $STAMP)" != "$LOCK_SHA" ]]; then
  step "npm ci"
  npm ci --no-audit --no-fund
  echo "$LOCK_SHA" > $STAMP
fi

# 2. the numr_web wheel (without the app: that one goes into Pyodide) ----------------------------------
step "numr_web wheel (engine only)"
mkdir -p $WHEELS $GOLDEN
rm -f $WHEELS/numr_web-*.whl
BUILD_ARGS=(--wheel --outdir "$WHEELS")
# build in the current environment when it has the build backend (fast, offline); else isolated
if $PY -c "import hatchling" 2>/dev/null; then BUILD_ARGS+=(--no-isolation); fi
NUMR_WEB_NO_APP=1 $PY -m build "${BUILD_ARGS[@]}" . >&2
WHEEL=$(cd $WHEELS && ls numr_web-*.whl | head -n1)
[[ -n $WHEEL ]] || die "no numr_web wheel was built"

# 3. micropip + packaging for Pyodide ----------------------------------------------------------------
step "micropip + packaging wheels"
read -r -a SUPPORT < <($PY - <<'PYEOF'
import json
lock = json.load(open("node_modules/pyodide/pyodide-lock.json"))
print(" ".join(lock["packages"][n]["file_name"] for n in ("micropip", "packaging")))
PYEOF
)
for f in "${SUPPORT[@]}"; do
  if [[ ! -f $WHEELS/$f ]]; then
    name=${f%%-*}; ver=${f#*-}; ver=${ver%%-*}
    $PY -m pip download --no-deps --only-binary=:all: --python-version 3.14 \
        --dest $WHEELS "$name==$ver" >&2
  fi
done

# 3b. numpy for Pyodide (the cpu device where a browser has no WebGPU) ----------------------------------
# npm's pyodide ships no package wheels and PyPI has no Pyodide (pyemscripten) build of numpy, so the
# wheel comes from a Pyodide distribution you point at: NUMR_PYODIDE_PACKAGES = a folder (an unpacked
# pyodide-<version>.tar.bz2 release, or a folder holding the wheel) or a base URL (a mirror of the
# distribution). Its name and sha256 come from node_modules/pyodide/pyodide-lock.json and are checked.
# Kept in build/web-wheels once there. Without it the build has no cpu fallback: pages without
# WebGPU say what is missing, as before.
step "numpy for Pyodide (optional: NUMR_PYODIDE_PACKAGES)"
NUMPY=$($PY - "${NUMR_PYODIDE_PACKAGES:-}" <<'PYEOF'
import hashlib, json, os, shutil, sys, urllib.request
src = sys.argv[1]
lock = json.load(open("node_modules/pyodide/pyodide-lock.json"))
pkg = lock["packages"]["numpy"]
name, sha = pkg["file_name"], pkg["sha256"]
dest = os.path.join("build/web-wheels", name)
def ok(path):
    return os.path.isfile(path) and hashlib.sha256(open(path, "rb").read()).hexdigest() == sha
if not ok(dest) and src:
    tmp = dest + ".part"
    try:
        if "://" in src:
            with urllib.request.urlopen(src.rstrip("/") + "/" + name, timeout=60) as r, open(tmp, "wb") as f:
                shutil.copyfileobj(r, f)
        else:
            shutil.copyfile(os.path.join(src, name), tmp)
        if ok(tmp):
            os.replace(tmp, dest)
        else:
            print(f"build-web: {name} from {src} does not match the sha256 in pyodide-lock.json; ignored", file=sys.stderr)
    except OSError as e:
        print(f"build-web: could not get {name} from {src}: {e}", file=sys.stderr)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
if ok(dest):
    print(name)
else:
    version = json.load(open("node_modules/pyodide/package.json"))["version"]
    print(f"build-web: no {name} (set NUMR_PYODIDE_PACKAGES to a Pyodide {version} "
          "distribution folder or URL for the cpu fallback in browsers without WebGPU)", file=sys.stderr)
PYEOF
)

# 4. manifest -------------------------------------------------------------------------------------------
$PY - "$WHEEL" "$NUMPY" "${SUPPORT[@]}" <<'PYEOF'
import json, sys
wheel, numpy, *support = sys.argv[1:]
json.dump({"numr_web": wheel, "support": support, "numpy": numpy or None},
          open("build/web-wheels/manifest.json", "w"))
PYEOF

# 5. golden values (native cpu backend) --------------------------------------------------------------
if [[ "${NUMR_SKIP_GOLDEN:-0}" != 1 || ! -f $GOLDEN/parity.json ]]; then
  step "parity golden values (cpu backend)"
  $PY scripts/make_golden.py --out $GOLDEN/parity.json
fi

# 6 + 7. the library, then the app ----------------------------------------------------------------------
step "vite build: the numr-web library (web/lib)"
npx --no-install vite build -c vite.lib.config.js --logLevel warn >&2
step "vite build: the app (web/dist)"
npx --no-install vite build --logLevel warn >&2
echo "build-web: done -> $ROOT/web/dist (serve with: numr-web serve)" >&2
