#!/usr/bin/env bash
# Prepare benchmarks/gpu.py for a GPU machine that reaches no package index and lacks Beam and Kiwi
# (an offline box, a lent image with its own torch): run here, where pip and kolectra work, then carry
# DIR to the GPU machine beside the checkout and run the two lines this prints there.
#
#   bash benchmarks/gpu_bundle.sh DIR [PYTHON_VERSION]     # default 3.12: the GPU machine's Python
#
# DIR/wheels: kolectra's own wheel and the pinned packages a CUDA image is likely to hold at other
# versions (transformers, tokenizers) or not at all (universal_pathlib, pathlib_abc, zstandard);
# torch and the rest are the machine's. huggingface_hub stays the machine's: the pinned 2.4.0 needs
# httpx2, httpcore2 and truststore, which such images lack, and transformers accepts 1.31 and later.
# DIR/store: the embedded sample through corpus, vocab (8,000) and examples (128), named gpu-check,
# since the examples phase needs Beam and Kiwi (docs/benchmarks.md, "Measured on an H200").
set -euo pipefail
dir=${1:?usage: gpu_bundle.sh DIR [PYTHON_VERSION]}
py=${2:-3.12}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir/wheels"
pins() { sed -n "s/^ *\"\($1==[^\"]*\)\".*/\1/p" "$repo/pyproject.toml"; }
python -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dir/wheels" "$(pins transformers)" "$(pins tokenizers)" "$(pins universal_pathlib)" "$(pins zstandard)" \
  "pathlib-abc>=0.5.1,<0.6"
python -m pip wheel -q --no-deps --no-build-isolation -w "$dir/wheels" "$repo"
for stage in "corpus --input $repo/pipeline/sample/reviews.jsonl.gz" "vocab --corpus gpu-check --vocab-size 8000" \
             "examples --corpus gpu-check --vocab gpu-check --max-seq-length 128"; do
  # shellcheck disable=SC2086 # each stage's words are its arguments
  python -m kolectra.pipeline.cli $stage --out "$dir/store" --name gpu-check -q
done
echo "on the GPU machine, from the checkout, with DIR beside it:"
echo "  python3 -m pip install -q --no-index --no-deps --target /tmp/site DIR/wheels/*.whl && export PYTHONPATH=/tmp/site"
echo "  python3 benchmarks/gpu.py --out DIR/store --examples gpu-check --compile-cache DIR/cache --compile-cache-out OUT"
echo "and bring OUT's inductor-cache.tar.xz.* parts back into DIR/cache for the next machine's compiles"
