#include "recordflow/image/augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "recordflow/image/image_test_util.h"
#include "recordflow/image/ops.h"

namespace recordflow::image {
namespace {

Image Gradient(int width, int height, int channels = 3) {
  Image img = testing_util::BlankImage(width, height, channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        img.row(y)[x * channels + c] = static_cast<uint8_t>((x * 7 + y * 13 + c * 85) % 256);
      }
    }
  }
  return img;
}

TEST(AugmentTest, BrightnessTruncatesAndClamps) {
  Image img = Gradient(8, 4);
  Image out = AdjustBrightness(img, 1.5).value();
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    const int want = std::min(255, static_cast<int>(img.pixels[i] * 1.5f));
    EXPECT_EQ(out.pixels[i], want) << i;
  }
  EXPECT_EQ(AdjustBrightness(img, -1).status().code(), StatusCode::kInvalidArgument);
}

TEST(AugmentTest, IdentityFactors) {
  Image img = Gradient(16, 9);
  EXPECT_EQ(AdjustBrightness(img, 1.0).value().pixels, img.pixels);
  EXPECT_EQ(AdjustContrast(img, 1.0).value().pixels, img.pixels);
  EXPECT_EQ(AdjustSaturation(img, 1.0).value().pixels, img.pixels);
  EXPECT_EQ(AdjustSharpness(img, 1.0).value().pixels, img.pixels);
  // A hue shift of 0 goes through HSV and back: exact for 8-bit input.
  EXPECT_EQ(AdjustHue(img, 0.0).value().pixels, img.pixels);
  EXPECT_EQ(Posterize(img, 8).value().pixels, img.pixels);
  EXPECT_EQ(Invert(Invert(img)).pixels, img.pixels);
  EXPECT_EQ(Rotate(img, 0.0).value().pixels, img.pixels);
}

TEST(AugmentTest, SaturationZeroIsGray) {
  Image img = Gradient(5, 5);
  Image out = AdjustSaturation(img, 0.0).value();
  Image gray = RgbToGrayscale(img, 3).value();
  EXPECT_EQ(out.pixels, gray.pixels);
}

TEST(AugmentTest, PosterizeSolarizeInvert) {
  Image img = Gradient(16, 16, 1);
  Image p = Posterize(img, 3).value();
  Image s = Solarize(img, 128).value();
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    EXPECT_EQ(p.pixels[i], img.pixels[i] & 0xE0);
    EXPECT_EQ(s.pixels[i], img.pixels[i] >= 128 ? 255 - img.pixels[i] : img.pixels[i]);
  }
  EXPECT_FALSE(Posterize(img, 9).ok());
  EXPECT_FALSE(Solarize(img, 300).ok());
}

TEST(AugmentTest, AutoContrastStretchesEachChannel) {
  Image img;
  img.width = 3;
  img.height = 1;
  img.channels = 1;
  img.pixels = {50, 100, 150};
  // torchvision divides by (max - min) * float(1 / 255): 100 / 0.39215687f truncates to 254.
  EXPECT_EQ(AutoContrast(img).pixels, (std::vector<uint8_t>{0, 127, 254}));
  img.pixels = {7, 7, 7};
  EXPECT_EQ(AutoContrast(img).pixels, img.pixels);
}

TEST(AugmentTest, EqualizeFlattensHistogram) {
  Image img = Gradient(64, 64, 1);
  for (auto& v : img.pixels) v = static_cast<uint8_t>(v / 4);  // 0..63
  Image out = Equalize(img);
  const auto [lo, hi] = std::minmax_element(out.pixels.begin(), out.pixels.end());
  EXPECT_EQ(*lo, 0);
  EXPECT_GE(*hi, 240);
}

