"""Error clients: the clients that got at least one 4xx or 5xx response, with their traffic.

    logetl run examples/error_clients.py --input access.log --output clients=out/clients [--hdfs]

Output ``clients``: TSV ``ip requests errors bytes``: the client's records, those with a response
starting with 4 or 5, and the sum of ``size`` as an integer (a size that is not a decimal number, ``-``
among them, counts 0: a 404 or a 304 without a body is still a request). Sorted by errors descending,
requests descending, ip.

It shows a checkpoint and a join: the parsed records are stored once (``records``); a failed run restarts
after it. Two branches aggregate the stored records per client (all of them, and the errors); the
totals stream through a hash join with the error counts, which are held in memory (the smaller side), and
the inner join keeps the clients with errors.
"""
import logetl.api as L


def flow(fmt):
    records = (L.read(fmt, fields=("ip", "response", "size"))
               .derive(bytes=L.coalesce(L.col("size").to_int(), 0),
                       error=L.col("response").starts_with("4") | L.col("response").starts_with("5"),
                       name="bytes_and_error")
               .select("ip", "bytes", "error", name="client_fields")
               .checkpoint("records"))
    errors = records.filter(L.col("error"), name="errors").group_by("ip", name="errors_per_client").agg(
        errors=L.count())
    totals = records.group_by("ip", name="traffic_per_client").agg(requests=L.count(), bytes=L.sum("bytes"))
    joined = totals.join(errors, on="ip", how="inner", name="clients_with_errors")
    ordered = (joined.select("ip", "requests", "errors", "bytes", name="report_fields")
               .sort(L.desc("errors"), L.desc("requests"), "ip", name="by_errors"))
    return L.Flow("error_clients", [ordered.write("clients")], "clients with 4xx/5xx responses and their traffic")
