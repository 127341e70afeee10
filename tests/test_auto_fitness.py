"""Task detection in five languages and model × task fitness (AUTO-6)."""

from __future__ import annotations

import pytest

from omniroute.routing.auto.fitness import FITNESS_TABLE, TASK_TYPES, detect_task, task_fitness

CASES = {
    "en": {
        "debugging": "I get a traceback when I run this",
        "review": "Please review my pull request",
        "documentation": "Write a README for this project",
        "planning": "Make a roadmap for the migration",
        "analysis": "Compare these two approaches",
        "coding": "Write a function that sorts a list",
        "default": "What is the capital of France?",
    },
    "pt": {
        "debugging": "Meu programa está dando erro ao iniciar",
        "review": "Pode revisar meu código?",
        "documentation": "Escreva a documentação da API",
        "planning": "Crie um plano de migração",
        "analysis": "Faça uma análise dos resultados",
        "coding": "Implemente uma função em Rust",
        "default": "Qual é a capital da França?",
    },
    "es": {
        "debugging": "Mi aplicación tiene un fallo al arrancar",
        "review": "¿Puedes revisar este cambio?",
        "documentation": "Escribe la documentación del módulo",
        "planning": "Necesito una hoja de ruta para el proyecto",
        "analysis": "Analiza estos datos de ventas",
        "coding": "Escribe una función que ordene una lista",
        "default": "¿Cuál es la capital de Francia?",
    },
    "de": {
        "debugging": "Ich bekomme einen Fehler beim Start",
        "review": "Bitte überprüfe meinen Merge-Request",
        "documentation": "Schreibe eine Dokumentation für das Modul",
        "planning": "Wir müssen die Architektur der Anwendung festlegen",
        "analysis": "Vergleiche diese beiden Ansätze",
        "coding": "Schreibe eine Funktion, die eine Liste sortiert",
        "default": "Wie ist das Wetter heute?",
    },
    "zh": {
        "debugging": "运行时报错了",
        "review": "请审查这段代码",
        "documentation": "为这个模块写文档",
        "planning": "制定一个项目计划",
        "analysis": "分析一下这些数据",
        "coding": "写一个排序函数",
        "default": "今天天气怎么样",
    },
}


def body(text: str, system: str | None = None) -> dict[str, object]:
    msgs = [{"role": "system", "content": system}] if system else []
    return {"messages": [*msgs, {"role": "user", "content": text}]}


@pytest.mark.parametrize("lang", sorted(CASES))
def test_all_seven_task_types_are_reachable_in_each_language(lang: str) -> None:
    """AUTO-6: keyword detection in EN, PT, ES, DE and ZH reaches all seven task types."""
    got = {task: detect_task(body(text)) for task, text in CASES[lang].items()}
    assert got == {t: t for t in CASES[lang]}
    assert set(got.values()) == set(TASK_TYPES)


def test_detection_reads_the_last_user_message_and_the_system_prompt() -> None:
    """AUTO-6: the current turn and the system prompt decide; words inside other words do not."""
    assert detect_task(body("hello", system="You are a code reviewer: review diffs")) == "review"
    multi = {"messages": [{"role": "user", "content": "fix the bug"}, {"role": "user", "content": "thanks"}]}
    assert detect_task(multi) == "default"
    assert detect_task(body("Give me an explanation of photosynthesis")) == "default"  # not "plan"
    assert detect_task(body("```\nprint(1)\n```")) == "coding"
    assert detect_task(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "debug it"}]}]}
    ) == ("debugging")
    assert detect_task({}) == "default"


def test_fitness_table_covers_30_families_longest_pattern_first() -> None:
    """AUTO-6: 30+ families; ``gpt-4o-mini`` matches its own entry (.80), not ``gpt-4o`` (.90)."""
    assert len(FITNESS_TABLE["coding"]) >= 30
    assert task_fitness("gpt-4o-mini", "coding") == 0.80
    assert task_fitness("gpt-4o", "coding") == 0.90
    assert task_fitness("deepseek-v3.2-exp", "coding") == 0.86
    assert task_fitness("claude-sonnet-4-5", "review") == 0.92
    assert task_fitness("claude-3-5-sonnet-20241022", "coding") == 0.95
    assert task_fitness("GPT-4o", "debugging") == 0.88


def test_task_without_an_entry_uses_the_default_table_then_wildcards() -> None:
    """AUTO-6: a model missing from the task table falls back to ``default``; unknown models get .5
    plus wildcard boosts (``*coder*`` → coding +.15, ``thinking`` → planning/analysis +.10)."""
    assert task_fitness("grok-4", "planning") == 0.74  # default table
    assert task_fitness("mystery-model", "coding") == 0.5
    assert task_fitness("acme-coder-7b", "coding") == pytest.approx(0.65)
    assert task_fitness("acme-code-1", "coding") == pytest.approx(0.60)
    assert task_fitness("acme-coder-7b", "review") == 0.5
    assert task_fitness("acme-thinking", "planning") == pytest.approx(0.6)
    assert task_fitness("acme-thinking", "analysis") == pytest.approx(0.6)
    assert task_fitness("acme-thinking", "coding") == 0.5
