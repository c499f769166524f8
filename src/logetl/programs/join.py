"""Join: the images-area clients joined with their scored records, highest score first.

Branch A: records whose request starts with ``GET /images/``, ``ip`` only, distinct.
Branch B: ``ip`` renamed ``userip``; ``score`` = crc32(userip) % 100; records with score < 60 removed;
then the checkpoint ``checkpoint``. A (small, in memory) is hash-joined with B (streamed) on
ip = userip; the result ``ip, userip, time, request, response, size, score`` is sorted by score
descending, equal scores in input order."""
from logetl.contract import FIELDS
from logetl.assembly import (
    AtLeast,
    Checkpoint,
    Crc32Mod,
    Filter,
    Flow,
    Function,
    HashJoin,
    Parse,
    Rename,
    Retain,
    Sink,
    Sort,
    Source,
    Unique,
)
from logetl.programs.filter import IMAGES

MIN_SCORE = 60


def flow(fmt=None) -> Flow:
    """``fmt``: the log format (``logetl.formats``; default ``combined``)."""
    parsed = Parse("parse", Source("input"), fmt, keep=FIELDS)
    images = Unique("unique_ip", Retain("retain_ip", Filter("images", parsed, IMAGES), ("ip",)))
    renamed = Rename("rename_ip", parsed, "ip", "userip")
    scored = Function("score", renamed, "score", Crc32Mod("userip", 100))
    kept = Filter("min_score", scored, AtLeast("score", MIN_SCORE))
    stored = Checkpoint("checkpoint", kept)
    joined = HashJoin("join", images, "ip", stored, "userip")
    ordered = Sort("sort_score", joined, ("score",), descending=True)
    return Flow("join", [Sink("sink", ordered, tap="output")], "images clients joined with scored records")
