"""PostgreSQL for the store (`--db postgresql://user:password@host/db`), through psycopg 3.

Why psycopg and not SQLAlchemy: the store is a handful of hand-written SQL statements over a
DB-API connection; psycopg's `Connection.execute` has the shape of sqlite3's, so one Store class
serves both with the differences kept here (placeholders, DDL, read-only sessions), and every
statement stays readable SQL. SQLAlchemy Core would rewrite each query into its expression
language for no difference in behaviour.
"""
from __future__ import annotations

import re

from memsleuth.errors import UsageError



# A password in a connection URL: in the userinfo (user:PW@host) or as a query parameter
# (?password=PW, &sslpassword=PW). Matched as text, so a URL too malformed to parse is redacted too.
_USERINFO_PW = re.compile(r"(postgres(?:ql)?://[^/@?#\s]*?:)([^@/?#\s]*)@", re.IGNORECASE)
_QUERY_PW = re.compile(r"([?&](?:ssl)?password=)([^&#\s]*)", re.IGNORECASE)


def display(url: str) -> str:
    """The URL (or any text holding one: `--db=URL`) as messages, the store and reports show it:
    every password replaced by ***, whichever form it takes."""
    return _QUERY_PW.sub(r"\1***", _USERINFO_PW.sub(r"\1***@", url))


class Connection:
    """A psycopg connection with sqlite3's calling convention: `?` placeholders, executescript."""

    def __init__(self, conn):
        self.conn = conn

    def execute(self, sql: str, params=()):
        return self.conn.execute(sql.replace("?", "%s"), tuple(params))

    def executescript(self, script: str) -> None:
        for stmt in (s.strip() for s in script.split(";")):
            if stmt:
                self.conn.execute(stmt)

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        self.conn.close()


def connect(url: str, *, readonly: bool) -> Connection:
    """One clear line (exit 2) for what stops the connection: no driver, unreachable, refused."""
    try:
        import psycopg
    except ImportError:
        raise UsageError("--db postgresql://... needs psycopg (pip install 'psycopg[binary]'); `make setup` "
                         "installs it") from None
    try:
        conn = psycopg.connect(url, connect_timeout=10, application_name="memsleuth")
    except psycopg.OperationalError as e:
        raise UsageError(f"{display(url)}: cannot connect: {_reason(display(str(e)))}") from None
    except (psycopg.ProgrammingError, psycopg.InterfaceError, ValueError) as e:   # a malformed URL
        raise UsageError(f"{display(url)}: not a usable PostgreSQL URL: {_reason(display(str(e)))}") from None
    if readonly:
        conn.execute("SET default_transaction_read_only = on")
        conn.commit()
    return Connection(conn)


def _reason(text: str) -> str:
    """libpq's message, one line, without the URL's password."""
    lines = [re.sub(r"^connection failed: ", "", ln.strip()) for ln in text.strip().splitlines() if ln.strip()]
    # libpq tries each address of the host and repeats the reason for each: say it once.
    lines = [re.sub(r'^connection to server at "[^"]*"(, port \d+)? failed: ', "", ln) for ln in lines]
    reason = "; ".join(dict.fromkeys(lines)) or "unknown error"
    return re.sub(r"password=\S+", "password=***", reason)
