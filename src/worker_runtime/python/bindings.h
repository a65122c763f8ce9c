// The parts of the _horovodd extension module; module.cc calls each once.
#pragma once

#include <pybind11/pybind11.h>

namespace horovodd::python {

// init/shutdown, rank and size, generation, rejoin.
void BindMembership(pybind11::module_& module);
// ReduceOp and the collectives over TensorRef.
void BindCollectives(pybind11::module_& module);
// AsyncHandle and the *_async collectives on the engine.
void BindAsync(pybind11::module_& module);
// add_process_set, remove_process_set, process_set_ranks.
void BindProcessSets(pybind11::module_& module);
// The primitives horovodd/elastic.py builds its run loop from.
void BindElastic(pybind11::module_& module);

}  // namespace horovodd::python
