#!/usr/bin/env bash
# Install the Docker Compose v2 CLI plugin into .tools/docker/cli-plugins/ (no root, no engine).
#
# `docker compose config` parses, interpolates and validates docker-compose.yml without a Docker
# engine; CI runs it (tests/test_deploy.py). Docker publishes the plugin on GitHub, which these
# machines cannot reach, so this takes Debian's build of it (package docker-compose, Compose v2,
# from the stable release trixie) and checks it the way apt does: the release file's signature
# against the machine's Debian archive keyring, the package index's SHA256 from that file, and
# the package's SHA256 from the index. Nothing is installed system-wide.
#
# Use it:   DOCKER_CONFIG=$PWD/.tools/docker docker compose config
# (or .tools/docker/cli-plugins/docker-compose config, which runs without the docker CLI).
#
# Settings: CODEMEM_DEBIAN_MIRROR (default http://deb.debian.org/debian),
#           CODEMEM_DEBIAN_SUITE (default trixie).
set -euo pipefail
cd "$(dirname "$0")/.."

mirror="${CODEMEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite="${CODEMEM_DEBIAN_SUITE:-trixie}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
plugin_dir=.tools/docker/cli-plugins
plugin="$plugin_dir/docker-compose"

fail() { echo "install-compose: $*" >&2; exit 1; }

if [ -x "$plugin" ] && "$plugin" version >/dev/null 2>&1; then
  echo "install-compose: $("$plugin" version) already in $plugin_dir" >&2
  exit 0
fi
for tool in curl gpgv xz sha256sum dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || fail "needs $tool (Debian: apt-get install curl gpgv xz-utils coreutils dpkg)"
done
[ -r "$keyring" ] || fail "needs the Debian archive keyring at $keyring (apt-get install debian-archive-keyring)"
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) fail "no Debian build of docker-compose is looked up for $(uname -m)" ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fetch() { curl --fail --silent --show-error --location --retry 3 --max-time 300 -o "$2" "$1" || fail "could not download $1"; }

# 1. The release file, accepted only with a good signature from the Debian archive keyring.
fetch "$mirror/dists/$suite/InRelease" "$work/InRelease"
gpgv --quiet --keyring "$keyring" --output "$work/Release" "$work/InRelease" 2>"$work/gpgv.log" \
  || fail "the signature of $mirror/dists/$suite/InRelease does not verify: $(tail -1 "$work/gpgv.log")"

# 2. The package index, checked against the SHA256 the signed release file gives for it.
index="main/binary-$arch/Packages.xz"
index_sha=$(awk -v f="$index" '/^SHA256:/{s=1; next} /^[^ ]/{s=0} s && $3 == f {print $1}' "$work/Release")
[ -n "$index_sha" ] || fail "$suite's release file lists no $index"
fetch "$mirror/dists/$suite/$index" "$work/Packages.xz"
echo "$index_sha  $work/Packages.xz" | sha256sum --check --quiet - || fail "$index does not match its signed SHA256"

# 3. The package, checked against the SHA256 the index gives for it.
read -r filename package_sha version < <(xz -dc "$work/Packages.xz" | awk '
  /^Package: / {p = ($2 == "docker-compose")}
  p && /^Filename: / {f = $2} p && /^SHA256: / {s = $2} p && /^Version: / {v = $2}
  /^$/ && p && f != "" {print f, s, v; exit}')
[ -n "${filename:-}" ] || fail "$suite has no docker-compose package for $arch"
fetch "$mirror/$filename" "$work/docker-compose.deb"
echo "$package_sha  $work/docker-compose.deb" | sha256sum --check --quiet - || fail "$filename does not match its SHA256"

dpkg-deb -x "$work/docker-compose.deb" "$work/root"
mkdir -p "$plugin_dir"
install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugin"
"$plugin" version >/dev/null || fail "the installed plugin does not run"
echo "install-compose: Debian $suite docker-compose $version -> $plugin" >&2
