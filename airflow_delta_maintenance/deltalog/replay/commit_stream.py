"""The one strict validation of one commit's lines (``model.validation``), fed in blocks of whole
lines as they are read — for a commit about to be copied into the published log, whose bytes are
streamed and never held whole.

Each line is parsed once. The caller may have line rules of its own (publish's: every line one JSON
object holding one key) that are looser than the strict ones and whose errors come first; they are
asked only about a line the strict rules could not accept as it is, and about the rest of its block
— so the outcome, and the error's wording, are those of running the caller's rules over the whole
block and then the strict ones.

The compiled scanner (``_log_lines`` of the optional accelerators) vouches for the plain ``add``
and ``remove`` lines that make up nearly all of a large commit and returns their paths; every other
line, and every line when it is not installed, is parsed and validated here. It only ever vouches
for lines the pure path accepts with the same path, so results never depend on it, only speed.

Without the scanner, a line is first parsed by orjson (a dependency; several times faster than the
stdlib's decoder with the strict hooks) and taken as parsed only when ``orjson.dumps`` gives back
exactly its bytes — the compact form every Delta writer writes. That equality proves what the strict
decoder's hooks and the tree walk would check: no duplicate key (dumps never writes one, so the
line holds none), no NaN/Infinity or number out of range (orjson refuses the first, and a number it
would read differently from ``json`` — an integer beyond 64 bits, ``-0``, ``1E5`` — does not come
back the same), valid UTF-8 and no lone surrogate (orjson refuses both; dumps writes no ``\\u``
escape of a non-control character), and, with at most ``MAX_NESTING`` brackets, no deep nesting.
Every other line goes the strict way below, which decides it and words its error as before.

An add's ``partitionValues`` keys must be partition columns of the table (``model.partition_keys``)
— the keys in effect (``PartitionKeys``: the table's, or a metaData of this commit's) are compared as
a set with a cached frozenset (the scanner compares them in C). The error waits for the end of the
commit (its metaData, wherever it sits, decides); a metaData that changes the keys after adds were
already checked asks the caller to feed the commit again from the start (``RescanCommit``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._runtime import accelerators
from ..errors import CorruptLogError
from ..model.partition_keys import check_partition_keys, partition_value_keys
from ..model.schema_validation import ORJSON as _orjson, STRICT_DECODER  # None without orjson: every line goes the strict way
from ..model.validation import MAX_NESTING, CommitRules, canonical_path, is_plain_add, loads_action, plain_adds_ok, require_commit_content, shallow_text, validate_action

__all__ = ["AVAILABLE", "CommitStreamValidator", "PartitionKeys", "PlainRules", "RescanCommit"]

_log_lines = accelerators.load("_log_lines")  # None: every line is parsed in Python
AVAILABLE = _log_lines is not None
# An older build's scanner does not check partition-value keys: used then only where none are known.
_SCAN_KEYS = bool(getattr(_log_lines, "PARTITION_KEYS", 0))
_MAX_SCAN_KEYS = 64

# The caller's own rules for one line (its number and bytes); raises to refuse it.
PlainRules = Callable[[int, bytes], None]

_JSON_SPACE = " \t\n\r"  # what json.loads allows around a value
_BLANK = " \t\n\r\x0b\x0c"  # what bytes.strip() removes: such a line is skipped
_KINDS = ("", "add", "remove")  # by the scanner's code
_BATCH = 256  # lines parsed at once: bounds the parsed objects held (~300 KiB of adds); larger costs more
_ADD_BODY = operator.itemgetter("add")
_ADD_LINE = operator.methodcaller("startswith", b'{"add":{')
_VALUES = operator.itemgetter("partitionValues")


@dataclass
class PartitionKeys:
    """The partition-value keys in effect while a run of commits is validated in order: the
    table's before the first (None: unknown, nothing checked), then each commit's own metaData's
    from that commit on (``CommitStreamValidator.finish`` moves it on)."""

    allowed: frozenset[str] | None


class RescanCommit(Exception):
    """A metaData changed the partition-value keys after adds of the same commit were checked
    against the old ones: validate the commit again from its start with ``keys`` (the commit's)."""

    def __init__(self, keys: frozenset[str] | None) -> None:
        super().__init__("the commit's metaData changes its partition-value keys")
        self.keys = keys


class CommitStreamValidator:
    """The strict rules for one commit, fed its blocks of whole lines in order: each line is
    validated as it comes, and the commit's own rules (one add per path, no add and remove of one
    file) keep their state across blocks. ``first``: the first action, as parsed.

    ``keys``: the partition-value keys in effect before this commit (``PartitionKeys``; None: not
    checked); ``commit_keys``: the keys of this commit's own metaData, known from a first pass
    (``RescanCommit``)."""

    def __init__(
        self, name: str, *, accelerated: bool = True, fast: bool = True, keys: PartitionKeys | None = None,
        commit_keys: frozenset[str] | None = None,
    ) -> None:
        self.name = name
        self.rules = CommitRules(name, canonical_path)
        self.number = 0
        self.actions = 0
        self.first: dict[str, Any] | None = None
        self._keys = keys
        self._rescanned = commit_keys is not None
        self._allowed = commit_keys if commit_keys is not None else keys.allowed if keys is not None else None
        self._adds_seen = False
        self._pending: CorruptLogError | None = None  # the first add whose keys the table lacks
        self._scanner = _log_lines.scan if accelerated and _log_lines is not None else None
        self._scan: Callable[[bytes], tuple[bytes, list[str]]] | None = None
        self._set_allowed(self._allowed)
        self._fast = _orjson is not None and fast

    def _set_allowed(self, allowed: frozenset[str] | None) -> None:
        """The keys adds are checked against from now on, and the scanner told them."""
        self._allowed = allowed
        scan = self._scanner
        if scan is None or allowed is None:
            self._scan = scan
        elif _SCAN_KEYS and len(allowed) <= _MAX_SCAN_KEYS:
            encoded = tuple(k.encode("utf-8", "surrogatepass") for k in allowed)
            self._scan = lambda block: scan(block, encoded)
        else:
            self._scan = None  # a scanner that cannot check the keys vouches for no add

    def _check_add(self, body: Any, number: int) -> None:
        """An add's partition-value keys (a validated add): a key the table lacks is remembered
        for ``finish`` (a metaData later in the commit may still change the keys)."""
        self._adds_seen = True
        allowed = self._allowed
        if allowed is not None and self._pending is None:
            values = body.get("partitionValues")
            if type(values) is dict and not allowed.issuperset(values):
                try:
                    check_partition_keys(body, allowed, self.name, number)
                except CorruptLogError as exc:
                    self._pending = exc

    def _metadata(self, body: Any) -> None:
        keys = partition_value_keys(body)
        if self._rescanned:
            return  # the commit's keys were known from the start
        if self._adds_seen and keys != self._allowed:
            raise RescanCommit(keys)
        self._set_allowed(keys)
        self._pending = None

    def _action(self, kind: str, body: Any, number: int) -> None:
        """Partition-value keys: an add is checked, a metaData changes them."""
        if kind == "add":
            self._check_add(body, number)
        elif kind == "metaData":
            self._metadata(body)

    def feed(self, block: bytes, plain: PlainRules | None = None) -> None:
        """Validate a block of whole lines; ``CorruptLogError`` names the first bad line.
        ``plain``: the caller's own rules, which win over the strict ones in the same block."""
        start = self.number
        try:
            self._validate(block, plain)
        except CorruptLogError:
            if plain is not None:  # the caller's rules over the rest of the block come first
                lines = block.split(b"\n")
                for number in range(self.number + 1, start + len(lines) + 1):
                    plain(number, lines[number - start - 1])
            raise

    def _validate(self, block: bytes, plain: PlainRules | None) -> None:
        if self._scan is not None:
            self._scanned(block, plain)
        elif self._fast:
            self._batched(block, plain)
        else:
            self._parsed(block, plain)

    def finish(self) -> None:
        if not self.actions:
            require_commit_content(self.name, b"")
        if self._pending is not None:
            raise self._pending
        if self._keys is not None:
            self._keys.allowed = self._allowed

    def _parsed(self, block: bytes, plain: PlainRules | None) -> None:
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:  # such a line is refused below: its bytes say how
            for raw in block.split(b"\n"):
                self.number += 1
                if raw.strip():
                    self._line(raw, None, plain)
            return
        for line in text.split("\n"):
            self.number += 1
            if line.strip(_BLANK):
                self._line(None, line, plain)

    def _batched(self, block: bytes, plain: PlainRules | None) -> None:
        """The block's lines parsed by orjson ``_BATCH`` at a time; runs of plain adds are checked
        and recorded together (``plain_adds_ok``, ``CommitRules.feed_adds``), the other lines one by
        one in order (``_element``). A batch with a line orjson cannot parse (a blank one too) goes
        line by line (``_round_trip``); anything a run's check refuses goes one by one, which
        decides and words the error exactly as the strict way would."""
        lines = block.split(b"\n")
        trailing = len(lines) > 1 and not lines[-1]  # a whole commit's bytes end with a newline
        if trailing:
            lines.pop()
        for start in range(0, len(lines), _BATCH):
            part = lines[start : start + _BATCH]
            try:
                elements = list(map(_orjson.loads, part))
            except ValueError:  # orjson.JSONDecodeError
                self._round_trip(part, plain)
                continue
            same = list(map(bytes.__eq__, map(_orjson.dumps, elements), part))
            # Nearly every batch of a large commit: adds only. dumps gave back each line, which
            # begins {"add":{ — so each is a dict whose first key is "add"; one key, so no other.
            if all(same) and all(map(_ADD_LINE, part)) and {*map(len, elements)} == {1}:
                self._adds(elements, part, plain)
                continue
            adds = [s and type(e) is dict and len(e) == 1 and "add" in e for e, s in zip(elements, same, strict=True)]
            i, n = 0, len(part)
            while i < n:
                if not adds[i]:
                    self._element(elements[i], part[i], same[i], plain)
                    i += 1
                    continue
                try:
                    j = adds.index(False, i)
                except ValueError:
                    j = n
                self._adds(elements[i:j], part[i:j], plain)
                i = j
        if trailing:
            self.number += 1

    def _adds(self, elements: list[Any], raws: list[bytes], plain: PlainRules | None) -> None:
        """A run of ``add`` lines that round-trip (see ``_batched``)."""
        bodies = list(map(_ADD_BODY, elements))
        paths = plain_adds_ok(bodies)
        first = self.number + 1
        allowed = self._allowed
        if (
            paths is not None and (allowed is None or all(map(allowed.issuperset, map(_VALUES, bodies))))
            and "\nfile:/" not in "\n" + "\n".join(paths)  # no path in file:/ form (one holding "\nfile:/" goes one by one)
            and self.rules.feed_adds(paths, range(first, first + len(paths)))
        ):
            self.number += len(paths)
            self.actions += len(paths)
            self._adds_seen = True
            if self.first is None:
                self.first = elements[0]
            return
        for element, raw in zip(elements, raws, strict=True):
            self._element(element, raw, True, plain)

    def _element(self, action: Any, raw: bytes, same: bool, plain: PlainRules | None) -> None:
        """The next line, parsed by orjson as ``action``; ``same``: ``dumps(action) == raw``."""
        self.number += 1
        if same and type(action) is dict and len(action) == 1:
            body = action.get("add")
            if body is not None and is_plain_add(body):  # nests 3 deep: no bracket count needed
                path = body["path"]
                self.rules.feed_file("add", canonical_path(path), self.number, None, path)
                self._check_add(body, self.number)
            elif raw.count(b"{") + raw.count(b"[") <= MAX_NESTING:
                kind = validate_action(action, self.name, self.number, shallow=True)
                self.rules.feed(kind, action[kind], self.number)
                self._action(kind, action[kind], self.number)
            else:
                self._line(raw, raw.decode("utf-8"), plain)  # dumps wrote it: valid UTF-8
                return
            self.actions += 1
            if self.first is None:
                self.first = action
        elif raw.strip():  # the strict way decides, and words the error
            try:
                text: str | None = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            self._line(raw, text, plain)

    def _round_trip(self, lines: list[bytes], plain: PlainRules | None) -> None:
        """Line by line: each parsed by orjson alone (a line it cannot parse goes the strict way)."""
        loads, dumps = _orjson.loads, _orjson.dumps
        for raw in lines:
            try:
                action = loads(raw)
            except ValueError:  # orjson.JSONDecodeError; a blank line too: the strict way decides
                self._element(None, raw, False, plain)
                continue
            self._element(action, raw, dumps(action) == raw, plain)

    def _scanned(self, block: bytes, plain: PlainRules | None) -> None:
        assert self._scan is not None
        codes, paths = self._scan(block)
        first_add = codes.find(1)  # a metaData after it changes the keys the scanner checked them by
        start = number = self.number
        lines: list[bytes] | None = None
        feed_file, kinds = self.rules.feed_file, _KINDS
        clean = 0
        path = iter(paths)
        allowed = self._allowed
        rest: list[bytes] = []
        try:
            for code in codes:
                number += 1
                if not code:
                    continue
                if code != 3 and self.first is not None:
                    feed_file(kinds[code], next(path), number)
                    clean += 1
                    continue
                if code != 3:
                    next(path)  # the first action is parsed here: its in-commit timestamp is asked for
                if lines is None:
                    lines = block.split(b"\n")
                self.number = number
                if 0 <= first_add < number - start - 1:
                    self._adds_seen = True
                raw = lines[number - start - 1]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    self._line(raw, None, plain)
                else:
                    self._line(raw, text, plain)
                if self._allowed is not allowed:  # a metaData changed the keys: the rest of the block by them
                    rest = lines[number - start :]
                    break
        finally:
            self.number = number
            self.actions += clean
        if first_add >= 0:
            self._adds_seen = True
        if rest:
            self._validate(b"\n".join(rest), plain)

    def _line(self, raw: bytes | None, text: str | None, plain: PlainRules | None) -> None:
        """One non-blank line: parsed once with the strict hooks; whatever that refuses or takes
        for more than one key goes the exact way (the caller's rules, then ``loads_action``)."""
        action: Any = None
        if text is not None:
            try:
                action, end = STRICT_DECODER.raw_decode(text)
                if end != len(text) and text[end:].strip(_JSON_SPACE):
                    action = None
            except (ValueError, RecursionError):
                action = None
        if isinstance(action, dict) and len(action) == 1:
            assert text is not None
            kind = validate_action(action, self.name, self.number, shallow=shallow_text(text))
        else:
            raw = raw if raw is not None else text.encode() if text is not None else b""
            if plain is not None:
                plain(self.number, raw)
            action = loads_action(raw, self.name, self.number)
            kind = next(iter(action))
        self.rules.feed(kind, action[kind], self.number)
        self._action(kind, action[kind], self.number)
        self.actions += 1
        if self.first is None:
            self.first = action
