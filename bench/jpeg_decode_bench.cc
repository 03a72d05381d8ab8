// Bare libjpeg-turbo decode of a set of JPEGs on N threads: the physical reference for the
// suite's image pipelines (bench/suite.py). Reads a pack file written by the suite (the very
// JPEG bytes stored in the TFRecord shards), decodes every image fully to RGB with TurboJPEG
// (ISLOW IDCT, fancy upsampling: the library defaults) and prints one JSON line.
//
// Pack format: repeated [uint32 little-endian length][length bytes].
// Usage: jpeg_decode_bench PACK THREADS PASSES
//
// Every thread has its own tjhandle and output buffer (allocated once, sized for the largest
// image) and takes the next image from a shared atomic counter, so the threads stay busy to
// the end; the decode does not touch the allocator in the timed loop.

#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace {

struct Image {
  std::vector<unsigned char> bytes;
  int width = 0;
  int height = 0;
};

// Busy CPU seconds of the whole machine since boot (all cores, /proc/stat: everything but idle
// and iowait), or -1 where /proc/stat cannot be read. Sampled around the timed loop so the
// suite can tell what other processes took during it (the pack load before it is excluded).
double MachineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  if (!(stat >> cpu) || cpu != "cpu") return -1;
  for (auto& x : v) {
    if (!(stat >> x)) return -1;
  }
  unsigned long long all = 0;
  for (auto x : v) all += x;
  const double tick = double(sysconf(_SC_CLK_TCK));
  return double(all - v[3] - v[4]) / tick;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PACK THREADS PASSES\n", argv[0]);
    return 2;
  }
  const std::string pack_path = argv[1];
  const int threads = std::max(1, std::atoi(argv[2]));
  const int passes = std::max(1, std::atoi(argv[3]));

  std::ifstream in(pack_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "error: cannot open %s\n", pack_path.c_str());
    return 1;
  }
  // One read of the whole file (an istreambuf_iterator copy took ~2 s for 330 MB).
  in.seekg(0, std::ios::end);
  const std::streamoff pack_size = in.tellg();
  in.seekg(0, std::ios::beg);
  std::vector<unsigned char> pack(pack_size > 0 ? size_t(pack_size) : 0);
  if (!in.read(reinterpret_cast<char*>(pack.data()), std::streamsize(pack.size()))) {
    std::fprintf(stderr, "error: cannot read %s\n", pack_path.c_str());
    return 1;
  }
  std::vector<Image> images;
  size_t pos = 0;
  tjhandle probe = tjInitDecompress();
  size_t max_pixels = 0;
  while (pos < pack.size()) {
    if (pack.size() - pos < 4) {
      std::fprintf(stderr, "error: %s: truncated length at offset %zu\n", pack_path.c_str(), pos);
      return 1;
    }
    uint32_t n =
        pack[pos] | (pack[pos + 1] << 8) | (pack[pos + 2] << 16) | (uint32_t(pack[pos + 3]) << 24);
    pos += 4;
    if (pack.size() - pos < n) {
      std::fprintf(stderr, "error: %s: image %zu at offset %zu: %u bytes past the end\n",
                   pack_path.c_str(), images.size(), pos - 4, n);
      return 1;
    }
    Image im;
    im.bytes.assign(pack.begin() + pos, pack.begin() + pos + n);
    pos += n;
    int subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(probe, im.bytes.data(), im.bytes.size(), &im.width, &im.height,
                            &subsamp, &colorspace) != 0) {
      std::fprintf(stderr, "error: %s: image %zu: %s\n", pack_path.c_str(), images.size(),
                   tjGetErrorStr2(probe));
      return 1;
    }
    max_pixels = std::max(max_pixels, size_t(im.width) * im.height);
    images.push_back(std::move(im));
  }
  tjDestroy(probe);
  if (images.empty()) {
    std::fprintf(stderr, "error: %s holds no images\n", pack_path.c_str());
    return 1;
  }

  const size_t total = images.size() * passes;
  std::atomic<size_t> next{0};
  std::atomic<size_t> failures{0};
  std::atomic<uint64_t> checksum{0};
  auto worker = [&] {
    tjhandle h = tjInitDecompress();
    std::vector<unsigned char> out(max_pixels * 3);
    uint64_t sum = 0;
    for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < total;) {
      const Image& im = images[k % images.size()];
      if (tjDecompress2(h, im.bytes.data(), im.bytes.size(), out.data(), im.width, 0, im.height,
                        TJPF_RGB, 0) != 0) {
        failures.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      // One pixel per image into a checksum, so the decode cannot be optimised away.
      sum += out[(size_t(im.height / 2) * im.width + im.width / 2) * 3];
    }
    checksum.fetch_add(sum);
    tjDestroy(h);
  };

  const double busy0 = MachineBusySeconds();
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  const double busy1 = MachineBusySeconds();
  const double machine_busy = (busy0 < 0 || busy1 < 0) ? -1 : busy1 - busy0;
  size_t bytes = 0;
  for (const auto& im : images) bytes += im.bytes.size();
  std::printf(
      "{\"images\": %zu, \"distinct_images\": %zu, \"threads\": %d, \"wall_s\": %.6f, "
      "\"cpu_s\": %.6f, \"machine_busy_s\": %.3f, \"images_per_s\": %.3f, \"mean_jpeg_bytes\": "
      "%.1f, \"failures\": %zu, "
      "\"checksum\": %llu}\n",
      total, images.size(), threads, wall, cpu, machine_busy, total / wall,
      double(bytes) / images.size(), failures.load(),
      static_cast<unsigned long long>(checksum.load()));
  return failures.load() == 0 ? 0 : 1;
}
