"""Reading a shell command line without running it, for Bash permission rules.

:func:`split_command` cuts a line into its simple commands and notes what in it no prefix
rule can vouch for; :func:`command_matches` is Claude Code's Bash rule pattern match;
:func:`program_forms` reads a simple command as the program it runs, for deny rules;
:func:`program_prefix` names the program and its subcommand, for remembering answers. Pure.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class CommandLine:
    parts: tuple[str, ...]  # the simple commands, trimmed, in order
    # What keeps an allow rule from vouching for the line ("command substitution", ...);
    # "" when every part can be judged on its own text.
    opaque: str
    # Every such reason, in order (``opaque`` is the first).
    reasons: tuple[str, ...] = ()


_OPERATORS = ("&&", "||", "|&")


@lru_cache(maxsize=256)
def split_command(command: str) -> CommandLine:
    """Cut at ``&&``, ``||``, ``|&``, ``;``, ``|``, ``&`` and newlines outside quotes, and at
    the edges of ``$(...)``, backticks, ``<(...)`` and subshells, so the text inside them is a
    part too (a substitution inside double quotes gives its commands after the others).
    Single quotes make everything literal; double quotes all but ``$(`` and backticks; a
    backslash escapes the next character.

    A ``#`` starting a word begins a comment that runs to the end of its line, as in bash.

    Opaque: command or process substitution, a subshell, a here-document (its body would read
    as commands), an unterminated quote, an ANSI-C quoted string (``$'...'``), or output
    redirected to (or a file opened read-write on) a file other than ``/dev/null`` (``2>&1``
    and ``>&2`` are fine).
    """
    parts: list[str] = []
    nested: list[str] = []  # commands substituted inside double quotes, for deny rules
    opaque: list[str] = []
    current: list[str] = []
    quote = ""
    index = 0

    def cut() -> None:
        text = "".join(current).strip()
        if text:
            parts.append(text)
        current.clear()

    while index < len(command):
        char, two = command[index], command[index : index + 2]
        step = 1
        if quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":
            step = 2
        elif quote == '"':
            quote = "" if char == '"' else quote
            if char == "`" or two == "$(":
                opaque.append("command substitution")
                step, inner = _substitution(command[index:])
                nested.extend(split_command(inner).parts)
        elif two == "$'":
            # ANSI-C quoting, where a backslash escapes a quote: read otherwise, a second
            # command would hide in what looks like a quoted argument.
            opaque.append("an ANSI-C quoted string ($'...')")
            quote = "'"
            step = 2
        elif char == "#" and (index == 0 or command[index - 1] in " \t\n;&|()"):
            # A comment runs to the end of its line, quotes in it included: bash runs the
            # next line whatever the comment holds.
            end = command.find("\n", index)
            step = (len(command) if end < 0 else end) - index
            index += step
            continue
        elif char in "'\"":
            quote = char
        elif two in ("$(", "<(", ">(") or char == "`":
            opaque.append("command substitution")
            cut()
            index += 1 if char == "`" else 2
            continue
        elif char in "()":
            opaque.append("a subshell")
            cut()
            index += 1
            continue
        elif two in _OPERATORS or char in ";\n|" or (char == "&" and two != "&>"):
            cut()
            index += 2 if two in _OPERATORS else 1
            continue
        elif char in "<>":
            step = _redirection(command[index:], opaque)
        current.append(command[index : index + step])
        index += step
    if quote:
        opaque.append("an unterminated quote")
    cut()
    return CommandLine((*parts, *nested), opaque[0] if opaque else "", tuple(opaque))


def _substitution(rest: str) -> tuple[int, str]:
    """The length of the ``$(...)`` or backquoted command ``rest`` starts with, and the
    command inside; an unclosed one runs to the end."""
    opener, closer = ("`", "`") if rest.startswith("`") else ("$(", ")")
    depth = 1
    for index in range(len(opener), len(rest)):
        if rest[index] == closer:
            depth -= 1
        elif opener == "$(" and rest[index] == "(":
            depth += 1
        if depth == 0:
            return index + 1, rest[len(opener) : index]
    return len(rest), rest[len(opener) :]


def _redirection(rest: str, opaque: list[str]) -> int:
    """The length of the redirection operator ``rest`` starts with; notes writes to a file."""
    if rest.startswith("<<<"):
        return 3
    if rest.startswith("<<"):
        opaque.append("a here-document")
        return 2
    if rest.startswith("<>"):  # opens the file for writing too (and makes it)
        target = re.match(r"[ \t]*([^\s;&|<>()]*)", rest[2:])
        if (target.group(1) if target else "") != "/dev/null":
            opaque.append("a file opened for writing")
        return 2
    if rest.startswith("<"):
        return 2 if rest.startswith("<&") else 1
    length = 2 if rest[1:2] in (">", "|", "&") else 1
    target = re.match(r"[ \t]*([^\s;&|<>()]*)", rest[length:])
    word = target.group(1) if target else ""
    duplicated = rest[1:2] == "&" and re.fullmatch(r"\d+-?|-", word)
    if word != "/dev/null" and not duplicated:
        opaque.append("output redirected to a file")
    return length


def command_matches(pattern: str, command: str) -> bool:
    """Claude Code's Bash rule match. ``cmd:*``: ``cmd`` itself or ``cmd `` and more (a word
    boundary: ``ls:*`` misses ``lsof``). With a ``*`` elsewhere: ``*`` is any text, ``\\*`` a
    star, ``\\\\`` a backslash, and a single trailing `` *`` is optional. Else exact."""
    if pattern.endswith(":*"):
        prefix = pattern[:-2]
        return command == prefix or command.startswith(prefix + " ")
    regex = _wildcard(pattern)
    return command == pattern if regex is None else regex.fullmatch(command) is not None


@lru_cache(maxsize=256)
def _wildcard(pattern: str) -> re.Pattern[str] | None:
    pieces = re.split(r"(\\\*|\\\\|\*)", pattern)
    stars = pieces.count("*")
    if not stars:
        return None
    regex = "".join({"*": ".*", "\\*": r"\*", "\\\\": r"\\"}.get(p, re.escape(p)) for p in pieces)
    if stars == 1 and pattern.endswith(" *"):
        regex = regex.removesuffix(re.escape(" ") + ".*") + "( .*)?"
    return re.compile(regex, re.DOTALL)


ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")
# Words that run the command after them: wrappers, and shell keywords that start a part.
WRAPPERS = frozenset(
    {
        *("sudo", "doas", "env", "command", "builtin", "exec", "nohup", "time", "nice", "timeout"),
        *("stdbuf", "xargs", "if", "then", "else", "elif", "do", "while", "until", "!", "{", "}"),
    }
)
_WRAPPER_ARGUMENT = re.compile(r"-\S*|\d+(\.\d+)?[smhd]?")  # `-n`, `10`, `30s`


def program_forms(part: str) -> Iterator[str]:
    """The simple command as written, then as the program it runs: quotes removed, words
    single-spaced, ``/bin/rm`` as ``rm``, and leading ``VAR=value`` words and wrappers (with
    their options and durations) dropped one by one."""
    yield part
    try:
        words = shlex.split(part)
    except ValueError:
        words = part.split()
    index = 0
    while index < len(words):
        rest = words[index:]
        yield " ".join(rest)
        yield " ".join([os.path.basename(rest[0]), *rest[1:]])
        if ASSIGNMENT.fullmatch(words[index]):
            index += 1
        elif words[index] in WRAPPERS:
            index += 1
            while index < len(words) and _WRAPPER_ARGUMENT.fullmatch(words[index]):
                index += 1
        else:
            return


_SUBCOMMANDS = frozenset(
    {
        *("git", "npm", "pnpm", "yarn", "bun", "uv", "cargo", "go", "make", "docker", "gh", "pip"),
        *("pip3", "poetry", "kubectl", "dotnet", "terraform", "helm"),
    }
)
_RUNNERS = frozenset(("npm run", "pnpm run", "yarn run", "bun run", "uv run", "poetry run"))
_INTERPRETERS = frozenset(
    {
        *("python", "python3", "node", "ruby", "perl", "php", "deno", "bash", "sh", "zsh", "fish"),
        *("npx", "bunx", "pnpx", "uvx"),
    }
)
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def program_prefix(part: str) -> str | None:
    """The words of a simple command that name what it runs: the program (``ls``), with its
    subcommand (``git diff``, ``cargo test``), with the script a runner or interpreter runs
    (``npm run test``, ``python -m pytest``, ``python tools/x.py``). None when no such words
    stand for the command: an interpreter with code or options (``python -c ...``), a
    wrapper (``sudo``), a ``VAR=value`` first word, an option before the subcommand
    (``git -C dir diff``), quotes or other shell syntax in those words."""
    words = part.split()
    if not words:
        return None
    size = 1
    if words[0] in _SUBCOMMANDS:
        size = 3 if " ".join(words[:2]) in _RUNNERS else 2
    elif words[0] in _INTERPRETERS:  # never the interpreter alone: it runs any code
        size = 3 if words[1:2] == ["-m"] else 2
    chosen = words[:size]
    prefix = " ".join(chosen)
    plain = (
        len(words) >= size
        and words[0] not in WRAPPERS
        and not ASSIGNMENT.fullmatch(words[0])
        and all(_PLAIN_WORD.fullmatch(word) for word in chosen)
        and not any(word.startswith("-") for word in chosen[1:] if word != "-m")
    )
    return prefix if plain and command_matches(prefix + ":*", part) else None
