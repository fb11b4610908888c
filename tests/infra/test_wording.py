"""How the twin's lines count things."""

from infra.wording import counted


def test_one_of_a_thing_is_singular_and_any_other_count_plural():
    assert [counted(n, "partition") for n in (0, 1, 2)] == ["0 partitions", "1 partition", "2 partitions"]


def test_a_noun_whose_plural_is_not_an_added_s_is_given_it():
    assert counted(3, "entry", "entries") == "3 entries" and counted(1, "entry", "entries") == "1 entry"
