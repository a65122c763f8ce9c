# Collectives over in-process Gloo rings (threads on 127.0.0.1).
hvdd_add_test(test_collectives
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_collectives_harness.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_collectives_kernels.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_scratch_pool.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_collectives_ops.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_collectives_faults.cc
  LIBS hvdd_collectives)