// torchvision's equalize, one channel at a time and one sample at a time: the reference for
// the one-pass histogram (two pixels a step, a table per channel and pixel parity) and the
// table pass.
std::vector<uint8_t> ReferenceEqualize(const Image& img) {
  std::vector<uint8_t> out = img.pixels;
  const size_t ch = static_cast<size_t>(img.channels), n = img.pixels.size() / ch;
  for (size_t c = 0; c < ch; ++c) {
    std::array<int64_t, 256> hist{};
    for (size_t i = 0; i < n; ++i) ++hist[img.pixels[i * ch + c]];
    int last = 255;
    while (last > 0 && hist[last] == 0) --last;
    const int64_t step = (static_cast<int64_t>(n) - hist[last]) / 255;
    if (step == 0) continue;
    std::array<uint8_t, 256> lut{};
    int64_t acc = step / 2;
    for (int v = 0; v < 256; ++v) {
      lut[v] = static_cast<uint8_t>(std::min<int64_t>(acc / step, 255));
      acc += hist[v];
    }
    for (size_t i = 0; i < n; ++i) out[i * ch + c] = lut[img.pixels[i * ch + c]];
  }
  return out;
}

TEST(AugmentTest, EqualizeAndAutoContrastMatchASampleBySampleReferenceAtEveryTail) {
  // Pixel counts odd and even, small and large, values spread over the whole range, in runs
  // of one value and in a narrow band, so that every channel gets its own table.
  for (int width : {1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 61, 300}) {
    for (int height : {1, 3}) {
      Image img;
      img.width = width;
      img.height = height;
      img.channels = 3;
      img.pixels.resize(static_cast<size_t>(width) * height * 3);
      uint32_t state = 12345u + static_cast<uint32_t>(width * 7 + height);
      for (size_t i = 0; i < img.pixels.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        const size_t c = i % 3;
        // Channel 0 wide, channel 1 in runs, channel 2 in a narrow band.
        img.pixels[i] = c == 0   ? static_cast<uint8_t>(state >> 24)
                        : c == 1 ? static_cast<uint8_t>((i / 12) * 37)
                                 : static_cast<uint8_t>(100 + (state >> 29));
      }
      SCOPED_TRACE(std::to_string(width) + "x" + std::to_string(height));
      EXPECT_EQ(Equalize(img).pixels, ReferenceEqualize(img));
      // AutoContrast's table pass, against the same table applied sample by sample.
      std::vector<uint8_t> expect = img.pixels;
      for (size_t c = 0; c < 3; ++c) {
        uint8_t lo = 255, hi = 0;
        for (size_t i = c; i < expect.size(); i += 3) {
          lo = std::min(lo, img.pixels[i]);
          hi = std::max(hi, img.pixels[i]);
        }
        if (lo == hi) continue;
        const float inv_scale = (static_cast<float>(hi) - lo) * static_cast<float>(1.0 / 255.0);
        for (size_t i = c; i < expect.size(); i += 3) {
          const float v = (static_cast<float>(img.pixels[i]) - lo) / inv_scale;
          expect[i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
        }
      }
      EXPECT_EQ(AutoContrast(img).pixels, expect);
    }
  }
}

TEST(AugmentTest, GaussianBlurKeepsConstantAndMean) {
  Image img = Gradient(20, 11);
  Image flat = img;
  std::fill(flat.pixels.begin(), flat.pixels.end(), 77);
  EXPECT_EQ(GaussianBlur(flat, {5, 3}, {1.5, 0.7}).value().pixels, flat.pixels);
  EXPECT_FALSE(GaussianBlur(img, {4, 3}, {1, 1}).ok());
  EXPECT_FALSE(GaussianBlur(img, {3, 3}, {0, 1}).ok());
  // Kernel larger than the image: reflection folds again and still gives a constant.
  Image tiny = flat;
  tiny.width = 2;
  tiny.height = 2;
  tiny.pixels.resize(12);
  EXPECT_EQ(GaussianBlur(tiny, {9, 9}, {3, 3}).value().pixels, tiny.pixels);
}

TEST(AugmentTest, AffineTranslateIsAShift) {
  Image img = Gradient(10, 6);
  AffineOptions o;
  o.translate = {3, -2};
  Image out = Affine(img, o).value();
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 10; ++x) {
      const int sx = x - 3, sy = y + 2;
      for (int c = 0; c < 3; ++c) {
        const int want = (sx >= 0 && sx < 10 && sy >= 0 && sy < 6) ? img.row(sy)[sx * 3 + c] : 0;
        ASSERT_EQ(out.row(y)[x * 3 + c], want) << x << "," << y;
      }
    }
  }
}

