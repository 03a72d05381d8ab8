// Where a libjpeg-turbo decode spends its time, on the suite's JPEGs: the floor under the
// image pipelines' ratio to the bare full decode (docs/benchmarks.md, issue 23's goals).
//
// For every image of a pack (bench/suite.py writes it: the very JPEG bytes of the shards), one
// thread, the libjpeg API (ISLOW IDCT, fancy upsampling, RGB out: what the bare decoder and
// the presets use), process CPU time of each variant over all images, the variants run in
// turn PASSES times; medians per image:
//   full      every row decoded to RGB (the bare decoder's work)
//   entropy   Huffman decoding of every coefficient and nothing else (jpeg_skip_scanlines
//             to the last row, which libjpeg-turbo entropy-decodes without IDCT or color)
//   train     the crop a RandomResizedCrop(scale 0.08-1, ratio 3/4-4/3) keeps, decoded as the
//             train preset decodes it: iMCU columns of the crop (jpeg_crop_scanline), rows
//             above it entropy-decoded only, rows below never read
//   eval      the same for the centre box Resize(256) + CenterCrop(224) keeps, plus the 3-pixel
//             filter margin the eval preset decodes around it
//   eval_m8   eval at the smallest DCT scale M/8 (M = 1..8) that keeps the box at >= 224 pixels
//             a side: what scaling by M/8, not only 1/2, 1/4, 1/8, would save (libjpeg-turbo's
//             scaled IDCTs other than 4x4, 2x2 and 1x1 are C, not SIMD)
//   eval_fast eval with fancy upsampling off (libjpeg's merged upsample + color conversion)
// No resize, normalisation, reading or parsing: a pipeline's ratio to "full" cannot exceed
// full / (its decode variant + what it does after the decode).
//
// Usage: jpeg_stages PACK [PASSES]   (build: g++ -O2 -std=c++20 jpeg_stages.cc -ljpeg)

#include <cstddef>
#include <cstdio>

#include <jpeglib.h>  // needs size_t and FILE first

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

struct Crop {
  int x = 0, y = 0, w = 0, h = 0;
};

struct Jpeg {
  std::vector<unsigned char> bytes;
  int width = 0, height = 0;
  Crop train, eval;
  int eval_m = 8;  // eval_m8's scale numerator (denominator 8)
};

struct ErrorJump {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
};

void OnError(j_common_ptr ci) { std::longjmp(reinterpret_cast<ErrorJump*>(ci->err)->jump, 1); }

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// torchvision's RandomResizedCrop.get_params (10 tries, then the centre crop of the clamped ratio).
Crop RandomResizedCrop(int W, int H, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double area = double(W) * H, lr0 = std::log(3.0 / 4), lr1 = std::log(4.0 / 3);
  for (int i = 0; i < 10; ++i) {
    const double target = area * (0.08 + u(rng) * 0.92);
    const double ratio = std::exp(lr0 + u(rng) * (lr1 - lr0));
    const int w = int(std::lround(std::sqrt(target * ratio)));
    const int h = int(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= W && h <= H) {
      std::uniform_int_distribution<int> dx(0, W - w), dy(0, H - h);
      return Crop{dx(rng), dy(rng), w, h};
    }
  }
  const int w = std::min(W, H), h = w;
  return Crop{(W - w) / 2, (H - h) / 2, w, h};
}

// The box Resize(256) + CenterCrop(224) keeps, in source pixels, with a 3-pixel margin.
Crop EvalBox(int W, int H) {
  const double s = 256.0 / std::min(W, H), side_w = 224 / s, side_h = 224 / s;
  const int m = 3;
  const int x0 = std::max(0, int(std::floor((W - side_w) / 2)) - m);
  const int y0 = std::max(0, int(std::floor((H - side_h) / 2)) - m);
  const int x1 = std::min(W, int(std::ceil((W + side_w) / 2)) + m);
  const int y1 = std::min(H, int(std::ceil((H + side_h) / 2)) + m);
  return Crop{x0, y0, x1 - x0, y1 - y0};
}

// The smallest M/8 scale at which the eval box keeps >= 224 pixels a side.
int EvalScaleNumerator(const Crop& c) {
  for (int m = 1; m < 8; ++m) {
    if (c.w * m / 8 >= 224 && c.h * m / 8 >= 224) return m;
  }
  return 8;
}

enum class Variant { kFull, kEntropy, kTrain, kEval, kEvalM8, kEvalFast };

