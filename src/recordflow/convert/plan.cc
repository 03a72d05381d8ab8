#include "recordflow/convert/plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "convert_internal.h"
#include "recordflow/core/enum_names.h"
#include "recordflow/core/random.h"
#include "recordflow/core/thread_pool.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::convert {
namespace fs = std::filesystem;

namespace internal {

void Hasher::Add(std::string_view bytes) {
  for (unsigned char c : bytes) {
    h_ ^= c;
    h_ *= 0x100000001B3ull;
  }
  // Length suffix: "ab"+"c" and "a"+"bc" hash differently.
  const uint64_t n = bytes.size();
  for (int i = 0; i < 8; ++i) {
    h_ ^= (n >> (8 * i)) & 0xFF;
    h_ *= 0x100000001B3ull;
  }
}

void Hasher::AddInt(int64_t v) { Add(std::to_string(v)); }

}  // namespace internal

namespace {

bool IsHidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

Status FsError(const std::error_code& ec, std::string_view what, const std::string& path) {
  return ErrnoToStatus(ec.value(), what, path);
}

}  // namespace

void FillRemoteSizes(InputListing* listing) {
  std::vector<size_t> remote;
  for (size_t i = 0; i < listing->items.size(); ++i) {
    if (io::IsRemotePath(listing->items[i].path)) remote.push_back(i);
  }
  if (remote.empty()) return;
  // One HEAD per object: concurrent, since each costs a round trip and no bandwidth.
  ThreadPool pool(static_cast<int>(std::min<size_t>(remote.size(), 16)));
  for (size_t i : remote) {
    pool.Schedule([listing, i] {
      InputItem& item = listing->items[i];
      Result<io::FileInfo> info = io::StatPath(item.path);
      if (info.ok()) item.size = info->size;
    });
  }
}

