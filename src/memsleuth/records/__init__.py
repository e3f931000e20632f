"""The records tier: what crosses layers, typed (model, evidence, stored runs), parsed once from
what the measuring tier wrote (ms-run's document, the explaining run's profiles, heap accounting,
call sites), and the store that keeps them (SQLite or PostgreSQL). Imports only the shared base."""