// Decodes one image as `v` says; false on a libjpeg error.
bool Decode(jpeg_decompress_struct& ci, ErrorJump& err, const Jpeg& j, Variant v,
            std::vector<unsigned char>& rows) {
  if (setjmp(err.jump) != 0) {
    jpeg_abort_decompress(&ci);
    return false;
  }
  jpeg_mem_src(&ci, j.bytes.data(), static_cast<unsigned long>(j.bytes.size()));
  jpeg_read_header(&ci, TRUE);
  ci.out_color_space = JCS_RGB;
  ci.dct_method = JDCT_ISLOW;
  ci.do_fancy_upsampling = v == Variant::kEvalFast ? FALSE : TRUE;
  const int m = v == Variant::kEvalM8 ? j.eval_m : 8;
  ci.scale_num = static_cast<unsigned>(m);
  ci.scale_denom = 8;
  jpeg_start_decompress(&ci);
  const int H = static_cast<int>(ci.output_height);
  int first = 0, last = H;
  if (v == Variant::kEntropy) {
    first = H - 1;
  } else if (v != Variant::kFull) {
    Crop c = v == Variant::kTrain ? j.train : j.eval;
    c = Crop{c.x * m / 8, c.y * m / 8, (c.w * m + 7) / 8, (c.h * m + 7) / 8};
    // One pixel each side, as the presets decode (the upsampler's edge must not reach the crop).
    JDIMENSION x = static_cast<JDIMENSION>(std::max(0, c.x - 1));
    JDIMENSION w =
        static_cast<JDIMENSION>(std::min(static_cast<int>(ci.output_width), c.x + c.w + 1)) - x;
    jpeg_crop_scanline(&ci, &x, &w);
    first = c.y;
    last = std::min(H, c.y + c.h);
  }
  if (first > 0) jpeg_skip_scanlines(&ci, static_cast<JDIMENSION>(first));
  const size_t stride = size_t{ci.output_width} * 3;
  rows.resize(stride * 2);
  JSAMPROW out[2] = {rows.data(), rows.data() + stride};
  while (static_cast<int>(ci.output_scanline) < last) {
    if (jpeg_read_scanlines(&ci, out, 2) == 0) break;
  }
  jpeg_abort_decompress(&ci);
  return true;
}

std::vector<Jpeg> LoadPack(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<Jpeg> out;
  uint32_t n = 0;
  while (in.read(reinterpret_cast<char*>(&n), 4)) {
    Jpeg j;
    j.bytes.resize(n);
    if (!in.read(reinterpret_cast<char*>(j.bytes.data()), n)) break;
    out.push_back(std::move(j));
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PACK [PASSES]\n", argv[0]);
    return 2;
  }
  const int passes = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  std::vector<Jpeg> jpegs = LoadPack(argv[1]);
  if (jpegs.empty()) {
    std::fprintf(stderr, "no JPEGs in %s\n", argv[1]);
    return 1;
  }
  jpeg_decompress_struct ci{};
  ErrorJump err{};
  ci.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = OnError;
  jpeg_create_decompress(&ci);
  std::mt19937_64 rng(0);
  std::vector<Jpeg> ok;
  for (Jpeg& j : jpegs) {
    if (setjmp(err.jump) != 0) {
      jpeg_abort_decompress(&ci);
      continue;
    }
    jpeg_mem_src(&ci, j.bytes.data(), static_cast<unsigned long>(j.bytes.size()));
    jpeg_read_header(&ci, TRUE);
    j.width = static_cast<int>(ci.image_width);
    j.height = static_cast<int>(ci.image_height);
    jpeg_abort_decompress(&ci);
    j.train = RandomResizedCrop(j.width, j.height, rng);
    j.eval = EvalBox(j.width, j.height);
    j.eval_m = EvalScaleNumerator(j.eval);
    ok.push_back(std::move(j));
  }
  constexpr int kVariants = 6;
  const char* names[kVariants] = {"full", "entropy", "train", "eval", "eval_m8", "eval_fast"};
  const Variant variants[kVariants] = {Variant::kFull, Variant::kEntropy, Variant::kTrain,
                                       Variant::kEval, Variant::kEvalM8,  Variant::kEvalFast};
  std::vector<double> ms[kVariants];
  std::vector<unsigned char> rows;
  int failures = 0;
  for (int p = 0; p < passes; ++p) {
    for (int k = 0; k < kVariants; ++k) {
      const double t0 = CpuSeconds();
      for (const Jpeg& j : ok) failures += Decode(ci, err, j, variants[k], rows) ? 0 : 1;
      ms[k].push_back((CpuSeconds() - t0) * 1e3 / double(ok.size()));
    }
  }
  jpeg_destroy_decompress(&ci);
  double med[kVariants];
  for (int k = 0; k < kVariants; ++k) med[k] = Median(ms[k]);
  std::printf("%zu JPEGs, %d passes, CPU-ms per image (median; every pass):\n", ok.size(), passes);
  int numerators[9] = {};
  for (const Jpeg& j : ok) ++numerators[j.eval_m];
  std::printf("eval_m8's scales (M/8: images):");
  for (int m = 1; m <= 8; ++m) {
    if (numerators[m] > 0) std::printf(" %d/8: %d", m, numerators[m]);
  }
  std::printf("\n");
  for (int k = 0; k < kVariants; ++k) {
    std::printf("  %-9s %.3f  (%.2f of full;", names[k], med[k], med[k] / med[0]);
    for (double x : ms[k]) std::printf(" %.3f", x);
    std::printf(")\n");
  }
  std::printf(
      "ceiling of a pipeline / full decode, with no work after the decode: train %.2fx, "
      "eval %.2fx\n",
      med[0] / med[2], med[0] / med[3]);
  std::printf(
      "{\"images\": %zu, \"passes\": %d, \"full_ms\": %.4f, \"entropy_ms\": %.4f, "
      "\"train_ms\": %.4f, \"eval_ms\": %.4f, \"eval_m8_ms\": %.4f, \"eval_fast_ms\": %.4f, "
      "\"failures\": %d}\n",
      ok.size(), passes, med[0], med[1], med[2], med[3], med[4], med[5], failures);
  return failures == 0 ? 0 : 1;
}
