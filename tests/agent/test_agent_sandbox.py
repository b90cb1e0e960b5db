"""The bash tool's sandbox under attack: hostile and malformed commands are refused before anything runs, or are
contained (time, output), and nothing outside the sandbox changes. Also: what it does allow works, and ripgrep
keeps the order of the files it is given (-j1 is injected whatever the model asks for)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from garen_infer.agent.sandbox import NO_TEMPORARY_FOLDER, Limits, Sandbox

DOCS = {f"d{i:03d}.txt": f"document {i}\nthe common word appears here\nnumber {i}\n" for i in range(60)}


@pytest.fixture
def world(tmp_path):
    """corpus/ (with a planted symlink out and a document listing outside paths), outside/ (a secret and a
    victim), and a query's working folder with a scope file and a planted symlink out."""
    corpus, outside, work = tmp_path / "corpus_files" / "docs", tmp_path / "outside", tmp_path / "work"
    corpus.mkdir(parents=True)
    outside.mkdir()
    for name, text in DOCS.items():
        (corpus / name).write_text(text)
    (corpus / "big.txt").write_text("line with e\n" * 200_000)
    (corpus / "evil.txt").write_text("../outside/secret.txt\n/etc/passwd\n")
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (outside / "victim.txt").write_text("do not touch\n")
    (corpus / "evil_link.txt").symlink_to(outside / "secret.txt")
    sandbox = Sandbox(corpus, work, Limits(seconds=5, stage_output_bytes=1 << 20))
    (work / "scopes" / "scope_1.txt").write_text("".join(f"corpus/{n}\n" for n in reversed(sorted(DOCS))))
    (work / "scopes" / "many.txt").write_text("corpus/d001.txt\n" * 3000)
    (work / "scopes" / "link_out").symlink_to(outside / "secret.txt")
    return tmp_path, sandbox


def snapshot(root: Path) -> dict:
    state = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        if path.is_symlink():
            digest = os.readlink(path)
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[str(path.relative_to(root))] = (stat.st_mode, stat.st_size, stat.st_mtime_ns, digest)
    return state


