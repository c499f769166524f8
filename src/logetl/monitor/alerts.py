"""Alert rules and their evaluation.

A rule watches one application's runs (optionally only those with a tag) and fires once per run:

- ``failed``: the run FAILED;
- ``malformed``: the run's malformed share is above the threshold (a fraction, default 0.1);
- ``records``: a SUCCESSFUL run wrote fewer records than threshold x the median of the application's last N
  successful runs before it (default 0.5 x, N = 10);
- ``duration``: a SUCCESSFUL run took longer than threshold x that median duration (default 2 x).

The median needs ``MIN_HISTORY`` earlier successful runs; before that, ``records`` and ``duration`` stay
quiet. A rule applies to runs whose final document arrives after the rule was added (adding a rule never
fires on history). Rules are evaluated by the server's background worker (``worker.py``), for runs sent to
it and for runs an embedded store records, and each alert's webhook is delivered from there.
"""
from __future__ import annotations

import json
import re
import statistics
import time
from urllib.parse import urlsplit

from sqlalchemy import select

from logetl.errors import UsageError
from logetl.monitor.documents import LENGTHS, name_problem, unprintable
from logetl.monitor.store import alert_rules, alerts, deliveries, delivery_attempts, runs

KINDS = ("failed", "malformed", "records", "duration")
DEFAULT_THRESHOLD = {"failed": None, "malformed": 0.1, "records": 0.5, "duration": 2.0}
DEFAULT_LAST = 10
MAX_LAST = 1000
MIN_HISTORY = 3
TERMINAL = ("SUCCESSFUL", "FAILED", "STOPPED")


class RuleError(UsageError):
    """A rule that cannot be added; the message starts with the bad field's name."""


def check_rule(application, kind, threshold=None, last=None, tag=None, webhook=None) -> dict:
    """A rule's fields, checked and completed with defaults; ``RuleError`` names the first bad one."""
    if not isinstance(application, str):
        raise RuleError(f"application must be a name (a string), not {application!r}")
    why = name_problem("application", application, LENGTHS["application"])
    if why:
        raise RuleError(why)
    if kind not in KINDS:
        raise RuleError(f"when must be one of {', '.join(KINDS)}, not {kind!r}")
    if threshold is not None:
        if kind == "failed":
            raise RuleError("threshold does not apply to a 'failed' rule")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold != threshold:
            raise RuleError(f"threshold must be a number, not {threshold!r}")
        if kind == "malformed" and not 0 <= threshold < 1:
            raise RuleError(f"threshold of a 'malformed' rule is a share from 0 to 1 (e.g. 0.05), not {threshold!r}")
        if kind in ("records", "duration") and not 0 < threshold < 1e6:
            raise RuleError(f"threshold of a {kind!r} rule is a positive factor of the median (e.g. "
                            f"{DEFAULT_THRESHOLD[kind]}), not {threshold!r}")
    if last is not None:
        if kind not in ("records", "duration"):
            raise RuleError(f"last (how many runs the median is of) does not apply to a {kind!r} rule")
        if isinstance(last, bool) or not isinstance(last, int) or not 1 <= last <= MAX_LAST:
            raise RuleError(f"last must be a whole number from 1 to {MAX_LAST}, not {last!r}")
    if tag is not None and (not isinstance(tag, str) or not tag.split("=", 1)[0] or len(tag) > 400):
        raise RuleError(f"tag must be KEY=VALUE or KEY, not {tag!r}")
    if tag is not None and unprintable(tag) is not None:
        raise RuleError(f"tag must not contain control characters (newlines, escapes, ...): {tag!r}")
    if not isinstance(webhook, str) or len(webhook) > 2000:
        raise RuleError("webhook must be an http:// or https:// URL")
    try:
        parts = urlsplit(webhook)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        ok = False
    if not ok:
        raise RuleError(f"webhook must be an http:// or https:// URL, not {webhook!r}")
    return {"application": application.strip(), "kind": kind,
            "threshold": float(threshold) if threshold is not None else DEFAULT_THRESHOLD[kind],
            "last": (last or DEFAULT_LAST) if kind in ("records", "duration") else None,
            "tag": tag, "webhook": webhook}


def add_rule(store, owner: str | None = None, policy=None, **fields) -> dict:
    """Stores a rule; ``policy`` (the server's ``outbound.WebhookPolicy``) refuses a webhook on the local
    network at once where its host is an address (names are resolved, and checked, at delivery). ``owner``
    None: every owner's runs (an administrator's rule); an owner is never empty, as a user never is."""
    if owner is not None:
        why = name_problem("owner", owner, LENGTHS["owner"]) if isinstance(owner, str) else \
            f"owner must be a user name (a string), not {owner!r}"
        if why:
            raise RuleError(why)
    rule = check_rule(**fields)
    if policy is not None:
        try:
            policy.check_url(rule["webhook"])
        except ValueError as exc:
            raise RuleError(f"webhook: {exc}") from None
    rule.update(owner=owner, created_at=time.time())
    with store.engine.begin() as conn:
        rule["id"] = conn.execute(alert_rules.insert().values(**rule).returning(alert_rules.c.id)).scalar_one()
    return public_rule(rule)


