# GPU tensors in the worker runtime.
#
#   hvdd_gpu_base  always built: HOROVOD_GPU_OPERATIONS, GPU tensor checks,
#                  device tensors and copies, the unique-id exchange. Without
#                  CUDA its device calls fail with "this build of horovodd has
#                  no CUDA support".
#   hvdd_nccl      built when HVDD_WITH_NCCL is on: a generation's NCCL
#                  communicator and the collectives on it, plus a scaling
#                  kernel compiled by nvcc (the project enables no CUDA
#                  language: the kernel object is linked like any other).
#   hvdd_gpu       always built: the per-worker dispatch of GPU collectives,
#                  to NCCL or staged through host memory onto the Gloo ring.
#
# HVDD_WITH_NCCL: AUTO (on when the CUDA toolkit, nvcc, nccl.h and libnccl
# >= 2.14 are found under /usr/local/cuda, $CUDA_HOME, $NCCL_HOME or the
# standard paths), ON (fail when they are not) or OFF. CUDA alone (staging
# through host memory) is used whenever the toolkit is found; configure with
# -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON for a build without any CUDA.
# horovodd_runtime (runtime.cmake, included after this file) gets hvdd_gpu
# linked at the end of this directory, by the deferred call below.

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

if(HVDD_HAVE_NCCL)
  # The scaling kernel: nvcc with the C++ compiler as host compiler.
  set(_hvdd_scale_object ${CMAKE_CURRENT_BINARY_DIR}/nccl_scale_kernel.o)
  set(_hvdd_gencode "")
  list(GET HVDD_CUDA_ARCHITECTURES 0 _hvdd_ptx_arch)
  list(APPEND _hvdd_gencode -gencode arch=compute_${_hvdd_ptx_arch},code=compute_${_hvdd_ptx_arch})
  foreach(arch ${HVDD_CUDA_ARCHITECTURES})
    list(APPEND _hvdd_gencode -gencode arch=compute_${arch},code=sm_${arch})
  endforeach()
  add_custom_command(
    OUTPUT ${_hvdd_scale_object}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -c -O2 -std=c++17 -ccbin ${CMAKE_CXX_COMPILER}
            -Xcompiler=-fPIC ${_hvdd_gencode}
            -I${PROJECT_SOURCE_DIR}/src -I${PROJECT_SOURCE_DIR}/src/worker_runtime/include
            -o ${_hvdd_scale_object} ${CMAKE_CURRENT_LIST_DIR}/nccl_scale_kernel.cu
    DEPENDS ${CMAKE_CURRENT_LIST_DIR}/nccl_scale_kernel.cu
            ${CMAKE_CURRENT_LIST_DIR}/nccl_scale.h
            ${PROJECT_SOURCE_DIR}/src/worker_runtime/include/horovodd/tensor.h
    COMMENT "nvcc nccl_scale_kernel.cu"
    VERBATIM)

  add_library(hvdd_nccl STATIC
    ${CMAKE_CURRENT_LIST_DIR}/nccl_status.cc
    ${CMAKE_CURRENT_LIST_DIR}/nccl_comm.cc
    ${CMAKE_CURRENT_LIST_DIR}/nccl_args.cc
    ${CMAKE_CURRENT_LIST_DIR}/nccl_ops.cc
    ${CMAKE_CURRENT_LIST_DIR}/nccl_ops_exchange.cc
    ${_hvdd_scale_object})
  set_source_files_properties(${_hvdd_scale_object} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  set_target_properties(hvdd_nccl PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(hvdd_nccl PUBLIC ${HVDD_NCCL_INCLUDE_DIR})
  target_link_libraries(hvdd_nccl PUBLIC
    hvdd_gpu_base hvdd_collectives CUDA::cudart_static ${HVDD_NCCL_LIBRARY}
    absl::status absl::statusor absl::strings absl::time)
endif()

set(_hvdd_cuda_memory ${CMAKE_CURRENT_LIST_DIR}/cuda_memory_unavailable.cc)
if(CUDAToolkit_FOUND)
  set(_hvdd_cuda_memory ${CMAKE_CURRENT_LIST_DIR}/cuda_memory.cc ${CMAKE_CURRENT_LIST_DIR}/cuda_status.cc)
endif()
add_library(hvdd_gpu_base STATIC
  ${CMAKE_CURRENT_LIST_DIR}/gpu_operations.cc
  ${CMAKE_CURRENT_LIST_DIR}/gpu_args.cc
  ${CMAKE_CURRENT_LIST_DIR}/unique_id_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_tensor.cc
  ${_hvdd_cuda_memory})
set_target_properties(hvdd_gpu_base PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(hvdd_gpu_base PUBLIC
  hvdd_collectives absl::status absl::statusor absl::strings absl::time)
if(CUDAToolkit_FOUND)
  target_link_libraries(hvdd_gpu_base PUBLIC CUDA::cudart_static)
endif()
# 0/1 so code can say #if HVDD_HAVE_NCCL; public so programs linking the
# runtime know what it was built with.
if(CUDAToolkit_FOUND)
  target_compile_definitions(hvdd_gpu_base PUBLIC HVDD_HAVE_CUDA=1)
else()
  target_compile_definitions(hvdd_gpu_base PUBLIC HVDD_HAVE_CUDA=0)
endif()
if(HVDD_HAVE_NCCL)
  target_compile_definitions(hvdd_gpu_base PUBLIC HVDD_HAVE_NCCL=1)
else()
  target_compile_definitions(hvdd_gpu_base PUBLIC HVDD_HAVE_NCCL=0)
endif()

add_library(hvdd_gpu STATIC
  ${CMAKE_CURRENT_LIST_DIR}/gpu_staging.cc
  ${CMAKE_CURRENT_LIST_DIR}/gpu_collectives.cc)
set_target_properties(hvdd_gpu PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(hvdd_gpu PUBLIC hvdd_gpu_base hvdd_collectives)
if(HVDD_HAVE_NCCL)
  target_sources(hvdd_gpu PRIVATE ${CMAKE_CURRENT_LIST_DIR}/nccl_backend.cc)
  target_link_libraries(hvdd_gpu PUBLIC hvdd_nccl)
endif()

# horovodd_runtime is defined by runtime.cmake, after this file.
function(hvdd_link_gpu_into_runtime)
  if(TARGET horovodd_runtime)
    target_link_libraries(horovodd_runtime PUBLIC hvdd_gpu)
  endif()
endfunction()
cmake_language(DEFER CALL hvdd_link_gpu_into_runtime)
