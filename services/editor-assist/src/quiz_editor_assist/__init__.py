"""quiz_editor_assist."""
