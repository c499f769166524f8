"""The programs logetl ships, each a flow definition that every engine runs and the monitor draws."""
from logetl.assembly import Flow
from logetl.programs import branch, filter, join

PROGRAMS = {"branch": branch.flow, "filter": filter.flow, "join": join.flow}


#: the fields each program needs from a log format
NEEDS = {"branch": ("ip", "time", "request", "response", "size"), "filter": ("ip", "request"),
         "join": ("ip", "time", "request", "response", "size")}


def get(name: str, fmt=None) -> Flow:
    """The program's flow reading log format ``fmt`` (``logetl.formats``; default ``combined``)."""
    return PROGRAMS[name](fmt)
