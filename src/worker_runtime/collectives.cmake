# hvdd_collectives: tensors, Gloo contexts that can be aborted, and the
# collectives (allreduce, allgather, broadcast, alltoall, reducescatter,
# barrier) over them.
add_library(hvdd_collectives STATIC
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce_kernels.cc
  ${CMAKE_CURRENT_LIST_DIR}/collective_args.cc
  ${CMAKE_CURRENT_LIST_DIR}/sigpipe_block.cc
  ${CMAKE_CURRENT_LIST_DIR}/gloo_context.cc
  ${CMAKE_CURRENT_LIST_DIR}/gloo_transfer.cc
  ${CMAKE_CURRENT_LIST_DIR}/scratch_pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/gloo_ring.cc
  ${CMAKE_CURRENT_LIST_DIR}/gloo_allreduce.cc
  ${CMAKE_CURRENT_LIST_DIR}/gloo_ops.cc)
set_target_properties(hvdd_collectives PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(hvdd_collectives PUBLIC
  ${PROJECT_SOURCE_DIR}/src/worker_runtime/include
  ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_collectives PUBLIC
  gloo absl::status absl::statusor absl::strings absl::time Threads::Threads)
