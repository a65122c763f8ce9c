# Who may call the daemon and how its listener is secured: tokens (admin,
# viewer, per-job worker), the JobService wrapper that checks them, and TLS.
# They join hvdd_daemon; their config keys join hvdd_service. (This file
# sorts after daemon.cmake and service.cmake, which define those targets.)
find_package(OpenSSL REQUIRED)
target_sources(hvdd_daemon PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/auth_job_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/auth_policy.cc
  ${CMAKE_CURRENT_LIST_DIR}/auth_token.cc
  ${CMAKE_CURRENT_LIST_DIR}/log_throttle.cc
  ${CMAKE_CURRENT_LIST_DIR}/tls_credentials.cc)
target_link_libraries(hvdd_daemon PUBLIC OpenSSL::Crypto spdlog::spdlog)
target_sources(hvdd_service PRIVATE ${CMAKE_CURRENT_LIST_DIR}/auth_config.cc)
