# The daemon's core (job driver, key-value namespace, gRPC adapters) and the
# horovodd binary. The local launcher is its own library (launcher.cmake).
add_library(hvdd_daemon STATIC
  ${CMAKE_CURRENT_LIST_DIR}/daemon_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/discovery_poller.cc
  ${CMAKE_CURRENT_LIST_DIR}/event_log.cc
  ${CMAKE_CURRENT_LIST_DIR}/event_loop.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_driver.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_launch.cc
  ${CMAKE_CURRENT_LIST_DIR}/launch_pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_manager.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_membership.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/launcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/kv_namespace.cc
  ${CMAKE_CURRENT_LIST_DIR}/membership.cc
  ${CMAKE_CURRENT_LIST_DIR}/worker_service.cc)
target_include_directories(hvdd_daemon PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_daemon PUBLIC
  hvdd_proto hvdd_launcher hvdd_discovery
  absl::status absl::statusor absl::strings absl::time Threads::Threads)
target_link_libraries(hvdd_daemon PUBLIC hvdd_journal)  # archived jobs (journal.cmake)
target_link_libraries(hvdd_daemon PUBLIC hvdd_ssh)  # remote hosts (ssh.cmake)

add_executable(horovodd ${CMAKE_CURRENT_LIST_DIR}/horovodd_main.cc)
target_link_libraries(horovodd PRIVATE hvdd_daemon CLI11::CLI11)