namespace {

bool HasHiddenComponent(std::string_view rel) {
  size_t start = 0;
  while (start < rel.size()) {
    if (rel[start] == '.') return true;
    const size_t slash = rel.find('/', start);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

// The object-store form of an image folder: "folders" are key prefixes, so a class is the
// first '/'-separated component under ROOT/ and its inputs are every key below it. The same
// order and names as a local tree with the same files, so both give the same shards.
Result<InputListing> ListImagePrefix(const std::string& root) {
  const std::string prefix = root.back() == '/' ? root : root + "/";
  RF_ASSIGN_OR_RETURN(io::FileSystem * store, io::FileSystemForPath(root));
  RF_ASSIGN_OR_RETURN(std::vector<std::string> keys, store->ListPrefix(prefix));
  if (keys.empty()) return NotFoundError("source folder '" + root + "' holds no objects");
  std::map<std::string, std::vector<std::string>> classes;  // class -> relative names
  std::vector<std::string> stray, hidden;
  for (const std::string& key : keys) {
    if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rel = key.substr(prefix.size());
    const size_t slash = rel.find('/');
    if (rel[0] == '.') {
      const std::string top = rel.substr(0, slash);
      if (hidden.empty() || hidden.back() != top) hidden.push_back(top);
      continue;
    }
    if (slash == std::string::npos) {
      stray.push_back(rel);
      continue;
    }
    std::vector<std::string>& files = classes[rel.substr(0, slash)];
    // A key ending in '/' is a folder marker some tools create: it makes the class exist.
    if (slash + 1 < rel.size() && rel.back() != '/') files.push_back(rel.substr(slash + 1));
  }
  if (classes.empty()) {
    return InvalidArgumentError("no class folders in '" + root +
                                "' (expected one key prefix per class, e.g. " + prefix +
                                "cat/001.jpg)");
  }
  InputListing listing;
  std::sort(stray.begin(), stray.end());
  for (const std::string& name : hidden) listing.skipped.push_back({prefix + name, "hidden"});
  for (const std::string& name : stray) {
    listing.skipped.push_back({prefix + name, "not in a class folder"});
  }
  for (auto& [name, files] : classes) {
    const int64_t label = static_cast<int64_t>(listing.class_names.size());
    listing.class_names.push_back(name);
    const std::string dir = prefix + name;
    std::sort(files.begin(), files.end());
    bool any = false;
    for (std::string& rel : files) {
      const std::string path = dir + "/" + rel;
      if (HasHiddenComponent(rel)) {
        listing.skipped.push_back({path, "hidden"});
        continue;
      }
      InputItem item;
      item.path = path;
      item.filename = std::move(rel);
      item.labels = {label};
      listing.items.push_back(std::move(item));
      any = true;
    }
    if (!any) listing.skipped.push_back({dir, "empty class folder (its label is kept)"});
  }
  FillRemoteSizes(&listing);
  return listing;
}

}  // namespace

Result<InputListing> ListImageFolder(const std::string& root) {
  if (io::IsRemotePath(root)) return ListImagePrefix(root);
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (ec || !fs::exists(st)) return NotFoundError("source folder '" + root + "' does not exist");
  if (!fs::is_directory(st)) {
    return InvalidArgumentError("'" + root + "' is neither a folder nor a .csv/.jsonl manifest");
  }
  InputListing listing;
  const std::string prefix = root.empty() || root.back() == '/' ? root : root + "/";
  std::vector<std::string> class_dirs;
  std::vector<std::string> stray, hidden;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsHidden(it->path())) {
      hidden.push_back(name);
      continue;
    }
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      class_dirs.push_back(name);
    } else {
      stray.push_back(name);
    }
  }
  if (ec) return FsError(ec, "cannot list", root);
  std::sort(class_dirs.begin(), class_dirs.end());
  std::sort(stray.begin(), stray.end());
  std::sort(hidden.begin(), hidden.end());
  if (class_dirs.empty()) {
    return InvalidArgumentError("no class folders in '" + root +
                                "' (expected one sub-folder per class, e.g. " + root +
                                "/cat/001.jpg)");
  }
  for (const std::string& name : hidden) listing.skipped.push_back({prefix + name, "hidden"});
  for (const std::string& name : stray) {
    listing.skipped.push_back({prefix + name, "not in a class folder"});
  }
  listing.class_names = class_dirs;
  // Files reached twice (two links to one inode): the first in listing order is used.
  std::map<std::pair<uint64_t, uint64_t>, std::string> seen;
  for (size_t c = 0; c < class_dirs.size(); ++c) {
    const std::string dir = prefix + class_dirs[c];
    // Relative to the class folder, as found there: a symlink is listed under its own name.
    struct Entry {
      std::string rel;
      std::string skip_reason;  // non-empty: listed as skipped
    };
    std::vector<Entry> entries;
    // Symlinks to folders are not followed (no cycles, no walking outside the tree).
    fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const std::string full = it->path().string();
      const std::string rel = full.size() > dir.size() + 1 ? full.substr(dir.size() + 1) : full;
      std::error_code type_ec;
      const bool is_link = it->is_symlink(type_ec);
      const bool is_dir = it->is_directory(type_ec);
      if (IsHidden(it->path())) {
        if (is_dir && !is_link) it.disable_recursion_pending();
        entries.push_back({rel, "hidden"});
        continue;
      }
      if (is_link && is_dir) {
        entries.push_back({rel, "symlink to a folder (not followed)"});
        continue;
      }
      if (is_dir) continue;
      if (is_link && !it->exists(type_ec)) {
        entries.push_back({rel, "NotFound: broken symlink (its target does not exist)"});
        continue;
      }
      entries.push_back({rel, ""});
    }
    if (ec) {
      listing.skipped.push_back({dir, "cannot list class folder: " + ec.message()});
      ec.clear();
      continue;
    }
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.rel < b.rel; });
    bool any = false;
    for (Entry& entry : entries) {
      const std::string path = dir + "/" + entry.rel;
      if (!entry.skip_reason.empty()) {
        listing.skipped.push_back({path, entry.skip_reason});
        continue;
      }
      InputItem item;
      item.path = path;
      struct stat file_st;
      if (::stat(item.path.c_str(), &file_st) == 0) {
        item.size = static_cast<uint64_t>(file_st.st_size);
        const auto key = std::make_pair(static_cast<uint64_t>(file_st.st_dev),
                                        static_cast<uint64_t>(file_st.st_ino));
        auto [first, inserted] = seen.emplace(key, item.path);
        if (!inserted) {
          listing.skipped.push_back({item.path, "duplicate: same file as '" + first->second + "'"});
          continue;
        }
      }
      any = true;
      item.filename = std::move(entry.rel);
      item.labels = {static_cast<int64_t>(c)};
      listing.items.push_back(std::move(item));
    }
    if (!any) {
      listing.skipped.push_back({dir, "empty class folder (its label is kept)"});
    }
  }
  return listing;
}

