"""Item-writing flaws found by rules, without a model (issue 30): eleven criteria of the
19-criterion item-writing-flaw rubric (Moore et al., EC-TEL 2023) for mcq in fr, en, de, it.

- `lint`: the pipeline (`lint_question` for the wire, `lint_mcq` for a valid config) and the
  table of criteria;
- `item`: the mcq as the rules read it, and a rule's finding (`Flaw`);
- `text`: words, folding, lemmas (simplemma), phrases, the data files `words/<code>.json`;
- `choices` (3, 6, 9, 14), `form` (4, 10, 16), `wording` (11, 17, 19), `cues` (12): the rules.
"""