def public_rule(r) -> dict:
    r = dict(r._mapping) if hasattr(r, "_mapping") else dict(r)
    return {"id": r["id"], "application": r["application"], "tag": r["tag"], "when": r["kind"],
            "threshold": r["threshold"], "last": r["last"], "webhook": r["webhook"], "owner": r["owner"],
            "created_at": r["created_at"]}


def list_rules(store, owner: str | None = None) -> list[dict]:
    q = select(alert_rules).order_by(alert_rules.c.id)
    if owner is not None:
        q = q.where(alert_rules.c.owner == owner)
    with store.engine.connect() as conn:
        return [public_rule(r) for r in conn.execute(q)]


#: the largest rule id: ids are SQL INTEGERs (PostgreSQL's are 32-bit; past 2**63 SQLite overflows)
MAX_RULE_ID = 2**31 - 1


def rule_id_of(text: str) -> int | None:
    """A rule id as given in a path or on the command line, or None when no rule can have it: ASCII digits
    only (``str.isdigit`` takes '²', which ``int`` refuses) and no larger than ``MAX_RULE_ID``."""
    if not re.fullmatch(r"[0-9]{1,10}", text):
        return None
    n = int(text)
    return n if n <= MAX_RULE_ID else None


def remove_rule(store, rule_id: int, owner: str | None = None) -> bool:
    conds = [alert_rules.c.id == rule_id] + ([alert_rules.c.owner == owner] if owner is not None else [])
    with store.engine.begin() as conn:
        return conn.execute(alert_rules.delete().where(*conds)).rowcount > 0


#: what a user who may not see a delivery's URL sees of an error that names its host
HIDDEN_ERROR = "the webhook was refused or failed (the rule's owner sees why: the reason names its host)"


def url_shown(viewer: str | None, rule_owner: str | None) -> bool:
    """Whether ``viewer`` (None: an administrator, or everyone on a server without keys) may see the URL
    of a delivery made for a rule of ``rule_owner`` (None: an administrator's rule, on everyone's runs; a
    rule removed since, or an OpenLineage event, has none either). A webhook URL often holds a secret
    token: a rule an administrator added fires on alice's runs, and alice sees the alert, not the URL."""
    return viewer is None or (rule_owner is not None and rule_owner == viewer)


def shown_tries(tries: list[dict], url: str, shown: bool) -> list[dict]:
    """A delivery's attempts as its viewer sees them: with the URL hidden, an error that names the host
    (a refusal by the webhook policy, some network errors) says only that it failed."""
    if shown:
        return tries
    host = urlsplit(url).hostname or url
    return [{**t, "error": HIDDEN_ERROR if t["error"] and (host in t["error"] or url in t["error"]) else t["error"]}
            for t in tries]


def list_alerts(store, owner: str | None = None, run_ids: list[str] | None = None,
                application: str | None = None, limit: int = 200) -> list[dict]:
    """Fired alerts, newest first, each with the state of its webhook delivery; its URL is shown only as
    ``url_shown`` says (else None)."""
    conds = []
    if owner is not None:
        conds.append(alerts.c.owner == owner)
    if run_ids is not None:
        conds.append(alerts.c.run_id.in_(run_ids))
    if application:
        conds.append(alerts.c.application == application)
    q = (select(alerts, deliveries.c.id.label("delivery_id"), deliveries.c.state, deliveries.c.attempts,
                deliveries.c.url, alert_rules.c.owner.label("rule_owner"))
         .select_from(alerts.outerjoin(deliveries, (deliveries.c.alert_id == alerts.c.id)
                                       & (deliveries.c.kind == "webhook"))
                      .outerjoin(alert_rules, alert_rules.c.id == alerts.c.rule_id))
         .where(*conds).order_by(alerts.c.created_at.desc(), alerts.c.id.desc()).limit(limit))
    out = []
    with store.engine.connect() as conn:
        rows = list(conn.execute(q))
        last = {}
        ids = [r.delivery_id for r in rows if r.delivery_id is not None]
        if ids:
            for a in conn.execute(select(delivery_attempts).where(delivery_attempts.c.delivery_id.in_(ids))
                                  .order_by(delivery_attempts.c.attempt)):
                last.setdefault(a.delivery_id, []).append({"attempt": a.attempt, "at": a.at, "status": a.status,
                                                            "error": a.error, "ms": round(a.ms, 1)})
    for r in rows:
        shown = url_shown(owner, r.rule_owner)
        out.append({"id": r.id, "rule_id": r.rule_id, "run_id": r.run_id, "application": r.application,
                    "owner": r.owner, "when": r.kind, "message": r.message, "values": json.loads(r.details),
                    "created_at": r.created_at,
                    "delivery": None if r.delivery_id is None else {
                        "state": r.state, "attempts": r.attempts, "url": r.url if shown else None,
                        "tries": shown_tries(last.get(r.delivery_id, []), r.url, shown)}})
    return out


