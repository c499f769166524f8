"""Join: the images-area clients joined with their scored records, highest score first.

Branch A: records whose request starts with ``GET /images/``, ``ip`` only, distinct.
Branch B: ``ip`` renamed ``userip``; ``score`` = crc32(userip) % 100; records with score < 60 removed;
then the checkpoint ``checkpoint``. B (streamed) is hash-joined with A (small, held in memory) on
userip = ip; the result ``ip, userip, time, request, response, size, score`` is sorted by score
descending, equal scores in input order.

Records whose size is exactly ``-`` are dropped first (``drop_size_dash``, the original programs' rule)."""
import logetl.api as L
from logetl.contract import FIELDS
from logetl.programs.filter import IMAGES

MIN_SCORE = 60


def flow(fmt=None) -> L.Flow:
    """``fmt``: the log format (``logetl.formats``; default ``combined``)."""
    parsed = L.read(fmt, fields=FIELDS).drop_size_dash()
    images = parsed.filter(IMAGES, name="images").select("ip", name="retain_ip").unique(name="unique_ip")
    stored = (parsed.rename(ip="userip", name="rename_ip")
              .derive(score=L.crc32(L.col("userip")) % 100, name="score")
              .filter(L.col("score") >= MIN_SCORE, name="min_score")
              .checkpoint("checkpoint"))
    joined = stored.join(images, on=("userip", "ip"), name="join")
    ordered = (joined.select("ip", "userip", "time", "request", "response", "size", "score", name="fields")
               .sort(L.desc("score"), name="sort_score"))
    return L.Flow("join", [ordered.write("output", name="sink")], "images clients joined with scored records")
