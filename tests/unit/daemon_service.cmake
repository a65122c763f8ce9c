# horovodd as a service: metrics and their HTTP endpoint, and an in-process
# DaemonServer's health checking, reflection, limits, metrics and journal.
# grpc_probe.proto holds wire-compatible copies of the health and reflection
# messages the tests send (see the file).
add_library(hvdd_test_grpc_probe STATIC ${CMAKE_CURRENT_LIST_DIR}/grpc_probe.proto)
target_link_libraries(hvdd_test_grpc_probe PUBLIC protobuf::libprotobuf)
# protobuf_generate writes unit/grpc_probe.pb.h under the binary dir.
target_include_directories(hvdd_test_grpc_probe PUBLIC ${CMAKE_CURRENT_BINARY_DIR})
protobuf_generate(TARGET hvdd_test_grpc_probe LANGUAGE cpp)

hvdd_add_test(test_daemon_service
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_metrics.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_daemon_server.cc
  LIBS hvdd_daemon hvdd_test_grpc_probe hvdd_client_credentials)