TEST(AugmentTest, Rotate180IsDoubleFlip) {
  Image img = Gradient(9, 7);
  Image out = Rotate(img, 180.0).value();
  for (int y = 0; y < 7; ++y) {
    for (int x = 0; x < 9; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(out.row(y)[x * 3 + c], img.row(6 - y)[(8 - x) * 3 + c]) << x << "," << y;
      }
    }
  }
}

TEST(AugmentTest, EraseAndRandomErasing) {
  Image img = Gradient(32, 32);
  const std::vector<double> value = {1, 2, 3};
  Image out = Erase(img, Rect{2, 3, 4, 5}, value).value();
  EXPECT_EQ(out.row(3)[2 * 3], 1);
  EXPECT_EQ(out.row(7)[5 * 3 + 2], 3);
  EXPECT_EQ(out.row(8)[2 * 3], img.row(8)[2 * 3]);
  EXPECT_FALSE(Erase(img, Rect{30, 0, 4, 4}, value).ok());
  RandomErasingOptions o;
  o.p = 1.0;
  int erased = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Rng rng(seed);
    auto r = RandomErasingRect(32, 32, o, rng).value();
    if (!r) continue;
    ++erased;
    EXPECT_LT(r->width, 32);
    EXPECT_LT(r->height, 32);
    EXPECT_LE(r->x + r->width, 32);
    EXPECT_LE(r->y + r->height, 32);
  }
  EXPECT_GT(erased, 40);
}

TEST(AugmentTest, RandomErasingRandomFillIsNormalPerSampleAndDeterministic) {
  Image img = Gradient(64, 64);
  RandomErasingOptions o;
  o.p = 1.0;
  o.scale = {0.3, 0.33};
  o.random_mean = {123.675, 116.28, 103.53};  // 255 x ImageNet's mean and std
  o.random_std = {58.395, 57.12, 57.375};
  Rng a(3), b(3), rect_rng(3);
  Image x = RandomErasing(img, o, a).value();
  EXPECT_EQ(x.pixels, RandomErasing(img, o, b).value().pixels);
  const Rect r = *RandomErasingRect(64, 64, o, rect_rng).value();  // the same rectangle
  double sum[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
  const double n = static_cast<double>(r.width) * r.height;
  for (int y = 0; y < 64; ++y) {
    for (int xx = 0; xx < 64; ++xx) {
      const bool inside = y >= r.y && y < r.y + r.height && xx >= r.x && xx < r.x + r.width;
      for (int c = 0; c < 3; ++c) {
        const int v = x.row(y)[xx * 3 + c];
        if (!inside) {
          ASSERT_EQ(v, img.row(y)[xx * 3 + c]) << "outside the rectangle at " << xx << "," << y;
          continue;
        }
        const double z = (v - o.random_mean[c]) / o.random_std[c];
        sum[c] += z;
        sq[c] += z * z;
      }
    }
  }
  ASSERT_GT(n, 1000);
  for (int c = 0; c < 3; ++c) {
    const double mean = sum[c] / n, sd = std::sqrt(sq[c] / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.08) << c;
    EXPECT_GT(sd, 0.88) << c;  // the clamp to 0..255 trims the tails a little
    EXPECT_LT(sd, 1.02) << c;
  }
  o.random_std = {58.0, 57.0};  // two stds for three means
  Rng c(3);
  EXPECT_FALSE(RandomErasing(img, o, c).ok());
}

TEST(AugmentTest, RandomOpsAreDeterministicPerSeed) {
  Image img = Gradient(40, 30);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Rng a(seed), b(seed);
    EXPECT_EQ(AutoAugment(img, {}, a).value().pixels, AutoAugment(img, {}, b).value().pixels);
    EXPECT_EQ(RandAugment(img, {}, {}, a).value().pixels,
              RandAugment(img, {}, {}, b).value().pixels);
    EXPECT_EQ(TrivialAugmentWide(img, {}, {}, a).value().pixels,
              TrivialAugmentWide(img, {}, {}, b).value().pixels);
    const auto cj = ColorJitterOptions::FromScalars(0.4, 0.4, 0.4, 0.1);
    EXPECT_EQ(ColorJitter(img, cj, a).value().pixels, ColorJitter(img, cj, b).value().pixels);
  }
}

