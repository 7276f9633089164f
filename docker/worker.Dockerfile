# kolectra's Beam worker image: Beam's Python SDK harness plus kolectra and what its corpus and
# examples steps import on a worker (kiwipiepy with its model, zstandard, numpy, tokenizers).
# Used by the Dataflow, Flink and Spark commands in docs/corpus.md. From the repository root:
#
#   docker build -f docker/worker.Dockerfile -t REGISTRY/kolectra-worker:0.1.0 .
#   docker build -f docker/worker.Dockerfile --build-arg BEAM_EXTRAS=gcp -t ... .   # gs:// only
#
# The launcher must run the same apache-beam and Python versions as this image (3.11, 2.77.0).
# Workers never download anything: Kiwi's model is the kiwipiepy_model package installed here.
ARG BEAM_VERSION=2.77.0
FROM apache/beam_python3.11_sdk:${BEAM_VERSION}

ARG BEAM_VERSION
# File systems the workers read from and write to (--input, --corpus_staging): gcp = gs://,
# aws = s3://, hadoop = hdfs:// (comma-separated)
ARG BEAM_EXTRAS=gcp,aws

# The worker-side dependencies at the tested versions (requirements/ci.txt). torch, transformers and the rest of
# kolectra's dependencies are for training and are not installed here (--no-deps below).
RUN pip install --no-cache-dir \
        "apache-beam[${BEAM_EXTRAS}]==${BEAM_VERSION}" \
        kiwipiepy==0.24.1 kiwipiepy_model==0.24.0 zstandard==0.25.0 numpy==2.4.6 tokenizers==0.23.3

COPY pyproject.toml README.md LICENSE MANIFEST.in /src/kolectra/
COPY core /src/kolectra/core
COPY corpus /src/kolectra/corpus
COPY vocab /src/kolectra/vocab
COPY model /src/kolectra/model
COPY finetune /src/kolectra/finetune
COPY pipeline /src/kolectra/pipeline
COPY kolectra /src/kolectra/kolectra
RUN pip install --no-cache-dir --no-deps /src/kolectra \
    && python -c "import kolectra.corpus.build, kolectra.corpus.examples_beam, kiwipiepy; kiwipiepy.Kiwi()"

# The base image's entry point (/opt/apache/beam/boot) starts the SDK harness.
