# The reset path: the ring bootstrap's key reads through the daemon, Gloo
# context teardown.
hvdd_add_test(test_reset_store
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reset_store.cc
  LIBS horovodd_runtime)
