// The local implementations behind RandomAccessFile::Open and AtomicFileWriter::Create.
#pragma once

#include <memory>
#include <string>

#include "recordflow/io/file.h"

namespace recordflow::io {

// `path` may start with file://.
Result<std::unique_ptr<RandomAccessFile>> OpenLocalRandomAccessFile(std::string path);
Result<std::unique_ptr<AtomicFileWriter>> CreateLocalAtomicFileWriter(std::string path,
                                                                      AtomicFileOptions options);

}  // namespace recordflow::io