# --- evaluation ----------------------------------------------------------------------------------------------

def has_tag(tags: dict, tag: str | None) -> bool:
    if not tag:
        return True
    key, sep, value = tag.partition("=")
    return key in tags and (not sep or str(tags[key]) == value)


def _history(conn, run: dict, rule: dict) -> list:
    """The last ``rule['last']`` successful runs of the run's owner and application before it (with the
    rule's tag)."""
    q = (select(runs.c.run_id, runs.c.duration, runs.c.records_written, runs.c.tags)
         .where(runs.c.owner == run["owner"], runs.c.application == run["application"],
                runs.c.status == "SUCCESSFUL", runs.c.run_id != run["run_id"],
                runs.c.started_at < (run["started_at"] or time.time()))
         .order_by(runs.c.started_at.desc()).limit(max(rule["last"] * 20, 200)))
    out = []
    for r in conn.execute(q):
        if has_tag(json.loads(r.tags), rule["tag"]):
            out.append(r)
            if len(out) == rule["last"]:
                break
    return out


def _num(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.2f}"


def check(conn, rule: dict, run: dict) -> tuple[str, dict] | None:
    """(message, values) when ``rule`` fires for ``run`` (a finished run's document body), else None."""
    kind, status = rule["kind"], run["status"]
    if kind == "failed":
        if status == "FAILED":
            error = run.get("error")
            return (f"run failed: {error}" if error else "run failed"), {"status": status, "error": error}
        return None
    if kind == "malformed":
        share = run.get("malformed_share")
        if isinstance(share, (int, float)) and share > rule["threshold"]:
            return (f"malformed share {share:.1%} is above {rule['threshold']:.1%}",
                    {"malformed_share": share, "threshold": rule["threshold"]})
        return None
    if status != "SUCCESSFUL":
        return None
    field = "records_written" if kind == "records" else "duration"
    value = run.get(field)
    if value is None:
        return None
    past = [getattr(r, field) for r in _history(conn, run, rule) if getattr(r, field) is not None]
    if len(past) < MIN_HISTORY:
        return None
    median = statistics.median(past)
    limit = rule["threshold"] * median
    values = {field: value, "median": median, "factor": rule["threshold"], "limit": limit, "runs": len(past)}
    if kind == "records" and value < limit:
        return (f"records written {_num(value)} is below {rule['threshold']:g} x the median {_num(median)} of "
                f"the last {len(past)} successful runs", values)
    if kind == "duration" and value > limit:
        return (f"duration {value:.2f} s is above {rule['threshold']:g} x the median {median:.2f} s of the "
                f"last {len(past)} successful runs", values)
    return None


def evaluate(conn, rules: list[dict], owner: str, run: dict, run_url: str, now: float) -> list[int]:
    """Fires the rules that match a finished run: records each alert and queues its webhook (in ``conn``'s
    transaction). Returns the new alerts' ids."""
    fired = []
    tags = run.get("tags") or {}
    for rule in rules:
        if rule["application"] != run["application"] or (rule["owner"] is not None and rule["owner"] != owner):
            continue
        if not has_tag(tags, rule["tag"]):
            continue
        hit = check(conn, rule, run)
        if hit is None:
            continue
        message, values = hit
        exists = conn.execute(select(alerts.c.id).where(alerts.c.rule_id == rule["id"], alerts.c.owner == owner,
                                                        alerts.c.run_id == run["run_id"])).first()
        if exists is not None:
            continue
        alert_id = conn.execute(alerts.insert().values(
            rule_id=rule["id"], owner=owner, run_id=run["run_id"], application=run["application"], kind=rule["kind"],
            message=message, details=json.dumps(values), created_at=now).returning(alerts.c.id)).scalar_one()
        payload = {"alert_id": alert_id, "run_id": run["run_id"], "application": run["application"],
                   "owner": owner, "status": run["status"], "tags": tags,
                   "rule": {"id": rule["id"], "when": rule["kind"], "threshold": rule["threshold"],
                            "last": rule["last"], "tag": rule["tag"]},
                   "message": message, "values": values, "run_url": run_url, "fired_at": now}
        conn.execute(deliveries.insert().values(
            kind="webhook", alert_id=alert_id, owner=owner, run_id=run["run_id"], event=f"alert:{alert_id}",
            url=rule["webhook"], payload=json.dumps(payload, sort_keys=True), state="pending", attempts=0,
            next_at=now, created_at=now))
        fired.append(alert_id)
    return fired