TEST(AugmentTest, PolicyEqualsItsSampledOps) {
  Image img = Gradient(40, 30);
  for (uint64_t seed = 0; seed < 30; ++seed) {
    Rng a(seed), b(seed);
    Image direct = RandAugment(img, {}, {}, a).value();
    auto ops = SampleRandAugment(40, 30, {}, b).value();
    ASSERT_EQ(ops.size(), 2u);
    Image replay = img;
    for (const auto& op : ops) replay = ApplyAugmentOp(replay, op).value();
    EXPECT_EQ(direct.pixels, replay.pixels);
  }
}

TEST(AugmentTest, PolicyMagnitudes) {
  // RandAugment's default magnitude 9 of 31 bins: rotate by 9 degrees (30 * 9 / 30).
  bool saw_rotate = false;
  for (uint64_t seed = 0; seed < 200 && !saw_rotate; ++seed) {
    Rng rng(seed);
    // Held in a named variable: a range-for over a temporary Result's value() would read the
    // vector after the Result died (ASan: stack-use-after-scope).
    const std::vector<AppliedOp> ops = SampleRandAugment(224, 224, {}, rng).value();
    for (const auto& op : ops) {
      if (op.op == AugmentOp::kRotate) {
        saw_rotate = true;
        EXPECT_NEAR(std::abs(op.magnitude), 9.0, 1e-5);
      }
      if (op.op == AugmentOp::kPosterize) EXPECT_EQ(op.magnitude, 7);  // 8 - round(9 / 7.5)
    }
  }
  EXPECT_TRUE(saw_rotate);
  EXPECT_EQ(ParseAugmentOp("Equalize").value(), AugmentOp::kEqualize);
  EXPECT_FALSE(ParseAugmentOp("Blur").ok());
}

TEST(AugmentTest, MixUpSoftLabelsAndPixels) {
  std::vector<float> batch = {0, 10, 20, 30};  // B=4, 1x1x1
  std::vector<int64_t> labels = {0, 1, 2, 0};
  std::vector<float> soft(4 * 3);
  BatchView v{4, 1, 1, 1, nullptr, batch.data()};
  ASSERT_TRUE(MixUpWithLambda(v, labels, 3, 0.25, soft).ok());
  EXPECT_FLOAT_EQ(batch[0], 0.25f * 0 + 0.75f * 30);
  EXPECT_FLOAT_EQ(batch[1], 0.25f * 10 + 0.75f * 0);
  EXPECT_FLOAT_EQ(batch[3], 0.25f * 30 + 0.75f * 20);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(soft[i * 3] + soft[i * 3 + 1] + soft[i * 3 + 2], 1.0f);
  }
  EXPECT_FLOAT_EQ(soft[0], 1.0f);  // labels 0 and (rolled) 0
  EXPECT_FLOAT_EQ(soft[1 * 3 + 1], 0.25f);
  EXPECT_FLOAT_EQ(soft[1 * 3 + 0], 0.75f);
  labels[2] = 3;
  EXPECT_EQ(MixUpWithLambda(v, labels, 3, 0.5, soft).code(), StatusCode::kInvalidArgument);
}

