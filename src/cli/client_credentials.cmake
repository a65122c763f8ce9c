# How both CLIs (and tests) reach horovodd: token lookup, the header that
# carries it, TLS credentials.
add_library(hvdd_client_credentials STATIC ${CMAKE_CURRENT_LIST_DIR}/client_credentials.cc)
target_include_directories(hvdd_client_credentials PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hvdd_client_credentials PUBLIC gRPC::grpc++ absl::status absl::statusor
  absl::strings)
