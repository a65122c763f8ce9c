# The worker runtime: elastic state, the daemon-backed store, and workers as
# threads against an in-test fake daemon.
hvdd_add_test(test_elastic_state
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_elastic_state.cc
  LIBS horovodd_runtime)
