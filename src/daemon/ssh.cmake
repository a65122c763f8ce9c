# Addresses: how host:port splits, what counts as loopback (listen addresses,
# callers, daemon addresses), and which loopback callers are remote workers'
# tunnels: shared by the launcher, the config and the daemon's access checks.
add_library(hvdd_loopback STATIC
  ${CMAKE_CURRENT_LIST_DIR}/host_port.cc
  ${CMAKE_CURRENT_LIST_DIR}/loopback.cc)
target_include_directories(hvdd_loopback PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_loopback PUBLIC absl::status absl::statusor absl::strings)

# The remote launcher: workers on other hosts through libssh exec channels.
add_library(hvdd_ssh STATIC
  ${CMAKE_CURRENT_LIST_DIR}/daemon_tunnel.cc
  ${CMAKE_CURRENT_LIST_DIR}/remote_command.cc
  ${CMAKE_CURRENT_LIST_DIR}/remote_process.cc
  ${CMAKE_CURRENT_LIST_DIR}/ssh_launcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/ssh_session.cc)
target_include_directories(hvdd_ssh PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_ssh PUBLIC
  hvdd_launcher hvdd_loopback ssh
  absl::status absl::statusor absl::strings absl::time absl::synchronization Threads::Threads)
