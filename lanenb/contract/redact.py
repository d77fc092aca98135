"""Keep secret values out of everything lanenb stores or shows (registry, ``jobs show``,
``describe``, rendered manifests, MLflow params, logs): the one secret rule.

A job's ``env`` is the usual way to hand a rank a credential (``WANDB_API_KEY``, an S3
token...). Its *value* must reach the ranks, but never the SQLite registry (readable by
anyone who can read ``LANENB_HOME``), a printed manifest or a notebook output. A secret is
known three ways, so the rule needs no configuration:

* **by name**: a variable whose name contains one of :data:`SECRET_WORDS`;
* **by reference**: ``secret:SECRET/KEY`` names a Kubernetes Secret; the reference is not
  itself secret and is kept, so a stored job can still say where its credential comes from;
* **by shape**, inside any value: URL userinfo (``https://user:PASS@host``, a database URL,
  a proxy), query tokens of presigned / SAS URLs (``X-Amz-Signature=``, ``sig=``,
  ``token=``...), ``Bearer`` tokens and known key formats (``AKIA...``, ``ghp_...``,
  ``hf_...``, ``sk-...``...). Only the credential part reads ``<redacted>``: a proxy URL still
  shows its host.

Logs are the hard case: a rank may print a secret's value, and the reader (another kernel,
the server's feeds, ``lanenb jobs logs``) only has the registry's redacted spec. So the
submitting process records a keyed **fingerprint** of every secret value under
``$LANENB_HOME/secrets`` (:func:`remember_secrets`): a per-home random key (0600) and, per
value, its length, a 16-bit tag of its first characters and a keyed BLAKE2b hash of the whole.
:func:`redact_text` finds a value again in any line from those alone, on every backend; the
value itself is never written anywhere. Whoever can read the key file can test guesses of a
weak password against the hash, as with any password hash: the key lives beside the registry,
owner-only, and a strong credential cannot be guessed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lanenb.home import lanenb_home, make_private_dir
from lanenb.launch.lines import LogLine

if TYPE_CHECKING:
    from lanenb.contract.backend import LogChunk

__all__ = [
    "REDACTED",
    "SECRET_REF_PREFIX",
    "SECRET_WORDS",
    "MIN_SECRET_LEN",
    "Fingerprints",
    "is_secret_name",
    "is_secret_ref",
    "is_secret",
    "secret_spans",
    "secret_parts",
    "secret_values",
    "redact_shapes",
    "redact_value",
    "redact_env",
    "redact_env_list",
    "redact_data",
    "redact_spec",
    "redacted_fields",
    "redact_text",
    "redact_line",
    "redact_chunk",
    "redact_output",
    "redact_status",
    "remember_secrets",
    "inherited_secrets",
    "spellings",
    "fingerprints",
]

REDACTED = "<redacted>"
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "CREDENTIAL", "AUTH",
                "PRIVATE")
SECRET_REF_PREFIX = "secret:"
# Shorter values are neither fingerprinted nor replaced: "1" replaced everywhere would garble
# every line and protect nothing.
MIN_SECRET_LEN = 4

_SECRET_NAME = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)
# query parameters that carry a signature or a token without saying TOKEN/KEY/SECRET in their name
_QUERY_SECRETS = {"sig", "signature", "x-amz-signature", "x-goog-signature", "sas", "sv_sig", "code"}
_SCHEME = r"\b[a-zA-Z][a-zA-Z0-9+.-]*://"
# (pattern, group): the group's text is the credential (0: the whole match)
_SHAPES: tuple[tuple[re.Pattern[str], int | str], ...] = (
    (re.compile(_SCHEME + r"[^\s:/?#@'\"]*:(?P<pw>[^\s/?#@'\"]+)@"), "pw"),  # scheme://user:PASSWORD@
    (re.compile(_SCHEME + r"(?P<tok>[^\s:/?#@'\"]{16,})@"), "tok"),  # scheme://TOKEN@ (GitHub, GitLab)
    (re.compile(r"[?&;](?P<name>[A-Za-z0-9_.-]+)=(?P<val>[^&#;\s'\"]+)"), "val"),  # ?X-Amz-Signature=...
    (re.compile(r"(?:\bBearer\s+|Authorization:\s*Basic\s+)(?P<tok>[A-Za-z0-9._~+/-]{12,}=*)", re.IGNORECASE), "tok"),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), 0),  # AWS access key ids
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), 0),  # GitHub tokens
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), 0),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), 0),  # GitLab
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), 0),  # Hugging Face
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), 0),  # OpenAI, Anthropic, Stripe...
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), 0),  # Slack
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), 0),  # Google API keys
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL), 0),
)


# one cheap search first: most log lines hold none of these, and then no pattern can match
_MAYBE = re.compile(r"://|[?&;][A-Za-z0-9_.-]+=|bearer|basic|AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|hf_|sk-|xox"
                    r"|AIza|PRIVATE KEY", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """True for variable names that carry credentials: ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``,
    ``DB_PASSWORD``, ``WANDB_API_KEY``...; case-insensitive substring match on purpose
    (``MY_S3_KEY_ID`` too: redacting one harmless value costs less than leaking one)."""
    return bool(_SECRET_NAME.search(str(name)))


def is_secret_ref(value: Any) -> bool:
    """``secret:NAME/KEY``: a reference to a Kubernetes Secret, safe to store and show."""
    return isinstance(value, str) and value.startswith(SECRET_REF_PREFIX)


def _query_secret(name: str) -> bool:
    return name.lower() in _QUERY_SECRETS or is_secret_name(name)


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds credentials by shape (URL userinfo, query tokens, known key formats),
    as sorted, non-overlapping ``(start, end)`` spans."""
    if not isinstance(text, str) or len(text) < MIN_SECRET_LEN or not _MAYBE.search(text):
        return []
    spans: list[tuple[int, int]] = []
    for pattern, group in _SHAPES:
        for m in pattern.finditer(text):
            if group == "val" and not _query_secret(m.group("name")):
                continue
            start, end = m.span(group)
            if end > start and text[start:end] != REDACTED:
                spans.append((start, end))
    return _merge(spans)


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in reversed(spans):
        text = text[:start] + REDACTED + text[end:]
    return text


