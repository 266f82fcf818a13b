"""Damage done to a PostgreSQL crawl with SQL, each kind the damage campaign found unnamed, named by an open or
by verify, and what ``verify --repair`` then does: functions dropped are installed again, a table or a meta row
gone is refused at open, the seen set, the counters, a request copied from another crawl, a waiting request due
early and rows deleted are named by verify, and repair says what it could not bring back."""

from __future__ import annotations

import pytest

from diskfrontier import CrawlDamaged, Request
from diskfrontier.access.checking import verify_target


def urls(host: str, n: int) -> list[Request]:
    return [Request(f"https://{host}/p/{i}") for i in range(n)]


def three_pushed(open_crawl) -> None:
    """A crawl of three requests of a.example, its client closed."""
    first = open_crawl()
    first.push_many(urls("a.example", 3))
    first.close()


def test_a_function_dropped_is_installed_again_by_the_next_open(open_crawl, sql):
    three_pushed(open_crawl)
    sql("DROP FUNCTION pop CASCADE")
    again = open_crawl()
    assert [r.url for r in again.pop_many(5)] == [f"https://a.example/p/{i}" for i in (2, 1, 0)]


def test_a_function_replaced_is_installed_again_by_the_next_open(open_crawl, sql):
    open_crawl().close()
    sql("CREATE OR REPLACE FUNCTION now_s() RETURNS double precision LANGUAGE sql VOLATILE AS $$ SELECT 0::float8 $$")
    again = open_crawl()
    again.push(Request("https://a.example/"))
    assert sql("SELECT now_s() > 1e9") == [(True,)]


@pytest.mark.parametrize("row", ["delay", "per_host", "paused_since"])
def test_a_meta_row_a_pop_reads_deleted_is_named_at_open_and_written_again_by_repair(open_crawl, sql, postgres_url,
                                                                                   crawl_name, row):
    first = open_crawl()
    first.push_many(urls("a.example", 2))
    first.close()
    sql("DELETE FROM meta WHERE name = %s", (row,))
    with pytest.raises(CrawlDamaged, match=rf"df_{crawl_name}\.meta {row}: is .*, not"):
        open_crawl()
    report = verify_target(postgres_url, crawl_name, repair=True)
    assert [f.where for f in report.findings] == [f"meta.{row}"]
    assert any(note.startswith(f"could not bring back meta {row}") for note in report.notes)
    assert verify_target(postgres_url, crawl_name).sound
    assert len(open_crawl().pop_many(5)) == 2


def test_a_table_dropped_is_named_at_open(open_crawl, sql, crawl_name):
    open_crawl().close()
    sql("DROP TABLE leases")
    with pytest.raises(CrawlDamaged, match=rf"df_{crawl_name}: its leases is gone"):
        open_crawl()


def test_a_seen_key_deleted_is_named_by_verify_and_repair_records_the_loss(open_crawl, sql, postgres_url,
                                                                          crawl_name):
    first = open_crawl()
    first.push_many(urls("a.example", 3))
    first.done(first.pop())
    first.close()
    sql("DELETE FROM seen WHERE key = (SELECT min(key) FROM seen)")
    report = verify_target(postgres_url, crawl_name)
    assert [(f.where, f.problem) for f in report.findings][-1] == (
        "seen", "holds 2 keys, and the seen counter says 3 were added")
    repaired = verify_target(postgres_url, crawl_name, repair=True)
    assert any(note.startswith("could not bring back") and "keys of the seen set" in note for note in repaired.notes)
    assert verify_target(postgres_url, crawl_name).sound


def test_a_pending_request_whose_seen_key_was_deleted_gets_it_back(open_crawl, sql, postgres_url, crawl_name):
    three_pushed(open_crawl)
    sql("DELETE FROM seen WHERE key = (SELECT min(key) FROM seen)")
    report = verify_target(postgres_url, crawl_name)
    assert any(f.problem == "is a request whose key the seen set does not hold" for f in report.findings)
    repaired = verify_target(postgres_url, crawl_name, repair=True)
    assert not any("could not bring back" in note for note in repaired.notes)
    assert verify_target(postgres_url, crawl_name).sound
    assert open_crawl().push_each(urls("a.example", 3)) == [False, False, False]


