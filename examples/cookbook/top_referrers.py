"""The sites that send the most visitors: referrer hosts.

    logetl run examples/cookbook/top_referrers.py --input access.log --output referrers=out/referrers [--hdfs]

Output ``referrers``: TSV ``host requests``, the 20 hosts of the ``Referer`` header's URL (lower-cased,
without port or user: ``url_host``) with the most requests, sorted by requests descending, then host.
Records without a referrer (null, ``-``) or whose referrer is not an absolute URL are left out. The site's
own host is counted too: it is the referrer of its own pages' images, scripts and links.
"""
import logetl.api as L


def flow(fmt):
    hosts = (L.read(fmt, fields=("referer",))
             .filter(L.col("referer").is_not_null() & (L.col("referer") != "-"), name="has_referer")
             .derive(host=L.url_host("referer"), name="host")
             .filter(L.col("host").is_not_null(), name="absolute_url")
             .group_by("host", name="per_host").agg(requests=L.count())
             .top(20, by=[L.desc("requests"), "host"], name="top_20"))
    return L.Flow("top_referrers", [hosts.write("referrers")], "the 20 referrer hosts with the most requests")
