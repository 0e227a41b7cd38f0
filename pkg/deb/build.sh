#!/usr/bin/env bash
# Builds the Debian package, target/debian/stria_<version>-<revision>_amd64.deb:
# the release binary, then the manual pages and shell completions it makes
# from its own command definitions, then the package (cargo-deb, from
# `cargo install cargo-deb`). Arguments go to `cargo deb` (say
# `--deb-revision 2`).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! cargo deb --version >/dev/null 2>&1; then
	echo "cargo-deb is needed: cargo install cargo-deb" >&2
	exit 1
fi
cargo build --release
bin=target/release/stria
out=target/assets
rm -rf "$out"
mkdir -p "$out/completions"
"$bin" man --out "$out/man" >/dev/null
gzip -9n "$out"/man/*.1
"$bin" completions bash >"$out/completions/stria"
"$bin" completions zsh >"$out/completions/_stria"
"$bin" completions fish >"$out/completions/stria.fish"
cargo deb --no-build --strip "$@"
