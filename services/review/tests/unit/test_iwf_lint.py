"""The item-writing-flaw lint (issue 30): each criterion by its definition in four languages,
words matched as words, the language-free criteria for another language, the refusals, and the
labelled set at the issue's targets."""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.review import LINT_CRITERIA, LintReply, ReviewFinding, Severity
from quiz_review.domain.iwf.form import parse_number
from quiz_review.domain.iwf.in_reviews import with_lint_notices
from quiz_review.domain.iwf.lint import CRITERIA, lint_question
from quiz_review.eval import iwf


def mcq(prompt: str, *choices: str) -> dict[str, Any]:
    """An mcq config; a choice starting with "*" is correct."""
    rows = [{"text": c.removeprefix("*"), "correct": c.startswith("*")} for c in choices]
    right = sum(r["correct"] for r in rows)
    return {
        "configVersion": 2,
        "prompt": prompt,
        "choices": rows,
        "mode": "single" if right == 1 else "multiple",
        "policy": "inherit",
        "shuffleChoices": True,
    }


def found(language: str, prompt: str, *choices: str) -> dict[int, list[str]]:
    """criterion → the paths of its findings."""
    reply = lint_question("mcq", language, mcq(prompt, *choices))
    out: dict[int, list[str]] = {}
    for f in reply.findings:
        out.setdefault(f.criterion, []).append(f.path)
    return out


# (language, prompt, choices, criterion, paths): each a positive of exactly that criterion.
POSITIVES = [
    (
        "en",
        "Which gas do we exhale?",
        ["Oxygen", "*Carbon dioxide", "Helium", "None of these"],
        3,
        ["choices.3"],
    ),
    (
        "fr",
        "Quel est l'organe de la vue ?",
        ["Le nez", "*L'œil", "La main", "Aucune des propositions ci-dessus."],
        3,
        ["choices.3"],
    ),
    (
        "de",
        "Welcher Planet ist der größte?",
        ["Mars", "*Jupiter", "Venus", "Keine der genannten"],
        3,
        ["choices.3"],
    ),
    (
        "it",
        "Qual è la capitale della Francia?",
        ["Lione", "*Parigi", "Nizza", "Nessuna delle precedenti"],
        3,
        ["choices.3"],
    ),
    (
        "en",
        "Which are primary colours of light?",
        ["Red light", "Green light", "Blue light", "*All of these"],
        9,
        ["choices.3"],
    ),
    (
        "fr",
        "Quels sont des mammifères marins ?",
        ["Le dauphin", "Le phoque", "La baleine", "*Toutes ces réponses"],
        9,
        ["choices.3"],
    ),
    ("de", "Welche sind Edelgase?", ["Helium", "Neon", "Argon", "*Alle"], 9, ["choices.3"]),
    (
        "it",
        "Quali sono pianeti?",
        ["Marte", "Giove", "Saturno", "*Tutte le precedenti"],
        9,
        ["choices.3"],
    ),
    ("en", "Spiders are insects.", ["True", "*False"], 6, ["prompt"]),
    ("fr", "Le nombre 1 est premier.", ["Vrai.", "*Faux."], 6, ["prompt"]),
    ("de", "Wale sind Fische.", ["Richtig", "*Falsch"], 6, ["prompt"]),
    ("it", "Il cuore ha tre cavità.", ["Vero", "*Falso"], 6, ["prompt"]),
    (
        "en",
        "Which are mammals? I. Whale II. Shark III. Bat",
        ["I only", "II only", "*I and III", "II and III"],
        14,
        ["choices.2", "choices.3"],
    ),
    (
        "fr",
        "Quels organes digèrent ?",
        ["L'estomac", "Le foie", "*Les deux", "Le cœur"],
        14,
        ["choices.2"],
    ),
    (
        "de",
        "Welche Aussagen stimmen? A) Eis schwimmt. B) Blei schwimmt. C) Holz schwimmt.",
        ["A und B", "*A und C", "B oder C", "Aussage B"],
        14,
        ["choices.0", "choices.1", "choices.2"],
    ),
    ("it", "Quali gas sono nobili?", ["Elio", "Neon", "*Entrambi", "Ossigeno"], 14, ["choices.2"]),
    ("en", "Which of these is NOT a mammal?", ["Whale", "Bat", "*Shark", "Dog"], 19, ["prompt"]),
    (
        "fr",
        "Quelle planète ne possède aucun anneau ?",
        ["Saturne", "Jupiter", "Uranus", "*Mars"],
        19,
        ["prompt"],
    ),
    (
        "de",
        "Welche Stadt liegt nicht in Bayern?",
        ["München", "Passau", "*Dresden", "Augsburg"],
        19,
        ["prompt"],
    ),
    (
        "it",
        "Tutte queste città sono in Sicilia tranne:",
        ["Palermo", "Catania", "*Bari", "Messina"],
        19,
        ["prompt"],
    ),
    (
        "en",
        "Light travels",
        ["*in straight lines", "always in curves", "in circles", "in spirals"],
        11,
        ["choices.1"],
    ),
    (
        "fr",
        "Les métaux",
        ["*conduisent le courant", "ne gèlent jamais", "sont transparents", "sont liquides"],
        11,
        ["choices.1"],
    ),
    (
        "de",
        "Wale",
        ["*sind Säugetiere", "sind stets Fische", "legen Eier", "haben Kiemen"],
        11,
        ["choices.1"],
    ),
    (
        "it",
        "Le piante",
        ["*producono ossigeno", "vivono soltanto al buio", "mangiano carne", "sono animali"],
        11,
        ["choices.1"],
    ),
    (
        "en",
        "Plants",
        ["*produce oxygen", "usually eat insects", "live in caves", "are animals"],
        17,
        ["choices.1"],
    ),
    (
        "fr",
        "Les oiseaux",
        ["*ont des plumes", "ont parfois des écailles", "ont des branchies", "sont des reptiles"],
        17,
        ["choices.1"],
    ),
    (
        "de",
        "Katzen",
        ["*sind Raubtiere", "fressen häufig Gras", "sind Vögel", "legen Eier"],
        17,
        ["choices.1"],
    ),
    (
        "it",
        "Le balene",
        ["*sono mammiferi", "sono a volte pesci", "hanno branchie", "fanno uova"],
        17,
        ["choices.1"],
    ),
    (
        "en",
        "Which gases are greenhouse gases?",
        ["Nitrogen", "*Methane gas", "Argon", "Helium"],
        12,
        ["choices.1"],
    ),
    (
        "fr",
        "Quel pigment colore les feuilles ?",
        ["*Un pigment vert", "Le carotène", "La mélanine", "L'hémoglobine"],
        12,
        ["choices.0"],
    ),
    (
        "de",
        "Welche Hauptstadt liegt an der Spree?",
        ["Wien", "*Die Hauptstadt Berlin", "Prag", "Bern"],
        12,
        ["choices.1"],
    ),
    (
        "it",
        "Quale organo pompa il sangue?",
        ["Fegato", "*Il cuore pompa", "Rene", "Milza"],
        12,
        ["choices.1"],
    ),
]


