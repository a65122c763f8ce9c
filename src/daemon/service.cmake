# horovodd as a service. The daemon's own pieces (metrics and their HTTP
# endpoint, RPC counting, job limits, the job event log) join hvdd_daemon,
# which daemon_server.cc is part of; what only the horovodd binary needs
# (config file, logging setup, systemd notification) is hvdd_service.
target_sources(hvdd_daemon PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/job_event_logger.cc
  ${CMAKE_CURRENT_LIST_DIR}/job_limits.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics_http.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics_interceptor.cc)
target_link_libraries(hvdd_daemon PUBLIC gRPC::grpc++_reflection spdlog::spdlog)

# sd_notify comes from libsystemd; without it horovodd still builds and runs,
# it just cannot tell systemd it is ready (use Type=simple then).
find_package(PkgConfig)
if(PkgConfig_FOUND)
  pkg_check_modules(SYSTEMD IMPORTED_TARGET libsystemd)
endif()

add_library(hvdd_service STATIC
  ${CMAKE_CURRENT_LIST_DIR}/daemon_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/logging.cc
  ${CMAKE_CURRENT_LIST_DIR}/systemd_notifier.cc)
target_include_directories(hvdd_service PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_service PUBLIC
  hvdd_loopback  # host:port checks
  absl::status absl::statusor absl::strings absl::time spdlog::spdlog yaml-cpp Threads::Threads)
if(SYSTEMD_FOUND)
  target_link_libraries(hvdd_service PRIVATE PkgConfig::SYSTEMD)
  target_compile_definitions(hvdd_service PRIVATE HVDD_HAVE_SYSTEMD=1)
else()
  message(STATUS "libsystemd not found: horovodd will not send sd_notify messages")
endif()

target_link_libraries(horovodd PRIVATE hvdd_service)
