// Microbenchmarks for reading TFRecord files and for CRC32C.
//
// Before the first read benchmark (outside its timing; a run filtered down to the CRC
// benchmarks writes nothing) the binary writes its input files into a fresh temporary folder,
// removed at exit, and reads each one once, so every benchmark reads from the page cache:
//
//   small.tfrecord      ~200 MB of payload in 100-byte records (2,000,000 records)
//   large.tfrecord      ~200 MB of payload in 100 KiB records  (2,000 records)
//   small.tfrecord.gz   GZIP (zlib's default level, as TensorFlow), --rf_gzip_mb of payload
//   large.tfrecord.gz   GZIP, --rf_gzip_mb of payload
//
// Payloads are random bytes drawn from a 16-symbol alphabet: deflate shrinks them to about
// 57% instead of storing incompressible noise.
//
// Every read benchmark is single-threaded, and rates are computed from the thread's CPU time,
// so bytes_per_second is the per-core rate (the Time column is wall-clock). bytes_per_second
// counts payload bytes (what the caller receives); the "file_bytes/s" counter counts bytes of
// the file (framing included; compressed bytes for GZIP).
//
// Flags (besides Google Benchmark's own):
//   --rf_dir=PATH       write the files under PATH instead of a new folder in $TMPDIR or /tmp;
//                       existing files there of the right size are reused and kept
//   --rf_mb=N           payload MB per uncompressed file (default 200)
//   --rf_gzip_mb=N      payload MB per GZIP file (default 64)
//
// Recommended run (5 repetitions, interleaved, medians):
//   record_read_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//                     --benchmark_report_aggregates_only=true
//
// Per-backend CRC32C rows need the private header src/recordflow/format/crc32c_internal.h,
// which CMake does not put on this target's include path; they are compiled in only when the
// header is reachable (configure with -DCMAKE_CXX_FLAGS=-I<repo>/src). Without it, only the
// public Crc32c (the backend chosen at run time) is measured.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "recordflow/format/crc32c.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"

#if __has_include("recordflow/format/crc32c_internal.h")
#include "recordflow/format/crc32c_internal.h"
#define RF_BENCH_HAVE_CRC_BACKENDS 1
#endif

namespace {

namespace fs = std::filesystem;
using recordflow::format::Compression;
using recordflow::format::Inflater;
using recordflow::format::RecordReader;
using recordflow::format::RecordReaderOptions;
using recordflow::format::RecordWriter;
using recordflow::format::RecordWriterOptions;

constexpr size_t kSmallRecord = 100;
constexpr size_t kLargeRecord = 100 * 1024;
constexpr size_t kFraming = 16;  // 8-byte length + 4-byte length CRC + 4-byte payload CRC

struct BenchFile {
  std::string path;
  Compression compression = Compression::kNone;
  uint64_t records = 0;
  uint64_t payload_bytes = 0;
  uint64_t file_bytes = 0;
};

struct Config {
  std::string dir;
  bool remove_dir = false;
  uint64_t mb = 200;
  uint64_t gzip_mb = 64;
};

Config& GetConfig() {
  static Config config;
  return config;
}

// Indexed by [large][gzip].
BenchFile& File(bool large, bool gzip) {
  static BenchFile files[2][2];
  return files[large ? 1 : 0][gzip ? 1 : 0];
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "record_read_bench: %s\n", what.c_str());
  std::exit(1);
}

// A pool of low-entropy random bytes; records are windows into it at varying offsets, so no
// two neighbouring records are equal and deflate cannot cheat across records.
const std::vector<std::byte>& Pool() {
  static const std::vector<std::byte> pool = [] {
    std::vector<std::byte> p(4 << 20);
    std::mt19937_64 rng(42);
    for (auto& b : p) b = static_cast<std::byte>('a' + (rng() & 15));
    return p;
  }();
  return pool;
}

void WriteFile(BenchFile& f, size_t record_size, uint64_t payload_mb) {
  f.records = payload_mb * 1000 * 1000 / record_size;
  f.payload_bytes = f.records * record_size;
  std::error_code ec;
  if (fs::exists(f.path, ec)) {
    // Reuse a file from an earlier run with --rf_dir when its size matches what we would write
    // (exact for uncompressed files; for GZIP the record count is checked by reading below).
    uint64_t size = fs::file_size(f.path, ec);
    if (!ec &&
        (f.compression != Compression::kNone || size == f.payload_bytes + f.records * kFraming)) {
      return;
    }
  }
  RecordWriterOptions options;
  options.compression = f.compression;
  options.sync = false;
  auto writer = RecordWriter::Open(f.path, options);
  if (!writer.ok()) Die(writer.status().ToString());
  const auto& pool = Pool();
  std::minstd_rand rng(7);
  for (uint64_t i = 0; i < f.records; ++i) {
    size_t start = rng() % (pool.size() - record_size);
    auto status = (*writer)->WriteRecord(std::span(pool.data() + start, record_size));
    if (!status.ok()) Die(status.ToString());
  }
  auto status = (*writer)->Close();
  if (!status.ok()) Die(status.ToString());
}

