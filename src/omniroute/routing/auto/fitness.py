"""Task types, task detection from the request text, and model × task fitness (AUTO-6).

Task types: ``coding``, ``review``, ``planning``, ``analysis``, ``debugging``, ``documentation`` and
``default``. :func:`detect_task` matches keyword rules in English, Portuguese, Spanish, German and
Chinese against the system prompt plus the last user message; rules are tried in :data:`TASK_ORDER`
(the most specific intent first, so "fix this function" is debugging, not coding), and every type is
reachable. Latin keywords match at a word start (``\\bdebug`` matches "debugging", "plan" does not
match "explanation"); Chinese keywords match anywhere.

:func:`task_fitness` looks a model id up in the static fitness table of seed
``001_c34bc1230a1e43d4.txt`` / reference §3.11 (31+ families): the task's table, else the ``default``
table, substring match on the lower-cased id with the **longest pattern first** (so ``gpt-4o-mini`` is
0.80 for coding, not ``gpt-4o``'s 0.90). No match: 0.5 plus wildcard boosts (``coder`` → coding
+0.15, ``code`` → coding +0.10, ``fast`` → coding +0.05, ``thinking`` → planning and analysis +0.10,
capped at 1.0). Unknown models score 0.5.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "DEFAULT_TASK",
    "FITNESS_TABLE",
    "TASK_KEYWORDS",
    "TASK_ORDER",
    "TASK_TYPES",
    "detect_task",
    "request_text",
    "task_fitness",
]

DEFAULT_TASK: Final = "default"
TASK_TYPES: Final[tuple[str, ...]] = (
    "coding",
    "review",
    "planning",
    "analysis",
    "debugging",
    "documentation",
    DEFAULT_TASK,
)
TASK_ORDER: Final[tuple[str, ...]] = (
    "debugging",
    "review",
    "documentation",
    "planning",
    "analysis",
    "coding",
)
"""Order in which keyword rules are tried; nothing matches → ``default``."""

# Keywords per task and language (EN, PT, ES, DE, ZH). Latin entries are word-start prefixes.
TASK_KEYWORDS: Mapping[str, Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "debugging": {
            "en": ("debug", "bug", "error", "exception", "traceback", "stack trace", "crash", "fix ",
                   "broken", "not working", "segfault", "fails with"),
            "pt": ("depurar", "erro", "falha", "corrigir", "conserte", "corrija", "travando", "não funciona"),
            "es": ("depura", "fallo", "corregir", "corrige", "arregla", "no funciona"),
            "de": ("fehler", "absturz", "beheben", "behebe", "debuggen", "funktioniert nicht"),
            "zh": ("调试", "错误", "报错", "异常", "修复", "崩溃"),
        },
        "review": {
            "en": ("review", "code review", "audit", "critique", "pull request"),
            "pt": ("revisar", "revisão", "revise", "avalie este código"),
            "es": ("revisar", "revisión", "revisa"),
            "de": ("überprüfe", "überprüfen", "begutachte", "prüfe den code", "code-review"),
            "zh": ("审查", "评审", "审阅", "代码审查"),
        },
        "documentation": {
            "en": ("document", "docstring", "readme", "jsdoc", "changelog", "write docs", "api docs"),
            "pt": ("documentação", "documentar", "documente"),
            "es": ("documentación", "documentar", "documenta"),
            "de": ("dokumentation", "dokumentiere", "dokumentieren"),
            "zh": ("文档", "注释", "说明文档"),
        },
        "planning": {
            "en": ("plan", "roadmap", "architecture", "milestone", "design a", "outline the steps"),
            "pt": ("planejar", "planeje", "plano", "arquitetura", "roteiro", "cronograma"),
            "es": ("planifica", "planear", "planea", "arquitectura", "hoja de ruta"),
            "de": ("planen", "plane ", "architektur", "entwurf", "fahrplan"),
            "zh": ("计划", "规划", "架构", "路线图", "设计方案"),
        },
        "analysis": {
            "en": ("analy", "compare", "evaluate", "assess", "explain why", "pros and cons", "trade-off"),
            "pt": ("analisar", "analise", "análise", "comparar", "compare", "avaliar"),
            "es": ("analizar", "analiza", "análisis", "comparar", "evaluar"),
            "de": ("analysier", "analyse", "vergleich", "bewerte"),
            "zh": ("分析", "比较", "评估", "对比"),
        },
        "coding": {
            "en": ("code", "function", "class ", "implement", "script", "program", "refactor", "python",
                   "javascript", "typescript", "sql", "regex", "algorithm", "compile", "```"),
            "pt": ("código", "função", "implementar", "implemente", "programa", "classe"),
            "es": ("código", "función", "implementar", "implementa", "programa", "clase"),
            "de": ("funktion", "implementiere", "implementieren", "programmier", "klasse", "skript"),
            "zh": ("代码", "函数", "编程", "实现", "程序", "写一个"),
        },
    }
)  # fmt: skip


def _compile(words: Mapping[str, tuple[str, ...]]) -> re.Pattern[str]:
    latin: list[str] = []
    cjk: list[str] = []
    for lang, ws in words.items():
        (cjk if lang == "zh" else latin).extend(ws)
    parts: list[str] = []
    if latin:
        alts = "|".join(re.escape(w) for w in sorted(set(latin), key=len, reverse=True))
        # "```" is not a word character: it must not need a word boundary before it.
        parts.append(rf"(?:\b|(?=`))(?:{alts})")
    if cjk:
        parts.append("|".join(re.escape(w) for w in cjk))
    return re.compile("|".join(parts))


_RULES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (task, _compile(TASK_KEYWORDS[task])) for task in TASK_ORDER
)
_MAX_TEXT_CHARS: Final = 8000


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            p if isinstance(p, str) else str(p.get("text") or "")
            for p in content
            if isinstance(p, str | dict)
        )
    return ""


def request_text(body: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(system prompt, first user message, last user message)`` text of an OpenAI chat body."""
    system: list[str] = []
    first = last = ""
    messages = body.get("messages")
    if isinstance(messages, list):
        for m in messages:
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            if role in ("system", "developer"):
                system.append(_text(m.get("content")))
            elif role == "user":
                last = _text(m.get("content"))
                if not first:
                    first = last
    return "\n".join(system), first, last


