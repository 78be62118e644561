#!/usr/bin/env bash
# Wheels of the peer libraries for a GPU machine with no package index (the device image has
# torch, triton, nvcc and ninja but not these): FlashInfer 0.3.1 (the last release whose JIT
# path needs nothing past torch; later ones pull apache-tvm-ffi, cutlass-dsl and more, far
# over what a device call can carry) built from its sdist, plus the small packages it imports.
# Lands in .whl/ (gitignored); a device call carries it and installs with
#   python3 -m pip install --no-deps .whl/*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
tmp=$(mktemp -d)
python3 -m pip install -q "setuptools>=77" packaging
python3 -m pip download -q --no-deps --no-build-isolation flashinfer-python==0.3.1 -d "$tmp"    # an sdist only
tar xzf "$tmp"/flashinfer_python-0.3.1.tar.gz -C "$tmp"
python3 -m pip wheel -q --no-deps --no-build-isolation "$tmp"/flashinfer_python-0.3.1 -w .whl
# the device's python is 3.12 on x86_64
python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    einops click tabulate nvidia-ml-py pynvml nvidia-cudnn-frontend -d .whl
rm -rf "$tmp"
ls -la .whl
