"""Which programs and flags the bash tool accepts, and what each argument is (a pattern, a path, a number).

An allow-list, not a deny-list: a flag that is not listed is refused, so a flag added by a later ripgrep cannot
slip through. Flags that run other programs (``rg --pre``, ``rg -z``, ``rg --hostname-bin``,
``sort --compress-program``), write files (``sort -o``, ``sed -i``, ``uniq IN OUT``, ``sort -S 2K`` and
``sort -T``, which spill to temporary files), follow symbolic links out
of the corpus (``rg -L``, ``grep -R``), list the corpus (``rg --files``), wait forever (``tail -f``) or read
files named inside their own arguments (``-f FILE``) are refused with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from garen_infer.agent.shell_parse import Refused


@dataclass(frozen=True)
class Spec:
    plain: frozenset[str]  # flags without a value: "-i", "--ignore-case"
    valued: frozenset[str]  # flags that take a value: "-m", "--max-count"
    refused: dict[str, str] = field(default_factory=dict)  # flag -> why
    pattern_flags: frozenset[str] = frozenset()  # valued flags whose value is a search pattern (-e)
    numeric: frozenset[str] = frozenset()  # valued flags whose value must be an integer
    first_positional_is_pattern: bool = False  # rg / grep: unless a pattern flag was given
    numeric_shorthand: bool = False  # head -5 / tail -5 means -n 5


def _s(text: str) -> frozenset[str]:
    return frozenset(text.split())


RUNS_PROGRAM = "runs another program"
SPECS: dict[str, Spec] = {
    "rg": Spec(
        plain=_s(
            "-i --ignore-case -s --case-sensitive -S --smart-case -w --word-regexp -x --line-regexp -F --fixed-strings "
            "-v --invert-match -c --count --count-matches -l --files-with-matches --files-without-match -n "
            "--line-number -N --no-line-number -H --with-filename -I --no-filename -o --only-matching -U --multiline "
            "--multiline-dotall --column --no-column -b --byte-offset --heading --no-heading --vimgrep -0 --null -a "
            "--text --no-ignore --hidden -u --unrestricted --trim --no-trim -q --quiet --passthru --no-messages "
            "--crlf --null-data --line-buffered --block-buffered --json --no-unicode --binary --one-file-system "
            "--no-ignore-vcs --no-ignore-parent --no-ignore-dot --no-ignore-global --max-columns-preview "
            "--include-zero --stats --sort-files --no-config --ignore-case --no-require-git"
        ),
        valued=_s(
            "-e --regexp -m --max-count -A --after-context -B --before-context -C --context -g --glob --iglob -t "
            "--type -T --type-not -M --max-columns -j --threads -r --replace -E --encoding -d --max-depth --maxdepth "
            "--max-filesize --sort --sortr --context-separator --field-match-separator --field-context-separator "
            "--path-separator --color --colour --engine --dfa-size-limit --regex-size-limit --type-add"
        ),
        refused={
            "--pre": RUNS_PROGRAM + " on every file", "--pre-glob": RUNS_PROGRAM + " on every file",
            "-z": "runs other programs (decompressors)", "--search-zip": "runs other programs (decompressors)",
            "--hostname-bin": RUNS_PROGRAM, "-L": "follows symbolic links out of the corpus",
            "--follow": "follows symbolic links out of the corpus",
            "--files": "lists the whole corpus; search the scope files from embed_recall instead",
            "--type-list": "prints no document text", "-f": "reads patterns from a file; give them with -e",
            "--file": "reads patterns from a file; give them with -e",
            "--ignore-file": "reads a file named in its value",
            "-p": "colours its output", "--pretty": "colours its output", "--debug": "floods the output",
            "--trace": "floods the output", "--generate": "prints no document text",
        },
        pattern_flags=_s("-e --regexp"),
        numeric=_s("-m --max-count -A --after-context -B --before-context -C --context -M --max-columns -j "
                   "--threads -d --max-depth --maxdepth"),
        first_positional_is_pattern=True,
    ),
    "grep": Spec(
        plain=_s(
            "-i -y --ignore-case --no-ignore-case -v --invert-match -w --word-regexp -x --line-regexp -c --count -l "
            "--files-with-matches -L --files-without-match -n --line-number -h --no-filename -H --with-filename -o "
            "--only-matching -q --quiet --silent -s --no-messages -E --extended-regexp -F --fixed-strings -G "
            "--basic-regexp -P --perl-regexp -r --recursive -z --null-data -Z --null -a --text -I -b --byte-offset "
            "-T --initial-tab -U --binary --line-buffered"
        ),
        valued=_s(
            "-e --regexp -m --max-count -A --after-context -B --before-context -C --context --include --exclude "
            "--exclude-dir --color --colour --label --binary-files -d --directories"
        ),
        refused={
            "-R": "follows symbolic links out of the corpus",
            "--dereference-recursive": "follows symbolic links out of the corpus",
            "-f": "reads patterns from a file; give them with -e",
            "--file": "reads patterns from a file; give them with -e",
            "--exclude-from": "reads a file named in its value", "-D": "reads devices", "--devices": "reads devices",
        },
        pattern_flags=_s("-e --regexp"),
        numeric=_s("-m --max-count -A --after-context -B --before-context -C --context"),
        first_positional_is_pattern=True,
    ),
    "cat": Spec(
        plain=_s("-n --number -b --number-nonblank -s --squeeze-blank -E --show-ends -A --show-all -T "
                 "--show-tabs -v --show-nonprinting -e -t"),
        valued=frozenset(),
    ),
    "head": Spec(
        plain=_s("-q --quiet --silent -v --verbose -z --zero-terminated"),
        valued=_s("-n --lines -c --bytes"), numeric=_s("-n --lines -c --bytes"), numeric_shorthand=True,
    ),
    "tail": Spec(
        plain=_s("-q --quiet --silent -v --verbose -z --zero-terminated"),
        valued=_s("-n --lines -c --bytes"), numeric=_s("-n --lines -c --bytes"), numeric_shorthand=True,
        refused={"-f": "waits for the file to grow, forever", "-F": "waits for the file to grow, forever",
                 "--follow": "waits for the file to grow, forever", "--retry": "waits for files to appear",
                 "--pid": "waits on another process", "-s": "only matters with -f",
                 "--sleep-interval": "only matters with -f"},
    ),
    "wc": Spec(
        plain=_s("-l --lines -w --words -c --bytes -m --chars -L --max-line-length"), valued=frozenset(),
        refused={"--files0-from": "reads a file named in its value"},
    ),
    "sort": Spec(
        plain=_s(
            "-b --ignore-leading-blanks -d --dictionary-order -f --ignore-case -g --general-numeric-sort -i "
            "--ignore-nonprinting -M --month-sort -h --human-numeric-sort -n --numeric-sort -r --reverse -V "
            "--version-sort -c -C --check -s --stable -u --unique -z --zero-terminated -m --merge"
        ),
        valued=_s("-k --key -t --field-separator"),
        refused={"-o": "writes a file", "--output": "writes a file", "-T": "writes temporary files",
                 "-S": "sets the buffer size; a small buffer spills to temporary files",
                 "--buffer-size": "sets the buffer size; a small buffer spills to temporary files",
                 "--temporary-directory": "writes temporary files", "--compress-program": RUNS_PROGRAM,
                 "--files0-from": "reads a file named in its value", "-R": "sorts in random order (not reproducible)",
                 "--random-sort": "sorts in random order (not reproducible)",
                 "--random-source": "reads a file named in its value",
                 "--parallel": "starts threads"},
    ),
    "uniq": Spec(
        plain=_s("-c --count -d --repeated -D -u --unique -i --ignore-case -z --zero-terminated"),
        valued=_s("-f --skip-fields -s --skip-chars -w --check-chars"),
        numeric=_s("-f --skip-fields -s --skip-chars -w --check-chars"),
    ),
    "cut": Spec(
        plain=_s("-s --only-delimited --complement -z --zero-terminated -n"),
        valued=_s("-d --delimiter -f --fields -c --characters -b --bytes --output-delimiter"),
    ),
    "sed": Spec(
        plain=_s("-n --quiet --silent -E -r --regexp-extended -s --separate -u --unbuffered -z --null-data"),
        valued=_s("-e --expression"), pattern_flags=_s("-e --expression"), first_positional_is_pattern=True,
        refused={"-i": "edits files in place", "--in-place": "edits files in place", "-f": "reads a script file",
                 "--file": "reads a script file", "--follow-symlinks": "follows symbolic links"},
    ),
    "xargs": Spec(
        plain=_s("-0 --null -r --no-run-if-empty"),
        valued=_s("-d --delimiter -n --max-args -L --max-lines"), numeric=_s("-n --max-args -L --max-lines"),
        refused={"-I": "is not supported here (items are appended at the end)", "-i": "is not supported here",
                 "--replace": "is not supported here", "-P": "runs commands in parallel",
                 "--max-procs": "runs commands in parallel",
                 "-a": "reads a file named in its value", "--arg-file": "reads a file named in its value",
                 "-p": "is interactive", "--interactive": "is interactive", "-o": "is interactive",
                 "--open-tty": "is interactive", "-E": "is not supported here", "-e": "is not supported here",
                 "-s": "is not supported here", "-x": "is not supported here"},
    ),
}
SEARCHERS = ("rg", "grep")
SED_SCRIPT = re.compile(r"\s*(?:\d+|\$)\s*(?:,\s*(?:\d+|\$)\s*)?p\s*|\s*/[^/\n]*/\s*p\s*")
NUMBER = re.compile(r"[+-]?\d{1,9}[kKmM]?")
NOT_ALLOWED = {
    "ls": "listing the corpus is not allowed; search the scope files that embed_recall writes",
    "find": "listing the corpus is not allowed; search the scope files that embed_recall writes",
    "tree": "listing the corpus is not allowed; search the scope files that embed_recall writes",
    "du": "listing the corpus is not allowed",
}
ALLOWED_NAMES = "rg, grep, cat, head, tail, sed -n, wc, sort, uniq, cut, and xargs feeding those"


@dataclass
class ParsedCommand:
    program: str
    flags: list[tuple[str, str | None]]  # (flag, value) in order, short clusters expanded
    patterns: list[str]  # search patterns (rg / grep / sed script)
    positionals: list[str]  # paths (or, for xargs, the inner command)


def parse_command(argv: list[str]) -> ParsedCommand:
    """Parse one stage's words against its program's allow-list; raises Refused naming the offending word."""
    program = argv[0]
    if program in NOT_ALLOWED:
        raise Refused(f"'{program}': {NOT_ALLOWED[program]}")
    if program not in SPECS:
        raise Refused(f"'{program}' is not allowed; the bash tool runs only {ALLOWED_NAMES}")
    spec = SPECS[program]
    flags, positionals = _split_words(program, spec, argv[1:])
    for name, value in flags:
        if name in spec.numeric and not NUMBER.fullmatch(value or ""):
            raise Refused(f"{program}: '{name}' needs a number, not '{value}'")
        if name in ("--color", "--colour") and value != "never":
            raise Refused(f"{program}: only --color=never is allowed")
    patterns = [v for n, v in flags if n in spec.pattern_flags and v is not None]  # valued: never None
    if spec.first_positional_is_pattern and not patterns and program != "xargs":
        if not positionals:
            raise Refused(f"{program}: no pattern given")
        patterns, positionals = [positionals[0]], positionals[1:]
    _check_program_rules(program, flags, patterns, positionals)
    return ParsedCommand(program, flags, patterns, positionals)


def _split_words(program: str, spec: Spec, words: list[str]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """Flags (short clusters such as ``-inC3`` expanded) and positional words, in order."""
    flags: list[tuple[str, str | None]] = []
    positionals: list[str] = []
    i, options_done = 0, False
    while i < len(words):
        word = words[i]
        i += 1
        if options_done or word == "-" or not word.startswith("-"):
            positionals.append(word)
            if program == "xargs":  # everything from the first non-option word on is the command to run
                positionals.extend(words[i:])
                break
            continue
        if word == "--":
            options_done = True
            continue
        if word.startswith("--"):
            name, eq, attached = word.partition("=")
            _check_known(program, spec, name)
            if name in spec.valued:
                value, i = _value(program, name, attached if eq else None, words, i)
                flags.append((name, value))
            elif eq:
                raise Refused(f"{program}: '{name}' takes no value")
            else:
                flags.append((name, None))
            continue
        if spec.numeric_shorthand and re.fullmatch(r"-\d+", word):
            flags.append(("-n", word[1:]))
            continue
        for j in range(1, len(word)):  # a cluster of short flags: -inC3, -m5, -e pattern
            name = "-" + word[j]
            _check_known(program, spec, name)
            if name in spec.valued:
                value, i = _value(program, name, word[j + 1 :] or None, words, i)
                flags.append((name, value))
                break
            flags.append((name, None))
    return flags, positionals


def _value(program: str, name: str, attached: str | None, words: list[str], i: int) -> tuple[str, int]:
    """A flag's value: attached (``-m5``, ``--max-count=5``, ``--regexp=``) or the next word."""
    if attached is not None:
        return attached, i
    if i >= len(words):
        raise Refused(f"{program}: '{name}' needs a value")
    return words[i], i + 1


