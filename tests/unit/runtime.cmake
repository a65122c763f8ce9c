# The worker runtime: elastic state and the runtime's plumbing (the
# daemon-backed store, the daemon client), with workers as threads against an
# in-test fake daemon (fake_daemon.h), and the reaper of dropped rings.
hvdd_add_test(test_elastic_state
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_elastic_state.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_runtime_daemon.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_ring_reaper.cc
  LIBS horovodd_runtime)
