"""The review's pure rules (ADR-060), no I/O: what the routes, consumers and the night call.

- `paths`: a finding's path (`explanation` or a dot path into the config), read and replaced;
- `fixes`: the exact replacement of a fix, and Fix/Undo on the editor's draft;
- `findings`: the findings kept from the model's reply;
- `prompt`: the call to make (system prompt, the question as data, the reply's schema);
- `states`: review state, pill, the pool's tab, the refusals checked before any call;
- `night`: the Zurich window, the candidates, the share of the cap.
"""