// With a source, MixUp and CutMix leave it untouched and write into the output what they
// write in place, for float32 and uint8 batches (CutMix with a box at the image's edge too).
TEST(AugmentTest, BatchOpsFromASourceEqualTheInPlaceOps) {
  constexpr int kB = 3, kH = 5, kW = 7, kC = 3;
  constexpr size_t kN = size_t{kB} * kH * kW * kC;
  std::vector<uint8_t> u8(kN);
  std::vector<float> f32(kN);
  for (size_t i = 0; i < kN; ++i) {
    u8[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
    f32[i] = static_cast<float>(u8[i]) / 7.0f;
  }
  const std::vector<int64_t> labels = {2, 0, 1};
  for (const Rect& box : {Rect{1, 2, 4, 2}, Rect{0, 0, 7, 1}, Rect{6, 4, 1, 1}}) {
    for (int op = 0; op < 2; ++op) {
      std::vector<uint8_t> u8_in_place = u8, u8_out(kN, 0);
      std::vector<float> f32_in_place = f32, f32_out(kN, 0.0f);
      std::vector<float> soft_a(kB * 4), soft_b(kB * 4);
      BatchView a{kB, kH, kW, kC, u8_in_place.data(), nullptr};
      BatchView b{kB, kH, kW, kC, u8_out.data(), nullptr, u8.data()};
      BatchView fa{kB, kH, kW, kC, nullptr, f32_in_place.data()};
      BatchView fb{kB, kH, kW, kC, nullptr, f32_out.data(), f32.data()};
      for (auto [in_place, from_source] : {std::pair{&a, &b}, std::pair{&fa, &fb}}) {
        if (op == 0) {
          ASSERT_TRUE(MixUpWithLambda(*in_place, labels, 4, 0.3, soft_a).ok());
          ASSERT_TRUE(MixUpWithLambda(*from_source, labels, 4, 0.3, soft_b).ok());
        } else {
          ASSERT_TRUE(CutMixWithBox(*in_place, labels, 4, box, soft_a).ok());
          ASSERT_TRUE(CutMixWithBox(*from_source, labels, 4, box, soft_b).ok());
        }
        EXPECT_EQ(soft_a, soft_b);
      }
      EXPECT_EQ(u8_out, u8_in_place) << "op " << op;
      EXPECT_EQ(f32_out, f32_in_place) << "op " << op;
      EXPECT_NE(u8_out, u8) << "op " << op << ": nothing mixed";
    }
  }
}

TEST(AugmentTest, CutMixPastesRolledBox) {
  std::vector<uint8_t> batch(2 * 4 * 4, 0);
  std::fill(batch.begin() + 16, batch.end(), 9);
  std::vector<int64_t> labels = {0, 1};
  std::vector<float> soft(4);
  BatchView v{2, 4, 4, 1, batch.data(), nullptr};
  ASSERT_TRUE(CutMixWithBox(v, labels, 2, Rect{1, 1, 2, 2}, soft).ok());
  EXPECT_EQ(batch[1 * 4 + 1], 9);
  EXPECT_EQ(batch[0], 0);
  EXPECT_EQ(batch[16 + 1 * 4 + 1], 0);
  EXPECT_EQ(batch[16], 9);
  EXPECT_FLOAT_EQ(soft[0], 0.75f);
  EXPECT_FLOAT_EQ(soft[1], 0.25f);
}

TEST(AugmentTest, BetaMeanIsOneHalf) {
  Rng rng(5);
  double sum = 0;
  for (int i = 0; i < 4000; ++i) {
    const double x = SampleBeta(0.4, rng);
    ASSERT_GE(x, 0);
    ASSERT_LE(x, 1);
    sum += x;
  }
  EXPECT_NEAR(sum / 4000, 0.5, 0.03);
}

// adjust_contrast(0) is the image's mean grey, truncated: torchvision's mean of
// rgb_to_grayscale (0.2989 r + 0.587 g + 0.114 b as fused float multiply-adds, truncated) over
// every pixel. Checked on every backend for widths and heights whose pixel counts end inside
// and outside the 8-pixel blocks of the AVX2 sum (a pixel dropped, counted twice or read from
// the wrong channel moves the mean).
TEST(AugmentTest, ContrastMeanGreyCountsEveryPixelOnEveryBackend) {
  uint32_t x = 987654321u;
  for (KernelBackend backend : {KernelBackend::kScalar, KernelBackend::kAuto}) {
    ASSERT_TRUE(SetKernelBackend(backend).ok());
    for (int w : {1, 2, 3, 7, 8, 10, 11, 12, 13, 19, 33}) {
      for (int h : {1, 2, 5}) {
        Image img = Gradient(w, h);
        for (auto& v : img.pixels) {
          x = x * 1664525u + 1013904223u;
          v = static_cast<uint8_t>(x >> 24);
        }
        int64_t sum = 0;
        for (size_t i = 0; i < img.pixels.size(); i += 3) {
          const float g = std::fma(static_cast<float>(img.pixels[i + 2]), 0.114f,
                                   std::fma(static_cast<float>(img.pixels[i + 1]), 0.587f,
                                            static_cast<float>(img.pixels[i]) * 0.2989f));
          sum += static_cast<int64_t>(g);
        }
        const double mean = static_cast<double>(sum) / (static_cast<double>(w) * h);
        const auto out = AdjustContrast(img, 0.0).value().pixels;
        ASSERT_EQ(out[0], static_cast<uint8_t>(static_cast<float>(mean)))
            << w << "x" << h << " backend " << KernelBackendName();
        for (uint8_t v : out) ASSERT_EQ(v, out[0]);
      }
    }
  }
  ASSERT_TRUE(SetKernelBackend(KernelBackend::kAuto).ok());
}

}  // namespace
}  // namespace recordflow::image

