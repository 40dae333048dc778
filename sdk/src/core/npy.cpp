#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace edgeinfer {
namespace {

const char* descrOf(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "<f4";
    case DataType::kFloat16:
      return "<f2";
    case DataType::kInt8:
      return "|i1";
    case DataType::kUInt8:
      return "|u1";
    case DataType::kInt32:
      return "<i4";
    case DataType::kInt64:
      return "<i8";
    case DataType::kBool:
      return "|b1";
    default:
      return nullptr;
  }
}

DataType typeOf(const std::string& d) {
  static const struct {
    const char* descr;
    DataType type;
  } kTable[] = {{"<f4", DataType::kFloat32}, {"<f2", DataType::kFloat16}, {"|i1", DataType::kInt8},
                {"|u1", DataType::kUInt8},   {"<i4", DataType::kInt32},   {"<i8", DataType::kInt64},
                {"|b1", DataType::kBool},    {"i1", DataType::kInt8},     {"u1", DataType::kUInt8}};
  for (const auto& e : kTable)
    if (d == e.descr) return e.type;
  return DataType::kUndefined;
}

}  // namespace

Expected<Tensor> readNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kNotFound, "cannot open '" + path + "'");
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return Status(ErrorCode::kCorruptFile, "'" + path + "' is not a .npy file");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t headerLen = 0;
  unsigned char lenBytes[4] = {0, 0, 0, 0};
  if (major == 1) {
    if (!f.read(reinterpret_cast<char*>(lenBytes), 2))
      return Status(ErrorCode::kCorruptFile, "'" + path + "' is truncated");
    headerLen = lenBytes[0] | lenBytes[1] << 8;
  } else if (major == 2 || major == 3) {
    if (!f.read(reinterpret_cast<char*>(lenBytes), 4))
      return Status(ErrorCode::kCorruptFile, "'" + path + "' is truncated");
    headerLen = lenBytes[0] | lenBytes[1] << 8 | lenBytes[2] << 16 |
                static_cast<uint32_t>(lenBytes[3]) << 24;
  } else {
    return Status(ErrorCode::kUnsupported,
                  "'" + path + "' has .npy version " + std::to_string(major));
  }
  if (headerLen > (1u << 20))
    return Status(ErrorCode::kCorruptFile, "'" + path + "' has an absurd header");
  std::string header(headerLen, '\0');
  if (!f.read(header.data(), headerLen))
    return Status(ErrorCode::kCorruptFile, "'" + path + "' is truncated");
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")))
    return Status(ErrorCode::kCorruptFile, "'" + path + "': header has no descr");
  const DataType dt = typeOf(m[1].str());
  if (dt == DataType::kUndefined)
    return Status(ErrorCode::kUnsupported,
                  "'" + path + "': element type '" + m[1].str() + "' is not supported");
  if (std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*True")))
    return Status(ErrorCode::kUnsupported,
                  "'" + path + "' is in Fortran order; save it C-contiguous");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    return Status(ErrorCode::kCorruptFile, "'" + path + "': header has no shape");
  std::vector<int64_t> dims;
  std::stringstream ss(m[1].str());
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos) continue;
    try {
      dims.push_back(std::stoll(item));
    } catch (...) {
      return Status(ErrorCode::kCorruptFile, "'" + path + "': bad shape entry '" + item + "'");
    }
  }
  EI_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dt, Shape(dims)));
  if (!f.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.bytes())))
    return Status(ErrorCode::kCorruptFile, "'" + path + "' holds fewer bytes than its shape " +
                                               t.shape().toString() + " needs");
  return t;
}

Status writeNpy(const std::string& path, const Tensor& t) {
  const char* descr = descrOf(t.dtype());
  if (!descr)
    return Status(ErrorCode::kUnsupported,
                  std::string("cannot write ") + dataTypeName(t.dtype()) + " to .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().rank(); ++i) shape += std::to_string(t.shape()[i]) + ",";
  if (t.shape().rank() > 1) shape.pop_back();
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that magic + len + header + '\n' is a multiple of 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status(ErrorCode::kIoError, "cannot open '" + path + "' for writing");
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  const char lenBytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(lenBytes, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
  if (!f) return Status(ErrorCode::kIoError, "writing '" + path + "' failed");
  return Status::Ok();
}

}  // namespace edgeinfer
