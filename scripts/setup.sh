#!/usr/bin/env bash
# One-time set-up: `harness` on PATH, its shell completion and manual pages, the base image,
# then `harness doctor` says what else this machine needs.
#
#   bash scripts/setup.sh                 # installs into ~/.cargo/bin (rustup's PATH)
#   PREFIX=$HOME/.local bash scripts/setup.sh
#
# HARNESS_SETUP_PROFILE=debug installs the debug build (what `cargo build` made; the tests
# use it to skip a release build). Completions go to ~/.local/share (bash, zsh) and
# ~/.config/fish; manual pages to ~/.local/share/man/man1 (`man harness`).
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX="${PREFIX:-${CARGO_HOME:-$HOME/.cargo}}"
DATA="${XDG_DATA_HOME:-$HOME/.local/share}"
CONFIG="${XDG_CONFIG_HOME:-$HOME/.config}"
profile=()
[ "${HARNESS_SETUP_PROFILE:-release}" = debug ] && profile=(--debug)

echo "setup: building and installing harness into $PREFIX/bin (a release build takes about 5 minutes the first time)..."
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}" \
  cargo install --quiet --locked --force --path . --root "$PREFIX" "${profile[@]}"
BIN="$PREFIX/bin/harness"
"$BIN" --version

mkdir -p "$DATA/bash-completion/completions" "$DATA/zsh/site-functions" \
  "$CONFIG/fish/completions" "$DATA/man/man1"
"$BIN" completions bash >"$DATA/bash-completion/completions/harness"
"$BIN" completions zsh >"$DATA/zsh/site-functions/_harness"
"$BIN" completions fish >"$CONFIG/fish/completions/harness.fish"
"$BIN" -q man --out "$DATA/man/man1" >/dev/null
echo "setup: completions for bash, zsh and fish, and manual pages (man harness) installed under $DATA"
if command -v manpath >/dev/null && ! manpath 2>/dev/null | tr : '\n' | grep -qx "$DATA/man"; then
  echo "setup: man does not look in $DATA/man yet: export MANPATH=\"$DATA/man:\$(manpath)\""
fi
echo "setup: zsh finds the completion once $DATA/zsh/site-functions is in fpath (fpath+=($DATA/zsh/site-functions))"

bash scripts/make-base-image.sh   # cached: says so and does nothing when it exists

case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "setup: $PREFIX/bin is not on PATH: add it (export PATH=\"$PREFIX/bin:\$PATH\")" ;;
esac
echo "setup: harness doctor"
"$BIN" doctor