@pytest.mark.parametrize(("language", "prompt", "choices", "criterion", "paths"), POSITIVES)
def test_each_criterion_finds_its_flaw_and_only_it(
    language: str, prompt: str, choices: list[str], criterion: int, paths: list[str]
) -> None:
    got = found(language, prompt, *choices)
    got.pop(4, None)  # lengths are criterion 4's business, checked on its own below
    assert got == {criterion: paths}


@pytest.mark.parametrize("language", ["fr", "en", "de", "it", "es", "pt-BR"])
def test_the_language_free_criteria_run_in_any_language(language: str) -> None:
    got = found(
        language,
        "___ is the capital of Italy.",
        "1789",
        "*1492",
        "1515",
        "Naples and more things here",
    )
    assert 10 in got
    numbers = found(language, "Year?", "1918", "*1914", "1939")
    assert numbers == {16: ["choices.2"]}
    longest = found(language, "Why?", "A flood", "*Because of a long chain of protests", "A war")
    assert longest == {4: ["choices.1"]}


def test_another_language_runs_only_4_10_16_and_says_so() -> None:
    reply = lint_question("mcq", "es", mcq("¿Cuál NO es?", "*Ninguna de las anteriores", "Todas"))
    assert reply.checked == [4, 10, 16]
    assert reply.findings == []
    assert lint_question("mcq", "fr-CH", mcq("Quoi ?", "*a", "b")).checked == list(LINT_CRITERIA)


def test_the_longest_key_by_the_definition() -> None:
    # Exactly 1.3 × the longest distractor: a flaw; just under: none; a tie for longest: none.
    assert found("en", "Q?", "*abcdefghijklm", "abcdefghij", "abc") == {4: ["choices.0"]}
    assert found("en", "Q?", "*abcdefghijkl", "abcdefghij", "abc") == {}
    assert found("en", "Q?", "*abcdefghijklmnop", "abcdefghijklmnop", "abc") == {}
    # Two choices, or a multiple key: not this criterion.
    assert found("en", "Q?", "*a long long long answer", "short") == {}
    assert found("en", "Q?", "*a long long long answer", "*b", "short") == {}


