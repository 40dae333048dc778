// Conversions between ONNX protobuf tensors and edgeinfer tensors/types.
#pragma once

#include <string>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "onnx/onnx_pb.h"

namespace edgeinfer::onnx_import {

/// Maps an ONNX TensorProto_DataType to ours; kUndefined when we do not support it.
DataType dataTypeFromOnnx(int onnxType);
int dataTypeToOnnx(DataType t);
/// ONNX's name for an ONNX element type ("DOUBLE", "STRING", ...), for error messages.
std::string onnxTypeName(int onnxType);

/// Reads a TensorProto (raw_data, typed fields, or external data resolved against
/// `externalDataDir`) into a host tensor. Fails with kUnsupported for element types we do
/// not have, kInvalidModel for inconsistent sizes, kIoError/kCorruptFile for external data
/// that is missing or too short, kOutOfMemory above `maxBytes`.
Expected<Tensor> tensorFromProto(const onnx::TensorProto& proto, const std::string& externalDataDir,
                                 int64_t maxBytes = int64_t{4} << 30);
/// Writes a host tensor into `proto` as raw_data.
void tensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* proto);

}  // namespace edgeinfer::onnx_import
