"""The cluster key: one CurveZMQ keypair shared by every node of a cluster.

Erlang authenticates nodes with a shared cookie; here the shared secret is a
CurveZMQ keypair.  Every node uses it both as its server key (listener) and
as its client key (outgoing connections), and the listener's ZAP handler
accepts only clients that present the cluster public key.  A CURVE client
can only present a public key whose secret half it holds (the handshake's
vouch box proves it), so holding the file is what makes a node a member.

The file is a small text file::

    # otpy cluster key: ...
    public = <40 Z85 characters>
    secret = <40 Z85 characters>

Like ssh with a private key, `load` refuses a file that group or others can
read, and refuses a malformed file or one whose halves do not match, with
an error naming the path and what is wrong.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

import zmq
from zmq.utils import z85

__all__ = ["ClusterKey", "KeyFileError", "generate", "load", "write_new"]

_HEADER = "# otpy cluster key: CurveZMQ keypair shared by every node of one cluster. Keep it secret (mode 0600).\n"
_Z85_LEN = 40


class KeyFileError(ValueError):
    """A cluster key file is unsafe or malformed; the message names the path."""


@dataclass(frozen=True)
class ClusterKey:
    """The shared keypair, Z85-encoded as pyzmq's socket options take them."""

    public: bytes
    secret: bytes

    def __post_init__(self) -> None:
        for half in ("public", "secret"):
            value = getattr(self, half)
            if not isinstance(value, bytes) or len(value) != _Z85_LEN:
                raise ValueError(f"cluster key {half} half must be {_Z85_LEN} Z85 bytes")
        if zmq.curve_public(self.secret) != self.public:
            raise ValueError("cluster key halves do not match (public is not derived from secret)")

    @property
    def public_raw(self) -> bytes:
        """The 32-byte public key, as a ZAP request carries the client's key."""
        return z85.decode(self.public)

    def __repr__(self) -> str:  # never print the secret half
        return f"ClusterKey(public={self.public.decode()!r})"


def generate() -> ClusterKey:
    """A fresh keypair (libzmq's `zmq_curve_keypair`)."""
    public, secret = zmq.curve_keypair()
    return ClusterKey(public, secret)


def write_new(path: str | os.PathLike[str]) -> ClusterKey:
    """Write a new key file at ``path`` with mode 0600; never overwrite one.

    The file is written under a temporary name, fsynced, then hard-linked to
    ``path``, so a reader never sees a partial key and an existing key (of a
    running cluster) is never replaced.
    """
    target = os.fspath(path)
    if os.path.lexists(target):
        raise KeyFileError(f"{target} already exists; refusing to overwrite a cluster key")
    key = generate()
    text = f"{_HEADER}public = {key.public.decode()}\nsecret = {key.secret.decode()}\n"
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:  # name the key the user asked for, not the temporary file
        raise KeyFileError(f"cannot write cluster key {target}: {exc.strerror}") from None
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise KeyFileError(f"{target} already exists; refusing to overwrite a cluster key") from None
    finally:
        os.unlink(tmp)
    return key


def load(path: str | os.PathLike[str]) -> ClusterKey:
    """Read and check a key file; `KeyFileError` names the path and the problem."""
    target = os.fspath(path)
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise KeyFileError(
            f"cluster key {target} does not exist (create one with: python -m actors keygen {target})"
        ) from None
    except OSError as exc:
        raise KeyFileError(f"cluster key {target} cannot be opened: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(f"cluster key {target} is not a regular file")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise KeyFileError(
                f"cluster key {target} has mode {mode:04o}: it must not be readable or writable by group "
                f"or others (run: chmod 600 {target})"
            )
        raw = os.read(fd, 4096)
    finally:
        os.close(fd)
    return parse(raw, target)


def parse(raw: bytes, where: str = "<key>") -> ClusterKey:
    """Parse the text of a key file (see the module docstring)."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise KeyFileError(f"cluster key {where} is malformed: not ASCII text") from None
    halves: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or name not in ("public", "secret"):
            raise KeyFileError(
                f"cluster key {where} is malformed at line {number}: expected 'public = ...' or 'secret = ...'"
            )
        if name in halves:
            raise KeyFileError(f"cluster key {where} is malformed at line {number}: '{name}' given twice")
        if len(value) != _Z85_LEN:
            raise KeyFileError(
                f"cluster key {where} is malformed at line {number}: {name} must be {_Z85_LEN} Z85 characters"
            )
        halves[name] = value
    missing = [h for h in ("public", "secret") if h not in halves]
    if missing:
        raise KeyFileError(f"cluster key {where} is malformed: no {' and no '.join(missing)} line")
    try:
        z85.decode(halves["public"].encode())
        z85.decode(halves["secret"].encode())
        return ClusterKey(halves["public"].encode(), halves["secret"].encode())
    except (ValueError, KeyError, zmq.ZMQError) as exc:
        raise KeyFileError(f"cluster key {where} is malformed: {exc}") from None
