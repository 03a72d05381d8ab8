// Remote storage through a real S3 server (SeaweedFS), gated on RF_TEST_S3_ENDPOINT
// ("http://127.0.0.1:8333") with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set. A small
// in-process TCP proxy drops connections mid-response to prove resumption.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/filesystem.h"
#include "recordflow/io/filesystem_internal.h"
#include "recordflow/io/http_client.h"

namespace recordflow::io {
namespace {

std::string Endpoint() {
  const char* e = std::getenv("RF_TEST_S3_ENDPOINT");
  return e == nullptr ? "" : e;
}

// Forwards loopback connections to the S3 port; after `drop_after` response bytes on a
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
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(listen_fd_, 16);
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

class S3IntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Endpoint().empty()) {
      GTEST_SKIP() << "RF_TEST_S3_ENDPOINT is not set: NO S3 SERVER, remote tests skipped";
    }
    setenv("AWS_ENDPOINT_URL_S3", Endpoint().c_str(), 1);
    saved_ = GetRemoteOptions();
    RemoteOptions o = saved_;
    o.retry.initial_backoff = std::chrono::milliseconds(10);
    o.retry.max_backoff = std::chrono::milliseconds(100);
    o.retry.max_total = std::chrono::milliseconds(10000);
    SetRemoteOptions(o);
    bucket_ = "rf-test-" + std::to_string(std::random_device{}());
    internal::S3Config c = internal::ResolveS3Config();
    internal::HttpResponse r;
    auto a = internal::HttpClient::Default().Perform(
        internal::S3Request(c, "PUT", bucket_, "", "", {}, {}), o.retry, &r);
    ASSERT_TRUE(a.status.ok()) << a.status.ToString();
    ASSERT_EQ(r.status, 200) << r.body;
  }
  void TearDown() override { SetRemoteOptions(saved_); }

  std::string Url(const std::string& key) const { return "s3://" + bucket_ + "/" + key; }

  static std::string Payload(int i, size_t size) {
    std::string s(size, '\0');
    std::mt19937 rng(static_cast<unsigned>(i));
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }

  // Writes n records of `size` bytes; returns their payloads.
  std::vector<std::string> WriteShard(const std::string& url, int n, size_t size, bool index) {
    format::RecordWriterOptions wo;
    wo.write_index = index;
    auto w = format::RecordWriter::Open(url, wo);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(Payload(i, size));
      EXPECT_TRUE((*w)->WriteRecord(std::as_bytes(std::span(out.back()))).ok());
    }
    Status s = (*w)->Close();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  static std::vector<std::string> ReadAll(const std::string& url, Status* status) {
    std::vector<std::string> got;
    auto r = format::RecordReader::Open(url);
    if (!r.ok()) {
      *status = r.status();
      return got;
    }
    std::span<const std::byte> rec;
    while (true) {
      Result<bool> more = (*r)->ReadRecord(&rec);
      if (!more.ok()) {
        *status = more.status();
        return got;
      }
      if (!*more) break;
      got.emplace_back(reinterpret_cast<const char*>(rec.data()), rec.size());
    }
    *status = Status::OK();
    return got;
  }

  RemoteOptions saved_;
  std::string bucket_;
};

