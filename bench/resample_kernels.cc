// Resample + normalize kernels (image::ResampleNormalizeInto, float32 HWC, ImageNet mean/std)
// per image, every backend: the share of the presets' work after the JPEG decode.
//
// Build against a release tree and run pinned to one core:
//   cmake --build build/release --target recordflow_tests   # builds the static libraries
//   g++ -std=c++20 -O2 -Iinclude -Isrc bench/resample_kernels.cc
//   build/release/librecordflow_image.a \
//     build/release/librecordflow_core.a -ljpeg -lpng -lz -lpthread -o /tmp/resample_kernels
//   taskset -c 0 /tmp/resample_kernels
//
// Prints, per case and backend, the thread CPU time per image (microseconds, the minimum of 9
// runs of 100 images: CPU time rather than wall time, and the minimum, because the host is
// shared), and whether the backend gives the scalar backend's bits.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "recordflow/image/ops.h"

namespace {

double ThreadCpuMicros() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

}  // namespace

int main() {
  using namespace recordflow::image;
  Image img;
  img.width = 420, img.height = 400, img.channels = 3;
  img.pixels.resize(img.row_bytes() * img.height);
  std::mt19937 rng(1);
  for (uint8_t& p : img.pixels) p = static_cast<uint8_t>(rng() & 255);
  std::vector<std::byte> out(224 * 224 * 3 * 4);
  NormalizeOptions o;
  o.mean = {0.485f, 0.456f, 0.406f};
  o.std = {0.229f, 0.224f, 0.225f};
  struct Case {
    const char* name;
    Box box;
  };
  // The eval preset's center box (256/224 of a ~400 px image) and two RandomResizedCrop boxes.
  const Case cases[] = {{"eval 350x350 -> 224", {20.3, 18.7, 350.0, 350.0}},
                        {"train 150x170 -> 224", {100.2, 50.1, 150.0, 170.0}},
                        {"train 410x400 -> 224", {3.0, 0.0, 410.0, 400.0}}};
  for (const Case& c : cases) {
    for (KernelBackend b : {KernelBackend::kScalar, KernelBackend::kSse2, KernelBackend::kAvx2}) {
      if (!SetKernelBackend(b).ok()) continue;
      double best = 1e30;
      for (int rep = 0; rep < 9; ++rep) {
        const double t0 = ThreadCpuMicros();
        for (int i = 0; i < 100; ++i) {
          o.flip = (i & 1) != 0;
          (void)ResampleNormalizeInto(img, c.box, 224, 224, Interpolation::kBilinear, o, out);
        }
        best = std::min(best, (ThreadCpuMicros() - t0) / 100);
      }
      std::vector<float> mine, ref;
      (void)ResampleToFloat(img, c.box, 224, 224, Interpolation::kBilinear, &mine, true);
      (void)SetKernelBackend(KernelBackend::kScalar);
      (void)ResampleToFloat(img, c.box, 224, 224, Interpolation::kBilinear, &ref, true);
      const bool same = mine.size() == ref.size() &&
                        std::memcmp(mine.data(), ref.data(), mine.size() * sizeof(float)) == 0;
      std::printf("%-22s %-6s %7.1f us/image  scalar bits: %s\n", c.name,
                  b == KernelBackend::kScalar ? "scalar"
                  : b == KernelBackend::kSse2 ? "sse2"
                                              : "avx2",
                  best, same ? "yes" : "NO");
    }
  }
  return 0;
}
