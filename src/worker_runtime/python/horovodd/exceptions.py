"""The exceptions elastic training reacts to (both derive from RuntimeError).

HorovodInternalError: a collective failed because a peer was lost or the
job's membership changed under it. HostsUpdatedInterrupt: the job's
membership changed; raised on every rank at the same commit. Errors for bad
arguments are ValueError; other runtime errors RuntimeError.
"""

from horovodd._horovodd import HorovodInternalError, HostsUpdatedInterrupt

# Shown in tracebacks as horovodd.HorovodInternalError, where users import it.
HorovodInternalError.__module__ = "horovodd"
HostsUpdatedInterrupt.__module__ = "horovodd"

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt"]