def secret_parts(text: str) -> list[str]:
    """The credentials found by shape in ``text`` (what :func:`redact_shapes` replaces)."""
    return [text[s:e] for s, e in secret_spans(text)]


def redact_shapes(text: str) -> str:
    """``text`` with every credential found by shape replaced by :data:`REDACTED`."""
    return _replace(text, secret_spans(text)) if isinstance(text, str) else text


def is_secret(name: str, value: Any) -> bool:
    """Whether ``name=value`` is a *literal* secret: a secret's name or a credential in the value,
    and not a ``secret:`` reference. What must never leave this process in clear (the
    Kubernetes backend moves these into a Secret, the AzureML backend refuses them)."""
    if not isinstance(value, str) or value == "" or is_secret_ref(value):
        return False
    return is_secret_name(name) or bool(secret_spans(value))


def redact_value(name: str, value: Any) -> Any:
    """``value``, :data:`REDACTED` when ``name`` is a secret's name (references are kept), and a
    string value with its credentials found by shape replaced otherwise."""
    if value is None or value == "" or is_secret_ref(value):
        return value
    if is_secret_name(name):
        return REDACTED
    return redact_shapes(value) if isinstance(value, str) else value


def redact_env(env: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``{NAME: value}`` with the secrets' values replaced by :data:`REDACTED`."""
    return {k: redact_value(k, v) for k, v in (env or {}).items()}


def redact_env_list(env: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """A copy of a Kubernetes container ``env`` list (``[{"name": ..., "value": ...}]``) with
    literal secret values redacted; ``valueFrom`` entries (secretKeyRef...) are kept as is."""
    out: list[dict[str, Any]] = []
    for item in env or []:
        item = dict(item)
        if "value" in item:
            item["value"] = redact_value(str(item.get("name", "")), item["value"])
        out.append(item)
    return out


def _redact_tree(data: Any, leaf: Callable[[str], str]) -> Any:
    """A copy of a JSON-like value with ``leaf`` applied to every string, and ``env`` entries
    (a container's list, a spec's mapping) redacted by name first."""
    if isinstance(data, str):
        return leaf(data)
    if isinstance(data, Mapping):
        out = {}
        for key, value in data.items():
            if key == "env" and isinstance(value, list):
                value = redact_env_list(value)
            elif key == "env" and isinstance(value, Mapping):
                value = redact_env(value)
            out[key] = _redact_tree(value, leaf)
        return out
    if isinstance(data, (list, tuple)):
        return [_redact_tree(v, leaf) for v in data]
    return data


def redact_data(data: Any) -> Any:
    """A copy of any JSON-like value (a manifest, a spec, pod args) with credentials found by
    shape replaced in every string, and container ``env`` lists redacted by name too."""
    return _redact_tree(data, redact_shapes)


def redact_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a spec's ``to_dict()`` with its ``env`` redacted and credentials found by shape
    replaced in every other string (fetch ``urls``/``mirrors``, ``extra_args``): the registry's form."""
    return dict(redact_data(spec))


def _strings(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a JSON-like value, with where it sits (``env.HF_TOKEN``, ``urls[0]``)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")


def _named_secrets(env: Mapping[str, Any] | None) -> list[str]:
    """The literal values of ``env``'s secret-named variables (references and empty ones left out)."""
    return [str(v) for k, v in (env or {}).items() if is_secret_name(k) and is_secret(k, v)]


def redacted_fields(spec: Mapping[str, Any]) -> list[str]:
    """The fields of a spec dict that hold :data:`REDACTED` (``env.HF_TOKEN``, ``urls[0]``...):
    what a spec read back from the registry lacks to run again (``retrain`` asks for them)."""
    return [where for where, text in _strings(spec) if REDACTED in text]


def secret_values(spec: Mapping[str, Any]) -> list[str]:
    """Every secret value in a spec dict: literal values of secret-named ``env`` variables and
    the credentials found by shape in any string. What :func:`remember_secrets` fingerprints."""
    env = spec.get("env")
    values = _named_secrets(env if isinstance(env, Mapping) else None)
    values += [part for _, text in _strings(spec) for part in secret_parts(text)]
    return sorted({v for v in values if len(v) >= MIN_SECRET_LEN and v != REDACTED})


# ---------------------------------------------------------------------- fingerprints
@dataclass(frozen=True)
class _Print:
    length: int
    digest: str


class Fingerprints:
    """The keyed fingerprints of the secret values of one ``LANENB_HOME`` (``secrets/key`` and
    ``secrets/prints``, both 0600): enough to find a value in a log line, not to recover it.

    Args:
        folder: where the key and the prints live (default ``$LANENB_HOME/secrets``).
    """

    KEY_BYTES = 32
    GRAM_CACHE = 1 << 16
    RECHECK_S = 1.0

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        self.folder = Path(folder) if folder is not None else lanenb_home() / "secrets"
        self._key: bytes | None = None
        self._stamp: tuple[int, int] | None = None
        self._by_anchor: dict[bytes, set[_Print]] = {}
        self._grams: dict[str, bytes] = {}  # anchor of each short text seen: log lines repeat theirs
        self._anchor_state: Any = None
        self._checked = -math.inf  # monotonic time of the last look at the prints file

    @property
    def key_path(self) -> Path:
        return self.folder / "key"

    @property
    def prints_path(self) -> Path:
        return self.folder / "prints"

    def _read_key(self, create: bool) -> bytes | None:
        if self._key is not None:
            return self._key
        try:
            key = self.key_path.read_bytes()
        except FileNotFoundError:
            if not create:
                return None
            key = self._make_key()
        if len(key) != self.KEY_BYTES:
            raise OSError(f"{self.key_path} is not a lanenb fingerprint key ({len(key)} bytes, want "
                          f"{self.KEY_BYTES}): move it aside; lanenb makes a new one (logs then no longer "
                          f"recognise the secrets of jobs submitted before)")
        self._key = key
        return key

    def _make_key(self) -> bytes:
        """A new random key, written once: a second process that races us keeps the first one."""
        make_private_dir(self.folder)
        tmp = self.folder / f".key.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_bytes(self.KEY_BYTES))
        finally:
            os.close(fd)
        try:
            os.link(tmp, self.key_path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        return self.key_path.read_bytes()

    @staticmethod
    def _hash(key: bytes, data: str, person: bytes, size: int) -> bytes:
        return hashlib.blake2b(data.encode("utf-8", "surrogatepass"), key=key, person=person,
                               digest_size=size).digest()

    def _anchor(self, key: bytes, text: str) -> bytes:
        anchor = self._grams.get(text)
        if anchor is None:
            if self._anchor_state is None:
                self._anchor_state = hashlib.blake2b(key=key, person=b"lanenb-anchor", digest_size=2)
            state = self._anchor_state.copy()  # cheaper than keying a new hash
            state.update(text.encode("utf-8", "surrogatepass"))
            if len(self._grams) >= self.GRAM_CACHE:
                self._grams.clear()
            anchor = self._grams[text] = state.digest()
        return anchor

    def _full(self, key: bytes, text: str) -> str:
        return self._hash(key, text, b"lanenb-secret", 16).hex()

    def add(self, values: Iterable[str]) -> int:
        """Fingerprint ``values`` (those of at least :data:`MIN_SECRET_LEN` characters) once each,
        in every spelling a log line may carry (:func:`spellings`); returns how many were new.
        Appends whole lines (``O_APPEND``), so kernels never mix theirs."""
        values = [s for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LEN and v != REDACTED
                  for s in spellings(v)]
        if not values:
            return 0
        key = self._read_key(create=True)
        assert key is not None
        self._load()
        lines = []
        for value in sorted(set(values)):
            anchor = self._anchor(key, value[:MIN_SECRET_LEN])
            entry = _Print(len(value), self._full(key, value))
            if entry in self._by_anchor.get(anchor, set()):
                continue
            self._by_anchor.setdefault(anchor, set()).add(entry)
            lines.append(json.dumps({"len": entry.length, "anchor": anchor.hex(), "hash": entry.digest}) + "\n")
        if lines:
            make_private_dir(self.folder)
            fd = os.open(self.prints_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, "".join(lines).encode())
            finally:
                os.close(fd)
        return len(lines)

    def _load(self) -> None:
        """(Re)read the prints when the file changed since the last read (another kernel added some);
        looked at once a second at most: a job's ranks start long after its prints are written."""
        now = time.monotonic()
        if now - self._checked < self.RECHECK_S:
            return
        self._checked = now
        try:
            st = self.prints_path.stat()
        except FileNotFoundError:
            self._stamp, self._by_anchor = None, {}
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        by_anchor: dict[bytes, set[_Print]] = {}
        for line in self.prints_path.read_text().splitlines():
            try:
                item = json.loads(line)
                by_anchor.setdefault(bytes.fromhex(item["anchor"]), set()).add(_Print(int(item["len"]), item["hash"]))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a full disk: the others still count
        self._stamp, self._by_anchor = stamp, by_anchor

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` holds a fingerprinted value: one 2-byte keyed hash per position, and the
        full hash only where that matches one of the prints (about one position in 65536)."""
        self._load()
        if not self._by_anchor or len(text) < MIN_SECRET_LEN:
            return []
        key = self._read_key(create=False)
        if key is None:
            return []
        found: list[tuple[int, int]] = []
        grams, by_anchor = self._grams, self._by_anchor
        for i in range(len(text) - MIN_SECRET_LEN + 1):
            gram = text[i:i + MIN_SECRET_LEN]
            anchor = grams.get(gram) or self._anchor(key, gram)
            for entry in by_anchor.get(anchor, ()):
                end = i + entry.length
                if end <= len(text) and self._full(key, text[i:end]) == entry.digest:
                    found.append((i, end))
        return _merge(found)


_FINGERPRINTS: dict[str, Fingerprints] = {}


def fingerprints(home: str | os.PathLike[str] | None = None) -> Fingerprints:
    """The (cached) fingerprints of ``home`` (default ``$LANENB_HOME``, looked up on every call)."""
    where = str(home) if home is not None else os.environ.get("LANENB_HOME") or "~"
    found = _FINGERPRINTS.get(where)
    if found is None:
        found = _FINGERPRINTS[where] = Fingerprints(Path(home or lanenb_home()) / "secrets")
    return found


def remember_secrets(spec: Mapping[str, Any], home: str | os.PathLike[str] | None = None) -> int:
    """Fingerprint the secret values of a spec dict (see :func:`secret_values`) so that every
    reader of this home redacts them from logs; called when a job is recorded. Returns how
    many values were new."""
    return fingerprints(home).add(secret_values(spec))


def spellings(value: str) -> list[str]:
    """``value`` as a line may carry it: raw, JSON-escaped (an ``@lanenb`` event's string escapes
    ``"``, ``\\`` and, ASCII-only, every non-ASCII letter) and repr-escaped (a Python traceback or
    a printed dict). A fingerprint of the raw value alone never matched inside an event line."""
    forms = [value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1]]
    return list(dict.fromkeys(f for f in forms if len(f) >= MIN_SECRET_LEN))


def inherited_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of secret-named variables in this process's environment (``AWS_SECRET_ACCESS_KEY``
    exported in the shell that started Jupyter): local ranks inherit them, and a rank may print
    one, so they are fingerprinted at submit like the spec's own."""
    return _named_secrets(dict(os.environ if environ is None else environ))


def redact_text(text: str, env: Mapping[str, Any] | None = None) -> str:
    """``text`` (a log line, a rendered document) with every secret replaced by :data:`REDACTED`:
    the values of ``env`` that are secrets (the submitting process's own, real ones), any value
    fingerprinted in ``$LANENB_HOME`` (any job's, from any kernel) and credentials by shape."""
    if not isinstance(text, str) or len(text) < MIN_SECRET_LEN:
        return text
    literal = sorted({s for v in _named_secrets(env) for s in spellings(v)}, key=len, reverse=True)
    for value in literal:
        text = text.replace(value, REDACTED)
    try:
        spans = fingerprints().spans(text)
    except OSError:
        spans = []  # an unreadable home: shapes and the env still apply
    return redact_shapes(_replace(text, spans))


def redact_line(line: LogLine, env: Mapping[str, Any] | None = None) -> LogLine:
    """``line`` with its text redacted (see :func:`redact_text`); the same object when clean."""
    text = redact_text(line.text, env)
    return line if text == line.text else LogLine(line.rank, text, line.source, line.stream)


def redact_chunk(chunk: LogChunk, env: Mapping[str, Any] | None = None) -> LogChunk:
    """A ``LogChunk`` whose lines are redacted (cursors and ``complete`` unchanged)."""
    # built as its own type: this module stays below the backend interface (no import cycle)
    return type(chunk)([(redact_line(line, env), cursor) for line, cursor in chunk.lines], chunk.cursor,
                       chunk.complete)


def redact_output(data: Any, env: Mapping[str, Any] | None = None) -> Any:
    """A copy of anything a backend returned (``describe()``'s dict, a status message, log tails):
    every string through :func:`redact_text` (fingerprints, ``env``'s secrets, shapes) and
    container ``env`` lists redacted by name. The job layer's seam: whatever the backend, a
    built-in or a plug-in, nothing it says reaches the registry, the server or a notebook raw."""
    return _redact_tree(data, lambda text: redact_text(text, env))


def redact_status(status: Any, env: Mapping[str, Any] | None = None) -> Any:
    """A ``JobStatus`` whose ``reason`` and ``message`` are redacted (the same object when clean):
    a rank's error message copied into a reason is stored in the registry and served."""
    reason = redact_text(status.reason, env) if status.reason else status.reason
    message = redact_text(status.message, env) if status.message else status.message
    if reason == status.reason and message == status.message:
        return status
    return dataclasses.replace(status, reason=reason, message=message)
