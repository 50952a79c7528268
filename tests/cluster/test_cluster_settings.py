"""The [cluster] section: parsing, defaults, and the checks made before anything listens."""

from __future__ import annotations

import os

import pytest

from actors._core.net.keys import KeyFileError, write_new
from actors.cluster_settings import ClusterSettings, parse_port_range, parse_seeds
from actors.config import Config, ConfigError


def settings(**values):
    return ClusterSettings.from_config(Config({"cluster": values}))


def test_absent_section_is_a_node_that_is_not_distributed():
    s = ClusterSettings.from_config(Config())
    assert not s.distributed and s.seeds == () and s.net_ticktime == 15.0 and s.load_key() is None
    assert s.connect_all, "Erlang's default: nodes connect transitively"


def test_full_section_from_an_ini_file(tmp_path):
    key = tmp_path / "cluster.key"
    written = write_new(key)
    ini = tmp_path / "node.ini"
    ini.write_text(
        "[cluster]\nname = a\nlisten = tcp://0.0.0.0:7100\n"
        f"cluster_key = {key}\nseeds = tcp://10.0.0.2:7100, tcp://10.0.0.3:7100\n  tcp://10.0.0.4:7100\n"
        "net_ticktime = 2.5\n"
    )
    s = ClusterSettings.from_config(Config.from_ini(ini))
    assert s == ClusterSettings(
        "a", "tcp://0.0.0.0:7100", str(key), ("tcp://10.0.0.2:7100", "tcp://10.0.0.3:7100", "tcp://10.0.0.4:7100"), 2.5
    )
    assert s.distributed and s.load_key() == written


def test_connect_all_can_be_turned_off():
    assert settings(name="a", listen="tcp://127.0.0.1:0", connect_all="false").connect_all is False
    assert settings(name="a", listen="tcp://127.0.0.1:0", connect_all="true").connect_all is True


def test_direct_ports_name_a_range_or_one_port():
    assert settings(name="a", listen="tcp://127.0.0.1:0").direct_ports is None  # any free port
    assert settings(name="a", listen="tcp://127.0.0.1:0", direct_ports=" 41000-41999 ").direct_ports == (41000, 41999)
    assert settings(name="a", listen="tcp://127.0.0.1:0", direct_ports="41000").direct_ports == (41000, 41000)
    assert ClusterSettings.from_config(
        Config(), name="a", listen="tcp://127.0.0.1:0", direct_ports=(5, 6)
    ).direct_ports == (
        5,
        6,
    )
    assert parse_port_range("1-65535") == (1, 65535)


def test_loopback_needs_no_key_and_port_zero_is_allowed():
    s = settings(name="a", listen="tcp://127.0.0.1:0")
    assert s.cluster_key is None and s.load_key() is None


def test_overrides_complete_and_replace_the_section_before_it_is_checked():
    """``Node(config, name=...)``: a section shared by every node leaves the name
    out; each keyword replaces only its own key."""
    shared = Config(
        {"cluster": {"listen": "tcp://127.0.0.1:7100", "seeds": "tcp://127.0.0.1:7101", "net_ticktime": "4"}}
    )
    s = ClusterSettings.from_config(shared, name="b")
    assert s == ClusterSettings("b", "tcp://127.0.0.1:7100", None, ("tcp://127.0.0.1:7101",), 4.0)
    s = ClusterSettings.from_config(shared, name="b", net_ticktime=2.0, listen="tcp://127.0.0.1:0")
    assert (s.listen, s.net_ticktime, s.seeds) == ("tcp://127.0.0.1:0", 2.0, ("tcp://127.0.0.1:7101",))
    with pytest.raises(ConfigError, match="name is not set"):
        ClusterSettings.from_config(shared)
    # seeds as the ini writes them, or a list
    assert parse_seeds("tcp://127.0.0.1:1, tcp://127.0.0.1:2\n tcp://127.0.0.1:3") == (
        "tcp://127.0.0.1:1",
        "tcp://127.0.0.1:2",
        "tcp://127.0.0.1:3",
    )
    assert parse_seeds(["tcp://127.0.0.1:1"]) == ("tcp://127.0.0.1:1",) and parse_seeds("") == ()
    with pytest.raises(ConfigError, match="net_ticktime = 0"):
        ClusterSettings.from_config(shared, name="b", net_ticktime=0)


@pytest.mark.parametrize(
    "values, why",
    [
        ({"name": "a", "listen": "tcp://0.0.0.0:7100"}, "not a loopback address and no cluster_key"),
        ({"name": "a"}, "listen is not set"),
        ({"listen": "tcp://127.0.0.1:0"}, "name is not set"),
        ({"name": "a b", "listen": "tcp://127.0.0.1:0"}, "name = 'a b'"),
        ({"name": "a", "listen": "ipc:///tmp/x"}, "listen = 'ipc:///tmp/x' is not tcp"),
        ({"name": "a", "listen": "tcp://127.0.0.1:0", "seeds": "tcp://b:1 nonsense"}, "seeds = 'nonsense'"),
        ({"seeds": "tcp://b:1"}, "no name and listen"),
        ({"name": "a", "listen": "tcp://127.0.0.1:0", "net_ticktime": "0"}, "net_ticktime = 0.0"),
        ({"name": "a", "listen": "tcp://127.0.0.1:0", "net_ticktime": "soon"}, "not a number"),
        ({"name": "a", "listen": "tcp://127.0.0.1:0", "net_ticktime": "inf"}, "must be a number of seconds"),
        ({"name": "a", "listen": "tcp://127.0.0.1:0", "ticktime": "1"}, "unknown key 'ticktime'"),
        (
            {"name": "a", "listen": "tcp://127.0.0.1:0", "connect_all": "maybe"},
            "connect_all = 'maybe' is not a boolean",
        ),
        (
            {"name": "a", "listen": "tcp://127.0.0.1:0", "direct_ports": "41000-"},
            "direct_ports = '41000-': not FIRST-LAST",
        ),
        ({"name": "a", "listen": "tcp://127.0.0.1:0", "direct_ports": "2-1"}, "the first not after the last"),
        ({"name": "a", "listen": "tcp://127.0.0.1:0", "direct_ports": "0-10"}, "ports go from 1 to 65535"),
        ({"name": "a", "listen": "tcp://127.0.0.1:0", "direct_ports": "1-70000"}, "ports go from 1 to 65535"),
    ],
)
def test_bad_values_name_the_key_and_the_value(values, why):
    with pytest.raises(ConfigError, match="\\[cluster\\]") as err:
        settings(**values)
    assert why in str(err.value)


def test_an_unsafe_key_file_is_refused_when_loaded(tmp_path):
    key = tmp_path / "cluster.key"
    write_new(key)
    os.chmod(key, 0o644)
    s = settings(name="a", listen="tcp://0.0.0.0:7100", cluster_key=str(key))
    with pytest.raises(KeyFileError, match="0644"):
        s.load_key()
