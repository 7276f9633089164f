#!/usr/bin/env bash
# Prepare benchmarks/gpu.py for a GPU machine that reaches no package index and lacks Beam and Kiwi
# (an offline box, a lent image with its own torch): run here, where pip and kolectra work, then carry
# DIR to the GPU machine beside the checkout and run DIR/run.sh there.
#
#   bash benchmarks/gpu_bundle.sh DIR [--python 3.12] [--input 'GLOB']
#
# DIR/wheels: kolectra's own wheel and the pinned packages a CUDA image is likely to hold at other
# versions (transformers, tokenizers) or not at all (universal_pathlib, pathlib_abc, zstandard);
# torch and the rest are the machine's. huggingface_hub stays the machine's: the pinned 2.4.0 needs
# httpx2, httpcore2 and truststore, which such images lack, and transformers accepts 1.31 and later.
# DIR/store: --input (default: the embedded sample) through corpus, vocab (8,000) and examples (128),
# named gpu-check, since the examples phase needs Beam and Kiwi (docs/benchmarks.md, "Measured on an
# H200"). The sample's 607 rows are an epoch every 4 steps of `small`; two NSMC review files give
# 28,082 rows (14 MB), a run that can learn.
# DIR/runs.sh OUT 'NAME|options' ...: the call for the GPU machine, one gpu.py run or several sharing
# the install (the wheels in /tmp/site) and Inductor's cache (carried in DIR/cache, its parts packed
# back into OUT: bring them back into DIR/cache for the next machine); each run's JSON in
# OUT/NAME.json, the logs in OUT/logs.tgz (the 2026-11-29 H200 session's two calls ran five this way).
# DIR/run.sh OUT [gpu.py's options]: runs.sh with one run, named gpu.
set -euo pipefail
dir=${1:?usage: gpu_bundle.sh DIR [--python 3.12] [--input GLOB]}
shift
py=3.12
repo=$(cd "$(dirname "$0")/.." && pwd)
input=$repo/pipeline/sample/reviews.jsonl.gz
while [ $# -gt 0 ]; do
  case $1 in
    --python) py=${2:?--python VERSION}; shift 2 ;;
    --input) input=${2:?--input GLOB}; shift 2 ;;
    *) echo "gpu_bundle.sh: unknown option $1 (usage: gpu_bundle.sh DIR [--python 3.12] [--input GLOB])" >&2; exit 2 ;;
  esac
done
mkdir -p "$dir/wheels" "$dir/cache"
# the tested versions (requirements/ci.txt, the set CI installs: pyproject.toml holds ranges); a name
# the file lacks stops the script here rather than downloading whatever is newest
pins() {
  local line
  line=$(grep -m1 -i "^$1==" "$repo/requirements/ci.txt") || { echo "gpu_bundle.sh: $1 is not in requirements/ci.txt" >&2; exit 2; }
  echo "$line"
}
python -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dir/wheels" "$(pins transformers)" "$(pins tokenizers)" "$(pins universal-pathlib)" "$(pins zstandard)" \
  "$(pins pathlib-abc)"
# kolectra's wheel from a copy of the working tree's files (tracked and new, not ignored): built in the
# tree itself, setuptools' build/lib would carry modules deleted since an earlier build into the wheel
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) \
  | tar -xf - -C "$src"
rm -f "$dir"/wheels/kolectra-*.whl
python -m pip wheel -q --no-deps --no-build-isolation -w "$dir/wheels" "$src"
# built whole each time: an earlier bundle's vocab (its corpus removed below) would stay beside the new
# one, and the name gpu-check would name two
rm -rf "$dir/store"
python -m kolectra.pipeline.cli corpus --input "$input" --out "$dir/store" --name gpu-check -q
python -m kolectra.pipeline.cli vocab --corpus gpu-check --vocab-size 8000 --out "$dir/store" --name gpu-check -q
python -m kolectra.pipeline.cli examples --corpus gpu-check --vocab gpu-check --max-seq-length 128 \
  --out "$dir/store" --name gpu-check -q
