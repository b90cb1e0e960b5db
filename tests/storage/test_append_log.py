from garen_infer.storage.append_log import read_finished


def test_a_torn_tail_is_cut_so_the_next_append_starts_clean(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"qid": "a", "x": 1}\n{"qid": "b", "x": 2}\n{"qid": "c", "x"')
    assert list(read_finished(log, "qid")) == ["a", "b"]
    with open(log, "a") as handle:
        handle.write('{"qid": "c", "x": 3}\n')
    assert read_finished(log, "qid")["c"]["x"] == 3


def test_missing_file_means_nothing_finished(tmp_path):
    assert read_finished(tmp_path / "none.jsonl", "qid") == {}
