"""Keeping secrets out of everything teamrun writes down (traces, cassettes, logs, spans).

A :class:`Redactor` knows a set of secret values — the values of environment
variables whose names look secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``,
``*PASSWORD*``...) plus any the team file interpolated from such variables —
and replaces each occurrence with ``***`` in any string, list or mapping.
"""

from __future__ import annotations

import json
import os
import re
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from teamrun.conventions import RECALLED_MEMORIES, WORKSPACE_INDEX

__all__ = ["MASK", "Redactor", "StoreMask", "mask_request", "secret_env_values", "secret_parts", "unmask"]

MASK = "***"

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
"""Environment variable names whose values are treated as secrets."""

_MIN_SECRET_CHARS = 6
"""Shorter values (``1``, ``true``, ``yes``) are settings, not secrets; masking them would mangle text."""
_NOT_SECRETS = frozenset({"true", "false", "none", "null", "yes", "no", "on", "off"})
_KEYLIKE = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{20,}"
    r"|\bBearer\s+[A-Za-z0-9._~+/=\-]{12,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens: ghp_ (classic), gho_ (OAuth), ghu_, ghs_, ghr_
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"  # GitHub fine-grained tokens
    r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"  # AWS access key ids (long-term, temporary)
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|\bglpat-[A-Za-z0-9_\-]{20,}"  # GitLab personal access tokens
)
"""Provider-key shapes masked even when no variable holds them (the shapes docs/a2a.md calls token-like)."""


_JSON_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')
"""Text JSON writes as it is (``ensure_ascii=False``): no quote, backslash or control character."""
_KEYS_KEPT = 4096
"""Masked mapping keys remembered per :class:`Redactor` (keys are field names: a few dozen in practice)."""

_TODAY = "<today>"
_FENCE = re.compile(r"(<<<(?:DATA|END) )[0-9a-f]{8,64}\b")
"""Result-reference fences carry a random token per run (teamrun.engine.references.render_blocks)."""
_NAMED = re.compile(r"\*\*\*\$\{([A-Za-z_][A-Za-z0-9_]*)\}\*\*\*")
"""What the store keeps of a secret-named variable's value: ``***${NAME}***``."""


def _is_secret_value(value: str) -> bool:
    return len(value) >= _MIN_SECRET_CHARS and value.strip().lower() not in _NOT_SECRETS


def secret_parts(text: str) -> set[str]:
    """What to mask of a secret given as ``text``: the text, and when it is JSON (an answer read against an
    ``answer_schema``), every string and number in it — a model may quote one part of it."""
    parts = {text.strip()}
    try:
        parsed = json.loads(text)
    except ValueError:
        return parts - {""}
    stack = [parsed]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            parts.add(value.strip())
        elif isinstance(value, int | float) and not isinstance(value, bool):
            parts.add(json.dumps(value))
    return parts - {""}


_DECLARED_NAMES: set[str] = set()
"""Variables declared secret whatever their names (an ``a2a:`` agent's ``auth.bearer_env``)."""
_LIVE_MASKS: weakref.WeakSet[StoreMask] = weakref.WeakSet()


def is_secret_name(name: str) -> bool:
    """Whether the value of the environment variable ``name`` is a secret (its name looks secret, or it was
    declared one with :func:`declare_secret_variable`)."""
    return bool(SECRET_NAME.search(name)) or name in _DECLARED_NAMES


def declare_secret_variable(name: str, environ: Mapping[str, str] | None = None) -> None:
    """Treat the variable ``name``'s value as a secret from now on, in this process, as if its name looked
    secret: every redactor made later masks it, and each store's mask made earlier too (``***${NAME}***``)."""
    _DECLARED_NAMES.add(name)
    env = os.environ if environ is None else environ
    value = env.get(name, "")
    if _is_secret_value(value):
        for mask in list(_LIVE_MASKS):
            mask.declare(name, value)


def secret_env_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """Values of the environment variables whose names look secret (or were declared secret)."""
    env = os.environ if environ is None else environ
    return {value for name, value in env.items() if is_secret_name(name) and _is_secret_value(value)}


