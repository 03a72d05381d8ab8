// Helpers shared by the pipeline and vision layers' tests: unwrapping results, JPEG records,
// draining a Dataset.
#pragma once

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/core/status.h"
#include "recordflow/format/record_test_util.h"
#include "recordflow/image/image.h"
#include "recordflow/pipeline/dataset.h"

namespace recordflow::pipeline::testing_util {

using format::testing::Ok;

// A w x h RGB JPEG whose pixels are a pattern seeded by `seed`.
inline std::string JpegOf(int w, int h, int seed) {
  image::Image img;
  img.width = w, img.height = h, img.channels = 3;
  img.pixels.resize(img.row_bytes() * h);
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    img.pixels[i] = static_cast<uint8_t>((i * 7 + seed * 13 + i / 97) % 251);
  }
  return Ok(image::EncodeJpeg(img));
}

// Every element of one pass over `ds`; an iteration error fails the test and ends the pass.
inline std::vector<Element> RunAll(const Dataset& ds) {
  auto it = Ok(ds.MakeIterator());
  std::vector<Element> out;
  Element e;
  while (true) {
    Result<bool> got = it->GetNext(&e);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || !*got) break;
    out.push_back(std::move(e));
  }
  return out;
}

// Expects the first GetNext of `it` to fail with kDataLoss naming `where` (e.g. "record 4 of
// file #0"). Call under ASSERT_NO_FATAL_FAILURE.
inline void ExpectFirstElementIsDataLossAt(Iterator& it, const std::string& where) {
  Element e;
  Result<bool> r = it.GetNext(&e);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(where), std::string::npos) << r.status().message();
}

// Same count of elements, and each element's first tensor has the same shape and bytes.
inline void ExpectSameFirstTensors(const std::vector<Element>& a, const std::vector<Element>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].tensors[0].shape, b[i].tensors[0].shape) << "batch " << i;
    ASSERT_EQ(a[i].tensors[0].size_bytes, b[i].tensors[0].size_bytes);
    EXPECT_EQ(std::memcmp(a[i].tensors[0].data.get(), b[i].tensors[0].data.get(),
                          a[i].tensors[0].size_bytes),
              0)
        << "batch " << i;
  }
}

}  // namespace recordflow::pipeline::testing_util
