// Test helper: one raw HTTP exchange with a server on loopback.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/numbers.h"

namespace horovodd::test {

// A connection to "127.0.0.1:PORT" whose reads give up after a minute.
inline int ConnectToLoopback(const std::string& address) {
  int port = 0;
  REQUIRE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{60, 0};  // "did not hang"
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// Sends `request` to "127.0.0.1:PORT" and returns everything the server
// answers before it closes the connection.
inline std::string HttpExchange(const std::string& address, const std::string& request) {
  const int fd = ConnectToLoopback(address);
  REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  std::string answer;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) answer.append(buffer, n);
  close(fd);
  return answer;
}

}  // namespace horovodd::test