namespace recordflow::image {
namespace {

// The AVX2 paths of hue, brightness, contrast, saturation and grayscale against the portable loops,
// bit for bit, on a size that leaves partial 256-pixel blocks and 32-byte tails, with grey,
// saturated and mixed pixels (every hue sector) from a fixed pseudo-random fill.
TEST(AugmentTest, Avx2PathsMatchPortableLoops) {
  Image img = Gradient(97, 61);
  uint32_t x = 12345;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    if (i % 7 != 0) img.pixels[i] = static_cast<uint8_t>(x >> 24);
  }
  for (int i = 0; i < 40; ++i) img.pixels[3 * i] = img.pixels[3 * i + 1] = img.pixels[3 * i + 2];
  auto run = [&](KernelBackend backend) {
    EXPECT_TRUE(SetKernelBackend(backend).ok());
    std::vector<std::vector<uint8_t>> outs;
    for (double h : {-0.5, -0.3, -0.1, 0.0, 0.07, 0.25, 0.5}) {
      outs.push_back(AdjustHue(img, h).value().pixels);
    }
    outs.push_back(RgbToGrayscale(img, 1).value().pixels);
    outs.push_back(RgbToGrayscale(img, 3).value().pixels);
    // autocontrast's per-channel min and max: an extreme sample placed in each channel, at
    // positions inside the 32-pixel runs and in the tail.
    for (size_t at : {size_t{5}, size_t{1000}, img.pixels.size() - 4}) {
      for (uint8_t extreme : {uint8_t{0}, uint8_t{255}}) {
        for (size_t c = 0; c < 3; ++c) {
          Image probe = img;
          for (auto& v : probe.pixels) v = static_cast<uint8_t>(40 + v % 150);
          probe.pixels[at - at % 3 + c] = extreme;
          outs.push_back(AutoContrast(probe).pixels);
        }
      }
    }
    for (int ch : {1, 2, 4}) {
      Image other = Gradient(97, 61, ch);
      for (size_t i = 0; i < other.pixels.size(); ++i) {
        other.pixels[i] = static_cast<uint8_t>(30 + (i * 37 + i / 7) % 180);
      }
      outs.push_back(AutoContrast(other).pixels);
    }
    for (double f : {0.0, 0.4, 1.3, 2.7}) {
      outs.push_back(AdjustSaturation(img, f).value().pixels);
      outs.push_back(AdjustBrightness(img, f).value().pixels);
      outs.push_back(AdjustContrast(img, f).value().pixels);
      outs.push_back(AdjustSharpness(img, f).value().pixels);
      outs.push_back(AdjustSharpness(RgbToGrayscale(img, 1).value(), f).value().pixels);
    }
    return outs;
  };
  // Every sample value under many factors and means: the float path and the table must agree
  // to the last bit, not only on average.
  auto sweep = [&](KernelBackend backend) {
    EXPECT_TRUE(SetKernelBackend(backend).ok());
    std::vector<std::vector<uint8_t>> outs;
    for (int offset : {0, 37, 101}) {
      Image all = Gradient(32, 24);
      for (size_t i = 0; i < all.pixels.size(); ++i) {
        all.pixels[i] = static_cast<uint8_t>((i * (offset + 1) + offset) % 256);
      }
      for (int k = 0; k < 240; ++k) {
        const double f = 0.0125 * k + 0.001 * offset;
        outs.push_back(AdjustBrightness(all, f).value().pixels);
        outs.push_back(AdjustContrast(all, f).value().pixels);
        outs.push_back(AdjustSaturation(all, f).value().pixels);
      }
    }
    return outs;
  };
  EXPECT_EQ(sweep(KernelBackend::kScalar), sweep(KernelBackend::kAuto));
  const auto portable = run(KernelBackend::kScalar);
  const auto fast = run(KernelBackend::kAuto);
  ASSERT_TRUE(SetKernelBackend(KernelBackend::kAuto).ok());
  ASSERT_EQ(portable.size(), fast.size());
  for (size_t k = 0; k < portable.size(); ++k) EXPECT_EQ(portable[k], fast[k]) << "case " << k;
  // The test means something only when the two differ in path.
  EXPECT_NE(KernelBackendName(), "scalar");
}

// An op given its image by std::move writes into that image's buffer (no new allocation, no
// zero fill) and computes what it computes for a copy, on every backend, for the ops that work
// in place and for the random wrappers and policies that chain them.
TEST(AugmentTest, MovedImagesAreTransformedInTheirOwnBuffer) {
  Image img = Gradient(61, 37);
  uint32_t x = 2468;
  for (auto& v : img.pixels) {  // within [20, 230]: autocontrast has something to stretch
    x = x * 1664525u + 1013904223u;
    v = static_cast<uint8_t>(20 + (x >> 24) % 211);
  }
  const std::array<double, 1> grey = {127};
  const std::vector<std::pair<const char*, std::function<Result<Image>(Image)>>> ops = {
      {"brightness", [](Image i) { return AdjustBrightness(std::move(i), 1.3); }},
      {"contrast", [](Image i) { return AdjustContrast(std::move(i), 0.6); }},
      {"saturation", [](Image i) { return AdjustSaturation(std::move(i), 1.7); }},
      {"hue", [](Image i) { return AdjustHue(std::move(i), 0.2); }},
      {"grayscale3", [](Image i) { return RgbToGrayscale(std::move(i), 3); }},
      {"posterize", [](Image i) { return Posterize(std::move(i), 3); }},
      {"solarize", [](Image i) { return Solarize(std::move(i), 100); }},
      {"invert", [](Image i) -> Result<Image> { return Invert(std::move(i)); }},
      {"autocontrast", [](Image i) -> Result<Image> { return AutoContrast(std::move(i)); }},
      {"equalize", [](Image i) -> Result<Image> { return Equalize(std::move(i)); }},
      {"erase",
       [&](Image i) {
         return Erase(std::move(i), Rect{3, 4, 20, 9}, grey);
       }},
      {"color_jitter",
       [](Image i) {
         Rng rng(7);
         return ColorJitter(std::move(i), ColorJitterOptions::FromScalars(.4, .4, .4, 0), rng);
       }},
      {"policy_ops",
       [](Image i) {
         Rng rng(11);  // photometric ops only: a geometric op allocates its output
         PolicyOptions o;
         Result<Image> out = std::move(i);
         for (AugmentOp op : {AugmentOp::kBrightness, AugmentOp::kColor, AugmentOp::kContrast,
                              AugmentOp::kPosterize, AugmentOp::kSolarize}) {
           if (!out.ok()) break;
           out = ApplyAugmentOp(std::move(out).value(), {op, 0.3 + 0.1 * rng.Uniform(0, 1)}, o);
         }
         return out;
       }},
  };
  for (KernelBackend backend : {KernelBackend::kScalar, KernelBackend::kAuto}) {
    ASSERT_TRUE(SetKernelBackend(backend).ok());
    for (const auto& [name, op] : ops) {
      const Result<Image> from_copy = op(img);
      ASSERT_TRUE(from_copy.ok()) << name;
      Image mine = img;
      const uint8_t* buffer = mine.pixels.data();
      const Result<Image> in_place = op(std::move(mine));
      ASSERT_TRUE(in_place.ok()) << name;
      EXPECT_EQ(in_place->pixels.data(), buffer) << name << " on " << KernelBackendName();
      EXPECT_EQ(in_place->pixels, from_copy->pixels) << name << " on " << KernelBackendName();
      EXPECT_NE(from_copy->pixels, img.pixels) << name << ": the op changed nothing";
    }
  }
  ASSERT_TRUE(SetKernelBackend(KernelBackend::kAuto).ok());
}

}  // namespace
}  // namespace recordflow::image
