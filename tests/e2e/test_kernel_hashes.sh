#!/bin/bash
# The generated source of the AutoTVM templates' kernels (resnet-18 and mobilenet tasks on AVX2,
# AVX-512 and Mali targets) hashes as tests/golden/kernel_hashes.txt records: a change to
# templates, lowering or code generation that alters a kernel shows here. After an intended
# change: `tunelua scripts/kernel_hashes.lua --update` and commit the new file with the change.
set -euo pipefail
exe="${1:-build/tunelua}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
cd "$root"
"$exe" scripts/kernel_hashes.lua > "$out"
if ! diff -u tests/golden/kernel_hashes.txt "$out"; then
  echo "FAIL: generated kernels differ from tests/golden/kernel_hashes.txt (lines above)" >&2
  exit 1
fi
echo "kernel hashes: $(wc -l < "$out") kernels as recorded"
