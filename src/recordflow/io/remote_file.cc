#include "remote_file_internal.h"

#include <algorithm>
#include <cstring>

#include "recordflow/core/thread_pool.h"

namespace recordflow::io::internal {

RemoteRandomAccessFile::RemoteRandomAccessFile(std::string url, uint64_t size, RangeFetcher fetch,
                                               RemoteOptions options, std::vector<std::byte> head)
    : RandomAccessFile(std::move(url), size),
      fetch_(std::move(fetch)),
      options_(options),
      head_size_(std::min<uint64_t>(head.size(), size)),
      head_(std::move(head)) {
  options_.part_size = std::max<uint64_t>(options_.part_size, 64 * 1024);
  options_.read_ahead_parts = std::max(options_.read_ahead_parts, 1);
  head_.resize(static_cast<size_t>(head_size_));
}

RemoteRandomAccessFile::~RemoteRandomAccessFile() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

size_t RemoteRandomAccessFile::buffered_bytes() const {
  std::lock_guard lock(mu_);
  uint64_t bytes = head_.size();
  for (const auto& p : window_) {
    // A part is charged from when it is scheduled: its buffer is allocated by a worker soon.
    const uint64_t end = std::min<uint64_t>((p->index + 1) * options_.part_size, size());
    bytes += p->done ? p->data.size() : (end > p->begin ? end - p->begin : 0);
  }
  return static_cast<size_t>(bytes);
}

bool RemoteRandomAccessFile::sequential_now() const {
  std::lock_guard lock(mu_);
  return sequential_;
}

uint64_t RemoteRandomAccessFile::PartBegin(uint64_t index) const {
  return std::max(index * options_.part_size, head_size_);
}

void RemoteRandomAccessFile::AdviseSequential() const {
  std::lock_guard lock(mu_);
  if (sequential_ || head_size_ >= size()) return;  // all of it is in memory already
  sequential_ = true;
  const uint64_t parts = (size() + options_.part_size - 1) / options_.part_size;
  const uint64_t threads = std::min<uint64_t>(parts, options_.read_ahead_parts);
  for (uint64_t i = 0; i < threads; ++i) {
    workers_.emplace_back([this, i] {
      SetCurrentThreadName("rf-fetch-" + std::to_string(i));
      Worker();
    });
  }
  // The reader starts at the front: fetch the parts after the head now, not at its first miss.
  Schedule(head_size_ / options_.part_size);
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
    const uint64_t start = part->begin;
    const uint64_t end = std::min<uint64_t>((part->index + 1) * options_.part_size, size());
    const uint64_t len = end > start ? end - start : 0;
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
    p->begin = PartBegin(p->index);
    window_.push_back(std::move(p));
    added = true;
  }
  if (added) cv_.notify_all();
}

size_t RemoteRandomAccessFile::ReadHead(uint64_t offset, std::span<std::byte> dst) const {
  if (offset >= head_.size()) return 0;
  const size_t n = std::min<size_t>(dst.size(), head_.size() - static_cast<size_t>(offset));
  std::memcpy(dst.data(), head_.data() + offset, n);
  return n;
}

Result<size_t> RemoteRandomAccessFile::ReadSequential(uint64_t offset,
                                                      std::span<std::byte> dst) const {
  size_t done = 0;
  std::unique_lock lock(mu_);
  done += ReadHead(offset, dst);
  if (offset >= head_size_ && !head_.empty()) {
    // The reader has moved past the head: its memory goes.
    std::vector<std::byte>().swap(head_);
  }
  if (done < dst.size() && offset + done < head_size_) {
    // Below the parts but the head is gone (a seek back): read those bytes directly.
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(dst.size() - done, head_size_ - (offset + done)));
    lock.unlock();
    RF_ASSIGN_OR_RETURN(size_t got, fetch_(offset + done, dst.subspan(done, n)));
    lock.lock();
    done += got;
    if (got < n) return done;
  }
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
    const uint64_t in_part = pos - part->begin;
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
  size_t done = 0;
  {
    std::lock_guard lock(mu_);
    if (!sequential_) {
      done = ReadHead(offset, dst);
      if (done == dst.size()) return done;
      // A random reader elsewhere in the object: the head is no longer worth its memory.
      if (done == 0 && !head_.empty()) std::vector<std::byte>().swap(head_);
    }
  }
  if (done == 0 && sequential_now()) return ReadSequential(offset, dst);
  RF_ASSIGN_OR_RETURN(size_t got, fetch_(offset + done, dst.subspan(done)));
  return done + got;
}

}  // namespace recordflow::io::internal
