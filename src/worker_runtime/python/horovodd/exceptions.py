"""The exceptions training code catches (all derive from RuntimeError).

HorovodInternalError: a collective failed because a peer was lost or the
job's membership changed under it. HostsUpdatedInterrupt: the job's
membership changed; raised on every rank at the same commit.
CollectiveArgumentError (a ValueError and a RuntimeError): a collective's
arguments are wrong, or ranks disagree on them (raised on every rank).
Other runtime errors are RuntimeError.

horovod.common.exceptions is this module.
"""

from horovodd import _horovodd
from horovodd._horovodd import HorovodInternalError, HostsUpdatedInterrupt

# Until the extension has it (a build older than its Python sources).
CollectiveArgumentError = getattr(_horovodd, "CollectiveArgumentError", ValueError)

# Shown in tracebacks as horovodd.HorovodInternalError, where users import it.
HorovodInternalError.__module__ = "horovodd"
HostsUpdatedInterrupt.__module__ = "horovodd"
if CollectiveArgumentError is not ValueError:
    CollectiveArgumentError.__module__ = "horovodd"

__all__ = ["CollectiveArgumentError", "HorovodInternalError", "HostsUpdatedInterrupt"]
