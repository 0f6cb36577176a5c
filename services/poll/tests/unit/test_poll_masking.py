"""Names and e-mails masked before an idea leaves (ADR-072 §14; FACTS D `maskNames`).

The platform's AI db test (heig-quiz `apps/api/src/modules/poll/brainstorm.ai.db.test.ts`,
"masks the name of a person the poll knows") sends "Zorglub Marchand respire" for a joined
student and expects neither name in the prompt; our cases restate that and the rules' edges.
"""

from __future__ import annotations

from quiz_contracts.poll import MaskedPerson, PollJoin, PollParticipant
from quiz_poll.domain.masking import MASK, name_mask, people_to_mask

ZOE = MaskedPerson(given_name="Zoé", family_name="Dupont", email="zoe.dupont@ecole.ch")
JEAN_LUC = MaskedPerson(given_name="Jean-Luc", family_name="N'Diaye", email="")
LI = MaskedPerson(given_name="Li", family_name="Na", email="")
PASCAL = MaskedPerson(given_name="Pascal", family_name="Rossi", email="")


def mask_names(text: str, people: list[MaskedPerson]) -> str:
    """`text` as it leaves for the model: the mask a pass builds once, applied (`build_call`)."""
    return name_mask(people).apply(text)


def test_a_known_persons_names_are_masked_as_whole_words_ignoring_case_and_accents() -> None:
    assert mask_names("zoe respire avec DUPONT", [ZOE]) == f"{MASK} respire avec {MASK}"
    assert mask_names("Zoé, Zoe et ZOÉ", [ZOE]) == f"{MASK}, {MASK} et {MASK}"
    # whole words only: a longer word that starts with the name stays
    assert mask_names("Dupontel respire", [ZOE]) == "Dupontel respire"


def test_hyphens_and_apostrophes_split_names_and_short_parts_are_kept() -> None:
    assert mask_names("jean et luc", [JEAN_LUC]) == f"{MASK} et {MASK}"
    assert mask_names("Diaye mange", [JEAN_LUC]) == f"{MASK} mange"
    assert mask_names("n dort", [JEAN_LUC]) == "n dort"  # "N" is one letter
    assert mask_names("Li Na chante", [LI]) == "Li Na chante"  # parts under 3 letters


def test_emails_are_masked_case_insensitively() -> None:
    assert mask_names("écris à ZOE.DUPONT@Ecole.CH", [ZOE]) == f"écris à {MASK}"


def test_a_name_that_is_also_a_word_is_masked_everywhere() -> None:
    assert mask_names("la loi de pascal", [PASCAL]) == f"la loi de {MASK}"


def test_nobody_known_means_nothing_masked_the_guests_of_an_anonymous_poll() -> None:
    text = "Zoé Dupont est nulle"
    assert mask_names(text, []) == text


def test_the_platforms_example_leaves_no_name() -> None:
    person = MaskedPerson(given_name="Zorglub", family_name="Marchand", email="")
    masked = name_mask([person]).apply("Zorglub Marchand respire")
    assert masked == f"{MASK} {MASK} respire"


def join(kind: str, person: MaskedPerson | None) -> PollJoin:
    participant = PollParticipant(
        attempt_id=f"a-{kind}", kind=kind, user_id="u1" if kind == "account" else None
    )
    return PollJoin(evaluation_id="ev1", participant=participant, person=person)


def test_the_roster_and_the_joined_accounts_are_masked_never_a_guest() -> None:
    people = people_to_mask([ZOE], [join("account", PASCAL), join("guest", JEAN_LUC)])
    assert people == [ZOE, PASCAL]
    masked = name_mask(people).apply("Zoé, Pascal et Jean")
    assert masked == f"{MASK}, {MASK} et Jean"
    # an anonymous poll: no roster; only the accounts that joined are known
    assert people_to_mask([], [join("guest", None)]) == []