class Redactor:
    """Masks known secret values (longest first) and provider-key shapes."""

    def __init__(
        self, secrets: Iterable[str] = (), *, environ: Mapping[str, str] | None = None, include_env: bool = True
    ) -> None:
        found = set(secret_env_values(environ)) if include_env else set()
        found.update(s for s in secrets if s and _is_secret_value(s))
        self._secrets: list[str] = []
        self._short: frozenset[str] = frozenset()
        """Declared secrets too short to pass for one (:meth:`add`): masked only as whole words."""
        self._pattern: re.Pattern[str] | None = None
        self._keys: dict[str, str] = {}
        """Masked mapping keys, by key (see :meth:`_key`)."""
        self._json_plain = self._ascii = True
        """No secret has a character JSON escapes (always / with ``ensure_ascii``): see :meth:`dumps`."""
        self.add(found)

    def add(self, secrets: Iterable[str], *, declared: bool = False) -> None:
        """Also mask these values from now on.

        A value shorter than six characters, or a word like ``yes``, is a setting rather than a secret and
        is skipped, unless ``declared`` (someone said it is a secret: a ``secret: true`` person's answer);
        such a short secret is masked where it stands as a whole word (not inside ids and longer words).
        """
        secrets = set(secrets)
        new = {s for s in secrets if s and _is_secret_value(s)}
        short = {s for s in secrets if declared and s.strip() and s not in new}
        self._short = (self._short | short) - new
        merged = set(self._secrets) | new | short
        if merged == set(self._secrets):
            return
        self._secrets = sorted(merged, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(self._regex, self._secrets))) if self._secrets else None
        self._keys = {}
        self._json_plain = all(_JSON_PLAIN.fullmatch(secret) for secret in self._secrets)
        self._ascii = all(secret.isascii() for secret in self._secrets)

    def _regex(self, secret: str) -> str:
        escaped = re.escape(secret)
        return rf"(?<!\w){escaped}(?!\w)" if secret in self._short else escaped

    def derived(self, secrets: Iterable[str], *, declared: bool = False) -> Redactor:
        """A copy of this redactor that also masks ``secrets`` (this one is left as it is)."""
        copy = self.__class__.__new__(self.__class__)
        copy.__dict__.update(self.__dict__)
        copy._keys = {}
        copy.add(secrets, declared=declared)
        return copy

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def text(self, value: str) -> str:
        """``value`` with every secret masked."""
        if self._pattern is not None:
            for secret in self._secrets:  # a loop of `in` costs a third of any() over a generator
                if secret in value:
                    value = self._pattern.sub(self._replacement, value)
                    break
        if (  # the regex costs ten times these searches
            "k-" in value or "Bearer" in value or "gh" in value or "IA" in value or "xox" in value or "glpat-" in value
        ):
            value = _KEYLIKE.sub(MASK, value)
        return value

    def _replacement(self, match: re.Match[str]) -> str:
        return MASK

    def value(self, value: Any) -> Any:
        """A copy of ``value`` (any JSON-like data) with every string masked; keys too."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self._key(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.value(v) for v in value]
        return value

    def _key(self, key: Any) -> str:
        """A mapping's key masked: keys come from a small set (field names), so each is masked once."""
        if type(key) is not str:
            return self.text(str(key))
        shown = self._keys.get(key)
        if shown is None:
            shown = self.text(key)
            if len(self._keys) < _KEYS_KEPT:
                self._keys[key] = shown
        return shown

    def dumps(self, value: Any, **options: Any) -> str:
        """``json.dumps(self.value(value), **options)``, written once and walked only when the text may hold
        a secret.

        The JSON text holds every string of ``value`` as it is, apart from the characters JSON escapes
        (quotes, backslashes, control characters; and non-ASCII with ``ensure_ascii``); when no secret
        has such a character and none appears in the text, nor a provider-key shape's start, no string
        holds one, and the text is the answer. ``value``'s mapping keys must be strings.
        """
        text = json.dumps(value, **options)
        plain = self._json_plain and (self._ascii or options.get("ensure_ascii", True) is False)
        if plain and "k-" not in text and "Bearer" not in text and not any(s in text for s in self._secrets):
            return text
        return json.dumps(self.value(value), **options)


class StoreMask(Redactor):
    """What teamrun keeps of secrets in its store: the value of a secret-named environment variable becomes
    ``***${NAME}***``, so a resume can put the variable's value back (:func:`unmask`); other secrets (the
    team file's, provider-key shapes) become ``***`` as in traces.

    The same masking makes the journal's request hashes: a request hashes alike whether it carries the
    secret or its mask, so a replayed reply (unmasked or not) leads to the same next request.
    """

    def __init__(self, secrets: Iterable[str] = (), *, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._names = {
            value: name for name, value in sorted(env.items()) if is_secret_name(name) and _is_secret_value(value)
        }
        super().__init__(secrets, environ=env)
        _LIVE_MASKS.add(self)

    def declare(self, name: str, value: str) -> None:
        """Mask ``value`` as the value of the secret variable ``name`` from now on."""
        self._names.setdefault(value, name)
        self.add({value})

    def _replacement(self, match: re.Match[str]) -> str:
        name = self._names.get(match.group(0))
        return MASK if name is None else f"{MASK}${{{name}}}{MASK}"


def unmask(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """``value`` (a string or JSON-like data) with each ``***${NAME}***`` of :class:`StoreMask` replaced by the
    variable's value, read from the environment now (left as it is when the variable is unset)."""
    env = os.environ if environ is None else environ
    if isinstance(value, str):
        if "${" not in value:
            return value
        return _NAMED.sub(lambda m: env.get(m.group(1)) or m.group(0), value)
    if isinstance(value, Mapping):
        return {unmask(k, env): unmask(v, env) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [unmask(v, env) for v in value]
    return value


def mask_request(value: Any, *, today: str, secrets: Redactor | None = None) -> Any:
    """A model request as record/replay and the journal compare it: ``value`` (a string, e.g. the request
    dumped as JSON, or JSON-like data) with what changes between runs masked — today's date, the random
    fences of referenced results — and ``secrets`` masked. The one normalisation behind the cassette's
    fingerprint and the journal's request hash. The workspace index of a delegating agent's system prompt is
    masked too: it shows what others wrote so far, which a resumed run sees at its latest; and the facts a
    recalling agent is given (long-term memory), which change as the resource's memories do."""
    if isinstance(value, str):
        if today in value:
            value = value.replace(today, _TODAY)
        if "<<<" in value:
            value = _FENCE.sub(r"\1<fence>", value)
            value = WORKSPACE_INDEX.sub("<<<WORKSPACE-INDEX>>>", value)
            value = RECALLED_MEMORIES.sub("<<<MEMORY>>>", value)
        return secrets.text(value) if secrets is not None else value
    if isinstance(value, Mapping):
        return {k: mask_request(v, today=today, secrets=secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_request(v, today=today, secrets=secrets) for v in value]
    return value