REFUSED = [
    # command separators, lists, background jobs
    ("rg common; rm -rf corpus", "';'"),
    ("rg common && touch pwned", "'&'"),
    ("rg common || touch pwned", "'||'"),
    ("rg common & touch pwned", "'&'"),
    ("rg common\ntouch pwned", "newlines"),
    ("rg common \\\ntouch pwned", "line continuations"),
    # substitutions and expansions
    ("rg $(touch pwned) corpus", "'$'"),
    ("rg `touch pwned` corpus", "backticks"),
    ('rg "$(touch pwned)" corpus', "double quotes"),
    ("rg ${HOME} corpus", "'$'"),
    ("cat ~/.bashrc", "'~'"),
    ("cat corpus/*", "glob"),
    ("cat corpus/d00?.txt", "glob"),
    ("rg common {corpus,..}", "brace"),
    ("rg common corpus # a comment", "comments"),
    ("RIPGREP_CONFIG_PATH=../outside/secret.txt rg common", "environment assignments"),
    # redirections and process substitution
    ("rg common > pwned.txt", "'>'"),
    ("rg common >> ../outside/victim.txt", "'>'"),
    ("cat < ../outside/secret.txt", "'<'"),
    ("rg common <(cat ../outside/secret.txt)", "'<'"),
    ("(rg common)", "subshells"),
    # paths out of the sandbox: traversal, absolute, symlinks planted in the corpus and in the work folder
    ("cat ../outside/secret.txt", "outside the corpus"),
    ("cat corpus/../../outside/secret.txt", "outside the corpus"),
    ("cat /etc/passwd", "outside the corpus"),
    ("head -c 100 /proc/self/environ", "outside the corpus"),
    ("cat corpus/evil_link.txt", "outside the corpus"),
    ("cat scopes/link_out", "outside the corpus"),
    ("rg TOP ../outside", "outside the corpus"),
    ("cat corpus/evil.txt | xargs cat", "outside the corpus"),  # items are checked as paths before anything runs
    # flags that run programs, write, follow links, list the corpus, wait forever or read other files
    ("rg --pre cat common corpus", "--pre"),
    ("rg --pre=sh common", "--pre"),
    ("rg --pre-glob '*' --pre sh common", "--pre-glob"),
    ("rg -z common corpus", "decompressors"),
    ("rg -iz common corpus", "decompressors"),
    ("rg --hostname-bin=/bin/sh common", "runs another program"),
    ("rg -L TOP corpus", "symbolic links"),
    ("rg --files", "lists the whole corpus"),
    ("rg --ignore-file=../outside/secret.txt common", "reads a file"),
    ("grep -R TOP .", "symbolic links"),
    ("grep -f ../outside/secret.txt corpus/d001.txt", "reads patterns from a file"),
    ("sed -i 's/a/b/' corpus/d001.txt", "edits files"),
    ("sed -n 'w pwned' corpus/d001.txt", "sed script"),
    ("sed -n '1e touch pwned' corpus/d001.txt", "sed script"),
    ("sed 1p corpus/d001.txt", "sed -n"),
    ("sort -o pwned corpus/d001.txt", "writes a file"),
    ("sort --output=pwned corpus/d001.txt", "writes a file"),
    ("sort --compress-program=sh corpus/d001.txt", "runs another program"),
    ("sort -S 2K corpus/big.txt", "spills to temporary files"),
    ("sort -nS2K corpus/big.txt", "spills to temporary files"),
    ("sort --buffer-size=2K corpus/big.txt", "spills to temporary files"),
    ("sort -T scopes corpus/big.txt", "temporary files"),
    ("sort --temporary-directory=. corpus/big.txt", "temporary files"),
    ("sort -R corpus/d001.txt", "random"),
    ("uniq corpus/d001.txt pwned", "second file"),
    ("tail -f corpus/d001.txt", "forever"),
    ("wc --files0-from=../outside/secret.txt", "reads a file"),
    ("head --lines=abc corpus/d001.txt", "needs a number"),
    # programs that are not search tools, directly or through xargs
    ("ls corpus", "listing the corpus"),
    ("find . -name 'x'", "listing the corpus"),
    ("find corpus -exec rm {} +", "brace"),
    ("curl http://127.0.0.1", "not allowed"),
    ("python3 -c 'print(1)'", "not allowed"),
    ("bash -c 'rm -rf corpus'", "not allowed"),
    ("env rg common", "not allowed"),
    ("tee pwned", "not allowed"),
    ("rg -l common | sh", "not allowed"),
    ("cat scopes/scope_1.txt | xargs rm", "not allowed"),
    ("cat scopes/scope_1.txt | xargs sh -c 'rm -rf corpus'", "not allowed"),
    ("cat scopes/scope_1.txt | xargs -P 4 rg common", "parallel"),
    ("cat scopes/scope_1.txt | xargs -a ../outside/secret.txt cat", "reads a file"),
    ("cat scopes/scope_1.txt | xargs xargs rm", "xargs may not run xargs"),
    ("cat scopes/scope_1.txt | xargs", "needs the command"),
    # malformed
    ("rg 'unterminated", "not closed"),
    ("", "empty"),
    ("   ", "empty"),
    ("rg common |", "empty"),
    ("rg", "no pattern"),
    ("rg -m", "needs a value"),
    ("rg --frobnicate common", "not allowed"),
    ("x" * 5000, "longer than"),
    ("cat | cat | cat | cat | cat | cat | cat", "at most 6 stages"),
]


@pytest.mark.parametrize("command, reason", REFUSED, ids=[c[:40] for c, _ in REFUSED])
def test_hostile_commands_are_refused_before_anything_runs(world, command, reason):
    root, sandbox = world
    before = snapshot(root)
    result = sandbox.run(command)
    assert result.refused and reason in result.refused, result.refused
    assert result.output == "" and snapshot(root) == before


CONTAINED = [
    "cat corpus/big.txt",  # 2.4 MB: cut at the stage limit
    "rg -n e corpus/big.txt",  # a flood of matches: cut at the limit
    "cat scopes/many.txt | xargs -n 1 rg common",  # 3,000 processes one after another: stopped at the deadline
    "cat",  # would wait for a terminal in a shell; here stdin is empty
    "tail -n 3",
    "rg -e --files corpus/d001.txt",  # a pattern that looks like a flag is a pattern (passed with -e)
    "cat -- -rf",  # a file named like a flag stays a file name
    "rg -j 8 common corpus",  # asks for threads: runs with -j1 anyway
    "grep -r TOP corpus",  # recursion does not follow the planted link
    "rg TOP corpus",  # neither does ripgrep
]


def test_contained_commands_stay_inside_their_limits(world):
    root, sandbox = world
    before = snapshot(root)
    results = {command: sandbox.run(command) for command in CONTAINED}
    assert all(r.refused is None for r in results.values())
    assert results["cat corpus/big.txt"].cut and len(results["cat corpus/big.txt"].output) <= 1 << 20
    assert results["rg -n e corpus/big.txt"].cut
    assert results["cat scopes/many.txt | xargs -n 1 rg common"].timed_out
    assert results["cat"].output == "" and results["tail -n 3"].output == ""
    assert results["rg -e --files corpus/d001.txt"].status == 1  # searched for the text '--files': no match
    assert "No such file" in results["cat -- -rf"].stderr
    assert "TOP SECRET" not in results["grep -r TOP corpus"].output + results["rg TOP corpus"].output
    assert snapshot(root) == before


