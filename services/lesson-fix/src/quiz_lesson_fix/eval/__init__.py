"""`quiz-eval lesson-fix`: seeded-defect lessons, their scoring, and the command (`cli`)."""
