# The Python package `horovodd` (horovodd.torch, horovodd.elastic, ...): the
# pybind11 extension `_horovodd` over horovodd_runtime, plus the pure-Python
# sources next to it. Both land in ${PROJECT_BINARY_DIR}/python/horovodd at
# build time, so `PYTHONPATH=<build>/python /usr/bin/python3` imports the
# package from the build tree; `cmake --install` puts it in site-packages.
#
# It targets Debian's /usr/bin/python3 (whose python3-torch and python3-numpy
# the package uses), not whatever python3 comes first on PATH.
if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 QUIET COMPONENTS Interpreter Development)
# Found after Python3, pybind11 uses that interpreter (its FindPython mode).
find_package(pybind11 CONFIG QUIET)

if(NOT Python3_FOUND OR NOT pybind11_FOUND)
  message(STATUS "horovodd Python package: skipped (needs Python 3 development files "
                 "and pybind11: apt-get install python3-dev pybind11-dev)")
  return()
endif()
message(STATUS "horovodd Python package: for ${Python3_EXECUTABLE} (Python ${Python3_VERSION})")

set(HVDD_PYTHON_DIR ${PROJECT_BINARY_DIR}/python/horovodd)
set(_hvdd_python_src ${CMAKE_CURRENT_LIST_DIR}/python)

pybind11_add_module(_horovodd MODULE NO_EXTRAS
  ${_hvdd_python_src}/module.cc
  ${_hvdd_python_src}/status_errors.cc
  ${_hvdd_python_src}/tensor_args.cc
  ${_hvdd_python_src}/membership_binding.cc
  ${_hvdd_python_src}/collectives_binding.cc
  ${_hvdd_python_src}/async_binding.cc
  ${_hvdd_python_src}/elastic_binding.cc)
target_include_directories(_horovodd PRIVATE ${_hvdd_python_src})
target_link_libraries(_horovodd PRIVATE horovodd_runtime)
set_target_properties(_horovodd PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${HVDD_PYTHON_DIR})

# The .py files are copied (not linked) on every build of _horovodd, so the
# build tree holds a complete, importable package.
file(GLOB_RECURSE _hvdd_python_files CONFIGURE_DEPENDS
  RELATIVE ${_hvdd_python_src}/horovodd ${_hvdd_python_src}/horovodd/*.py)
set(_hvdd_python_copies)
foreach(_file ${_hvdd_python_files})
  add_custom_command(
    OUTPUT ${HVDD_PYTHON_DIR}/${_file}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different
            ${_hvdd_python_src}/horovodd/${_file} ${HVDD_PYTHON_DIR}/${_file}
    DEPENDS ${_hvdd_python_src}/horovodd/${_file}
    COMMENT "horovodd Python package: ${_file}")
  list(APPEND _hvdd_python_copies ${HVDD_PYTHON_DIR}/${_file})
endforeach()
add_custom_target(horovodd_python_sources ALL DEPENDS ${_hvdd_python_copies})
add_dependencies(_horovodd horovodd_python_sources)

# Where `cmake --install` puts the package, relative to CMAKE_INSTALL_PREFIX:
# Debian's /usr/bin/python3 reads lib/python3/dist-packages under /usr and
# lib/python3.X/dist-packages under /usr/local.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_hvdd_python_install_default lib/python3/dist-packages)
else()
  set(_hvdd_python_install_default
      lib/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/dist-packages)
endif()
set(HVDD_PYTHON_INSTALL_DIR ${_hvdd_python_install_default} CACHE STRING
    "Directory (relative to CMAKE_INSTALL_PREFIX) the horovodd Python package is installed into")
install(TARGETS _horovodd LIBRARY DESTINATION ${HVDD_PYTHON_INSTALL_DIR}/horovodd)
install(DIRECTORY ${_hvdd_python_src}/horovodd/ DESTINATION ${HVDD_PYTHON_INSTALL_DIR}/horovodd
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