def test_nothing_is_written_even_by_a_program_that_tries(world, tmp_path):
    """Defence in depth: a process that gets past the rules still cannot write a file (RLIMIT_FSIZE 0)."""
    root, sandbox = world
    target = tmp_path / "outside" / "written.txt"
    argv = ["/usr/bin/tee", str(target)] if Path("/usr/bin/tee").exists() else pytest.skip("no tee")
    out, status, err, timed_out, cut = sandbox._spawn(argv, b"data\n",
                                                      deadline=__import__("time").monotonic() + 5, stop=None)
    assert status != 0 and (not target.exists() or target.stat().st_size == 0)


def test_a_sort_that_spills_creates_no_file_anywhere(world):
    """RLIMIT_FSIZE stops writes, not the creation of an empty file: sort past its buffer would create a temporary
    file in /tmp. The sandbox's temporary folder cannot exist, so the spill fails before any file is created."""
    root, sandbox = world
    before = snapshot(root)
    argv = ["/usr/bin/sort", "-S", "2K", str(root / "corpus_files" / "docs" / "big.txt")]
    if not Path(argv[0]).exists():
        pytest.skip("no /usr/bin/sort")
    out, status, err, timed_out, cut = sandbox._spawn(argv, b"", deadline=__import__("time").monotonic() + 5, stop=None)
    assert status != 0 and out == b""
    assert f"cannot create temporary file in '{NO_TEMPORARY_FOLDER}'" in err, err
    assert snapshot(root) == before
    # sort within its buffer needs no temporary file and works as before
    assert sandbox.run("sort -r corpus/d001.txt").output.splitlines()[0] == "the common word appears here"


def test_a_search_is_cut_only_past_the_matches_asked_for(world):
    """RARG's default m = 60 at its boundary: the corpus holds exactly 60 documents with "common", one match
    each. Asked for 60, the search runs to its end (not cut, so the agent is told "60 matches", not "more than
    60"); asked for 59, it is cut."""
    from garen_infer.methods.rarg import RargConfig

    _, sandbox = world
    limit = RargConfig().max_matches
    assert limit == 60 == len(DOCS)
    exact = sandbox.run("rg -n common corpus", unit_limit=limit)
    assert not exact.cut and len(exact.output.splitlines()) == limit
    assert sandbox.run("rg -n common corpus", unit_limit=limit - 1).cut


def test_scope_order_survives_ripgrep_and_j1_is_always_there(world):
    root, sandbox = world
    scope = (root / "work" / "scopes" / "scope_1.txt").read_text().split()
    for command in (
        "cat scopes/scope_1.txt | xargs -d '\\n' rg -n common",
        "cat scopes/scope_1.txt | xargs -d '\\n' rg -j 8 -n common",  # the model's -j is dropped
        "cat scopes/scope_1.txt | xargs rg --threads=4 common",
    ):
        files = [line.split(":", 1)[0] for line in sandbox.run(command).output.splitlines()]
        assert files == scope  # every document matches once, in scope order (reverse of name order)
    # long scopes are split over several invocations, as xargs does: still one ordered stream
    small = Sandbox(root / "corpus_files" / "docs", root / "work", Limits(xargs_chunk_bytes=100))
    result = small.run("cat scopes/scope_1.txt | xargs -d '\\n' rg -l common")
    assert result.output.split() == scope
    assert small.run("cat scopes/scope_1.txt | xargs -n 7 rg -l common").output.split() == scope


def test_directory_searches_are_in_path_order(world):
    _, sandbox = world
    files = [line.split(":", 1)[0] for line in sandbox.run("rg -l common").output.splitlines()]
    assert files == sorted(files) and len(files) == len(DOCS)


def test_allowed_pipelines_give_what_a_shell_would(world):
    _, sandbox = world
    assert sandbox.run("sed -n '2,3p' corpus/d007.txt").output == "the common word appears here\nnumber 7\n"
    assert sandbox.run("head -1 corpus/d007.txt | wc -c").output.strip() == "11"
    assert sandbox.run("rg -c common | sort -t: -k2 -n | tail -1").output.strip().endswith(":1")
    assert sandbox.run("cat scopes/scope_1.txt | head -3 | xargs cat | grep -c document").output.strip() == "3"
    assert sandbox.run("rg -l 'number 1[0-2]$' corpus | sort | uniq -c | wc -l").output.strip() == "3"
    assert sandbox.run("cut -d ' ' -f 2 corpus/d042.txt").output.splitlines()[0] == "42"
    assert sandbox.run("rg -e nothing-matches corpus").status == 1
