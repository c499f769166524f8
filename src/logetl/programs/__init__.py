"""The programs logetl ships, each a flow definition that every engine runs and the monitor draws."""
from logetl.assembly import Flow
from logetl.programs import branch, filter, join

PROGRAMS = {"branch": branch.flow, "filter": filter.flow, "join": join.flow}


def get(name: str) -> Flow:
    return PROGRAMS[name]()
