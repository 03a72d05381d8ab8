#include "recordflow/format/record_writer.h"

#include <algorithm>
#include <cstring>

#include "recordflow/format/record_format.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::format {

RecordWriter::RecordWriter(std::string path, RecordWriterOptions options,
                           std::unique_ptr<OutputStream> stream)
    : path_(std::move(path)), options_(std::move(options)), stream_(std::move(stream)) {
  options_.buffer_size = std::max<size_t>(options_.buffer_size, 4096);
  buffer_.resize(options_.buffer_size);
}

RecordWriter::~RecordWriter() { Abort(); }

Result<std::unique_ptr<RecordWriter>> RecordWriter::Open(const std::string& path,
                                                         RecordWriterOptions options) {
  Compression compression = options.compression.value_or(CompressionFromPath(path));
  if (options.write_index && compression != Compression::kNone) {
    return InvalidArgumentError("cannot write an index for '" + path + "': index files (" +
                                "offset size per record) need uncompressed TFRecord files");
  }
  OutputStreamOptions stream_options;
  stream_options.compression_level = options.compression_level;
  stream_options.file.sync = options.sync;
  stream_options.file.defer_completion = options.defer_completion;
  RF_ASSIGN_OR_RETURN(auto stream, CreateOutputStream(path, compression, stream_options));
  std::unique_ptr<OutputStream> index_stream;
  if (options.write_index) {
    if (options.index_path.empty()) options.index_path = path + ".idx";
    RF_ASSIGN_OR_RETURN(index_stream,
                        CreateOutputStream(options.index_path, Compression::kNone, stream_options));
  }
  auto writer =
      std::unique_ptr<RecordWriter>(new RecordWriter(path, std::move(options), std::move(stream)));
  writer->index_stream_ = std::move(index_stream);
  return writer;
}

Status RecordWriter::Fail(Status s) {
  error_ = s;
  return s;
}

Status RecordWriter::FlushBuffer() {
  if (buffered_ == 0) return Status::OK();
  Status s = stream_->Write(std::span(buffer_.data(), buffered_));
  buffered_ = 0;
  if (!s.ok()) return Fail(std::move(s));
  if (index_stream_ && !index_buffer_.empty()) {
    s = index_stream_->Write(std::as_bytes(std::span(index_buffer_)));
    index_buffer_.clear();
    if (!s.ok()) return Fail(std::move(s));
  }
  return Status::OK();
}

Status RecordWriter::WriteRecord(std::span<const std::byte> payload) {
  if (closed_) return FailedPreconditionError("write to closed RecordWriter for '" + path_ + "'");
  if (!error_.ok()) {
    return FailedPreconditionError("RecordWriter for '" + path_ +
                                   "' failed earlier: " + error_.ToString());
  }
  const uint64_t length = payload.size();
  std::byte header[kHeaderSize];
  EncodeHeader(header, length);
  std::byte footer[kFooterSize];
  EncodeFixed32(footer, MaskCrc(Crc32c(payload)));

  const size_t framed = length + kFramingOverhead;
  if (framed <= buffer_.size() - buffered_) {
    std::byte* out = buffer_.data() + buffered_;
    std::memcpy(out, header, kHeaderSize);
    if (length > 0) std::memcpy(out + kHeaderSize, payload.data(), length);
    std::memcpy(out + kHeaderSize + length, footer, kFooterSize);
    buffered_ += framed;
  } else {
    RF_RETURN_IF_ERROR(FlushBuffer());
    if (framed <= buffer_.size()) {
      return WriteRecord(payload);  // fits the now empty buffer (index entry added there)
    }
    // Large payloads go straight to the stream, without a copy into the buffer.
    std::memcpy(buffer_.data(), header, kHeaderSize);
    buffered_ = kHeaderSize;
    RF_RETURN_IF_ERROR(FlushBuffer());
    Status s = stream_->Write(payload);
    if (!s.ok()) return Fail(std::move(s));
    std::memcpy(buffer_.data(), footer, kFooterSize);
    buffered_ = kFooterSize;
  }
  if (index_stream_) {
    index_buffer_ += std::to_string(offset_);
    index_buffer_ += ' ';
    index_buffer_ += std::to_string(framed);
    index_buffer_ += '\n';
  }
  offset_ += framed;
  ++records_written_;
  return Status::OK();
}

Status RecordWriter::Flush() {
  if (closed_) return FailedPreconditionError("flush of closed RecordWriter for '" + path_ + "'");
  if (!error_.ok()) return error_;
  RF_RETURN_IF_ERROR(FlushBuffer());
  Status s = stream_->Flush();
  if (!s.ok()) return Fail(std::move(s));
  return Status::OK();
}

Status RecordWriter::Close() {
  if (closed_) return error_;
  closed_ = true;
  if (!error_.ok()) {
    Abort();
    return error_;
  }
  Status s = FlushBuffer();
  if (s.ok()) s = stream_->Close();
  if (s.ok() && index_stream_) s = index_stream_->Close();
  if (!s.ok()) {
    error_ = s;
    // A deferred upload already handed over by a closed stream is no longer the stream's to
    // abort (Abort after Commit keeps it), so the failed writer aborts it here.
    for (const OutputStream* o : {stream_.get(), index_stream_.get()}) {
      if (o == nullptr) continue;
      if (std::optional<io::PendingUpload> u = o->pending_upload()) {
        io::AbortPendingUpload(u->url, u->upload_id).IgnoreError();
      }
    }
    stream_->Abort();
    if (index_stream_) index_stream_->Abort();
  }
  return s;
}

std::vector<io::PendingUpload> RecordWriter::pending_uploads() const {
  std::vector<io::PendingUpload> out;
  if (!closed_ || !error_.ok()) return out;
  for (const OutputStream* s : {stream_.get(), index_stream_.get()}) {
    if (s == nullptr) continue;
    std::optional<io::PendingUpload> u = s->pending_upload();
    if (u.has_value()) out.push_back(*std::move(u));
  }
  return out;
}

void RecordWriter::Abort() {
  closed_ = true;
  if (stream_) stream_->Abort();
  if (index_stream_) index_stream_->Abort();
}

}  // namespace recordflow::format
