// What horovodrun -v and -cb/--check-build print: the version, and what this build has in
// Horovod's check-build layout (frameworks, controllers, tensor operations), so that scripts
// which read Horovod's output read ours.
#pragma once

#include <string>

namespace horovodd::cli {

// "0.1.0": the project's version.
std::string VersionText();

// Horovod's layout, with an [X] for what is here: PyTorch when the Python package
// horovodd.torch imports (in the interpreter the package is built for, with this process's
// PYTHONPATH), Gloo always, NCCL when this build has it; never TensorFlow, MXNet, MPI, DDL or
// CCL.
std::string CheckBuildText();

}  // namespace horovodd::cli