std::string ShardFileName(const std::string& split, int index, int count,
                          format::Compression compression) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "-%05d-of-%05d.tfrecord", index, count);
  std::string name = split + buf;
  if (compression == format::Compression::kGzip) name += ".gz";
  if (compression == format::Compression::kZlib) name += ".zz";
  return name;
}

std::string Plan::HashHex() const {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

namespace {

// Cuts `items` into `count` shards: by count (equal sizes, +-1) or, when `by_bytes`, so that
// each shard holds about the same input bytes (each item goes where the middle of its byte
// range falls).
std::vector<std::vector<uint32_t>> CutShards(const std::vector<uint32_t>& items, int count,
                                             bool by_bytes, const InputListing& listing) {
  std::vector<std::vector<uint32_t>> shards(count);
  const size_t n = items.size();
  if (!by_bytes) {
    for (int s = 0; s < count; ++s) {
      const size_t begin = n * s / count, end = n * (s + 1) / count;
      shards[s].assign(items.begin() + begin, items.begin() + end);
    }
    return shards;
  }
  long double total = 0;
  for (uint32_t i : items) total += static_cast<long double>(listing.items[i].size) + 1;
  long double before = 0;
  for (uint32_t i : items) {
    const long double size = static_cast<long double>(listing.items[i].size) + 1;
    const long double middle = before + size / 2;
    int s = static_cast<int>(middle * count / total);
    s = std::clamp(s, 0, count - 1);
    shards[s].push_back(i);
    before += size;
  }
  return shards;
}

}  // namespace

Result<Plan> MakePlan(InputListing listing, const ConvertOptions& options) {
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0)) {
    return InvalidArgumentError("val_fraction must be in [0, 1) (got " +
                                std::to_string(options.val_fraction) + ")");
  }
  if (options.train_shards < 0 || options.validation_shards < 0) {
    return InvalidArgumentError("shard counts must not be negative");
  }
  if (options.train_shards == 0 && options.shard_size == 0) {
    return InvalidArgumentError("give a shard count or a shard size");
  }
  if (listing.items.size() > UINT32_MAX) return InvalidArgumentError("too many inputs");
  Plan plan;
  SplitMix64 rng(options.seed);

  // Stratified split: per first label, in label order.
  std::map<int64_t, std::vector<uint32_t>> groups;
  for (uint32_t i = 0; i < listing.items.size(); ++i) {
    const auto& labels = listing.items[i].labels;
    groups[labels.empty() ? -1 : labels[0]].push_back(i);
  }
  std::vector<uint32_t> train, validation;
  for (auto& [label, members] : groups) {
    const size_t n_val = static_cast<size_t>(
        std::llround(options.val_fraction * static_cast<double>(members.size())));
    Shuffle(&members, &rng);
    validation.insert(validation.end(), members.begin(), members.begin() + n_val);
    train.insert(train.end(), members.begin() + n_val, members.end());
  }
  std::sort(train.begin(), train.end());
  std::sort(validation.begin(), validation.end());
  if (options.shuffle) {
    Shuffle(&train, &rng);
    Shuffle(&validation, &rng);
  }

  auto bytes_of = [&](const std::vector<uint32_t>& items) {
    uint64_t total = 0;
    for (uint32_t i : items) total += listing.items[i].size;
    return total;
  };
  auto count_by_size = [&](const std::vector<uint32_t>& items) {
    const uint64_t shards = (bytes_of(items) + options.shard_size - 1) / options.shard_size;
    return static_cast<int>(std::clamp<uint64_t>(shards, 1, std::max<size_t>(items.size(), 1)));
  };
  const bool by_bytes = options.train_shards == 0;
  int train_count = by_bytes ? count_by_size(train) : options.train_shards;
  int val_count = 0;
  const bool with_validation = options.val_fraction > 0;
  if (with_validation) {
    if (options.validation_shards > 0) {
      val_count = options.validation_shards;
    } else if (!by_bytes) {
      val_count =
          std::max(1, static_cast<int>(std::lround(options.train_shards * options.val_fraction /
                                                   (1.0 - options.val_fraction))));
    } else {
      val_count = count_by_size(validation);
    }
  }
  auto add_split = [&](const std::string& split, const std::vector<uint32_t>& items, int count,
                       bool split_by_bytes) {
    auto cut = CutShards(items, count, split_by_bytes, listing);
    for (int s = 0; s < count; ++s) {
      ShardPlan shard;
      shard.split = split;
      shard.index = s;
      shard.count = count;
      shard.file = ShardFileName(split, s, count, options.compression);
      shard.items = std::move(cut[s]);
      plan.shards.push_back(std::move(shard));
    }
  };
  add_split("train", train, train_count, by_bytes);
  if (with_validation)
    add_split("validation", validation, val_count, options.validation_shards == 0 && by_bytes);

  // Everything that decides the output bytes.
  internal::Hasher h;
  h.Add("recordflow-convert-v1");
  h.Add(std::to_string(options.val_fraction));
  h.AddInt(static_cast<int64_t>(options.seed));
  h.AddInt(options.shuffle);
  h.AddInt(static_cast<int64_t>(options.compression));
  h.AddInt(options.write_index);
  h.AddInt(options.label_offset);
  h.AddInt(static_cast<int64_t>(options.non_jpeg));
  h.AddInt(options.resize_shorter);
  h.AddInt(options.quality);
  h.AddInt(options.force_rgb);
  h.AddInt(options.apply_exif_orientation);
  h.AddInt(static_cast<int64_t>(options.verify));
  h.AddInt(static_cast<int64_t>(options.max_pixels));
  h.AddInt(static_cast<int64_t>(options.max_file_size));
  for (const auto& name : listing.class_names) h.Add(name);
  for (const auto& item : listing.items) {
    h.Add(item.path);
    h.Add(item.filename);
    h.AddInt(static_cast<int64_t>(item.size));
    for (int64_t l : item.labels) h.AddInt(l);
    h.Add(example::SerializeExample(item.extra));
  }
  for (const auto& shard : plan.shards) {
    h.Add(shard.file);
    for (uint32_t i : shard.items) h.AddInt(i);
  }
  plan.hash = h.value();
  plan.listing = std::move(listing);
  return plan;
}

namespace {

constexpr EnumName<NonJpegPolicy> kNonJpegPolicyNames[] = {
    {NonJpegPolicy::kTranscode, "transcode"},
    {NonJpegPolicy::kKeep, "keep"},
};

constexpr EnumName<VerifyLevel> kVerifyLevelNames[] = {
    {VerifyLevel::kHeader, "header"},
    {VerifyLevel::kStructure, "structure"},
    {VerifyLevel::kDecode, "decode"},
};

}  // namespace

Result<NonJpegPolicy> ParseNonJpegPolicy(std::string_view name) {
  return ParseName(kNonJpegPolicyNames, name, "non-JPEG policy");
}

std::string_view NonJpegPolicyName(NonJpegPolicy policy) {
  return NameOf(kNonJpegPolicyNames, policy, "transcode");
}

Result<VerifyLevel> ParseVerifyLevel(std::string_view name) {
  return ParseName(kVerifyLevelNames, name, "verify level");
}

std::string_view VerifyLevelName(VerifyLevel level) {
  return NameOf(kVerifyLevelNames, level, "structure");
}

}  // namespace recordflow::convert
