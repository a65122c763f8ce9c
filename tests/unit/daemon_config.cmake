# horovodd's config file and flags (src/daemon/daemon_config.*).
hvdd_add_test(test_daemon_config
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_daemon_config.cc
  LIBS hvdd_service)