// Reads the whole file once through the reader: puts it in the page cache and checks that it
// holds what we think it holds.
void WarmAndCheck(BenchFile& f) {
  RecordReaderOptions options;
  options.compression = f.compression;
  auto reader = RecordReader::Open(f.path, options);
  if (!reader.ok()) Die(reader.status().ToString());
  std::span<const std::byte> record;
  uint64_t records = 0;
  uint64_t bytes = 0;
  while (true) {
    auto more = (*reader)->ReadRecord(&record);
    if (!more.ok()) Die(more.status().ToString());
    if (!*more) break;
    ++records;
    bytes += record.size();
  }
  if (records != f.records || bytes != f.payload_bytes) {
    Die(f.path + ": expected " + std::to_string(f.records) + " records, found " +
        std::to_string(records) + " (remove the file or the --rf_dir folder)");
  }
  f.file_bytes = fs::file_size(f.path);
}

void SetUpFiles() {
  Config& c = GetConfig();
  if (c.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/record_read_bench.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp failed: " + std::string(strerror(errno)));
    c.dir = tmpl;
    c.remove_dir = true;
  } else {
    fs::create_directories(c.dir);
  }
  for (bool large : {false, true}) {
    for (bool gzip : {false, true}) {
      BenchFile& f = File(large, gzip);
      f.path = c.dir + "/" + (large ? "large" : "small") + ".tfrecord" + (gzip ? ".gz" : "");
      f.compression = gzip ? Compression::kGzip : Compression::kNone;
      WriteFile(f, large ? kLargeRecord : kSmallRecord, gzip ? c.gzip_mb : c.mb);
      WarmAndCheck(f);
    }
  }
  std::fprintf(stderr, "record_read_bench: input files in %s (page cache warmed)\n", c.dir.c_str());
}

// How each record reaches the caller: a view into the reader's buffer, or a copy in a string
// (as the pipeline's stages hold records), through the buffer or read straight into it.
enum class Into { kView, kStringBuffered, kStringDirect };

