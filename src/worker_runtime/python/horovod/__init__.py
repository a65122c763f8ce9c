"""`horovod`, the name Horovod scripts import, for horovodd's package.

    import horovod.torch as hvd          # is horovodd.torch
    from horovod.common.exceptions import HorovodInternalError

Every `horovod.X` module is the horovodd module it stands for (the same
object, not a copy), so classes, exceptions and module state are shared:
`except horovod.common.exceptions.HorovodInternalError` catches what
horovodd.torch raises, and `hvd.init()` through either name initializes
both. Do not install this beside the real Horovod: whichever is found first
on sys.path wins.
"""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.28.1"

# horovod module -> the horovodd module it is. Names not listed map by
# prefix: horovod.torch.X -> horovodd.torch.X.
_ALIASES = {
    "horovod.common": "horovodd._horovod_common",
    "horovod.common.basics": "horovodd.basics",
    "horovod.common.elastic": "horovodd.elastic",
    "horovod.common.exceptions": "horovodd.exceptions",
    "horovod.common.process_sets": "horovodd.process_sets",
    "horovod.common.util": "horovodd._horovod_common",
    "horovod.torch": "horovodd.torch",
    "horovod.torch.compression": "horovodd.compression",
    "horovod.torch.elastic": "horovodd.torch.elastic",
    "horovod.torch.elastic.sampler": "horovodd.torch.elastic_sampler",
    "horovod.torch.elastic.state": "horovodd.torch.elastic",
    "horovod.torch.functions": "horovodd.torch.functions",
    "horovod.torch.mpi_ops": "horovodd.torch",
    "horovod.torch.optimizer": "horovodd.torch.optimizer",
    "horovod.torch.sync_batch_norm": "horovodd.torch.sync_batch_norm",
}


def _target(fullname):
    if fullname in _ALIASES:
        return _ALIASES[fullname]
    if fullname.startswith("horovod.torch."):
        return "horovodd.torch." + fullname[len("horovod.torch."):]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Loads `horovod.X` by importing its horovodd module and handing that
    very module object back."""

    def __init__(self, target):
        self._target = target

    def create_module(self, spec):
        module = importlib.import_module(self._target)
        # The import system sets __spec__ to the alias's; put the module's
        # own back in exec_module (which runs right after).
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module):
        # Already executed under its horovodd name.
        module.__spec__ = self._own_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("horovod."):
            return None
        real = _target(fullname)
        if real is None or importlib.util.find_spec(real) is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real),
                                               is_package=True)


if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())
