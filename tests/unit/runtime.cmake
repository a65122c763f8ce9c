# The worker runtime: elastic state, the daemon-backed store, workers as
# threads against an in-test fake daemon, and the reaper of dropped rings.
hvdd_add_test(test_elastic_state
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_elastic_state.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_ring_reaper.cc
  LIBS horovodd_runtime)
