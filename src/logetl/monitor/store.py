"""The monitor's store, through SQLAlchemy: SQLite by default, PostgreSQL with ``postgresql://...``.

``runs`` keeps, per owner and run id, the latest document (highest ``seq``) and the columns the
all-applications view filters and sorts on, each indexed, so that a page stays fast with 100,000 runs.
Runs are keyed by (owner, run id): a document sent with one user's key can never touch, hide or reveal
another user's run, even one with the same id. API keys are kept as a short public prefix and the SHA-256
of the whole key; the key itself is shown once, when created. Login sessions live here too, as the
SHA-256 of a random session id (the cookie holds the id, never a key). A SQLite store is a 0600 file.
"""
from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import time
from contextlib import contextmanager

from sqlalchemy import (BigInteger, Column, Float, Index, Integer, MetaData, PrimaryKeyConstraint, String,
                        Table, Text, UniqueConstraint, create_engine, func, inspect, select, text, tuple_)

from logetl.monitor.documents import lineage_changes, lineage_of, row_of, validate
from logetl.monitor.layout import SCHEMA_VERSION, private_file

metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("run_id", String(32), nullable=False),
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
    Column("warning", Text),
    # data quality (layout 3): malformed lines, their share of the lines read, dropped records; and a
    # running run's progress (JSON: step, percent, rate, ETA)
    Column("malformed", BigInteger),
    Column("malformed_share", Float),
    Column("dropped", BigInteger),
    Column("progress", Text),
    Column("document", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
    PrimaryKeyConstraint("owner", "run_id", name="runs_pk"),
)
SORTABLE = ("started_at", "finished_at", "duration", "application", "status", "owner", "engine", "program",
            "records_read", "records_written", "malformed", "malformed_share", "dropped", "run_id")
#: the columns layout 3 added: a store of layout 2 gets them (and their indexes), filled from its documents
ADDED_IN_3 = ("malformed", "malformed_share", "dropped", "progress")
for _col in SORTABLE:
    if _col != "run_id":
        Index(f"runs_{_col}", runs.c[_col], runs.c.run_id)
Index("runs_run_id", runs.c.run_id)
Index("runs_owner_started", runs.c.owner, runs.c.started_at, runs.c.run_id)
Index("runs_application_started", runs.c.application, runs.c.started_at)
#: what the monitor's background worker looks at: runs updated since it last looked (alerts, lineage)
RUNS_UPDATED = Index("runs_updated_at", runs.c.updated_at)