TEST_F(S3IntegrationTest, WriteThenReadRecordsWithReadAheadAcrossParts) {
  RemoteOptions o = GetRemoteOptions();
  o.part_size = 64 * 1024;  // many parts, several in flight
  o.read_ahead_parts = 3;
  SetRemoteOptions(o);
  const auto written = WriteShard(Url("d/a.tfrecord"), 200, 3000, false);
  Status s;
  const auto read = ReadAll(Url("d/a.tfrecord"), &s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(read, written);
}

TEST_F(S3IntegrationTest, MultipartWriteCompletesOnCloseOnly) {
  RemoteOptions o = GetRemoteOptions();
  o.upload_part_size = 5 << 20;
  SetRemoteOptions(o);
  const auto written = WriteShard(Url("big.tfrecord"), 12, 1 << 20, false);  // 3 parts
  Status s;
  EXPECT_EQ(ReadAll(Url("big.tfrecord"), &s), written);
  ASSERT_TRUE(s.ok()) << s.ToString();
  {
    auto w = format::RecordWriter::Open(Url("aborted.tfrecord"));
    ASSERT_TRUE(w.ok());
    const std::string p = Payload(1, 1 << 20);
    for (int i = 0; i < 8; ++i) ASSERT_TRUE((*w)->WriteRecord(std::as_bytes(std::span(p))).ok());
    // Destroyed without Close(): at least one part was uploaded, and the upload is aborted.
  }
  auto st = StatPath(Url("aborted.tfrecord"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kNotFound);
}

TEST_F(S3IntegrationTest, GlobListsMatchingKeysOnly) {
  WriteShard(Url("g/train-0.tfrecord"), 2, 10, false);
  WriteShard(Url("g/train-1.tfrecord"), 2, 10, false);
  WriteShard(Url("g/val-0.tfrecord"), 2, 10, false);
  WriteShard(Url("g/sub/train-2.tfrecord"), 2, 10, false);
  auto m = GlobPaths(Url("g/train-*.tfrecord"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (std::vector<std::string>{Url("g/train-0.tfrecord"), Url("g/train-1.tfrecord")}));
  auto none = GlobPaths(Url("g/test-*.tfrecord"));
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

TEST_F(S3IntegrationTest, IndexedReaderUsesTheRemoteIndex) {
  const auto written = WriteShard(Url("i/x.tfrecord"), 50, 777, true);
  auto r = format::IndexedRecordReader::Open(Url("i/x.tfrecord"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->size(), 50u);
  std::vector<std::byte> scratch;
  for (uint64_t i : {49u, 0u, 17u}) {
    auto rec = (*r)->ReadRecord(i, &scratch);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(rec->data()), rec->size()), written[i]);
  }
}

TEST_F(S3IntegrationTest, MissingObjectIsNotFoundAndBadSecretIsPermissionDenied) {
  Status s;
  ReadAll(Url("nope.tfrecord"), &s);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find(Url("nope.tfrecord")), std::string::npos);
  WriteShard(Url("p.tfrecord"), 1, 10, false);
  const std::string secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value", 1);
  ReadAll(Url("p.tfrecord"), &s);
  setenv("AWS_SECRET_ACCESS_KEY", secret.c_str(), 1);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_EQ(s.message().find("wrong-secret-value"), std::string::npos);
}

TEST_F(S3IntegrationTest, DroppedConnectionsResumeWithoutLosingOrDuplicatingRecords) {
  const auto written = WriteShard(Url("f/r.tfrecord"), 300, 1000, false);
  const io::Url u = ParseUrl(Endpoint());
  const int port = std::stoi(u.authority.substr(u.authority.rfind(':') + 1));
  DroppingProxy proxy(port, 100 * 1000, 4);  // each dropped response stops after ~100 KB
  setenv("AWS_ENDPOINT_URL_S3", ("http://127.0.0.1:" + std::to_string(proxy.port())).c_str(), 1);
  Status s;
  const auto read = ReadAll(Url("f/r.tfrecord"), &s);
  setenv("AWS_ENDPOINT_URL_S3", Endpoint().c_str(), 1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(proxy.drops_done(), 1);
  EXPECT_EQ(read, written);
}

TEST_F(S3IntegrationTest, UnreachableEndpointGivesUpNamingUrlAndOffset) {
  RemoteOptions o = GetRemoteOptions();
  o.retry.max_total = std::chrono::milliseconds(500);
  SetRemoteOptions(o);
  setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1", 1);
  Status s;
  ReadAll(Url("x.tfrecord"), &s);
  setenv("AWS_ENDPOINT_URL_S3", Endpoint().c_str(), 1);
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
  EXPECT_NE(s.message().find(Url("x.tfrecord")), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("gave up after"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace recordflow::io