// Reads every record of one file per iteration.
void BM_ReadRecords(benchmark::State& state, bool large, bool gzip, bool verify_checksums,
                    size_t buffer_size, Inflater inflater, Into into) {
  // Files are written on first use (outside the timed loop), so a run filtered down to the
  // CRC benchmarks writes nothing.
  static std::once_flag once;
  std::call_once(once, SetUpFiles);
  const BenchFile& f = File(large, gzip);
  RecordReaderOptions options;
  options.compression = f.compression;
  options.verify_checksums = verify_checksums;
  options.buffer_size = buffer_size;
  options.inflater = inflater;
  if (into == Into::kStringBuffered) options.direct_read_bytes = 0;
  for (auto _ : state) {
    auto reader = RecordReader::Open(f.path, options);
    if (!reader.ok()) {
      state.SkipWithError(reader.status().ToString().c_str());
      return;
    }
    std::span<const std::byte> record;
    std::string copy;
    uint64_t records = 0;
    uint64_t bytes = 0;
    while (true) {
      auto more =
          into == Into::kView ? (*reader)->ReadRecord(&record) : (*reader)->ReadRecord(&copy);
      if (!more.ok()) {
        state.SkipWithError(more.status().ToString().c_str());
        return;
      }
      if (!*more) break;
      ++records;
      if (into == Into::kView) {
        bytes += record.size();
        benchmark::DoNotOptimize(record.data());
      } else {
        bytes += copy.size();
        benchmark::DoNotOptimize(copy.data());
      }
    }
    if (records != f.records || bytes != f.payload_bytes) {
      state.SkipWithError("wrong record count");
      return;
    }
  }
  // Rates are per CPU-second of this (only) thread, i.e. per core; the Time column gives the
  // wall-clock time as well.
  const auto iterations = static_cast<int64_t>(state.iterations());
  state.SetItemsProcessed(iterations * static_cast<int64_t>(f.records));
  state.SetBytesProcessed(iterations * static_cast<int64_t>(f.payload_bytes));
  state.counters["file_bytes/s"] =
      benchmark::Counter(static_cast<double>(iterations) * static_cast<double>(f.file_bytes),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

void RegisterRead(bool large, bool gzip, bool crc, size_t buffer_size = size_t{1} << 20,
                  Inflater inflater = Inflater::kAuto, Into into = Into::kView) {
  std::string name = std::string("BM_ReadRecords/") + (large ? "large_100KiB" : "small_100B");
  if (!gzip) {
    name += "/none";
  } else {
    bool isal = inflater == Inflater::kIsal ||
                (inflater == Inflater::kAuto && recordflow::format::IsalInflaterAvailable());
    name += isal ? "/gzip_isal" : "/gzip_zlib";
  }
  name += crc ? "/crc" : "/nocrc";
  if (buffer_size != (size_t{1} << 20)) {
    name += "/buffer_" + std::to_string(buffer_size >> 10) + "KiB";
  }
  if (into == Into::kStringBuffered) name += "/into_string_buffered";
  if (into == Into::kStringDirect) name += "/into_string_direct";
  benchmark::RegisterBenchmark(name.c_str(), BM_ReadRecords, large, gzip, crc, buffer_size,
                               inflater, into)
      ->Unit(benchmark::kMillisecond);
}

void RegisterReadBenchmarks() {
  for (bool large : {false, true}) {
    for (bool crc : {true, false}) RegisterRead(large, /*gzip=*/false, crc);
    // GZIP with the default inflater (ISA-L's igzip when built in), and with zlib, the
    // decoder TensorFlow uses.
    for (bool crc : {true, false}) RegisterRead(large, /*gzip=*/true, crc);
    if (recordflow::format::IsalInflaterAvailable()) {
      RegisterRead(large, /*gzip=*/true, /*crc=*/true, size_t{1} << 20, Inflater::kZlib);
    }
  }
  // Records copied out, as the pipeline holds them: through the buffer, or read straight into
  // the record (RecordReaderOptions::direct_read_bytes).
  for (Into into : {Into::kStringBuffered, Into::kStringDirect}) {
    RegisterRead(/*large=*/true, /*gzip=*/false, /*crc=*/true, size_t{1} << 20, Inflater::kAuto,
                 into);
  }
  // How much the read size matters for large records (syscall count vs. cache residency).
  for (size_t buffer_size : {size_t{256} << 10, size_t{4} << 20}) {
    RegisterRead(/*large=*/true, /*gzip=*/false, /*crc=*/true, buffer_size);
  }
}

// CRC32C over one buffer of range(0) bytes per iteration.
std::vector<std::byte> CrcInput(size_t size) {
  const auto& pool = Pool();
  return std::vector<std::byte>(pool.begin() + 13, pool.begin() + 13 + size);
}

void BM_Crc32cPublic(benchmark::State& state) {
  const auto data = CrcInput(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(recordflow::format::Crc32c(data));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.SetLabel(std::string(recordflow::format::Crc32cBackendName()));
}

#if defined(RF_BENCH_HAVE_CRC_BACKENDS)
void BM_Crc32cBackend(benchmark::State& state,
                      const recordflow::format::internal::Crc32cBackend* backend) {
  const auto data = CrcInput(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(backend->extend(0, data.data(), data.size()));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
#endif

void RegisterCrcBenchmarks() {
  benchmark::RegisterBenchmark("BM_Crc32c/public", BM_Crc32cPublic)
      ->Arg(8)  // the length field, checked once per record
      ->Arg(kSmallRecord)
      ->Arg(kLargeRecord);
#if defined(RF_BENCH_HAVE_CRC_BACKENDS)
  for (const auto& backend : recordflow::format::internal::AllCrc32cBackends()) {
    if (!backend.supported()) continue;
    benchmark::RegisterBenchmark((std::string("BM_Crc32c/") + backend.name).c_str(),
                                 BM_Crc32cBackend, &backend)
        ->Arg(8)
        ->Arg(kSmallRecord)
        ->Arg(kLargeRecord);
  }
#endif
}

// Takes our --rf_* flags out of argv (Google Benchmark rejects flags it does not know).
void ParseOwnFlags(int* argc, char** argv) {
  Config& c = GetConfig();
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* prefix) -> const char* {
      size_t n = std::strlen(prefix);
      return arg.compare(0, n, prefix) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--rf_dir=")) {
      c.dir = v;
    } else if (const char* v = value("--rf_mb=")) {
      c.mb = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--rf_gzip_mb=")) {
      c.gzip_mb = std::strtoull(v, nullptr, 10);
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  if (c.mb == 0 || c.gzip_mb == 0) Die("--rf_mb and --rf_gzip_mb must be positive");
}

}  // namespace

int main(int argc, char** argv) {
  ParseOwnFlags(&argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("crc32c_backend",
                              std::string(recordflow::format::Crc32cBackendName()));
  RegisterReadBenchmarks();
  RegisterCrcBenchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (GetConfig().remove_dir) {
    std::error_code ec;
    fs::remove_all(GetConfig().dir, ec);
  }
  return 0;
}
