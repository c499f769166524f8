"""The most frequent user agents.

    logetl run examples/cookbook/top_agents.py --input access.log --output agents=out/agents [--hdfs]

Output ``agents``: TSV ``user_agent requests``, the 20 ``User-Agent`` values (as written, compared whole)
with the most requests, sorted by requests descending, then user agent. Records without one (the line
lacks the quoted referer and agent) are left out; ``-`` and the empty agent count as values.
"""
import logetl.api as L


def flow(fmt):
    agents = (L.read(fmt, fields=("user_agent",))
              .filter(L.col("user_agent").is_not_null(), name="has_agent")
              .group_by("user_agent", name="per_agent").agg(requests=L.count())
              .top(20, by=[L.desc("requests"), "user_agent"], name="top_20"))
    return L.Flow("top_agents", [agents.write("agents")], "the 20 user agents with the most requests")
