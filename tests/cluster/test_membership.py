"""Which side of a network cut ends its incarnation (pure policy, no processes)."""

from __future__ import annotations

from actors._core.node.membership import SILENCE, Membership, PeerInfo, RateLimit, yields


def _up(m: Membership, *names: str) -> None:
    for n in names:
        m.node_up(PeerInfo(n, f"tcp://{n}:4370", 1, 0.0))


def test_a_node_cut_off_from_both_others_is_the_minority_and_they_are_not():
    h3 = Membership("h3")
    _up(h3, "h1", "h2")
    h3.node_down("h1", SILENCE)
    assert not h3.in_minority()  # 2 of 3 still
    h3.node_down("h2", SILENCE)
    assert h3.in_minority()
    h1 = Membership("h1")
    _up(h1, "h2", "h3")
    h1.node_down("h3", SILENCE)
    assert not h1.in_minority()


def test_a_peer_that_closed_or_died_is_no_longer_a_member():
    m = Membership("h1")
    _up(m, "h2", "h3")
    m.node_down("h2", "connection_closed")
    m.node_down("h3", "peer_closed")
    assert m.members() == {"h1"} and not m.in_minority()


def test_an_even_split_keeps_the_side_of_the_smallest_name():
    a, b = Membership("a"), Membership("b")
    _up(a, "b")
    _up(b, "a")
    a.node_down("b", SILENCE)
    b.node_down("a", SILENCE)
    assert not a.in_minority() and b.in_minority()


def test_a_node_back_in_a_new_incarnation_is_reachable_again():
    m = Membership("h1")
    _up(m, "h2", "h3")
    m.node_down("h2", SILENCE)
    m.node_down("h3", SILENCE)
    assert m.in_minority()
    _up(m, "h3")
    assert not m.in_minority() and m.unreachable == {"h2"}


def test_peers_list_what_status_shows():
    m = Membership("h1")
    m.node_up(PeerInfo("h2", "tcp://10.0.0.2:4370", 255, 12.5))
    assert m.peers() == [{"name": "h2", "address": "tcp://10.0.0.2:4370", "incarnation": "ff", "up_since": 12.5}]


def test_of_two_nodes_that_declared_each_other_down_exactly_one_yields():
    for h1_up, h3_up in ((1, 1), (0, 1), (2, 1)):
        h1_yields = yields("h1", h1_up, "h3", h3_up, mutual=True)
        h3_yields = yields("h3", h3_up, "h1", h1_up, mutual=True)
        assert h1_yields != h3_yields
    assert yields("h3", 1, "h1", 1, mutual=True) and not yields("h1", 1, "h3", 1, mutual=True)
    assert yields("h1", 0, "h2", 1, mutual=True)  # the frozen one, whatever its name


def test_a_node_declared_down_by_a_peer_it_did_not_declare_down_yields():
    assert yields("h1", 5, "h9", 0, mutual=False)


def test_rate_limit_allows_one_line_per_key_per_period():
    limit = RateLimit(60.0)
    assert limit.allow("h2", 0.0) and not limit.allow("h2", 59.0) and limit.allow("h3", 1.0)
    assert limit.allow("h2", 60.0)