@pytest.mark.parametrize(
    ("language", "prompt", "choices"),
    [
        ("en", "How many moons does Venus have?", ["*None", "One", "Two", "Four"]),
        ("fr", "Combien de satellites possède Mercure ?", ["*Aucun", "Un", "Deux", "Trois"]),
        ("de", "Wie viele Monde hat Merkur?", ["*Keinen", "Einen", "Zwei", "Drei"]),
        ("it", "Quanti satelliti ha Venere?", ["*Nessuno", "Uno", "Due", "Quattro"]),
        ("en", "Roots of x² − 5x + 6 = 0?", ["1 and 6", "*2 and 3", "−2 and −3", "−1 and −6"]),
        ("en", "Which elements make up methane?", ["*C and H", "C and O", "H and O", "N and H"]),
        (
            "en",
            "Which sport uses a ball and a net?",
            ["*Volleyball", "Football", "Handball", "Netball"],
        ),
        (
            "en",
            "Which knot makes a fixed loop?",
            ["Reef knot", "*Bowline", "Clove hitch", "Sheet bend"],
        ),
        ("fr", "Quel astre se lève toujours à l'est ?", ["La Lune", "*Le Soleil", "Mars", "Vénus"]),
        ("fr", "La capitale de l'Australie est…", ["Sydney", "*Canberra", "Melbourne", "Perth"]),
        ("en", "The chemical symbol of gold is ___.", ["*Au", "Ag", "Gd", "Go"]),
        (
            "fr",
            "Qui a dit « Veni, vidi, vici… » ?",
            ["Marc Antoine", "*Jules César", "Néron", "Pompée"],
        ),
        ("fr", "Quel est le plus grand organe ?", ["Le foie", "*La peau", "Le cœur", "L'œil"]),
        ("de", "Welches Organ filtert Harnstoff?", ["Leber", "*Niere", "Lunge", "Milz"]),
        (
            "de",
            "Wie heißt die Tochter meiner Schwester?",
            ["*Nichte", "Cousine", "Tante", "Enkelin"],
        ),
        ("de", "Wo steht der Herd?", ["Im Bad", "*In der Küche", "Im Wohnzimmer", "Im Flur"]),
        ("it", "Che cosa trattiene il suolo?", ["*L'acqua", "Il vento", "La luce", "Il sole"]),
        ("en", "What is 12 × 12?", ["124", "*144", "156", "164"]),
        ("fr", "π arrondi au centième ?", ["3,12", "*3,14", "3,16", "3,18"]),
        ("en", "Is the Earth round?", ["*Yes", "No"]),
        (
            "en",
            "Which blood vessels carry blood from the heart?",
            ["*Arteries", "Veins", "Capillaries", "Ducts"],
        ),
        (
            "en",
            "Which ocean is the largest?",
            ["Atlantic ocean", "*Pacific ocean", "Indian ocean", "Arctic ocean"],
        ),
        ("en", "Which holds [[a]] and [[b]]?", ["*[[a+b]]", "[[a-b]]", "[[a*b]]"]),
    ],
)
def test_near_misses_are_clean(language: str, prompt: str, choices: list[str]) -> None:
    assert found(language, prompt, *choices) == {}


def test_words_are_words_not_substrings() -> None:
    # "all" in "ball", "nie" in "Niere", "solo" in "suolo", "not" in "knot", "often" in "soften".
    assert found("en", "What is it?", "*A ball", "A tall wall", "Soften the knot", "Fall") == {}
    assert found("de", "Was ist das?", "*Die Niere", "Das Zimmer", "Die Nichte", "Ein Nest") == {}
    assert found("it", "Che cos'è?", "*Il suolo", "I sogni", "Il sole", "Il mare") == {}


def test_case_accents_punctuation_and_inflections_are_read() -> None:
    assert 3 in found("fr", "Quoi ?", "*Un", "Deux", "AUCUNE DES RÉPONSES PRÉCÉDENTES !")
    assert 3 in found("fr", "Quoi ?", "*Un", "Deux", "aucune des reponses precedentes")
    assert 19 in found("de", "Welches ist KEINE Primzahl?", "2", "3", "*9")
    assert 19 in found("de", "Alle sind Metalle ausser:", "Eisen", "*Schwefel", "Zink")
    assert 11 in found("fr", "Les chats", "*sont des félins", "sont toutes des femelles", "nagent")
    # A negation right before it makes a hedge, not an absolute.
    assert 11 not in found("en", "Cats", "*are felines", "are not always black", "swim")


