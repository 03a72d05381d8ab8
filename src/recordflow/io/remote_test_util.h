// Shared by the remote-storage integration tests (s3, gs): the environment gates, seeded
// payloads, and writing/reading a shard of records at a URL.
#pragma once

#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::io::testing_util {

// Sets the remote options to retry quickly (backoffs of 10 to 100 ms, 10 s in all), so that a
// test of failures ends in seconds. Returns the options set before, for TearDown to restore.
inline RemoteOptions UseFastRetries() {
  const RemoteOptions saved = GetRemoteOptions();
  RemoteOptions o = saved;
  o.retry.initial_backoff = std::chrono::milliseconds(10);
  o.retry.max_backoff = std::chrono::milliseconds(100);
  o.retry.max_total = std::chrono::milliseconds(10000);
  SetRemoteOptions(o);
  return saved;
}

// The variable's value; "" when unset.
inline std::string Env(const char* name) {
  const char* e = std::getenv(name);
  return e == nullptr ? "" : e;
}

// CI sets RF_REQUIRE_REMOTE_SERVERS=1: a missing server then fails the test instead of
// skipping it.
inline bool RequireServers() { return Env("RF_REQUIRE_REMOTE_SERVERS") == "1"; }

// `size` bytes seeded by `i`: record i of a test shard.
inline std::string Payload(int i, size_t size) {
  std::string s(size, '\0');
  std::mt19937 rng(static_cast<unsigned>(i));
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Writes n records of `size` bytes (and the .idx when `index`) to `url`; returns their payloads.
inline std::vector<std::string> WriteShard(const std::string& url, int n, size_t size, bool index) {
  format::RecordWriterOptions wo;
  wo.write_index = index;
  auto w = format::RecordWriter::Open(url, wo);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  std::vector<std::string> out;
  if (!w.ok()) return out;
  for (int i = 0; i < n; ++i) {
    out.push_back(Payload(i, size));
    EXPECT_TRUE((*w)->WriteRecord(std::as_bytes(std::span(out.back()))).ok());
  }
  Status s = (*w)->Close();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// Every record of `url`; `*status` says whether it read to the end.
inline std::vector<std::string> ReadAll(const std::string& url, Status* status) {
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

// Writes 50 records with their .idx to `url`; the indexed reader finds them through the
// remote index, in any order.
// Reading `url`, an object that does not exist, fails with kNotFound naming the URL.
inline void ExpectMissingObjectIsNotFound(const std::string& url) {
  Status s;
  ReadAll(url, &s);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find(url), std::string::npos) << s.ToString();
}

inline void ExpectIndexedReads(const std::string& url) {
  const auto written = WriteShard(url, 50, 777, true);
  auto r = format::IndexedRecordReader::Open(url);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->size(), 50u);
  std::vector<std::byte> scratch;
  for (uint64_t i : {49u, 0u, 17u}) {
    auto rec = (*r)->ReadRecord(i, &scratch);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(rec->data()), rec->size()), written[i]);
  }
}

// Writes 200 records of 3000 bytes to `url` and reads them back in 64 KiB parts, 3 read ahead
// (many parts, several in flight): every record comes back as written. Leaves the remote
// options so set; the fixtures restore theirs in TearDown.
inline void ExpectReadAheadAcrossParts(const std::string& url) {
  RemoteOptions o = GetRemoteOptions();
  o.part_size = 64 * 1024;
  o.read_ahead_parts = 3;
  SetRemoteOptions(o);
  const auto written = WriteShard(url, 200, 3000, false);
  Status s;
  const auto read = ReadAll(url, &s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(read, written);
}

// Writes g/train-0, g/train-1, g/val-0 and g/sub/train-2 (`url` makes a key a URL in the test's
// bucket): g/train-*.tfrecord matches exactly the first two, sorted (not the one a level
// down), and a pattern matching nothing is kNotFound.
inline void ExpectGlobMatchesKeysOnly(const std::function<std::string(const std::string&)>& url) {
  WriteShard(url("g/train-0.tfrecord"), 2, 10, false);
  WriteShard(url("g/train-1.tfrecord"), 2, 10, false);
  WriteShard(url("g/val-0.tfrecord"), 2, 10, false);
  WriteShard(url("g/sub/train-2.tfrecord"), 2, 10, false);
  auto m = GlobPaths(url("g/train-*.tfrecord"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (std::vector<std::string>{url("g/train-0.tfrecord"), url("g/train-1.tfrecord")}));
  EXPECT_EQ(GlobPaths(url("g/test-*.tfrecord")).status().code(), StatusCode::kNotFound);
}

}  // namespace recordflow::io::testing_util