def test_requests_whose_rows_were_deleted_are_named_as_lost_by_repair(open_crawl, sql, postgres_url, crawl_name):
    three_pushed(open_crawl)
    sql("DELETE FROM requests WHERE id = (SELECT min(id) FROM requests)")
    repaired = verify_target(postgres_url, crawl_name, repair=True)
    assert ("could not bring back 1 requests of host a.example: its row counted them, and their rows are gone"
            in repaired.notes)
    assert verify_target(postgres_url, crawl_name).sound


def test_a_request_row_copied_from_another_crawl_is_named_and_left_by_repair(open_crawl, sql, postgres_url,
                                                                            crawl_name):
    ours = open_crawl()
    ours.push_many(urls("a.example", 2))
    other = open_crawl(crawl="x")
    other.push_many([Request("https://a.example/elsewhere")])
    other_rows = f'"df_{crawl_name}x".requests'
    sql(f"UPDATE requests r SET fingerprint = o.fingerprint, record = o.record FROM {other_rows} o "  # noqa: S608
        "WHERE r.id = (SELECT min(id) FROM requests)")
    row = sql("SELECT min(id) FROM requests")[0][0]
    found = [(f.where, f.problem) for f in verify_target(postgres_url, crawl_name).findings]
    assert found == [(f"requests row {row}", "is a request whose key the seen set does not hold")]
    repaired = verify_target(postgres_url, crawl_name, repair=True)
    assert any(note.startswith(f"not repaired: requests row {row}") for note in repaired.notes)


def test_a_waiting_request_due_before_its_not_before_is_named_and_set_back(open_crawl, sql, postgres_url,
                                                                          crawl_name):
    first = open_crawl()
    first.push(Request("https://a.example/later"), not_before=4e9)
    first.close()
    sql("UPDATE waiting SET due = 1")
    [(row,)] = sql("SELECT id FROM waiting")
    found = [f.where for f in verify_target(postgres_url, crawl_name).findings]
    assert found == [f"waiting row {row}"]
    verify_target(postgres_url, crawl_name, repair=True)
    assert sql("SELECT due FROM waiting") == [(4e9,)]
    assert open_crawl().pop() is None


def test_counters_and_host_settings_no_client_writes_are_named_and_cleared(open_crawl, sql, postgres_url, crawl_name):
    first = open_crawl()
    first.push_many(urls("a.example", 2))
    first.set_delay("a.example", 1.0)
    first.close()
    sql("UPDATE hosts SET delay = 'NaN'")
    sql("INSERT INTO counters (name, part, value) VALUES ('done', 0, -5)")
    found = {f.where for f in verify_target(postgres_url, crawl_name).findings}
    assert found == {"hosts row a.example delay", "counters done"}
    repaired = verify_target(postgres_url, crawl_name, repair=True)
    assert len([n for n in repaired.notes if n.startswith("could not bring back")]) == 2
    assert verify_target(postgres_url, crawl_name).sound
    assert len(open_crawl().pop_many(5)) == 2


def test_a_sequence_set_back_is_named_by_the_step_that_meets_a_key_taken(open_crawl, sql, crawl_name):
    first = open_crawl()
    first.push_many(urls("a.example", 3))
    sql("SELECT setval('places', 1, false)")
    with pytest.raises(CrawlDamaged, match=rf"df_{crawl_name}: push\(\): a key of its tables is taken twice"):
        first.push(Request("https://b.example/"))


def test_a_sequence_set_back_is_named_by_verify_and_set_again_by_repair(open_crawl, sql, postgres_url, crawl_name):
    three_pushed(open_crawl)
    sql("SELECT setval('places', 1, false)")
    report = verify_target(postgres_url, crawl_name)
    assert [f.where for f in report.findings] == ["sequence places"]
    repaired = verify_target(postgres_url, crawl_name, repair=True)
    assert any("the sequence places was set back: set to 3" in note for note in repaired.notes)
    assert verify_target(postgres_url, crawl_name).sound
    again = open_crawl()
    assert again.push(Request("https://b.example/")) and len(again.pop_many(10)) == 4
