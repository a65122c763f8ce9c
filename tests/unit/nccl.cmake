# GPU tensors: HOROVOD_GPU_OPERATIONS, the NCCL unique-id exchange, CUDA and
# NCCL errors as Status, and what CUDA tensors get without a GPU. Cases that
# need a GPU print "skipped: no GPU: <why>" and pass without one; the GPU
# check below (run by tests/gpu/run.sh) covers the rest on a machine with one.
set(_hvdd_nccl_tests
  ${CMAKE_CURRENT_LIST_DIR}/test_nccl_options.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_nccl_unique_id.cc)
if(TARGET hvdd_nccl)
  list(APPEND _hvdd_nccl_tests
    ${CMAKE_CURRENT_LIST_DIR}/test_nccl_errors.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_nccl_gpu.cc)
endif()
hvdd_add_test(test_nccl SOURCES ${_hvdd_nccl_tests} LIBS horovodd_runtime)

if(TARGET hvdd_nccl)
  # Not a ctest: it needs a GPU. tests/gpu/run.sh builds and runs it.
  add_executable(hvdd_gpu_check ${PROJECT_SOURCE_DIR}/tests/gpu/gpu_check.cc)
  target_link_libraries(hvdd_gpu_check PRIVATE hvdd_gpu)
  set_target_properties(hvdd_gpu_check PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/gpu)
endif()
