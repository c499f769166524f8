"""How much of the traffic comes from bots.

    logetl run examples/cookbook/bot_share.py --input access.log --output bots=out/bots [--hdfs]

Output ``bots``: TSV ``requests bot_requests share``, one row: all the records, those whose user agent
contains ``bot``, ``crawler`` or ``spider`` in any case of ASCII letters (``Googlebot``, ``bingbot``,
``YandexBot``, ``Baiduspider``...), and their share of all the records (a float rounded to 4 places). A
record without a user agent is not counted as a bot.
"""
import logetl.api as L

BOT = L.col("user_agent").matches("bot|crawler|spider", ignore_case=True)


def flow(fmt):
    share = (L.read(fmt, fields=("user_agent",))
             .derive(all=L.lit("all"), name="one_group")
             .group_by("all", name="all_records").agg(requests=L.count(), bot_requests=L.count(where=BOT))
             .derive(share=L.round(L.col("bot_requests") / L.col("requests"), 4), name="share")
             .select("requests", "bot_requests", "share", name="report_fields"))
    return L.Flow("bot_share", [share.write("bots")], "the share of requests made by bots")
