#include "remote_file_internal.h"

#include <algorithm>
#include <cstring>

namespace recordflow::io::internal {

RemoteRandomAccessFile::RemoteRandomAccessFile(std::string url, uint64_t size, RangeFetcher fetch,
                                               RemoteOptions options)
    : RandomAccessFile(std::move(url), size), fetch_(std::move(fetch)), options_(options) {
  options_.part_size = std::max<uint64_t>(options_.part_size, 64 * 1024);
  options_.read_ahead_parts = std::max(options_.read_ahead_parts, 1);
}

RemoteRandomAccessFile::~RemoteRandomAccessFile() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void RemoteRandomAccessFile::AdviseSequential() const {
  std::lock_guard lock(mu_);
  if (sequential_ || size() <= options_.part_size) {
    // A one-part object gains nothing from read-ahead threads.
    return;
  }
  sequential_ = true;
  for (int i = 0; i < options_.read_ahead_parts; ++i) workers_.emplace_back([this] { Worker(); });
}

void RemoteRandomAccessFile::Worker() const {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] {
      if (stop_) return true;
      return std::any_of(window_.begin(), window_.end(), [](const auto& p) { return !p->started; });
    });
    if (stop_) return;
    std::shared_ptr<Part> part;
    for (auto& p : window_) {
      if (!p->started) {
        part = p;
        break;
      }
    }
    part->started = true;
    const uint64_t start = part->index * options_.part_size;
    const uint64_t len = std::min<uint64_t>(options_.part_size, size() - start);
    lock.unlock();
    std::vector<std::byte> data;
    Status status;
    try {
      data.resize(len);
      Result<size_t> got = fetch_(start, std::span(data));
      if (!got.ok()) {
        status = got.status();
      } else {
        data.resize(*got);
      }
    } catch (const std::bad_alloc&) {
      status = ResourceExhaustedError("cannot allocate a read-ahead part of " +
                                      std::to_string(len) + " bytes for " + path());
    }
    lock.lock();
    part->data = std::move(data);
    part->status = std::move(status);
    part->done = true;
    cv_.notify_all();
  }
}

void RemoteRandomAccessFile::Schedule(uint64_t first_part) const {
  const uint64_t parts = (size() + options_.part_size - 1) / options_.part_size;
  // Keep the window at [first_part, first_part + read_ahead_parts): drop parts behind the
  // reader, or everything after a seek.
  while (!window_.empty() && window_.front()->index < first_part) window_.pop_front();
  if (!window_.empty() && window_.front()->index != first_part) window_.clear();
  uint64_t next = window_.empty() ? first_part : window_.back()->index + 1;
  bool added = false;
  while (window_.size() < static_cast<size_t>(options_.read_ahead_parts) && next < parts) {
    auto p = std::make_shared<Part>();
    p->index = next++;
    window_.push_back(std::move(p));
    added = true;
  }
  if (added) cv_.notify_all();
}

Result<size_t> RemoteRandomAccessFile::ReadSequential(uint64_t offset,
                                                      std::span<std::byte> dst) const {
  size_t done = 0;
  std::unique_lock lock(mu_);
  while (done < dst.size() && offset + done < size()) {
    const uint64_t pos = offset + done;
    const uint64_t index = pos / options_.part_size;
    Schedule(index);
    std::shared_ptr<Part> part = window_.front();
    cv_.wait(lock, [&] { return part->done; });
    if (!part->status.ok()) {
      Status s = part->status;
      window_.clear();  // a later call starts over (and retries) rather than repeat the error
      return s;
    }
    const uint64_t in_part = pos - index * options_.part_size;
    if (in_part >= part->data.size()) break;  // the object ended early
    const size_t n = std::min<size_t>(dst.size() - done, part->data.size() - in_part);
    std::memcpy(dst.data() + done, part->data.data() + in_part, n);
    done += n;
  }
  return done;
}

Result<size_t> RemoteRandomAccessFile::ReadAt(uint64_t offset, std::span<std::byte> dst) const {
  if (offset >= size()) return size_t{0};
  if (dst.size() > size() - offset) dst = dst.first(static_cast<size_t>(size() - offset));
  if (dst.empty()) return size_t{0};
  bool sequential;
  {
    std::lock_guard lock(mu_);
    sequential = sequential_;
  }
  if (sequential) return ReadSequential(offset, dst);
  return fetch_(offset, dst);
}

}  // namespace recordflow::io::internal
