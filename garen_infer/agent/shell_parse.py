"""Splitting a model-written command line into a pipeline of argument lists, without a shell.

A quote-aware scan refuses everything a shell would do beyond running one pipeline of plain words: command
separators (``;``, newlines, ``&&``, ``||``), background jobs (``&``), redirections (``>``, ``<``, here-docs,
process substitution), subshells and grouping (``(``, ``)``, braces), command substitution (``$(...)``,
backticks), parameter expansion (``$VAR``, ``${...}``, ``$'...'``), globs (``*``, ``?``, ``[``: the shell would
expand them, we do not, so a quoted pattern is asked for instead), tilde expansion, comments and ``VAR=value``
prefixes. What is left has the same meaning in bash and in ``shlex.split``, which does the word splitting and
quote removal of each pipeline stage.
"""

from __future__ import annotations

import shlex

MAX_COMMAND_CHARS = 4000
MAX_STAGES = 6


class Refused(Exception):
    """The command is not run; ``str(self)`` tells the agent why, in one sentence."""


_UNQUOTED = {
    ";": "';' (one pipeline per call: use separate tool calls)",
    "&": "'&' and '&&' (background jobs and command lists)",
    ">": "'>' (redirections: nothing may be written)",
    "<": "'<' (redirections and process substitution)",
    "(": "'(' (subshells)",
    ")": "')' (subshells)",
    "{": "'{' (brace expansion and grouping; quote the pattern)",
    "}": "'}' (brace expansion and grouping; quote the pattern)",
    "`": "backticks (command substitution)",
    "$": "'$' (expansions and command substitution; put patterns in single quotes)",
    "\n": "newlines (one pipeline per call)",
    "\r": "carriage returns",
    "*": "an unquoted '*' (globs are not expanded here; quote the pattern, or use rg -g 'GLOB')",
    "?": "an unquoted '?' (globs are not expanded here; quote the pattern)",
    "[": "an unquoted '[' (globs are not expanded here; quote the pattern)",
}


def split_pipeline(command: str) -> list[list[str]]:
    """``cat a | xargs rg x`` -> ``[["cat", "a"], ["xargs", "rg", "x"]]``; raises Refused for anything else."""
    if not command or not command.strip():
        raise Refused("the command is empty")
    if len(command) > MAX_COMMAND_CHARS:
        raise Refused(f"the command is longer than {MAX_COMMAND_CHARS} characters")
    if "\x00" in command:
        raise Refused("the command contains a NUL byte")
    segments, start, quote, i = [], 0, None, 0
    while i < len(command):
        ch = command[i]
        if quote == "'":
            quote = None if ch == "'" else quote
        elif quote == '"':
            if ch == "\\":
                i += 1  # \" \\ \$ \` keep their next character
            elif ch == '"':
                quote = None
            elif ch in "$`":
                raise Refused("'$' and backticks inside double quotes are expansions, which are not allowed; "
                              "use single quotes")
        elif ch == "\\":
            if i + 1 < len(command) and command[i + 1] in "\n\r":
                raise Refused("line continuations are not allowed (one pipeline per call)")
            i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "|":
            if command[i + 1 : i + 2] in ("|", "&"):
                raise Refused("'||' and '|&' are not allowed (one plain pipeline per call)")
            segments.append(command[start:i])
            start = i + 1
        elif ch in _UNQUOTED:
            raise Refused(f"this sandbox does not allow {_UNQUOTED[ch]}")
        elif ch in "#~" and (i == 0 or command[i - 1] in " \t|"):
            raise Refused("comments ('#') and '~' expansion are not allowed" if ch == "#" else "'~' (home "
                          "directory) is not allowed")
        i += 1
    if quote:
        raise Refused("a quote is not closed")
    segments.append(command[start:])
    if len(segments) > MAX_STAGES:
        raise Refused(f"a pipeline may have at most {MAX_STAGES} stages")
    stages = []
    for segment in segments:
        try:
            words = shlex.split(segment, posix=True)
        except ValueError as err:  # cannot happen after the scan above, kept as a guard
            raise Refused(f"the command cannot be parsed ({err})") from None
        if not words:
            raise Refused("a pipeline stage is empty")
        if "=" in words[0] and not words[0].startswith("-"):
            raise Refused(f"environment assignments ('{words[0]}') are not allowed")
        stages.append(words)
    return stages