# training reads the examples and their vocab only; the corpus (23 MB for two review files) would eat
# into the 64 MiB a lent machine's call carries
rm -rf "$dir/store/corpus"
cat > "$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# The GPU check in one call, from the checkout (written by benchmarks/gpu_bundle.sh): runs.sh with one run
# named gpu (OUT/gpu.json; the log, the nvidia-smi line and the run's metrics.jsonl in OUT/logs.tgz)
#   bash DIR/run.sh OUT [gpu.py's options, e.g. --phases base/cuda_graphs --set model.attention_dropout=0]
out=${1:?usage: run.sh OUT [gpu.py options]}
shift
exec bash "$(dirname "$0")/runs.sh" "$out" "gpu|$*"
RUN
cat > "$dir/runs.sh" <<'RUNS'
#!/usr/bin/env bash
# Several gpu.py runs in one call (written by benchmarks/gpu_bundle.sh), e.g. variants of one phase:
#   bash DIR/runs.sh OUT 'NAME|gpu.py options' ['NAME|gpu.py options' ...]
# The wheels installed once; one Inductor cache for every run (DIR/cache's parts unpacked into it first,
# packed back into OUT at the end unless KOLECTRA_NO_PACK is set); each run's JSON in OUT/NAME.json; the
# logs, the seconds each run took and the last run's metrics.jsonl in OUT/logs.tgz (a lent machine
# returns at most 8 files). KOLECTRA_SKIP_INSTALL=1 uses the Python already set up (a rehearsal).
set -uo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: runs.sh OUT 'NAME|gpu.py options' ...}
shift
logs=$(mktemp -d)
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/kolectra-gpu-runs-inductor}
mkdir -p "$TORCHINDUCTOR_CACHE_DIR"
t0=$(date +%s)
if [ -z "${KOLECTRA_SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$bundle"/wheels/*.whl || exit 3
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; uptime; } > "$logs/runs.txt" 2>&1
[ -n "$(ls "$bundle/cache" 2>/dev/null)" ] && python3 benchmarks/compile_cache.py unpack "$bundle/cache" "$TORCHINDUCTOR_CACHE_DIR" >> "$logs/runs.txt"
rc=0
for spec in "$@"; do
  name=${spec%%|*}; opts=${spec#*|}; s=$(date +%s)
  # shellcheck disable=SC2086 # the options are words
  python3 benchmarks/gpu.py --out "$bundle/store" --examples gpu-check $opts 2>&1 > "$out/$name.json" \
    | tee "$logs/$name.log" >&2  # its log shown as it runs and kept
  code=$?; [ $code -ne 0 ] && rc=$code  # gpu.py's code (pipefail)
  echo "$name: exit $code, $(( $(date +%s) - s )) s (at $(( $(date +%s) - t0 )) s)" | tee -a "$logs/runs.txt"
done
[ -n "${KOLECTRA_NO_PACK:-}" ] || python3 benchmarks/compile_cache.py pack "$TORCHINDUCTOR_CACHE_DIR" "$out" >> "$logs/runs.txt"
latest=$(ls -td "$bundle"/store/checkpoint/gpu-check-* 2>/dev/null | head -1)  # the last run's
[ -n "$latest" ] && cp "$latest/metrics.jsonl" "$logs/metrics.jsonl"
tar czf "$out/logs.tgz" -C "$logs" .
rm -rf "$logs"
exit $rc  # the last failing run's code, 0 when every run passed
RUNS
echo "carry $dir to the GPU machine beside the checkout; there, from the checkout: bash $dir/run.sh OUT"
echo "(or several variants in one call: bash $dir/runs.sh OUT 'NAME|gpu.py options' ...)"
echo "then bring OUT/inductor-cache.tar.xz.* back into $dir/cache for the next machine's compiles"
