"""The brainstorm poll's pure core (ADR-071 with ADR-072): no I/O, no clock, no message.

- `ideas`: `idea_key`, the ideas of an answer, the maxIdeas check;
- `marks`: visibility, cluster heads, the teacher's actions (with their audit record);
- `board`: the board and the cloud recomputed from every answer — the reference rule;
- `tally`: the same kept incrementally, one answer change at a time;
- `views`: the wall's and the phones' tallies, the live frames, the staff board, the switches;
- `masking`, `ai`, `ai_run`: what leaves for the model, how its reply is read, the lease rules;
- `freeze`: 30 days after close.
"""
