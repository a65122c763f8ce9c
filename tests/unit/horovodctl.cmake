# horovodctl's tables, status view, watch lines and JSON, without a daemon.
hvdd_add_test(test_horovodctl
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_horovodctl_format.cc
  LIBS hvdd_ctl)
