"""Pure lesson logic: the text model, the checks and "Fix with AI". No I/O."""