def detect_task(body: Mapping[str, Any]) -> str:
    """The task type of a request from its system prompt and last user message (AUTO-6)."""
    system, _, last = request_text(body)
    return _classify(f"{system[-2000:]}\n{last[:_MAX_TEXT_CHARS]}".lower())


@lru_cache(maxsize=256)
def _classify(text: str) -> str:
    """The first task (in :data:`TASK_ORDER`) whose keywords occur in ``text`` (lower-cased); pure,
    memoised because one conversation sends the same system prompt and user turn many times (tool
    loops, retries)."""
    if not text.strip():
        return DEFAULT_TASK
    for task, pattern in _RULES:
        if pattern.search(text):
            return task
    return DEFAULT_TASK


_T = {
    "coding": {
        "claude-sonnet": 0.95, "claude-opus": 0.92, "claude-haiku": 0.78, "sonnet": 0.95, "opus": 0.92,
        "haiku": 0.78, "gpt-4o": 0.90, "gpt-4o-mini": 0.80, "gpt-4-turbo": 0.88, "gpt-4.1": 0.90,
        "gpt-4.1-mini": 0.82, "gpt-5": 0.95, "gpt-5-mini": 0.86, "o1": 0.93, "o3": 0.95,
        "o4-mini": 0.88, "codex": 0.98, "gemini-pro": 0.85, "gemini-flash": 0.80,
        "gemini-2.5-pro": 0.92, "gemini-2.5-flash": 0.82, "deepseek-coder": 0.90, "deepseek-v3": 0.85,
        "deepseek-r1": 0.88, "deepseek-chat": 0.84, "deepseek-v3.2": 0.86, "qwen": 0.78, "llama": 0.72,
        "mistral": 0.75, "mixtral": 0.77, "grok-4-fast": 0.80, "grok-4": 0.82, "grok-3": 0.80,
        "kimi-k2": 0.82, "glm-5.1": 0.78, "glm-5": 0.78, "minimax-m2.5": 0.75, "minimax-m2": 0.72,
    },
    "review": {
        "claude-sonnet": 0.92, "claude-opus": 0.95, "claude-haiku": 0.70, "sonnet": 0.92, "opus": 0.95,
        "gpt-4o": 0.88, "gpt-4o-mini": 0.72, "o1": 0.90, "o3": 0.92, "gemini-pro": 0.90,
        "gemini-2.5-pro": 0.93, "gemini-flash": 0.75, "deepseek-r1": 0.85, "deepseek-v3": 0.80,
    },
    "planning": {
        "claude-opus": 0.95, "claude-sonnet": 0.90, "opus": 0.95, "sonnet": 0.90, "gpt-4o": 0.88,
        "o1": 0.92, "o3": 0.95, "gemini-2.5-pro": 0.93, "gemini-pro": 0.88, "deepseek-r1": 0.85,
    },
    "analysis": {
        "claude-opus": 0.95, "claude-sonnet": 0.92, "opus": 0.95, "sonnet": 0.92, "gemini-2.5-pro": 0.95,
        "gemini-pro": 0.88, "gemini-3.1-pro": 0.95, "gpt-4o": 0.85, "o1": 0.90, "o3": 0.93,
        "deepseek-r1": 0.88, "deepseek-chat": 0.80, "kimi-k2": 0.82, "glm-5.1": 0.82, "glm-5": 0.78,
        "minimax-m2.5": 0.76,
    },
    "debugging": {
        "claude-sonnet": 0.93, "claude-opus": 0.90, "sonnet": 0.93, "opus": 0.90, "gpt-4o": 0.88,
        "o1": 0.85, "deepseek-coder": 0.90, "deepseek-v3": 0.82, "gemini-flash": 0.78, "codex": 0.92,
    },
    "documentation": {
        "claude-sonnet": 0.90, "claude-opus": 0.88, "sonnet": 0.90, "opus": 0.88, "gpt-4o": 0.92,
        "gpt-4o-mini": 0.85, "gemini-pro": 0.88, "gemini-flash": 0.82, "deepseek-v3": 0.78,
    },
    DEFAULT_TASK: {
        "claude-sonnet": 0.85, "claude-opus": 0.85, "sonnet": 0.85, "opus": 0.85, "gpt-4o": 0.85,
        "gemini-pro": 0.80, "gemini-3.1-pro": 0.85, "deepseek-v3": 0.75, "deepseek-chat": 0.74,
        "gemini-flash": 0.72, "grok-4-fast": 0.72, "grok-4": 0.74, "grok-3": 0.73, "kimi-k2": 0.76,
        "glm-5.1": 0.75, "glm-5": 0.70, "minimax-m2.5": 0.70,
    },
}  # fmt: skip

