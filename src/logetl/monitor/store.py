"""The monitor's store, through SQLAlchemy: SQLite by default, PostgreSQL with ``postgresql://...``.

``runs`` keeps, per run id, the latest document (highest ``seq``) and the columns the all-applications
view filters and sorts on, each indexed, so that a page stays fast with 100,000 runs. API keys are kept as
a short public prefix and the SHA-256 of the whole key; the key itself is shown once, when created.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time

from sqlalchemy import (BigInteger, Column, Float, Index, Integer, MetaData, String, Table, Text, and_,
                        create_engine, func, select)

from logetl.monitor.documents import row_of, validate

metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("run_id", String(32), primary_key=True),
    Column("owner", String(200), nullable=False),
    Column("application", String(200), nullable=False),
    Column("program", String(50), nullable=False),
    Column("engine", String(20), nullable=False),
    Column("status", String(12), nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("duration", Float),
    Column("records_read", BigInteger),
    Column("records_written", BigInteger),
    Column("seq", Integer, nullable=False),
    Column("tags", Text, nullable=False),
    Column("document", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)
SORTABLE = ("started_at", "finished_at", "duration", "application", "status", "owner", "engine", "program",
            "records_read", "records_written", "run_id")
for _col in SORTABLE:
    if _col != "run_id":
        Index(f"runs_{_col}", runs.c[_col], runs.c.run_id)
Index("runs_owner_started", runs.c.owner, runs.c.started_at, runs.c.run_id)
Index("runs_application_started", runs.c.application, runs.c.started_at)

api_keys = Table(
    "api_keys", metadata,
    Column("prefix", String(16), primary_key=True),
    Column("hash", String(64), nullable=False),
    Column("user", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
)

settings = Table(
    "settings", metadata,
    Column("key", String(50), primary_key=True),
    Column("value", Text, nullable=False),
)

KEY_PREFIX = "lgt_"


def default_url(home: str) -> str:
    return f"sqlite:///{home}/monitor.db"


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class Store:
    def __init__(self, url: str):
        self.url = url
        kwargs = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        elif url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url[len("postgresql://"):]
        self.engine = create_engine(url, **kwargs)
        if self.engine.dialect.name == "sqlite":
            from sqlalchemy import event

            @event.listens_for(self.engine, "connect")
            def _pragmas(conn, _):  # many writers (runs) and readers (the app) at once
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.close()
        metadata.create_all(self.engine)

    def _insert(self):
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert

    # --- documents ---------------------------------------------------------------------------------------

    def ingest(self, doc: dict, owner: str | None = None) -> bool:
        """Stores a document unless a newer one (higher seq) of the run is there. Returns whether it did.
        A run already stored for another owner is not taken over."""
        doc = validate(doc)
        row = row_of(doc, owner)
        stmt = self._insert()(runs).values(**row)
        stmt = stmt.on_conflict_do_update(
            index_elements=[runs.c.run_id],
            set_={k: stmt.excluded[k] for k in row if k != "run_id"},
            where=and_(runs.c.seq < stmt.excluded.seq, runs.c.owner == stmt.excluded.owner))
        with self.engine.begin() as conn:   # RETURNING, not rowcount: drivers differ on upserts' rowcount
            return conn.execute(stmt.returning(runs.c.run_id)).first() is not None

    def ingest_many(self, rows: list[dict]) -> None:
        """Bulk load of prepared rows (tests and benchmarks)."""
        with self.engine.begin() as conn:
            conn.execute(runs.insert(), rows)

    def _filters(self, owner, status, application, since, until):
        conds = []
        if owner is not None:
            conds.append(runs.c.owner == owner)
        if status:
            conds.append(runs.c.status.in_(status))
        if application:
            conds.append(runs.c.application == application)
        if since is not None:
            conds.append(runs.c.started_at >= since)
        if until is not None:
            conds.append(runs.c.started_at < until)
        return conds

    def list_runs(self, *, owner: str | None = None, status: list[str] | None = None, application: str | None = None,
                  since: float | None = None, until: float | None = None, sort: str = "started_at",
                  descending: bool = True, limit: int = 50, offset: int = 0) -> tuple[list[dict], int]:
        conds = self._filters(owner, status, application, since, until)
        col = runs.c[sort]
        order = [col.desc().nulls_last() if descending else col.asc().nulls_last(),
                 runs.c.run_id.desc() if descending else runs.c.run_id.asc()]
        cols = [c for c in runs.c if c.name not in ("document",)]
        q = select(*cols).where(*conds).order_by(*order).limit(limit).offset(offset)
        n = select(func.count()).select_from(runs).where(*conds)
        with self.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(q)]
            total = conn.execute(n).scalar_one()
        for r in rows:
            r["tags"] = json.loads(r["tags"])
        return rows, total

    def get_run(self, run_id: str, owner: str | None = None) -> dict | None:
        conds = [runs.c.run_id == run_id] + ([runs.c.owner == owner] if owner is not None else [])
        with self.engine.connect() as conn:
            r = conn.execute(select(runs.c.document, runs.c.owner).where(*conds)).first()
        if r is None:
            return None
        doc = json.loads(r.document)
        run = doc["run"]
        run["owner"] = r.owner
        run["seq"] = doc["seq"]
        return run

    def applications(self, owner: str | None = None) -> list[str]:
        q = select(runs.c.application).distinct().order_by(runs.c.application)
        if owner is not None:
            q = q.where(runs.c.owner == owner)
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(q)]

    # --- API keys -----------------------------------------------------------------------------------------

    def create_key(self, user: str) -> str:
        prefix = secrets.token_hex(4)
        key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(24)}"
        with self.engine.begin() as conn:
            conn.execute(api_keys.insert().values(prefix=prefix, hash=_hash(key), user=user, created_at=time.time()))
        return key

    def user_of_key(self, key: str | None) -> str | None:
        """The user a key belongs to, or None: the only place keys are checked."""
        if not key or not key.startswith(KEY_PREFIX):
            return None
        prefix = key[len(KEY_PREFIX):].split("_", 1)[0]
        with self.engine.connect() as conn:
            row = conn.execute(select(api_keys).where(api_keys.c.prefix == prefix,
                                                      api_keys.c.revoked_at.is_(None))).first()
        if row is None or not hmac.compare_digest(row.hash, _hash(key)):
            return None
        return row.user

    def has_keys(self) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(api_keys)
                                .where(api_keys.c.revoked_at.is_(None))).scalar_one() > 0

    def list_keys(self) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                select(api_keys.c.prefix, api_keys.c.user, api_keys.c.created_at, api_keys.c.revoked_at)
                .order_by(api_keys.c.created_at))]

    def revoke_key(self, prefix: str) -> bool:
        prefix = prefix[len(KEY_PREFIX):] if prefix.startswith(KEY_PREFIX) else prefix
        with self.engine.begin() as conn:
            return conn.execute(api_keys.update().where(api_keys.c.prefix == prefix, api_keys.c.revoked_at.is_(None))
                                .values(revoked_at=time.time())).rowcount > 0

    def secret(self) -> str:
        """The session-cookie signing secret, made once per store."""
        with self.engine.begin() as conn:
            row = conn.execute(select(settings.c.value).where(settings.c.key == "session_secret")).first()
            if row:
                return row[0]
            value = secrets.token_urlsafe(32)
            conn.execute(settings.insert().values(key="session_secret", value=value))
            return value