def test_refusals() -> None:
    with pytest.raises(ContractError) as e:
        lint_question("short", "fr", {"configVersion": 3})
    assert e.value.code is ErrorCode.lint_unsupported
    with pytest.raises(ContractError) as e:
        lint_question("mcq", "fr", {"configVersion": 2, "prompt": "Q ?", "choices": []})
    assert e.value.code is ErrorCode.draft_invalid
    problems = (e.value.details or {})["problems"]
    assert any(p["path"] == "choices" for p in problems)


def test_the_reply_is_the_contract() -> None:
    reply = lint_question(
        "mcq", "en", mcq("Which is NOT blue?", "Sky", "*Grass", "Sea", "None of the above")
    )
    again = LintReply.model_validate_json(reply.model_dump_json())
    assert [(f.code, f.criterion, f.path, f.severity) for f in again.findings] == [
        ("iwf.none_of_the_above", 3, "choices.3", "notice"),
        ("iwf.negative_stem", 19, "prompt", "notice"),
    ]
    assert "none of the above" in again.findings[0].message
    assert [c.number for c in CRITERIA] == list(LINT_CRITERIA)


def test_messages_speak_the_question_s_language() -> None:
    reply = lint_question("mcq", "de", mcq("Welches ist nicht rot?", "*Gras", "Blut", "Rose"))
    assert reply.findings[0].message.startswith("Der Fragestamm ist verneint")


@pytest.mark.parametrize(
    ("text", "language", "value"),
    [
        ("1,500", "en", 1500),
        ("1,5", "fr", 1.5),
        ("4 806", "fr", 4806),
        ("1'000", "de", 1000),
        ("−3", "en", -3),
        ("9,81 m/s²", "fr", 9.81),
        ("3 × 10^8", "en", 300_000_000),
        ("1/2", "fr", 0.5),
        ("15 %", "de", 15),
        ("6,02 · 10²³", "fr", 6.02e23),
    ],
)
def test_numbers_are_read_as_numbers(text: str, language: str, value: float) -> None:
    parsed = parse_number(text, language)
    assert parsed is not None and float(parsed[0]) == pytest.approx(value)
    assert parse_number("Paris", language) is None


def test_the_labelled_set_meets_the_issue_s_targets() -> None:
    items = iwf.load_items()
    assert len(items) >= 120
    assert {i.language for i in items} == {"fr", "en", "de", "it"}
    clean = [i for i in items if not i.flaws]
    assert len(clean) >= 40
    for number in LINT_CRITERIA:
        assert sum(1 for i in items if number in i.flaws) >= 10, number
    result = iwf.score(iwf.lint_items(items))
    assert iwf.meets_targets(result), iwf.render(result)


def test_lint_notices_join_a_review_after_the_model_s_and_never_on_its_fields() -> None:
    config = mcq(
        "Quel animal n'est pas un mammifère ?",
        "Le chat",
        "*Le requin",
        "Le lion",
        "Aucune de ces réponses",
    )
    model = [
        ReviewFinding(severity=Severity.notice, path="choices.3.text", message="Typo."),
        ReviewFinding(severity=Severity.error, path="choices.1.correct", message="Faux."),
    ]
    merged = with_lint_notices(model, "mcq", config, "fr")
    assert merged[:2] == model
    # NOTA is on choices.3, which the model named (choices.3.text): dropped. The stem stays.
    assert [(f.code, f.path, f.severity) for f in merged[2:]] == [
        ("iwf.negative_stem", "prompt", Severity.notice)
    ]
    assert merged[2].fix is None
    # Unknown language: the language-free criteria only; another type or an invalid config:
    # the model's findings as they were.
    assert with_lint_notices(model, "mcq", config, None) == model
    assert with_lint_notices(model, "short", config, "fr") == model
    assert with_lint_notices(model, "mcq", {"prompt": 1}, "fr") == model
    # Never past the platform's 20.
    many = [
        ReviewFinding(severity=Severity.warn, path="explanation", message=str(i)) for i in range(20)
    ]
    assert with_lint_notices(many, "mcq", config, "fr") == many
    # The model's finding keeps no code on the wire; a notice carries its own.
    wire = [f.model_dump(mode="json") for f in merged]
    assert "code" not in wire[0] and wire[2]["code"] == "iwf.negative_stem"


def test_a_phrase_may_go_on_with_reference_words_and_combinations_take_neither_nor() -> None:
    assert 3 in found("en", "Which gas?", "Oxygen", "*Carbon dioxide", "No correct answer is given")
    assert 14 in found("en", "Which conduct?", "Copper", "*Neither A nor B", "Glass")
    assert 10 in found("fr", "Le chat .... sur le toit.", "*dort", "mange", "court")
    assert 17 in found("en", "Smoking", "*causes cancer", "might cure colds", "helps sleep")
