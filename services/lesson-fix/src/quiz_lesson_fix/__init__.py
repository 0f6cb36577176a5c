"""quiz_lesson_fix."""
