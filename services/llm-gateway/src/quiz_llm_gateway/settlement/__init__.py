"""What a paid call owes the books, never lost: the ledger (`ledger`), the settle writer
(`writer`), the local and JetStream journals (`journal`, `stream_journal`) and the replay of
request ids (`requests`). Above the rows only."""
