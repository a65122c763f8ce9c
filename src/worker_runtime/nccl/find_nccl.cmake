# Finds CUDA and NCCL for the worker runtime; included by
# src/worker_runtime/CMakeLists.txt before gpu/ and nccl/, which read
# HVDD_HAVE_NCCL and CUDAToolkit_FOUND.
#
# HVDD_WITH_NCCL: AUTO (on when the CUDA toolkit, nvcc, nccl.h and libnccl
# >= 2.14 are found under /usr/local/cuda, $CUDA_HOME, $NCCL_HOME or the
# standard paths), ON (fail when they are not) or OFF. CUDA alone (staging
# through host memory) is used whenever the toolkit is found; configure with
# -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON for a build without any CUDA.

set(HVDD_WITH_NCCL AUTO CACHE STRING "NCCL backend for GPU tensors: AUTO, ON or OFF")
set_property(CACHE HVDD_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
set(HVDD_CUDA_ARCHITECTURES "75;80;90;100;120" CACHE STRING
  "GPU architectures (sm_XX) the NCCL backend's kernel is compiled for; PTX of the first is added")
string(TOUPPER "${HVDD_WITH_NCCL}" _hvdd_nccl_mode)
if(NOT _hvdd_nccl_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "HVDD_WITH_NCCL must be AUTO, ON or OFF, got '${HVDD_WITH_NCCL}'")
endif()

find_package(CUDAToolkit QUIET)

# Why the NCCL backend is off (empty: it is on).
set(_hvdd_nccl_missing "")
if(_hvdd_nccl_mode STREQUAL "OFF")
  set(_hvdd_nccl_missing "HVDD_WITH_NCCL=OFF")
elseif(NOT CUDAToolkit_FOUND)
  set(_hvdd_nccl_missing "the CUDA toolkit was not found (set CUDAToolkit_ROOT)")
elseif(NOT CUDAToolkit_NVCC_EXECUTABLE OR NOT EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  set(_hvdd_nccl_missing "nvcc was not found next to the CUDA toolkit")
else()
  find_path(HVDD_NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME ENV CUDA_HOME
    PATHS /usr/local/cuda /usr/local/nccl
    PATH_SUFFIXES include)
  find_library(HVDD_NCCL_LIBRARY nccl
    HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME ENV CUDA_HOME
    PATHS /usr/local/cuda /usr/local/nccl
    PATH_SUFFIXES lib64 lib)
  if(NOT HVDD_NCCL_INCLUDE_DIR OR NOT EXISTS "${HVDD_NCCL_INCLUDE_DIR}/nccl.h")
    set(_hvdd_nccl_missing "nccl.h was not found (set NCCL_HOME or HVDD_NCCL_INCLUDE_DIR)")
  elseif(NOT HVDD_NCCL_LIBRARY OR NOT EXISTS "${HVDD_NCCL_LIBRARY}")
    set(_hvdd_nccl_missing "libnccl was not found (set NCCL_HOME or HVDD_NCCL_LIBRARY)")
  else()
    file(STRINGS "${HVDD_NCCL_INCLUDE_DIR}/nccl.h" _hvdd_nccl_version_lines
      REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
    string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" _hvdd_nccl_major "${_hvdd_nccl_version_lines}")
    string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" _hvdd_nccl_minor "${_hvdd_nccl_version_lines}")
    string(REGEX REPLACE ".*NCCL_PATCH +([0-9]+).*" "\\1" _hvdd_nccl_patch "${_hvdd_nccl_version_lines}")
    set(HVDD_NCCL_VERSION "${_hvdd_nccl_major}.${_hvdd_nccl_minor}.${_hvdd_nccl_patch}")
    # Non-blocking communicators (ncclCommInitRankConfig) came with 2.14.
    if(HVDD_NCCL_VERSION VERSION_LESS 2.14)
      set(_hvdd_nccl_missing "NCCL ${HVDD_NCCL_VERSION} is older than 2.14")
    endif()
  endif()
endif()

if(_hvdd_nccl_missing STREQUAL "")
  set(HVDD_HAVE_NCCL ON)
  message(STATUS "horovodd GPU support: CUDA ${CUDAToolkit_VERSION}, NCCL ${HVDD_NCCL_VERSION} "
                 "(${HVDD_NCCL_LIBRARY})")
else()
  set(HVDD_HAVE_NCCL OFF)
  if(_hvdd_nccl_mode STREQUAL "ON")
    message(FATAL_ERROR "HVDD_WITH_NCCL=ON but ${_hvdd_nccl_missing}")
  endif()
  if(CUDAToolkit_FOUND)
    message(STATUS "horovodd GPU support: CUDA ${CUDAToolkit_VERSION}, no NCCL "
                   "(${_hvdd_nccl_missing}): GPU tensors are staged through host memory")
  else()
    message(STATUS "horovodd GPU support: none (no CUDA toolkit): CUDA tensors are rejected")
  endif()
endif()

