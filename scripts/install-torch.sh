#!/usr/bin/env bash
# Install the pinned PyTorch (requirements-torch.txt) into the venv from a wheel house kept outside
# the clone. PyPI's Linux wheel of torch 2.13.0 is the CUDA build: with its nvidia-* and triton
# dependencies it is ~3.5 GB to download and ~4.6 GB installed (docs/operations.md, "PyTorch").
# The download happens once per version into $CAIRN_WHEEL_CACHE; every later venv (a clean clone
# in CI, say) installs from there with --no-index, so no run depends on the registry for it.
set -euo pipefail
pip=${1:?usage: install-torch.sh PIP}
req=requirements-torch.txt
version=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' "$req")
house="${CAIRN_WHEEL_CACHE:-$HOME/.cache/cairn/wheels}/torch-$version"
if [ ! -f "$house/.complete" ]; then
  echo "downloading torch $version and its dependencies into $house (once per version; ~3.5 GB)"
  mkdir -p "$house"
  start=$(date +%s)
  "$pip" download --disable-pip-version-check -q -d "$house" -r "$req"
  touch "$house/.complete"
  echo "torch wheels downloaded in $(( $(date +%s) - start )) s"
fi
"$pip" install --disable-pip-version-check -q --no-index --find-links "$house" -r "$req"
