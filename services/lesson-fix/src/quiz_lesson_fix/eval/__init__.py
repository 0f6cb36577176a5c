"""Seeded-defect lessons and the scoring of `quiz-eval lesson-fix` (the harness comes later)."""
