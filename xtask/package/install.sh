#!/bin/sh
# Installs atlas and atlas-pipeline from a release of github.com/atlas-mcp/atlas:
# downloads this platform's archive, checks its sha256, and puts both binaries in
# ~/.local/bin (or PREFIX/bin).
#
#   curl -fsSL https://github.com/atlas-mcp/atlas/releases/latest/download/install.sh | sh
#   sh install.sh --prefix /opt/atlas        # into /opt/atlas/bin
#   sh install.sh --version 0.2.0            # another release
#
# ATLAS_INSTALL_BASE_URL replaces https://github.com/atlas-mcp/atlas/releases/download
# (a mirror holding the same v<version>/ folders).
#
# `cargo xtask package` writes this file from xtask/package/install.sh, with the
# release's version and the sha256 of every archive it was given.
set -eu

RELEASE="@VERSION@"
VERSION="$RELEASE"
# "<target> <sha256>" per line: the archives of this release, checked before any
# download is trusted. Another --version is checked against its release's .sha256.
KNOWN_SHA256="@SHA256S@"
BASE="${ATLAS_INSTALL_BASE_URL:-https://github.com/atlas-mcp/atlas/releases/download}"
PREFIX="${ATLAS_INSTALL_PREFIX:-${HOME:-}/.local}"

say() { printf 'install.sh: %s\n' "$*" >&2; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }

usage() {
  cat <<EOF
Install atlas $VERSION (the MCP servers) and atlas-pipeline (the bundle builder).

usage: install.sh [--prefix DIR] [--version X.Y.Z]
  --prefix DIR     install into DIR/bin (default ~/.local)
  --version X.Y.Z  install that release instead of $VERSION
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a folder"; PREFIX="$2"; shift 2 ;;
    --prefix=*) PREFIX="${1#--prefix=}"; shift ;;
    --version) [ $# -ge 2 ] || die "--version needs a version such as 0.1.0"; VERSION="${2#v}"; shift 2 ;;
    --version=*) VERSION="${1#--version=}"; VERSION="${VERSION#v}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
[ -n "$PREFIX" ] || die "no prefix: set HOME or pass --prefix DIR"
# The prefix goes into a JSON receipt and into PATH hints: no quote, backslash or
# control character (a newline included).
case "$PREFIX" in
  *[\"\\]*|*[[:cntrl:]]*) die "the prefix may not hold a quote, a backslash or a control character; pass --prefix DIR with a plain folder name" ;;
esac
case "$VERSION" in
  *[!0-9A-Za-z.+-]*|'') die "'$VERSION' is not a version (such as 0.1.0)" ;;
esac

os="$(uname -s)"
arch="$(uname -m)"
case "$arch" in
  x86_64|amd64) arch=x86_64 ;;
  aarch64|arm64) arch=aarch64 ;;
  *) die "no release archive for $arch; build from source (https://github.com/atlas-mcp/atlas#build-from-source)" ;;
esac
case "$os" in
  Linux)
    if ldd --version 2>&1 | grep -qi musl; then
      die "no release archive for musl Linux; use the wheel (uvx atlas-mcp-server) or build from source"
    fi
    target="$arch-unknown-linux-gnu" ;;
  Darwin) target="$arch-apple-darwin" ;;
  MINGW*|MSYS*|CYGWIN*) die "on Windows, download atlas-$VERSION-x86_64-pc-windows-msvc.tar.gz from the release, or use uvx / npx" ;;
  *) die "no release archive for $os; use the wheel (uvx atlas-mcp-server) or build from source" ;;
esac

fetch() { # URL FILE
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --retry 3 -o "$2" "$1" || die "could not download $1 (check the version and your connection)"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$2" "$1" || die "could not download $1 (check the version and your connection)"
  else
    die "neither curl nor wget is installed; install one of them"
  fi
}

sha256_of() { # FILE
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then shasum -a 256 "$1" | cut -d' ' -f1
  else die "neither sha256sum nor shasum is installed; install coreutils"
  fi
}

name="atlas-$VERSION-$target"
url="$BASE/v$VERSION/$name.tar.gz"
tmp="$(mktemp -d 2>/dev/null || mktemp -d -t atlas)"
trap 'rm -rf "$tmp"' EXIT INT TERM

# The sha256 this installer was written with for TARGET, or nothing. Every line is
# looked at and the loop's status is 0 whatever the last line holds (under `set -e`
# a failed test as the loop's last command would end the script).
known_sha256() { # TARGET
  printf '%s\n' "$KNOWN_SHA256" | while read -r t h; do
    if [ "$t" = "$1" ]; then printf '%s\n' "$h"; fi
  done
}

want=""
if [ "$VERSION" = "$RELEASE" ]; then
  want="$(known_sha256 "$target")"
fi
if [ -z "$want" ]; then
  say "atlas $VERSION ($target) is not a release this installer was written for ($RELEASE): its download is checked against the .sha256 file beside it, from the same server, which shows it arrived whole but not who made it"
fi
say "downloading $url"
fetch "$url" "$tmp/$name.tar.gz"
if [ -z "$want" ]; then
  fetch "$url.sha256" "$tmp/$name.tar.gz.sha256"
  want="$(cut -d' ' -f1 < "$tmp/$name.tar.gz.sha256")"
fi
got="$(sha256_of "$tmp/$name.tar.gz")"
[ "$got" = "$want" ] || die "the download's sha256 is $got, the release says $want: not installing it (try again; report it if it persists)"

tar -xzf "$tmp/$name.tar.gz" -C "$tmp" || die "could not unpack $name.tar.gz"
for bin in atlas atlas-pipeline; do
  # A regular file, not a link: `cp` would copy a link's target (any file on this machine).
  if [ -L "$tmp/$name/$bin" ] || [ ! -f "$tmp/$name/$bin" ]; then
    die "$name.tar.gz does not hold atlas and atlas-pipeline as regular files; not installing it"
  fi
done
mkdir -p "$PREFIX/bin" "$PREFIX/share/atlas" || die "cannot create $PREFIX/bin (pass --prefix DIR)"
for bin in atlas atlas-pipeline; do
  # Beside the target first, then renamed over it: a running atlas keeps its file.
  if ! { cp "$tmp/$name/$bin" "$PREFIX/bin/.$bin.new" && chmod 755 "$PREFIX/bin/.$bin.new" \
    && mv -f "$PREFIX/bin/.$bin.new" "$PREFIX/bin/$bin"; }; then
    die "cannot write $PREFIX/bin/$bin"
  fi
done
cat > "$PREFIX/share/atlas/install-receipt.json" <<EOF
{"method": "install.sh", "version": "$VERSION", "target": "$target", "sha256": "$got", "bin": "$PREFIX/bin"}
EOF

say "installed atlas $VERSION ($target) into $PREFIX/bin"
case ":${PATH:-}:" in
  *":$PREFIX/bin:"*) ;;
  *) say "$PREFIX/bin is not on your PATH; add it: export PATH=\"$PREFIX/bin:\$PATH\"" ;;
esac
say "next: \`atlas setup\` (ONNX Runtime and the embedding model, once), then \`atlas install SOURCE\`"
