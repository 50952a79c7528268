#!/usr/bin/env bash
# Run the README's two commands on another Python, in a Debian root of its own.
#
#   sudo scripts/other-python.sh 3.13          # Debian 13 (trixie): Python 3.13
#   sudo scripts/other-python.sh 3.11          # Debian 12 (bookworm): Python 3.11
#
# Why: a user on another Python than the developers' finds what the project's
# install and tests assume of theirs (a dependency with no wheel for it, a
# default that changed).  This builds a minimal Debian root with debootstrap
# (Debian's own packages: its python3, postgresql, iproute2, git), clones this
# repository into it (committed work only), makes a virtual environment there
# (Debian's Python is "externally managed"), and runs the README's first
# command (install, then the demo) and its second (lint, types, the whole
# suite), timing each.  The root stays in $ROOT (default /var/tmp/otpy-py<V>)
# for a second run, which skips debootstrap; remove it with rm -rf when done.
# Too slow for CI (ten minutes and more): run it before a release and when
# touching something version-sensitive (start methods, signals, asyncio,
# pickling); put its figures (pass/fail and time) in the CHANGELOG.
set -euo pipefail

version="${1:-3.13}"
case "$version" in
    3.13) suite=trixie ;;
    3.11) suite=bookworm ;;
    *) echo "usage: $0 3.13|3.11 (the Python of a Debian release)" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "error: debootstrap and chroot need root" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/.." && pwd)"
root="${ROOT:-/var/tmp/otpy-py${version}}"
mirror="${MIRROR:-http://deb.debian.org/debian}"

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }

if [ ! -x "$root/usr/bin/python3" ]; then
    echo "== debootstrap $suite into $root"
    start=$(date +%s)
    debootstrap --variant=minbase \
        --include=python3,python3-venv,python3-dev,git,ca-certificates,postgresql,iproute2,build-essential,procps \
        "$suite" "$root" "$mirror" >"$root.debootstrap.log" 2>&1 \
        || { tail -20 "$root.debootstrap.log" >&2; exit 1; }
    echo "   took $(( $(date +%s) - start )) s"
fi

mounts=(proc sys dev dev/pts dev/shm)
cleanup() {
    umount -l "$root/run/netns" 2>/dev/null || true  # what `ip netns` of the hosts tests left mounted
    for ((i=${#mounts[@]}-1; i>=0; i--)); do umount -l "$root/${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs tmpfs "$root/dev/shm"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# The host's pip settings (an index mirror, a certificate) and the certificates it trusts (a
# proxy's own CA, say), if any, reach pip in the root too.
for f in /etc/pip.conf /etc/xdg/pip/pip.conf /etc/xdg/pip/constraints.txt; do
    [ -f "$f" ] && mkdir -p "$root$(dirname "$f")" && cp "$f" "$root$f"
done
[ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
pip_env=()
while IFS= read -r line; do pip_env+=("$line"); done < <(env | grep -E '^(PIP_[A-Z_]+|HTTPS?_PROXY|https?_proxy|NO_PROXY|no_proxy)=' || true)

rm -rf "$root/src"
git clone -q "$repo" "$root/src"
echo "== in the root: $(chroot "$root" python3 --version)"

run() {  # NAME COMMAND: run COMMAND in the root's checkout, print pass/fail and the time
    local name="$1"; shift
    local start status
    start=$(date +%s)
    set +e
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/src/.venv/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        TMPDIR=/tmp LANG=C.UTF-8 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "${pip_env[@]}" \
        bash -c "cd /src && $*" >"$root/$name.log" 2>&1
    status=$?
    set -e
    echo "== $name: $([ $status = 0 ] && echo pass || echo "FAIL ($status)") in $(( $(date +%s) - start )) s" \
         "(log: $root/$name.log)"
    tail -3 "$root/$name.log" | sed 's/^/   /'
    return $status
}

chroot "$root" python3 -m venv /src/.venv
failed=0
run first-command "python3 -m pip install -q -e '.[test]' && python3 -m actors demo --short" || failed=1
run second-command "python3 -m ruff check . && python3 -m ruff format --check . && python3 -m mypy && python3 -m pytest -q" \
    || failed=1
exit $failed
