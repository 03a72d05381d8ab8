// A loopback TCP proxy for the remote-storage integration tests (s3, gs): forwards to a port
// and drops connections mid-response to prove resumption.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/io/filesystem.h"
#include "recordflow/io/remote_test_util.h"

namespace recordflow::io::testing_util {

// Forwards loopback connections to `target_port`; after `drop_after` response bytes on a
// connection (while drops remain) it closes both sides mid-response.
class DroppingProxy {
 public:
  DroppingProxy(int target_port, size_t drop_after, int drops)
      : target_port_(target_port), drop_after_(drop_after), drops_left_(drops) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    const bool ok = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0 &&
                    ::listen(listen_fd_, 16) == 0;
    EXPECT_TRUE(ok) << "proxy cannot listen on loopback";
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Accept(); });
  }
  ~DroppingProxy() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    thread_.join();
    for (auto& t : conns_) t.join();
  }
  int port() const { return port_; }
  int drops_done() const { return drops_done_; }

 private:
  void Accept() {
    while (!stop_) {
      int c = ::accept(listen_fd_, nullptr, nullptr);
      if (c < 0) return;
      conns_.emplace_back([this, c] { Serve(c); });
    }
  }
  void Serve(int client) {
    int up = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(client);
      ::close(up);
      return;
    }
    std::thread request([client, up] {
      char buf[65536];
      ssize_t n;
      while ((n = ::read(client, buf, sizeof(buf))) > 0) {
        if (::write(up, buf, static_cast<size_t>(n)) != n) break;
      }
      ::shutdown(up, SHUT_WR);
    });
    char buf[65536];
    size_t sent = 0;
    ssize_t n;
    while ((n = ::read(up, buf, sizeof(buf))) > 0) {
      size_t take = static_cast<size_t>(n);
      bool drop = false;
      if (sent + take > drop_after_ && drops_left_.fetch_sub(1) > 0) {
        take = drop_after_ > sent ? drop_after_ - sent : 0;
        drop = true;
      }
      if (take > 0 && ::write(client, buf, take) != static_cast<ssize_t>(take)) break;
      sent += take;
      if (drop) {
        ++drops_done_;
        break;
      }
    }
    ::shutdown(client, SHUT_RDWR);
    ::shutdown(up, SHUT_RDWR);
    request.join();
    ::close(client);
    ::close(up);
  }

  int target_port_;
  size_t drop_after_;
  std::atomic<int> drops_left_;
  std::atomic<int> drops_done_{0};
  std::atomic<bool> stop_{false};
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::vector<std::thread> conns_;
};

// Writes 300 records of 1000 bytes to `url`, then reads them back with `endpoint_env` (the
// variable naming the server, whose value is `endpoint`) pointed at a DroppingProxy in front of
// the server that drops 4 responses after ~100 KB each: the reads must resume without losing
// or duplicating a record. `endpoint_env` is set back to `endpoint` afterwards.
inline void ExpectReadsResumeAfterDroppedConnections(const std::string& url,
                                                     const std::string& endpoint,
                                                     const char* endpoint_env) {
  const auto written = WriteShard(url, 300, 1000, false);
  const Url u = ParseUrl(endpoint);
  const int port = std::stoi(u.authority.substr(u.authority.rfind(':') + 1));
  DroppingProxy proxy(port, 100 * 1000, 4);
  setenv(endpoint_env, ("http://127.0.0.1:" + std::to_string(proxy.port())).c_str(), 1);
  Status s;
  const auto read = ReadAll(url, &s);
  setenv(endpoint_env, endpoint.c_str(), 1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(proxy.drops_done(), 1);
  EXPECT_EQ(read, written);
}

}  // namespace recordflow::io::testing_util