def _check_known(program: str, spec: Spec, name: str) -> None:
    if name in spec.refused:
        raise Refused(f"{program} {name} is not allowed: it {spec.refused[name]}")
    if name not in spec.plain and name not in spec.valued:
        raise Refused(f"{program}: the flag '{name}' is not allowed here")


def _check_program_rules(program: str, flags, patterns: list[str], positionals: list[str]) -> None:
    names = {n for n, _ in flags}
    if program == "sed":
        if not names & {"-n", "--quiet", "--silent"}:
            raise Refused("sed is allowed only as 'sed -n' with a line-printing script such as '10,20p'")
        for script in patterns:
            if not SED_SCRIPT.fullmatch(script):
                raise Refused(f"sed script '{script}' is not allowed: use 'Np', 'N,Mp' or '/regex/p'")
    if program == "uniq" and len(positionals) > 1:
        raise Refused("uniq with a second file name writes to it; give at most one input")
    if program == "xargs":
        if not positionals:
            raise Refused("xargs needs the command it should run (one of rg, grep, cat, head, tail, sed -n, "
                          "wc, sort, uniq, cut)")
        if positionals[0] == "xargs":
            raise Refused("xargs may not run xargs")
        parse_command(positionals)  # the inner command's flags are checked now, its paths when items arrive
