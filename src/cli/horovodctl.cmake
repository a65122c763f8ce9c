# horovodctl: the operator's client of horovodd. Its parts are a library so
# that tests/unit/horovodctl.cmake can test the formatting without a daemon.
add_library(hvdd_ctl STATIC
  ${CMAKE_CURRENT_LIST_DIR}/horovodctl_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/horovodctl_commands.cc
  ${CMAKE_CURRENT_LIST_DIR}/horovodctl_format.cc
  ${CMAKE_CURRENT_LIST_DIR}/horovodctl_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/horovodctl_table.cc)
target_include_directories(hvdd_ctl PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_ctl PUBLIC
  hvdd_proto hvdd_client_credentials gRPC::grpc++ absl::status absl::statusor absl::strings absl::str_format
  absl::time)

add_executable(horovodctl ${CMAKE_CURRENT_LIST_DIR}/horovodctl_main.cc)
target_link_libraries(horovodctl PRIVATE hvdd_ctl CLI11::CLI11)
