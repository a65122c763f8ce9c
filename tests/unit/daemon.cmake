hvdd_add_test(test_daemon_core
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_membership.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_kv_namespace.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_event_loop.cc
  LIBS hvdd_daemon)

hvdd_add_test(test_remote_launch
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_remote_launch.cc
  LIBS hvdd_daemon)
