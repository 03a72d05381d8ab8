// Shared by the remote-storage integration tests (s3, gs): the environment gates, seeded
// payloads, and writing/reading a shard of records at a URL.
#pragma once

#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"

namespace recordflow::io::testing_util {

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

}  // namespace recordflow::io::testing_util
