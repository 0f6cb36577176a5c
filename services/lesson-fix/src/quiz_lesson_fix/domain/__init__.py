"""Pure lesson logic: the text model, the checks, quick fixes and "Fix with AI". No I/O."""
