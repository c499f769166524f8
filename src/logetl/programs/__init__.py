"""The programs logetl ships, each a flow definition that every engine runs and the monitor draws.

Each reads the log and drops the records whose size is ``-`` (the original programs' rule, their step
``drop_size_dash``, which the flow folds into the read: its kernel drops them as it scans), so that their
outputs, counters and summaries are the original programs'. A flow of one's own keeps those records."""
from logetl.assembly import Flow
from logetl.programs import branch, filter, join

PROGRAMS = {"branch": branch.flow, "filter": filter.flow, "join": join.flow}


#: the fields each program needs from a log format
NEEDS = {"branch": ("ip", "time", "request", "response", "size"), "filter": ("ip", "request"),
         "join": ("ip", "time", "request", "response", "size")}


def get(name: str, fmt=None) -> Flow:
    """The program's flow reading log format ``fmt`` (``logetl.formats``; default ``combined``)."""
    return PROGRAMS[name](fmt)
