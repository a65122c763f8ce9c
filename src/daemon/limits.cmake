# Request validation and limits (issue 5). The checks of every RPC request are
# pure functions in their own small library, so the fuzz targets
# (tests/fuzz, HVDD_FUZZ) link it and hvdd_proto without the whole daemon.
add_library(hvdd_request_validation STATIC
  ${CMAKE_CURRENT_LIST_DIR}/request_validation.cc)
target_include_directories(hvdd_request_validation PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_request_validation PUBLIC hvdd_proto absl::status absl::strings)

if(TARGET hvdd_daemon)
  # Streams per client (WatchJob, Attach) are counted in the daemon's services.
  target_sources(hvdd_daemon PRIVATE ${CMAKE_CURRENT_LIST_DIR}/client_stream_limiter.cc)
  target_link_libraries(hvdd_daemon PUBLIC hvdd_request_validation)
endif()
