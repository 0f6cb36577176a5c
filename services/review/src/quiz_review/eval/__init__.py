"""The labelled evaluation set of the review and its scoring (for `quiz-eval review`)."""
