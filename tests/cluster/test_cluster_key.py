"""The cluster key file: keygen writes 0600, load refuses unsafe or malformed files."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
import zmq

from actors._core.net.keys import ClusterKey, KeyFileError, generate, load, parse, write_new
from actors.tools.cli import main

ENV = dict(os.environ, PYTHONPATH=os.getcwd())


def test_keygen_command_writes_a_0600_key_that_loads(tmp_path):
    path = tmp_path / "cluster.key"
    out = subprocess.run(
        [sys.executable, "-m", "actors", "keygen", str(path)], capture_output=True, text=True, timeout=30, env=ENV
    )
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    key = load(path)
    assert zmq.curve_public(key.secret) == key.public
    assert key.public.decode() in out.stdout
    assert key.secret.decode() not in out.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.key"]  # no temporary left


def test_keygen_never_overwrites_an_existing_key(tmp_path, capsys):
    path = tmp_path / "cluster.key"
    first = write_new(path)
    assert main(["keygen", str(path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert load(path) == first


def test_keygen_into_a_missing_folder_names_the_key_in_one_line(tmp_path, capsys):
    path = tmp_path / "no" / "such" / "cluster.key"
    assert main(["keygen", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write cluster key {path}: No such file or directory" in err
    assert ".tmp" not in err


def test_keygen_is_0600_even_with_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        write_new(tmp_path / "k")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "k").st_mode) == 0o600


def test_two_keys_differ():
    assert generate() != generate()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o602])
def test_load_refuses_group_or_world_accessible_files(tmp_path, mode):
    path = tmp_path / "cluster.key"
    write_new(path)
    os.chmod(path, mode)
    with pytest.raises(KeyFileError) as err:
        load(path)
    assert str(path) in str(err.value) and f"{mode:04o}" in str(err.value)
    assert "chmod 600" in str(err.value)


def test_load_accepts_0400(tmp_path):
    path = tmp_path / "cluster.key"
    key = write_new(path)
    os.chmod(path, 0o400)
    assert load(path) == key


def test_load_names_a_missing_file(tmp_path):
    with pytest.raises(KeyFileError, match="does not exist.*keygen"):
        load(tmp_path / "nope.key")


def test_load_refuses_a_symlink_and_a_directory(tmp_path):
    real = tmp_path / "real.key"
    write_new(real)
    link = tmp_path / "link.key"
    link.symlink_to(real)
    with pytest.raises(KeyFileError, match="link.key"):
        load(link)
    (tmp_path / "dir").mkdir(mode=0o700)
    with pytest.raises(KeyFileError, match="dir"):
        load(tmp_path / "dir")


def _write(tmp_path, text: bytes):
    path = tmp_path / "bad.key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, text)
    os.close(fd)
    return path


def test_load_refuses_malformed_files(tmp_path):
    pub, sec = zmq.curve_keypair()
    other_pub, _ = zmq.curve_keypair()
    cases = {
        b"": "no public and no secret",
        b"public = " + pub + b"\n": "no secret",
        b"public = " + pub + b"\nsecret = " + sec[:-1] + b"\n": "40 Z85",
        b"public = " + pub + b"\nsecret = " + sec + b"\nsecret = " + sec + b"\n": "given twice",
        b"public = " + pub + b"\nnonsense\n": "line 2",
        b"public = " + other_pub + b"\nsecret = " + sec + b"\n": "do not match",
        b"public = " + b"~" * 40 + b"\nsecret = " + sec + b"\n": "malformed",
        b"\xff\xfe": "not ASCII",
    }
    for text, why in cases.items():
        path = _write(tmp_path, text)
        with pytest.raises(KeyFileError, match=why) as err:
            load(path)
        assert str(path) in str(err.value)
        path.unlink()


def test_parse_round_trips_and_repr_hides_the_secret():
    key = generate()
    text = b"# comment\n\npublic = " + key.public + b"\nsecret = " + key.secret + b"\n"
    assert parse(text) == key
    assert key.secret.decode() not in repr(key)
    assert len(key.public_raw) == 32
    with pytest.raises(ValueError):
        ClusterKey(key.public, b"x" * 39)
