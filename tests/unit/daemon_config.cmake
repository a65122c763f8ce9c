# horovodd's config file and flags (src/daemon/daemon_config.*), and the
# host:port parser its address settings share with the daemon (host_port.*).
hvdd_add_test(test_daemon_config
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_daemon_config.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_host_port.cc
  LIBS hvdd_service)
