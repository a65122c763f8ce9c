# Request validation (pure functions: no daemon, no gRPC server).
hvdd_add_test(test_request_validation
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_request_validation.cc
  LIBS hvdd_request_validation)

# The daemon's limits: config keys, the key-value namespace, streams per
# client, and an in-process DaemonServer refusing what goes past them.
hvdd_add_test(test_limits
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_limits_config.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_limits_kv.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_limits_server.cc
  LIBS hvdd_daemon hvdd_service)

# The SSH launcher's remote command on random hostile argv and environment
# values, run through sh -c and bash -c (nothing from a request is
# interpolated unquoted).
hvdd_add_test(test_remote_command_roundtrip
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_remote_command_roundtrip.cc
  LIBS hvdd_ssh)