api_keys = Table(
    "api_keys", metadata,
    Column("prefix", String(16), primary_key=True),
    Column("hash", String(64), nullable=False),
    Column("user", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
)

sessions = Table(
    "sessions", metadata,
    Column("id_hash", String(64), primary_key=True),     # SHA-256 of the cookie's random session id
    Column("prefix", String(16), nullable=False),        # the key it was opened with: revoking it ends it
    Column("user", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

settings = Table(
    "settings", metadata,
    Column("key", String(50), primary_key=True),
    Column("value", Text, nullable=False),
)

# --- alerts, deliveries, lineage and retention (layout 3: new tables only, so older stores just gain them) ---

alert_rules = Table(
    "alert_rules", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("owner", String(200)),                        # None: every owner's runs (a rule made with the CLI)
    Column("application", String(200), nullable=False),
    Column("tag", String(400)),                          # KEY=VALUE (or KEY): only runs with that tag
    Column("kind", String(12), nullable=False),          # failed | malformed | records | duration
    Column("threshold", Float),
    Column("last", Integer),                             # how many earlier successful runs the median is of
    Column("webhook", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
Index("alert_rules_application", alert_rules.c.application)

alerts = Table(
    "alerts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("rule_id", Integer, nullable=False),
    Column("owner", String(200), nullable=False),        # the run's owner
    Column("run_id", String(32), nullable=False),
    Column("application", String(200), nullable=False),
    Column("kind", String(12), nullable=False),
    Column("message", Text, nullable=False),
    Column("details", Text, nullable=False),             # JSON: the values the rule compared
    Column("created_at", Float, nullable=False),
    UniqueConstraint("rule_id", "owner", "run_id", name="alerts_once_per_run"),
)
Index("alerts_run", alerts.c.owner, alerts.c.run_id)
Index("alerts_created", alerts.c.created_at)

#: what the server sends out: alert webhooks and OpenLineage events, each retried with back-off
deliveries = Table(
    "deliveries", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(12), nullable=False),          # webhook | openlineage
    Column("alert_id", Integer),
    Column("owner", String(200), nullable=False),
    Column("run_id", String(32), nullable=False),
    Column("event", String(40), nullable=False),         # alert:<id>, or START / COMPLETE / FAIL / ABORT
    Column("url", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("state", String(12), nullable=False),         # pending | delivered | failed
    Column("attempts", Integer, nullable=False),
    Column("next_at", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    UniqueConstraint("kind", "owner", "run_id", "event", name="deliveries_once"),
)
Index("deliveries_due", deliveries.c.state, deliveries.c.next_at)
Index("deliveries_run", deliveries.c.owner, deliveries.c.run_id)

delivery_attempts = Table(
    "delivery_attempts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("delivery_id", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("at", Float, nullable=False),
    Column("status", Integer),                           # the HTTP status, None when no answer came
    Column("error", Text),
    Column("ms", Float, nullable=False),
)
Index("delivery_attempts_delivery", delivery_attempts.c.delivery_id)

#: the last status the background worker handled for a run (so each run is handled once per state)
run_checks = Table(
    "run_checks", metadata,
    Column("owner", String(200), nullable=False),
    Column("run_id", String(32), nullable=False),
    Column("status", String(12), nullable=False),
    Column("checked_at", Float, nullable=False),
    PrimaryKeyConstraint("owner", "run_id", name="run_checks_pk"),
)

#: what a run read and wrote, and its error: the lineage search looks here
run_lineage = Table(
    "run_lineage", metadata,
    Column("owner", String(200), nullable=False),
    Column("run_id", String(32), nullable=False),
    Column("role", String(8), nullable=False),           # input | output | error
    Column("value", Text, nullable=False),
)
Index("run_lineage_run", run_lineage.c.owner, run_lineage.c.run_id)

#: per owner, application and UTC day, the sums of runs that ``logetl monitor prune`` removed
daily_aggregates = Table(
    "daily_aggregates", metadata,
    Column("owner", String(200), nullable=False),
    Column("application", String(200), nullable=False),
    Column("day", String(10), nullable=False),           # YYYY-MM-DD (UTC) of the runs' start
    Column("runs", Integer, nullable=False),
    Column("successful", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("duration_sum", Float, nullable=False),
    Column("duration_n", Integer, nullable=False),
    Column("duration_max", Float),
    Column("records_read", BigInteger, nullable=False),
    Column("records_written", BigInteger, nullable=False),
    PrimaryKeyConstraint("owner", "application", "day", name="daily_aggregates_pk"),
)

KEY_PREFIX = "lgt_"
SESSION_DAYS = 14


def default_url(home: str) -> str:
    return f"sqlite:///{home}/monitor.db"


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///path`` URL (None for other databases and in-memory SQLite)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):].split("?", 1)[0]
    return path if path and path != ":memory:" else None


#: SQLite's lower() folds ASCII letters only (``CAFÉ`` stays ``cafÉ``): the store's SQLite connections
#: get Python's ``str.lower`` under this name for the search
FOLD = "logetl_lower"
#: a PostgreSQL collation whose lower() is Unicode's, whatever the database's locale (its lower() under
#: the C locale folds ASCII letters only); present where PostgreSQL is built with ICU
ICU_ROOT = "und-x-icu"


def _fold(text: str | None) -> str | None:
    return None if text is None else text.lower()


def tag_text(tag: str) -> str:
    """How a tag, ``KEY=VALUE`` or ``KEY``, looks inside ``runs.tags`` (JSON with sorted keys, ``json.dumps``
    spacing)."""
    key, sep, value = tag.partition("=")
    return json.dumps(key) + ": " + (json.dumps(value) if sep else "")


def replace_lineage(conn, owner: str, doc: dict) -> None:
    """The run's rows in ``run_lineage``, from its newest document."""
    rid = doc["run"]["run_id"]
    conn.execute(run_lineage.delete().where(run_lineage.c.owner == owner, run_lineage.c.run_id == rid))
    rows = [{"owner": owner, **x} for x in lineage_of(doc)]
    if rows:
        conn.execute(run_lineage.insert(), rows)


#: PostgreSQL's advisory lock key of a store's set-up (``Store._setting_up``): "logetl" in ASCII
SETUP_LOCK = 0x6C6F6765746C


class Store:
    def __init__(self, url: str):
        self.url = url
        kwargs = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            path = sqlite_path(url)
            if path:
                private_file(path)
        elif url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url[len("postgresql://"):]
        self.engine = create_engine(url, **kwargs)
        self._keys_required = False
        self._icu: bool | None = None     # whether PostgreSQL has the ICU root collation (``contains``)
        #: called after a document is stored (the server's background worker wakes up on it)
        self.on_ingest = None
        if self.engine.dialect.name == "sqlite":
            from sqlalchemy import event

            @event.listens_for(self.engine, "connect")
            def _pragmas(conn, _):  # many writers (runs) and readers (the app) at once
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.close()
                conn.create_function(FOLD, 1, _fold, deterministic=True)
        with self._setting_up():
            self._migrate()
            metadata.create_all(self.engine)
            self._migrate_v3()
            if self.engine.dialect.name == "sqlite":
                with self.engine.begin() as conn:
                    conn.exec_driver_sql(f"PRAGMA user_version={SCHEMA_VERSION}")

    @contextmanager
    def _setting_up(self):
        """One process at a time creates or migrates the store. ``create_all`` looks for each table, then
        creates the missing ones: several runs that opened a new store at once (a scheduler starting them
        together on a fresh machine) all found no table, and all but one failed with "table runs already
        exists", so their runs were not recorded (27 of 40 opens, 4 processes at once, 10 times). SQLite:
        an exclusive ``flock`` of the store's directory (not of the database file: closing any descriptor
        of it would drop the POSIX locks SQLite's own connections in this process hold). PostgreSQL: an
        advisory lock, held by a connection of its own while the others do the work."""
        path = sqlite_path(self.url)
        if path:
            fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_DIRECTORY)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError:   # a file system without flock of a directory (NFS, some FUSE): as before
                    pass
                yield
            finally:
                os.close(fd)   # (and the lock with it)
        elif self.engine.dialect.name == "postgresql":
            # held by a transaction of its own: released at its end, whatever ends it (an error, a lost
            # connection), so a connection back in the pool never keeps it
            with self.engine.begin() as conn:
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SETUP_LOCK})
                yield
        else:
            yield

    def _migrate(self) -> None:
        """A store of the first layout (runs keyed by run id alone, no warning column) is rebuilt in the new
        one; its runs, keys and settings are kept."""
        insp = inspect(self.engine)
        if not insp.has_table("runs"):
            return
        have = {c["name"] for c in insp.get_columns("runs")}
        if "warning" in have:
            return self._add_columns(have)
        pg = self.engine.dialect.name == "postgresql"
        old_indexes = [i["name"] for i in insp.get_indexes("runs")]
        pk_name = insp.get_pk_constraint("runs").get("name")
        cols = [c.name for c in runs.c if c.name in have]
        with self.engine.begin() as conn:
            conn.execute(text("ALTER TABLE runs RENAME TO runs_v1"))
            for name in old_indexes:
                conn.execute(text(f'DROP INDEX IF EXISTS "{name}"'))
            if pg and pk_name:
                conn.execute(text(f'ALTER INDEX "{pk_name}" RENAME TO runs_v1_pkey'))
            runs.create(conn)               # with its indexes
            conn.execute(text(f"INSERT INTO runs ({', '.join(cols)}) SELECT {', '.join(cols)} FROM runs_v1"))
            conn.execute(text("DROP TABLE runs_v1"))
        self._fill_quality()

    def _add_columns(self, have: set[str]) -> None:
        """Layout 2 -> 3: adds the data-quality and progress columns and their indexes, then fills them from
        the stored documents."""
        missing = [c for c in ADDED_IN_3 if c not in have]
        if not missing:
            return
        with self.engine.begin() as conn:
            for name in missing:
                col = runs.c[name]
                conn.execute(text(f"ALTER TABLE runs ADD COLUMN {name} {col.type.compile(self.engine.dialect)}"))
            for index in runs.indexes:
                if any(c.name in missing for c in index.columns):
                    index.create(conn, checkfirst=True)
        self._fill_quality()

    def _fill_quality(self, batch: int = 1000) -> None:
        """Computes the data-quality columns of runs stored before they existed, from their documents: in
        key order, each run once (a run not counted keeps them null, and must not be taken again)."""
        from logetl.monitor.documents import progress_column, quality

        after = ("", "")
        while True:
            with self.engine.begin() as conn:
                todo = conn.execute(select(runs.c.owner, runs.c.run_id, runs.c.document)
                                    .where(runs.c.malformed.is_(None), tuple_(runs.c.owner, runs.c.run_id) > after)
                                    .order_by(runs.c.owner, runs.c.run_id).limit(batch)).all()
                if todo:
                    after = (todo[-1].owner, todo[-1].run_id)
                for r in todo:
                    run = json.loads(r.document).get("run", {})
                    conn.execute(runs.update().where(runs.c.owner == r.owner, runs.c.run_id == r.run_id)
                                 .values(**quality(run), progress=progress_column(run)))
            if len(todo) < batch:
                return

    def _migrate_v3(self) -> None:
        """Layout 3 adds tables (made by ``create_all``) and an index on ``runs.updated_at``; runs stored
        before it get their lineage rows (paths, error) from their documents, once."""
        with self.engine.begin() as conn:
            RUNS_UPDATED.create(conn, checkfirst=True)
            # the one store opener that adds the marker indexes the runs (several runs may open a new store at once)
            mark = self._insert()(settings).values(key="lineage_indexed", value="1").on_conflict_do_nothing()
            if conn.execute(mark.returning(settings.c.key)).first() is None:
                return
            rows = []
            for r in conn.execute(select(runs.c.owner, runs.c.document)):
                rows.extend({"owner": r.owner, **x} for x in lineage_of(json.loads(r.document)))
                if len(rows) >= 5000:
                    conn.execute(run_lineage.insert(), rows)
                    rows = []
            if rows:
                conn.execute(run_lineage.insert(), rows)

    def contains(self, column, needle: str):
        """Case-insensitive substring (no LIKE, so ``%`` and ``_`` in paths are plain characters), with
        Unicode's lower case on both sides (``CAFÉ.log`` is found by ``café``): Python's ``str.lower`` on
        SQLite (a function of the store's connections), the ICU root collation's ``lower()`` on a
        PostgreSQL that has it, else the database's own (Unicode's under a UTF-8 locale)."""
        if self.engine.dialect.name == "sqlite":
            return func.instr(getattr(func, FOLD)(column), needle.lower()) > 0
        if self._icu is None:
            with self.engine.connect() as conn:
                self._icu = conn.execute(text(   # (ICU collations need a UTF-8 database)
                    "SELECT current_setting('server_encoding') = 'UTF8' "
                    "AND EXISTS (SELECT 1 FROM pg_collation WHERE collname = :name)"), {"name": ICU_ROOT}).scalar_one()
        folded = func.lower(column.collate(ICU_ROOT)) if self._icu else func.lower(column)
        return func.strpos(folded, needle.lower()) > 0

    def _insert(self):
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert

    # --- documents ---------------------------------------------------------------------------------------

    def ingest(self, doc: dict, owner: str | None = None) -> bool:
        """Stores a document unless a newer one (higher seq) of the same owner's run is there. Returns whether
        it did. Runs are keyed by (owner, run id): another owner's run of the same id is neither touched nor
        consulted, so the answer is the same whether or not it exists."""
        doc = validate(doc)
        row = row_of(doc, owner)
        stmt = self._insert()(runs).values(**row)
        stmt = stmt.on_conflict_do_update(
            index_elements=[runs.c.owner, runs.c.run_id],
            set_={k: stmt.excluded[k] for k in row if k not in ("run_id", "owner")},
            where=runs.c.seq < stmt.excluded.seq)
        with self.engine.begin() as conn:   # RETURNING, not rowcount: drivers differ on upserts' rowcount
            stored = conn.execute(stmt.returning(runs.c.run_id)).first() is not None
            if stored and lineage_changes(doc):
                replace_lineage(conn, row["owner"], doc)
        if stored and self.on_ingest is not None:
            self.on_ingest()
        return stored

    def ingest_many(self, rows: list[dict]) -> None:
        """Bulk load of prepared rows (tests and benchmarks)."""
        with self.engine.begin() as conn:
            conn.execute(runs.insert(), rows)

    def _filters(self, owner, status, application, since, until, min_malformed_share=None,
                 max_malformed_share=None, tag=None):
        conds = []
        if tag:   # as the lineage search takes it (KEY=VALUE, or KEY: any value)
            conds.append(self.contains(runs.c.tags, tag_text(tag)))
        if min_malformed_share is not None:
            conds.append(runs.c.malformed_share >= min_malformed_share)
        if max_malformed_share is not None:
            conds.append(runs.c.malformed_share <= max_malformed_share)
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
                  descending: bool = True, limit: int = 50, offset: int = 0,
                  min_malformed_share: float | None = None, max_malformed_share: float | None = None,
                  tag: str | None = None) -> tuple[list[dict], int]:
        conds = self._filters(owner, status, application, since, until, min_malformed_share, max_malformed_share,
                              tag)
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
            r["progress"] = json.loads(r["progress"]) if r.get("progress") else None
        return rows, total

    def previous_run(self, run: dict, owner: str | None = None, status: str = "SUCCESSFUL") -> str | None:
        """The id of the latest run of ``run``'s application that started before it, with ``status``
        (visible to ``owner``; None: every owner's), or None."""
        if run.get("started_at") is None:
            return None
        conds = [runs.c.application == run["application"], runs.c.status == status,
                 runs.c.run_id != run["run_id"], runs.c.started_at <= run["started_at"]]
        if owner is not None:
            conds.append(runs.c.owner == owner)
        q = (select(runs.c.run_id).where(*conds)
             .order_by(runs.c.started_at.desc(), runs.c.run_id.desc()).limit(1))
        with self.engine.connect() as conn:
            r = conn.execute(q).first()
        return r[0] if r else None

    def get_run(self, run_id: str, owner: str | None = None) -> dict | None:
        """The run ``run_id`` of ``owner``; with no owner (a server without keys), the most recently updated
        run of that id, whoever its document names as owner."""
        conds = [runs.c.run_id == run_id] + ([runs.c.owner == owner] if owner is not None else [])
        q = select(runs.c.document, runs.c.owner).where(*conds).order_by(runs.c.updated_at.desc()).limit(1)
        with self.engine.connect() as conn:
            r = conn.execute(q).first()
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

    def keys_required(self) -> bool:
        """Whether this store has ever had an API key (active or revoked). Once it has, keys stay required:
        revoking the last key leaves a server nobody can use without a new key, never a public one."""
        if not self._keys_required:
            with self.engine.connect() as conn:
                self._keys_required = conn.execute(select(func.count()).select_from(api_keys)).scalar_one() > 0
        return self._keys_required

    # --- login sessions -----------------------------------------------------------------------------------

    def open_session(self, key: str | None) -> str | None:
        """A new session for a valid key: returns its random id (for the cookie), or None for a bad key.
        Only the id's SHA-256 is stored; expired sessions are purged."""
        user = self.user_of_key(key)
        if user is None:
            return None
        sid = secrets.token_urlsafe(32)
        now = time.time()
        prefix = key[len(KEY_PREFIX):].split("_", 1)[0]
        with self.engine.begin() as conn:
            conn.execute(sessions.delete().where(sessions.c.expires_at < now))
            conn.execute(sessions.insert().values(id_hash=_hash(sid), prefix=prefix, user=user, created_at=now,
                                                  expires_at=now + SESSION_DAYS * 86400))
        return sid

    def user_of_session(self, sid: str | None) -> str | None:
        """The user of a live session (not expired, its key not revoked), or None."""
        if not sid:
            return None
        q = (select(sessions.c.user).select_from(sessions.join(api_keys, api_keys.c.prefix == sessions.c.prefix))
             .where(sessions.c.id_hash == _hash(sid), sessions.c.expires_at > time.time(),
                    api_keys.c.revoked_at.is_(None)))
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        return row[0] if row else None

    def close_session(self, sid: str | None) -> None:
        if sid:
            with self.engine.begin() as conn:
                conn.execute(sessions.delete().where(sessions.c.id_hash == _hash(sid)))

    def list_keys(self) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                select(api_keys.c.prefix, api_keys.c.user, api_keys.c.created_at, api_keys.c.revoked_at)
                .order_by(api_keys.c.created_at))]

    def revoke_key(self, prefix: str) -> bool:
        prefix = prefix[len(KEY_PREFIX):] if prefix.startswith(KEY_PREFIX) else prefix
        with self.engine.begin() as conn:
            done = conn.execute(api_keys.update().where(api_keys.c.prefix == prefix, api_keys.c.revoked_at.is_(None))
                                .values(revoked_at=time.time())).rowcount > 0
            conn.execute(sessions.delete().where(sessions.c.prefix == prefix))
            return done