FITNESS_TABLE: Mapping[str, tuple[tuple[str, float], ...]] = MappingProxyType(
    {task: tuple(sorted(t.items(), key=lambda kv: -len(kv[0]))) for task, t in _T.items()}
)
"""Task → ``((pattern, fitness), …)`` with the longest pattern first (AUTO-6)."""

UNKNOWN_FITNESS: Final = 0.5
_WILDCARD_BOOSTS: Final[tuple[tuple[str, str, float], ...]] = (
    ("coder", "coding", 0.15),
    ("code", "coding", 0.10),
    ("fast", "coding", 0.05),
    ("thinking", "planning", 0.10),
    ("thinking", "analysis", 0.10),
)


def _lookup(table: tuple[tuple[str, float], ...], model: str) -> float | None:
    for pattern, score in table:
        if pattern in model:
            return score
    return None


@lru_cache(maxsize=8192)
def task_fitness(model_id: str, task: str) -> float:
    """Fitness in [0, 1] of ``model_id`` for ``task`` (AUTO-6); pure and memoised."""
    model = model_id.lower()
    table = FITNESS_TABLE.get(task)
    if table is not None:
        hit = _lookup(table, model)
        if hit is not None:
            return hit
    hit = _lookup(FITNESS_TABLE[DEFAULT_TASK], model)
    if hit is not None:
        return hit
    score = UNKNOWN_FITNESS
    for needle, boosted, boost in _WILDCARD_BOOSTS:
        if boosted == task and needle in model:
            score += boost
            if needle == "coder":  # "coder" contains "code": one boost, not two
                break
    return min(1.0, score)
